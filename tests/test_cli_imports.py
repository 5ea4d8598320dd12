"""A command imports what it needs: ``kgrag validate`` checks a spec without the
libraries that only building, searching or answering use, whose imports would take
longer than the check."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

# what validating never needs: vector store, embedder, LLM, NLP, clustering, plotting
HEAVY = ("lancedb", "pyarrow", "torch", "sentence_transformers", "transformers", "llama_cpp",
         "spacy", "igraph", "leidenalg", "networkx", "scipy", "plotly")
PROBE = """
import json, sys
from kgrag.cli import main
code = main(["validate", *sys.argv[1:]])
print(json.dumps([code, sorted({name.split(".")[0] for name in sys.modules})]))
"""


def test_validate_imports_no_heavy_library() -> None:
    specs = sorted(str(path) for path in (REPO / "specs").glob("*.yaml"))
    done = subprocess.run([sys.executable, "-c", PROBE, *specs], cwd=REPO, check=True,
                          capture_output=True, text=True)
    code, imported = json.loads(done.stdout.splitlines()[-1])
    assert code == 0  # every shipped spec was checked, and is valid
    assert "kgrag" in imported and "jsonschema" in imported  # the check really ran
    assert sorted(set(HEAVY) & set(imported)) == []
