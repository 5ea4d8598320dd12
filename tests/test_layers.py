"""kgrag's import graph runs one way: no cycle, no arrow that climbs back up a layer.

Every ``import`` and ``from … import`` in ``kgrag/`` counts, wherever it stands: at the
top of a module, inside a function, under ``TYPE_CHECKING``. ``from a import b`` is an
arrow to the module ``a.b`` when that is a module, else to ``a``. The rules:

* **Layers**, top to bottom (``LAYERS``): a module imports only modules of its own layer
  or of layers below it. The library's packages are themselves ordered (``LIBRARY``):
  a package imports only those after it. A module's layer is its top package's: a
  sub-package (a family of modules, such as ``retrieval/ras/``) is in its package's layer.
* **No cycle** among modules.

``python -m tests.test_layers`` prints every arrow that breaks a rule and every cycle.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The library, top to bottom: strategies read trained models, training reads metrics
# and artefacts, artefacts are read with the graphs' and knowledge graphs' types, all
# of them call models, models read the corpus's tokenizer.
LIBRARY = ("retrieval", "training", "eval", "answer", "contents", "graphs", "kg", "models",
           "corpus", "store")
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "console", "api", "outputs", "session", "bundle", "report"),  # entry points
    ("spec",),  # loading, the schema, spec checks
    ("pipeline",),  # compile, plan, runner, artefacts
    ("steps",),  # every step kind and the step contract
    *((package,) for package in LIBRARY),
    # base: what every layer reads
    ("declarations", "sweeps", "limits", "configuration", "errors", "host", "progress", "memory",
     ""),
)


def modules(root: Path = REPO / "kgrag") -> dict[str, Path]:
    """Dotted module name → file, for every module of the package."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def arrows(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the kgrag modules it imports."""
    out: dict[str, set[str]] = defaultdict(set)
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in found else base
                           for a in node.names]
            else:
                continue
            out[name].update(t for t in targets if t in found and t != name)
    return out


def layer_of(module: str) -> int:
    """The index of the module's layer in ``LAYERS`` (0 is the top)."""
    top = module.split(".")[1] if "." in module else ""
    for index, layer in enumerate(LAYERS):
        if top in layer:
            return index
    raise KeyError(f"{module} is in no layer: add its package to tests/test_layers.py")


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every arrow from a module to one in a layer above it."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if layer_of(b) < layer_of(a))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_is_in_a_layer():
    for name in modules():
        layer_of(name)


def test_no_arrow_climbs_a_layer():
    assert upward(arrows(modules())) == []


def test_no_import_cycle():
    assert cycles(arrows(modules())) == []


def test_the_checker_sees_arrows_inside_functions_and_type_checking(tmp_path: Path):
    package = tmp_path / "kgrag"
    (package / "steps").mkdir(parents=True)
    (package / "retrieval").mkdir()
    for name in ("__init__.py", "steps/__init__.py", "retrieval/__init__.py"):
        (package / name).write_text("")
    (package / "steps" / "run.py").write_text("from kgrag.retrieval import rank\n")
    (package / "retrieval" / "rank.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kgrag.steps import run\n"
        "def f():\n    from . import other\n")
    (package / "retrieval" / "other.py").write_text("from .rank import f\n")
    graph = arrows(modules(package))
    assert upward(graph) == [("kgrag.retrieval.rank", "kgrag.steps.run")]
    assert cycles(graph) == [["kgrag.retrieval.other", "kgrag.retrieval.rank",
                              "kgrag.steps.run"]]


if __name__ == "__main__":
    graph = arrows(modules())
    for source, target in upward(graph):
        print(f"up    {source} -> {target}")
    for component in cycles(graph):
        print(f"cycle {len(component)}: {' '.join(component)}")
