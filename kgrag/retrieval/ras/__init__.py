"""Strategy ``ras``: RAS's plan / retrieve / structure loop (Jiang et al.).

strategy (the declaration: parameters, needs, spec checks), loop (the loop itself),
plan (the planner's call and reply), triples (text-to-triples and the per-query
graph), oracle (gold sub-questions as the plan). The package gives the strategies'
registry its ``DECLARATION``.
"""

from kgrag.retrieval.ras.strategy import DECLARATION

__all__ = ["DECLARATION"]
