"""Extraction quality of the bundled LLMs on MuSiQue supporting paragraphs.

    python benchmarks/extraction_quality.py              # 8 paragraphs, every configuration
    python benchmarks/extraction_quality.py --n 4 --configs smollm2-135m:chat
    python benchmarks/extraction_quality.py --max-entities 8 --max-relationships 8

Each configuration (model and prompt style) extracts the same paragraphs (the
``is_supporting`` paragraphs of the first questions, text only, as a chunk would
hold them) through a fresh, empty call cache, so every call really runs the model.
Every paragraph is extracted once with ungrounded items kept and flagged; the
"after" columns are what the default (grounded-only) filter keeps, computed from
those flags, so both settings are measured on the same model outputs.

Columns, per configuration:
  parse@1      share of paragraphs whose first attempt parsed and validated
  att          mean attempts per paragraph (1 + retries); fail = paragraphs that failed
  ent raw/bef/aft   entities per paragraph: as emitted / after normalising, dedupe and
                    added endpoints / grounded only
  rel raw/bef/aft   relationships per paragraph, the same stages (self-loops drop at "bef")
  gnd ent/rel  grounded share of the "bef" items
  dup          repeated items / emitted items (entities and relationships together)
  loop         self-loops (and empty endpoints) / emitted relationships
  graph        distinct grounded entities / relationships after ``merge`` over all paragraphs
  s/para       wall seconds per paragraph (model load excluded); tok/s = output tokens/s
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from kgrag.graphs.elements import Extraction
from kgrag.graphs.extraction.llm import extract
from kgrag.graphs.extraction.prompt import MAX_ENTITIES, MAX_RELATIONSHIPS
from kgrag.graphs.merge import merge
from kgrag.models.backend import LLMSettings
from kgrag.models.cache import CallCache
from kgrag.models.llm import CachedLLM
from kgrag.models.registry import resolve_llm

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "musique_200.jsonl"
# Gemma's bundled GGUF is a base model without a chat template, so only completion.
CONFIGS = ("gemma3-270m:completion", "smollm2-135m:completion", "smollm2-135m:chat")


def supporting_paragraphs(path: Path, n: int) -> list[tuple[str, str]]:
    """(id, text) of the first ``n`` supporting paragraphs, in question order."""
    paragraphs: list[tuple[str, str]] = []
    with path.open() as handle:
        for line in handle:
            question = json.loads(line)
            for p in question["paragraphs"]:
                if p["is_supporting"] and len(paragraphs) < n:
                    paragraphs.append((f"{question['id']}/{p['idx']}", p["paragraph_text"]))
            if len(paragraphs) >= n:
                break
    return paragraphs


@dataclass
class Row:
    config: str
    extractions: list[Extraction]
    seconds: float
    tokens_out: int


def run_config(config: str, paragraphs: list[tuple[str, str]], cache_root: Path,
               caps: dict[str, int | None]) -> Row:
    name, style = config.split(":")
    model = resolve_llm(name)
    cache = CallCache(cache_root / config.replace(":", "-"))
    llm = CachedLLM(LLMSettings(name=model.name, path=model.path, sha256=model.sha256,
                                n_ctx=4096), cache)
    llm.complete("Hello", max_tokens=1)  # loads the model outside the timed part
    before = llm.usage.snapshot()
    extractions = []
    started = time.perf_counter()
    for i, (chunk_id, text) in enumerate(paragraphs, 1):
        t0 = time.perf_counter()
        x = extract(llm, chunk_id, text, style=style, keep_ungrounded=True, **caps)
        extractions.append(x)
        print(f"  {config} {i}/{len(paragraphs)} {time.perf_counter() - t0:5.1f}s "
              f"attempts={x.attempts} ent={len(x.entities)} rel={len(x.relationships)}"
              + (f" FAILED {x.error[:80]}" if x.failed else ""), file=sys.stderr, flush=True)
    seconds = time.perf_counter() - started
    used = llm.usage.since(before)
    if used.cache_hits:
        print(f"  {config}: {used.cache_hits} cache hits (timings are not all real calls)",
              file=sys.stderr)
    cache.close()
    return Row(config, extractions, seconds, used.tokens_out)


def grounded_only(x: Extraction) -> Extraction:
    """What ``extract`` returns by default, rebuilt from the flags of a keep-all run."""
    return replace(x, entities=tuple(e for e in x.entities if e.grounded),
                   relationships=tuple(r for r in x.relationships if r.grounded))


def summarise(row: Row) -> dict[str, str]:
    xs, n = row.extractions, len(row.extractions)
    ok = [x for x in xs if not x.failed]
    raw_e = sum(x.counts.entities_raw for x in ok)
    raw_r = sum(x.counts.relationships_raw for x in ok)
    bef_e = sum(len(x.entities) for x in ok)
    bef_r = sum(len(x.relationships) for x in ok)
    aft_e = sum(len(grounded_only(x).entities) for x in ok)
    aft_r = sum(len(grounded_only(x).relationships) for x in ok)
    dups = sum(x.counts.entities_duplicate + x.counts.relationships_duplicate for x in ok)
    loops = sum(x.counts.relationships_invalid for x in ok)
    entities, relationships = merge(grounded_only(x) for x in ok)

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b else "-"

    return {
        "config": row.config,
        "parse@1": ratio(sum(x.attempts == 1 and not x.failed for x in xs), n),
        "att": ratio(sum(x.attempts for x in xs), n),
        "fail": str(sum(x.failed for x in xs)),
        "ent raw/bef/aft": f"{raw_e / n:.1f}/{bef_e / n:.1f}/{aft_e / n:.1f}",
        "rel raw/bef/aft": f"{raw_r / n:.1f}/{bef_r / n:.1f}/{aft_r / n:.1f}",
        "gnd ent/rel": f"{ratio(aft_e, bef_e)}/{ratio(aft_r, bef_r)}",
        "dup": ratio(dups, raw_e + raw_r),
        "loop": ratio(loops, raw_r),
        "graph": f"{entities.height}/{relationships.height}",
        "s/para": f"{row.seconds / n:.1f}",
        "tok/s": f"{row.tokens_out / row.seconds:.1f}",
    }


def print_table(rows: list[dict[str, str]]) -> None:
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(r[c].ljust(widths[c]) for c in columns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8, help="supporting paragraphs (default 8)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS),
                        help="model:style pairs (default: %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="default: max_output_tokens() of the caps")
    parser.add_argument("--max-entities", type=int, default=MAX_ENTITIES)
    parser.add_argument("--max-relationships", type=int, default=MAX_RELATIONSHIPS)
    args = parser.parse_args()
    caps = {"max_tokens": args.max_tokens, "max_entities": args.max_entities,
            "max_relationships": args.max_relationships}
    paragraphs = supporting_paragraphs(args.data, args.n)
    with tempfile.TemporaryDirectory(prefix="kgrag-extraction-") as root:
        rows = [summarise(run_config(c, paragraphs, Path(root), caps)) for c in args.configs]
    print(f"{len(paragraphs)} MuSiQue supporting paragraphs, fresh cache per configuration, "
          f"caps {args.max_entities} entities / {args.max_relationships} relationships")
    print_table(rows)


if __name__ == "__main__":
    main()
