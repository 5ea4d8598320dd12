"""Parameters several strategies share, declared once (``kgrag.declarations``)."""

from __future__ import annotations

from kgrag.declarations import Param
from kgrag.limits import ITEMS_MAX

GRAPH_NAME = {"type": ["string", "null"]}

SKELETON = Param("skeleton", GRAPH_NAME,
                 "name of a skeleton graph build (ppr walks its extraction).", default=None)
HIERARCHY = Param("hierarchy", GRAPH_NAME,
                  "name of a hierarchy graph build (ppr walks its canonical entities).",
                  default=None)
TOP_K = Param("top_k", {"type": ["integer", "null"], "minimum": 1, "maximum": ITEMS_MAX},
              "candidates taken from the vector search before filling the budget; null "
              "takes as many as the budget can hold.", default=None)
TOP_ENTITIES = Param("top_entities", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
                     "seed entities of the local search.", default=10)


def theta(default: float, why: str) -> Param:
    """θ, the budget share of the skeleton channel; its default differs by strategy."""
    return Param("theta", {"type": "number", "minimum": 0, "maximum": 1},
                 f"share θ of the budget for the skeleton channel; {default} by default "
                 f"({why}).", default=default, sweep=True)
