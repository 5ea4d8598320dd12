"""Query strategies: a question in, a context within a token budget out.

A strategy class has ``needs(config) -> {role: step name}`` (the index artefacts it
reads), ``load(config, artefacts, resources)`` building it from those folders, and
``retrieve(question, vector) -> Context``, and optionally ``uses_llm(config)`` when it
calls the LLM while retrieving. A strategy that ranks chunks also has
``ranking(question, vector) -> [chunk ids, best first]`` and registers in ``RANKERS``,
so that ``fusion`` can combine it with another. The registry below is the spec's ``strategy`` enum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.retrieval.bm25 import Bm25Strategy
from kgrag.retrieval.fusion import RANKERS, FusionStrategy
from kgrag.retrieval.hugrag import HugragStrategy
from kgrag.retrieval.hybrid import HybridStrategy
from kgrag.retrieval.ket import KetStrategy
from kgrag.retrieval.knng import KnngStrategy
from kgrag.retrieval.naive import NaiveStrategy
from kgrag.retrieval.ppr import PprStrategy
from kgrag.retrieval.units import Units


@dataclass(frozen=True)
class Resources:
    """What every strategy may use besides its own artefacts."""

    units: Units  # the chunks
    tokenizer: Tokenizer
    llm: Any = None  # the CachedLLM, for strategies that call one while retrieving
    prompt_style: str = "completion"  # how that LLM is prompted (answer.prompt)
    embedder: Any = None  # the CachedEmbedder, for strategies that embed more than questions
    pipeline: Any = None  # the nlp extraction's ResolvedPipeline, to find question mentions


STRATEGIES = {"naive": NaiveStrategy, "ket": KetStrategy, "knng": KnngStrategy,
              "hybrid": HybridStrategy, "hugrag": HugragStrategy, "bm25": Bm25Strategy,
              "ppr": PprStrategy, "fusion": FusionStrategy}
# Strategies that rank chunks (a ``ranking(question, vector)`` method), so ``fusion``
# can fuse them; not fusion itself, whose members compile resolves one level deep.
RANKERS.update({name: cls for name, cls in STRATEGIES.items()
                if hasattr(cls, "ranking") and cls is not FusionStrategy})


def uses_llm(config: dict[str, Any]) -> bool:
    """Whether a strategy calls the LLM while retrieving (so its LLM joins the fingerprint)."""
    check = getattr(STRATEGIES[config["strategy"]], "uses_llm", None)
    return bool(check and check(config))
