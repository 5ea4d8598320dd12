"""Every extraction method side by side on the same 2Wiki paragraphs, scored on gold triples.

    python benchmarks/extraction_gold.py                  # nlp on every paragraph with a gold triple
    python benchmarks/extraction_gold.py --llm 20         # and llm, hybrid on the first 20 of them
    python benchmarks/extraction_gold.py --llm 20 --model smollm2-135m --prompt chat
    python benchmarks/extraction_gold.py --pipeline en_core_web_trf

The paragraphs are 2wiki_200's (the real importer: deduplicated, gold triples from
``evidences``), each one unit as a pipeline with ``chunking.title: true`` shows it
(``# <title>`` + text), not cut into 256-token chunks as a spec would cut them (the
1,294 paragraphs of 2wiki_200 make 1,413 such chunks). Kept are the paragraphs that are evidence of a gold triple: their text
mentions its subject and its object (``kgrag.eval.gold``). Each method extracts
through a fresh, empty call cache, so every parse and model call really runs and
the timings are real (model and pipeline loading excluded).

``--llm N`` adds the LLM methods on the first N of those paragraphs (``llm``; ``hybrid``,
which relates the nlp entities; and hybrid's LLM relationships alone, without the nlp
ones beside them), and the ``nlp`` method again on the same N, so the rows compare
like with like: a gold triple counts only where its evidence paragraph was extracted.
Hybrid's time includes its spaCy parses. Columns are those of a build row
(``kgrag.eval.builds.extraction_figures`` and ``kgrag.eval.gold``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kgrag.corpus import load_corpus
from kgrag.eval.builds import extraction_figures
from kgrag.eval.gold import evidence_chunks, gold_scores
from kgrag.graphs.elements import Extraction, counts_frame
from kgrag.graphs.extraction.hybrid import LLM_STRENGTH, relate
from kgrag.graphs.extraction.llm import extract
from kgrag.graphs.extraction.nlp import Chunk, NlpExtractor
from kgrag.graphs.merge import merge
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llm import CachedLLM
from kgrag.models.pipelines import load_pipeline, resolve_pipeline
from kgrag.models.registry import resolve_llm

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "2wiki_200.jsonl"
COLUMNS = ("method", "chunks", "gold_in_scope", "entity_recall", "triple_recall",
           "relation_match", "entities_per_chunk", "relationships_per_chunk", "empty_chunks",
           "grounded_share", "chunks_per_min", "llm_tokens_per_chunk")


def gold_paragraphs(path: Path) -> tuple[list[Chunk], Any]:
    """The paragraphs that are evidence of a gold triple, as units, and the triples."""
    corpus = load_corpus({"dataset": "2wiki", "path": str(path), "limit": None,
                          "questions": None}, path.parent)
    chunks = [Chunk(f"{doc_id}:0", text, title) for doc_id, title, text
              in corpus.documents.select("doc_id", "title", "text").iter_rows()]
    evidence = evidence_chunks(corpus.triples, {c.chunk_id: c.unit for c in chunks})
    wanted = set().union(*evidence.values())
    return [c for c in chunks if c.chunk_id in wanted], corpus.triples


def score(method: str, chunks: list[Chunk], triples: Any, extractions: list[Extraction],
          seconds: float, llm_tokens: int | None) -> dict[str, Any]:
    entities, relationships = merge(extractions)
    gold = gold_scores(triples, {c.chunk_id: c.unit for c in chunks}, entities, relationships)
    return {"method": method, "chunks": len(chunks), **gold.as_row(),
            **extraction_figures(counts_frame(extractions), seconds, llm_tokens)}


def run_nlp(pipeline_name: str, chunks: list[Chunk], cache: CallCache
            ) -> tuple[list[Extraction], float]:
    pipeline = resolve_pipeline(pipeline_name)
    nlp = load_pipeline(pipeline)  # loaded outside the timed part
    extractor = NlpExtractor(pipeline, cache, load=lambda _: nlp)
    started = time.perf_counter()
    extractions = extractor.extract(chunks)
    return extractions, time.perf_counter() - started


def load_llm(model: str, cache: CallCache) -> CachedLLM:
    resolved = resolve_llm(model)
    llm = CachedLLM(LLMSettings(name=resolved.name, path=resolved.path, sha256=resolved.sha256,
                                n_ctx=4096), cache)
    llm.complete("Hello", max_tokens=1)  # loads the model outside the timed part
    return llm


def run_llm(llm: CachedLLM, style: str, chunks: list[Chunk], echo: Callable[[str], None]
            ) -> tuple[list[Extraction], float, int]:
    before = llm.usage.snapshot()
    extractions = []
    started = time.perf_counter()
    for k, chunk in enumerate(chunks, 1):
        extractions.append(extract(llm, chunk.chunk_id, chunk.unit, style=style))
        echo(f"  llm {k}/{len(chunks)} {time.perf_counter() - started:7.1f}s")
    seconds = time.perf_counter() - started
    used = llm.usage.since(before)
    return extractions, seconds, used.tokens_in + used.tokens_out


def run_hybrid(llm: CachedLLM, style: str, pipeline_name: str, chunks: list[Chunk],
               cache: CallCache, echo: Callable[[str], None]
               ) -> tuple[list[Extraction], float, int]:
    """The nlp extraction (timed: it is part of the method), then one relating call each."""
    pipeline = resolve_pipeline(pipeline_name)
    nlp = load_pipeline(pipeline)
    before = llm.usage.snapshot()
    started = time.perf_counter()
    parsed = NlpExtractor(pipeline, cache, load=lambda _: nlp).extract(chunks)
    extractions = []
    for k, (chunk, extraction) in enumerate(zip(chunks, parsed), 1):
        extractions.append(relate(llm, extraction, chunk.unit, style=style).extraction)
        echo(f"  hybrid {k}/{len(chunks)} {time.perf_counter() - started:7.1f}s")
    seconds = time.perf_counter() - started
    used = llm.usage.since(before)
    return extractions, seconds, used.tokens_in + used.tokens_out


def llm_relationships_only(extractions: list[Extraction]) -> list[Extraction]:
    """Hybrid extractions without the nlp relationships: the pairs the LLM named."""
    return [replace(x, relationships=tuple(r for r in x.relationships
                                           if r.strength == LLM_STRENGTH))
            for x in extractions]


def print_table(rows: list[dict[str, Any]]) -> None:
    cells = [[_cell(row.get(c)) for c in COLUMNS] for row in rows]
    widths = [max(len(c), *(len(r[k]) for r in cells)) for k, c in enumerate(COLUMNS)]
    print("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) and abs(value) < 10 else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--pipeline", default="en_core_web_sm",
                        help="spaCy pipeline of the nlp method (default %(default)s)")
    parser.add_argument("--llm", type=int, default=0, metavar="N",
                        help="also run the llm and hybrid methods on the first N paragraphs")
    parser.add_argument("--model", default="smollm2-135m", help="LLM (default %(default)s)")
    parser.add_argument("--prompt", choices=("completion", "chat"), default="chat")
    args = parser.parse_args()
    chunks, triples = gold_paragraphs(args.data)
    print(f"{len(chunks)} 2Wiki paragraphs hold a gold triple", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kgrag-gold-") as root:
        extractions, seconds = run_nlp(args.pipeline, chunks, CallCache(Path(root) / "nlp"))
        rows.append(score(f"nlp:{args.pipeline}", chunks, triples, extractions, seconds, 0))
        if args.llm:
            some = chunks[:args.llm]
            extractions, seconds = run_nlp(args.pipeline, some, CallCache(Path(root) / "nlp-n"))
            rows.append(score(f"nlp:{args.pipeline}", some, triples, extractions, seconds, 0))
            echo = lambda line: print(line, file=sys.stderr, flush=True)
            llm = load_llm(args.model, CallCache(Path(root) / "llm"))
            extractions, seconds, tokens = run_llm(llm, args.prompt, some, echo)
            rows.append(score(f"llm:{args.model}:{args.prompt}", some, triples, extractions,
                              seconds, tokens))
            extractions, seconds, tokens = run_hybrid(
                llm, args.prompt, args.pipeline, some, CallCache(Path(root) / "hybrid"), echo)
            rows.append(score(f"hybrid:{args.model}:{args.prompt}", some, triples,
                              extractions, seconds, tokens))
            rows.append(score(f"hybrid, LLM rels only:{args.prompt}", some, triples,
                              llm_relationships_only(extractions), seconds, tokens))
    print_table(rows)


if __name__ == "__main__":
    main()
