"""How an extractive answer chooses its span: the choice rules compared on one half of a
sample, over the same candidates, scores and free answers.

    python benchmarks/reader_rules.py specs/reader/musique.yaml [--half dev|test]
        [--rows dense] [--limit N] [--bootstrap 1000]

For each question of each row it reads the free answer (``kgrag.answer.reader.read``,
``mode: free``), the candidate spans (``kgrag.answer.spans.candidates``: the best
``answer.candidates`` by the prior, and the whole pool) and each scored candidate's
log-probability after the answer prompt (``CachedLLM.scores``, the prompt of
``kgrag.answer.extractive``), every call through the cache, so a rule costs nothing to add
once a question has been answered both ways. A yes/no question is answered by the
judgement in every extractive rule. Rules (F1 per row, 95 % bootstrap interval):

- ``free``: the free answer (not a span: the baseline);
- ``prior``: the prior's first candidate, no LLM;
- ``sum``, ``mean``, ``sqrt``: the candidate with the best summed log-probability, mean per
  token, sum over the root of its tokens;
- ``sqrt-typed``: ``sqrt`` among the candidates of the type the wh-word asks for, when any;
- ``sqrt+prior``: the best sum of the candidate's ranks by ``sqrt`` and by the prior
  (Borda: no weight to fit);
- ``snap``: the scored candidate sharing the most words (token F1) with the free answer,
  the prior breaking ties; ``sqrt`` when the free answer shares none;
- ``snap-pool``: the same over every candidate of the context (no limit: the pool costs
  no LLM call, only the fallback is scored); what ``answer.mode: extractive`` does with
  ``answer.focus: 0`` (the free answer from the whole context);
- ``verbatim``: the free answer itself when a unit holds it (case aside: the unit's own
  text is the answer), else ``snap-pool``;
- ``verbatim-prior``: ``verbatim`` with the prior's first candidate, not ``sqrt``, when
  nothing overlaps: no scoring at all;
- ``verbatim-escape``: ``verbatim``, but a free answer that is the escape stays the escape
  (the escape policy: every question here has an answer, so it costs what it escapes);
- ``oracle``, ``oracle-pool``: the best candidate by F1 (the candidate set's ceiling).

``scored`` is the share of questions a rule had to score candidates for (its time beyond a
free answer's).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bootstrap import interval
from benchmarks.reader_halves import load_rows
from kgrag import api
from kgrag.answer import INSUFFICIENT
from kgrag.answer.extractive import DEFAULT_CANDIDATES, extractive_answer, nearest
from kgrag.answer.generate import completion_prompt
from kgrag.answer.matching import f1_score
from kgrag.answer.reader import read
from kgrag.answer.spans import YES_NO, Candidate, candidates, read_question

POOL = 10_000  # candidates per context "without limit"


class Case:
    """One question of a row: its free answer, its candidates and their scores."""

    def __init__(self, session: api.Session, units: Sequence[str], layout: str | None,
                 question: str, limit: int) -> None:
        llm = session.models.llm("answerer")
        settings = {**session.spec.answer, "mode": "free", "cite": False}
        self.free = read(llm, units, question, settings, layout).text
        self.units = units
        self.judgement: str | None = None
        self.found: list[Candidate] = []
        self.pool: list[Candidate] = []
        self.means: list[float] = []
        self.tokens: list[int] = []
        self.asked = read_question(question).asked
        if read_question(question).yes_no:
            self.judgement = extractive_answer(
                llm, units, question, style=settings["prompt"],
                max_tokens=settings["max_tokens"]).text if units else None
            return
        self.pool = candidates(units, question, POOL)
        self.found = self.pool[:limit]
        if self.found:
            prompt = completion_prompt("\n\n".join(units), question)
            scores = llm.scores([(prompt, f" {c.text}") for c in self.found])
            self.means = [s.mean for s in scores]
            self.tokens = [s.target_tokens for s in scores]

    def best(self, value: Callable[[int], float]) -> str:
        """The scored candidate with the largest ``value(i)``, the prior breaking ties."""
        return self.found[max(range(len(self.found)),
                              key=lambda i: (value(i), -i))].text

    def sqrt(self) -> str:
        return self.best(lambda i: self.means[i] * self.tokens[i] ** 0.5)

    def snapped(self, pool: Sequence[Candidate]) -> str | None:
        """The candidate of ``pool`` nearest the free answer (``extractive.nearest``)."""
        chosen = nearest(self.free, pool)
        return None if chosen is None else chosen.text

    def verbatim(self) -> str | None:
        """The free answer as a unit writes it, when a unit holds it (case aside)."""
        needle = self.free.lower()
        if self.free == INSUFFICIENT or not needle.strip():
            return None
        for unit in self.units:
            at = unit.lower().find(needle)
            if at >= 0:
                return unit[at:at + len(needle)]
        return None


def rules(case: Case) -> dict[str, tuple[str, bool]]:
    """Each rule's answer and whether it scored candidates."""
    if case.judgement is not None:
        return {name: (case.free if name == "free" else case.judgement, name != "free")
                for name in NAMES}
    if not case.found:
        return {name: (case.free if name == "free" else INSUFFICIENT, False) for name in NAMES}
    ranks_by_score = np.argsort(np.argsort([-m * t ** 0.5 for m, t in
                                            zip(case.means, case.tokens)]))
    typed = [i for i, c in enumerate(case.found) if c.label in case.asked]
    snap, snap_pool, verbatim = (case.snapped(case.found), case.snapped(case.pool),
                                 case.verbatim())
    free_or_pool = verbatim or snap_pool
    return {
        "free": (case.free, False),
        "prior": (case.found[0].text, False),
        "sum": (case.best(lambda i: case.means[i] * case.tokens[i]), True),
        "mean": (case.best(lambda i: case.means[i]), True),
        "sqrt": (case.sqrt(), True),
        "sqrt-typed": (case.best(lambda i: (i in typed or not typed,
                                            case.means[i] * case.tokens[i] ** 0.5)), True),
        "sqrt+prior": (case.best(lambda i: -(ranks_by_score[i] + i)), True),
        "snap": (snap or case.sqrt(), snap is None),
        "snap-pool": (snap_pool or case.sqrt(), snap_pool is None),
        "verbatim": (free_or_pool or case.sqrt(), free_or_pool is None),
        "verbatim-prior": (free_or_pool or case.found[0].text, False),
        "verbatim-escape": ((INSUFFICIENT if case.free == INSUFFICIENT else
                             free_or_pool or case.sqrt()), free_or_pool is None),
    }


NAMES = ("free", "prior", "sum", "mean", "sqrt", "sqrt-typed", "sqrt+prior", "snap",
         "snap-pool", "verbatim", "verbatim-prior", "verbatim-escape")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("spec")
    parser.add_argument("--half", choices=("dev", "test"), default="dev")
    parser.add_argument("--rows", default="dense", help="comma-separated rows (and gold)")
    parser.add_argument("--limit", type=int, help="the half's first N questions only")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the dev/test split")
    args = parser.parse_args(argv)
    session = api.open_session(args.spec)
    limit = session.spec.answer.get("candidates") or DEFAULT_CANDIDATES
    questions, rows, _ = load_rows(session, args.half, args.seed, args.limit, args.rows,
                                   run=False)
    rng = np.random.default_rng(0)
    print(f"\n{args.spec}, {args.half} half ({questions.height} questions), "
          f"{session.spec.models['llm']['model']}\n")
    print("| row | rule | n | F1 [95 %] | scored |")
    print("|---|---|---|---|---|")
    for name, (table, contexts, layouts) in rows.items():
        f1: dict[str, list[float]] = {rule: [] for rule in (*NAMES, "oracle", "oracle-pool")}
        scored: dict[str, int] = dict.fromkeys(NAMES, 0)
        for n, (question, golds, parts, layout) in enumerate(zip(
                table["question"], table["answers"].to_list(), contexts, layouts), 1):
            case = Case(session, [p.text for p in parts], layout, question, limit)
            print(f"  [{name}] {n}/{table.height}", file=sys.stderr, flush=True)
            for rule, (text, paid) in rules(case).items():
                f1[rule].append(f1_score(text, golds))
                scored[rule] += paid
            ceiling = (max(f1_score(w, golds) for w in YES_NO) if case.judgement is not None
                       else 0.0)
            f1["oracle"].append(max([ceiling, *(f1_score(c.text, golds) for c in case.found)]))
            f1["oracle-pool"].append(max([ceiling, *(f1_score(c.text, golds)
                                                     for c in case.pool)]))
        for rule, values in f1.items():
            share = f"{scored[rule] / table.height:.2f}" if rule in scored else "–"
            print(f"| {name} | {rule} | {table.height} | "
                  f"{interval(np.array(values), args.bootstrap, rng)} | {share} |")


if __name__ == "__main__":
    main(sys.argv[1:])
