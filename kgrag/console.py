"""``kgrag query`` at a terminal: one question, or a session of a question per line of
standard input, each answered with the evidence first (as soon as retrieval ends), then
the answer and the passages it cites, the answer marked in them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from kgrag.errors import (
    CtrlC,
    Refused,
    ctrl_c_raises,
    one_line,
)

if TYPE_CHECKING:
    from kgrag.api import Citation, Evidence, Querier, QueryResult

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
STDIN = "-"  # `kgrag query SPEC -`: the questions are standard input's lines
SHOWN_CHARS = 1000  # a question echoed longer than this is cut: a pasted page stays off screen


def query_command(args: argparse.Namespace) -> int:
    from kgrag import api

    querier = api.open_query(args.spec, args.strategy, echo=_quiet)
    if args.question != STDIN:
        _ask(querier, args.question)
        return 0
    with ctrl_c_raises():
        return _session(querier, sys.stdin)


def _session(querier: Querier, stdin: TextIO) -> int:
    """Answer each line of ``stdin``. A question the models cannot take (too long, not
    UTF-8) is refused with a line on stderr and the next one read; Ctrl-C during an
    answer abandons it and goes back to the prompt, Ctrl-C at the prompt ends the session
    (exit 130)."""
    from kgrag.models.cache import abandon_claims

    if stdin.isatty():
        print("kgrag: ready; a question per line, Ctrl-D to end (Ctrl-C stops an answer, "
              "or at this prompt ends)", file=sys.stderr)
    lines = _lines(stdin)
    while True:
        try:
            number, line = next(lines)
        except StopIteration:
            return 0
        except CtrlC:
            print("\nkgrag: query session ended (Ctrl-C)", file=sys.stderr)
            return EXIT_INTERRUPTED
        question = line.strip()
        if not question:
            continue
        shown = one_line(question[:SHOWN_CHARS]) + ("…" if len(question) > SHOWN_CHARS else "")
        print(f"question: {shown}")
        try:
            _ask(querier, question)
        except Refused as refused:
            print(f"kgrag: error: line {number}: {one_line(str(refused))}", file=sys.stderr)
        except CtrlC:
            abandon_claims()  # the answer's call may have left its claim on the cache
            print("\nkgrag: answer abandoned (Ctrl-C); the next question, or Ctrl-C again "
                  "to end", file=sys.stderr)
        print()


def _lines(stdin: TextIO) -> Iterator[tuple[int, str]]:
    """Standard input's lines, numbered from 1, read as bytes where it has them so that a
    line that is not UTF-8 spoils only itself: its bad bytes become lone surrogates, which
    the querier refuses (a text stream would fail, or replace them unseen)."""
    raw = getattr(stdin, "buffer", None)
    if raw is None:  # already text (a test's StringIO)
        yield from enumerate(stdin, start=1)
        return
    for number, line in enumerate(iter(raw.readline, b""), start=1):
        yield number, line.decode("utf-8", errors="surrogateescape")


def _quiet(line: str) -> None:
    """Echo for the index steps a query runs: their lines would hide the answer."""


def _ask(querier: Querier, question: str) -> None:
    """The evidence as soon as retrieval ends, then the answer (which may take the LLM
    seconds), then the passages it cites with the answer marked in them."""
    evidence = querier.retrieve(question)
    _print_evidence(evidence)
    sys.stdout.flush()
    _print_answer(querier.answer(evidence))


def _print_evidence(evidence: Evidence) -> None:
    """What the strategy retrieved and why, as ``kgrag query`` shows it."""
    print(f"strategy: {evidence.strategy}  ({evidence.context_tokens} context tokens, "
          f"{evidence.retrieval_ms:.1f} ms)")
    scores = evidence.trace.get("scores", {})
    walked = evidence.trace.get("ppr_seeds", evidence.trace.get("seeds"))  # a PPR walk's seeds
    if isinstance(walked, dict):
        seeds = ", ".join(f"{name} ({weight:.3g})" for name, weight in walked.items())
        print(f"seeds: {seeds or '(none)'}")
    if "nearest" in evidence.trace:
        linked = ", ".join(f"{m} -> {n}" for m, n in evidence.trace["nearest"].items())
        print(f"linked by nearest name: {linked}")
    if "far_seeds" in evidence.trace:  # seeds_near: names found only far from the question
        print(f"not seeded (no chunk near the question): {', '.join(evidence.trace['far_seeds'])}")
    if "fallback" in evidence.trace:
        print(f"fallback: {evidence.trace['fallback']}")
    number = {p.unit_id: n for n, p in enumerate(evidence.parts, 1) if p.unit_id}
    sources = evidence.sources or [""] * len(evidence.unit_ids)
    for unit, title, source in zip(evidence.unit_ids, evidence.titles, sources):
        cited = f"[{number[unit]}] " if unit in number else ""
        where = _beside(title, source)
        print(f"  {cited}{unit}  {title}" + (f"  ({where})" if where else "")
              + (f"  (score {scores[unit]:.4g})" if unit in scores else ""))


PASSAGE_CHARS = 240  # how much of a cited passage is shown around the answer


def _marked(citation: Citation) -> str:
    """The cited passage on one line, around the answer's span marked »like this«."""
    text = citation.text
    if citation.span is None:
        return " ".join(text[:PASSAGE_CHARS].split())
    start, end = citation.span
    left = max(0, start - PASSAGE_CHARS // 2)
    shown = f"{text[left:start]}»{text[start:end]}«{text[end:end + PASSAGE_CHARS // 2]}"
    return ("…" if left else "") + " ".join(shown.split()) + ("…" if end + PASSAGE_CHARS // 2
                                                              < len(text) else "")


def _print_answer(result: QueryResult) -> None:
    """The answer, and with citations each cited passage with the answer marked."""
    print(f"answer: {result.answer}")
    if result.citations is None:
        return
    for citation in result.citations:
        where = _beside(citation.title, citation.source)
        print(f"  [{citation.number}] {citation.title}{', ' + where if where else ''}"
              f"  ({citation.unit_id})")
        print(f"      {_marked(citation)}")
    if not result.citations:
        print("  (no citation)")


def _beside(title: str, source: str) -> str:
    """Where a unit came from, to print beside its title: without the file when the
    title is the file's path (a document that names no title of its own), so that
    ``manuals/a.pdf, p. 35`` is not ``manuals/a.pdf, manuals/a.pdf, p. 35``."""
    if source == title or source.startswith(f"{title}, "):
        return source[len(title) + 2:]
    return source
