"""Query strategies: a question in, a context within a token budget out.

A strategy class has ``needs(config) -> {role: step name}`` (the index artefacts it
reads), ``load(config, artefacts, resources)`` building it from those folders, and
``retrieve(question, vector) -> Context``. The registry below is the spec's
``strategy`` enum.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.retrieval.hybrid import HybridStrategy
from kgrag.retrieval.ket import KetStrategy
from kgrag.retrieval.knng import KnngStrategy
from kgrag.retrieval.naive import NaiveStrategy
from kgrag.retrieval.units import Units


@dataclass(frozen=True)
class Resources:
    """What every strategy may use besides its own artefacts."""

    units: Units  # the chunks
    tokenizer: Tokenizer


STRATEGIES = {"naive": NaiveStrategy, "ket": KetStrategy, "knng": KnngStrategy,
              "hybrid": HybridStrategy}
