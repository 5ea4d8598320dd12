"""Query strategies: a question in, a ranked context within a token budget out.

Every strategy has ``needs`` (the index steps it reads), a ``load`` classmethod
building it from those artefacts, and ``retrieve(question, vector)`` returning
unit ids in context order. The registry below is the spec's ``strategy`` enum.
"""

from kgrag.retrieval.naive import NaiveStrategy

STRATEGIES = {"naive": NaiveStrategy}
