"""The type check that ``make test`` runs before pytest: ``python -m tests.typecheck``.

mypy checks ``kgrag/`` as ``[tool.mypy]`` in ``pyproject.toml`` configures it (the default
strictness, strict mode for the base layers). An error it cannot fix is silenced only with
``# type: ignore[code]  # why``: this script prints how many there are and fails on one
that names no error code or gives no reason, so that the count stays honest.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)$")
EXPLAINED = re.compile(r"\[[a-z-]+(,\s*[a-z-]+)*\]\s+#\s*\S")  # [code] # the reason


def ignores(root: Path = ROOT / "kgrag") -> tuple[int, list[str]]:
    """How many ``type: ignore`` comments the package holds, and each one (file:line)
    that lacks its error code or its reason."""
    count, unexplained = 0, []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found = IGNORE.search(line)
            if found is None:
                continue
            count += 1
            if not EXPLAINED.match(found["rest"]):
                unexplained.append(f"{path.relative_to(root.parent)}:{number}")
    return count, unexplained


def main() -> int:
    count, unexplained = ignores()
    print(f"typecheck: {count} `type: ignore` comments in kgrag/", flush=True)
    for place in unexplained:
        print(f"{place}: a `type: ignore` needs its error code and a comment giving why",
              flush=True)
    checked = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, check=False)
    return 1 if unexplained or checked.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
