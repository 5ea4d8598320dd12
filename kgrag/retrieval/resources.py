"""What every strategy's ``load`` is handed besides its own artefacts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgrag.corpus.tokenizer import Tokenizer
from kgrag.retrieval.units import Units


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
    # a strategy built on other entries: each member's loaded strategy, by role
    members: dict[str, Any] = field(default_factory=dict)

    @property
    def chunks(self) -> Units:
        """``units`` as a strategy whose evidence is chunks reads them: the retrieve step
        loads them for every such strategy, so their absence is a bug, not bad input."""
        if self.units is None:
            raise TypeError("this strategy's evidence is chunks, but no units were loaded")
        return self.units
