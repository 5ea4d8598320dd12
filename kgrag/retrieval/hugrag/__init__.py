"""Strategy ``hugrag``: HugRAG's online retrieval (paper §3.2, App. B.2–B.3).

strategy (the declaration and the four steps), graph (one hierarchy build's graph),
search (seeds and the walk over it), budget (the context within the token budget),
causal_filter (the LLM's causal filter). The package gives the strategies' registry
its ``DECLARATION``.
"""

from kgrag.retrieval.hugrag.strategy import DECLARATION

__all__ = ["DECLARATION"]
