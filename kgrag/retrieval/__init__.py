"""Query strategies: a question in, a context within a token budget out.

Each strategy module declares itself once, as ``DECLARATION``
(``kgrag.spec.declarations.Strategy``): its parameters, the artefacts it reads and the
class that retrieves (``load(config, artefacts, resources)``,
``retrieve(question, vector) -> Evidence``). A class that ranks chunks also has
``ranking(question, vector) -> [chunk ids, best first]``, which makes its strategy one
that ``fusion`` can fuse. ``STRATEGIES`` below is the spec's ``strategy`` enum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.retrieval import bm25, fusion, hugrag, hybrid, ket, knng, naive, ppr, ras, triples
from kgrag.retrieval.units import Units
from kgrag.spec.declarations import Strategy


@dataclass(frozen=True)
class Resources:
    """What every strategy may use besides its own artefacts."""

    units: Units | None  # the chunks, for a strategy whose evidence is chunks
    tokenizer: Tokenizer
    llm: Any = None  # the CachedLLM, for strategies that call one while retrieving
    prompt_style: str = "completion"  # how that LLM is prompted (answer.prompt)
    embedder: Any = None  # the CachedEmbedder, for strategies that embed more than questions
    pipeline: Any = None  # the nlp extraction's ResolvedPipeline, to find question mentions
    models: Any = None  # the spec's Models, for a strategy that runs more of them (ras)


STRATEGIES: dict[str, Strategy] = {
    module.DECLARATION.name: module.DECLARATION
    for module in (naive, ket, knng, hybrid, hugrag, bm25, fusion, ppr, ras)} | {
    declared.name: declared for declared in triples.DECLARATIONS}
# Strategies whose class ranks chunks, so ``fusion`` can fuse them; not fusion itself,
# whose members compile resolves one level deep.
fusion.RANKERS.update({name: declared for name, declared in STRATEGIES.items()
                       if hasattr(declared.runs, "ranking") and name != "fusion"})
