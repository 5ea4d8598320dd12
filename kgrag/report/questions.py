"""The report's per-question drill-down: each question with its gold answer and
supporting documents, and for every strategy the units it retrieved (rank order,
supporting documents marked, each with where it came from and its text on a click), its
answer and its trace (HugRAG's seeds, reached entities and filter; PPR's seeds and
scores; whatever a strategy records). A graph walk's trace is also drawn as the
question's subgraph (``kgrag.report.walk``), its chunk nodes linked to the units. An
answer given with ``answer.cite`` shows its citations as links to the units it cites;
those are marked, shown open, and the answer's span is marked in their text where it
occurs there (always, for an answer copied from a unit)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from kgrag.contents.answers import read_answers, read_citations
from kgrag.contents.corpus import read_documents, read_questions
from kgrag.contents.retrieved import read_retrieved
from kgrag.declarations import step_name
from kgrag.report.run_folder import RunFolder
from kgrag.report.units import Unit, read_units, unit_details
from kgrag.report.walk import walk_figure


def drilldown(run: RunFolder) -> str:
    """One collapsed ``<details>`` per question of the run, in corpus order."""
    corpus = run.artefact("corpus")  # the import step's: documents and questions
    documents = read_documents(corpus, ["doc_id", "title"])
    titles = dict(zip(documents["doc_id"], documents["title"]))
    assert run.metrics is not None, "the page shows questions only for an evaluated run"
    strategies = [row["strategy"] for row in run.metrics["rows"]]
    retrieved = {name: {row["question_id"]: row for row in read_retrieved(
        run.artefact(step_name("retrieve", name))).select(
            "question_id", "unit_ids", "doc_ids", "context_tokens", "trace").iter_rows(named=True)}
        for name in strategies}
    answers, cited = {}, {}
    for name in strategies:
        step = step_name("answer", name)
        if step in run.artefacts:
            table = read_answers(run.artefact(step))
            answers[name] = dict(zip(table["question_id"], table["answer"]))
            citations = read_citations(run.artefact(step))
            if citations is not None:
                cited[name] = dict(zip(citations["question_id"],
                                       citations["cited_units"].to_list()))
    units = read_units(run, {unit for rows in retrieved.values() for row in rows.values()
                             for unit in row["unit_ids"]})
    return "\n".join(
        _question(question, titles, [(name, retrieved[name].get(question["question_id"]),
                                      answers.get(name, {}).get(question["question_id"]),
                                      cited[name].get(question["question_id"], [])
                                      if name in cited else None)
                                     for name in strategies], units, f"q{number}")
        for number, question in enumerate(read_questions(corpus).iter_rows(named=True)))


def _question(question: dict[str, Any], titles: dict[str, str],
              strategies: list[tuple[str, dict[str, Any] | None, str | None,
                                     list[str] | None]], units: dict[str, Unit],
              anchor: str) -> str:
    """One question's drill-down; ``anchor`` prefixes the ids its citation links use."""
    gold, *aliases = question["answers"] or ["(none)"]
    supporting = set(question["supporting_doc_ids"] or [])
    also = f' <span class="muted">(also: {escape(", ".join(aliases))})</span>' if aliases else ""
    lines = [(f'<details class="question"><summary><code>{escape(question["question_id"])}'
              f'</code> {escape(question["question"])}</summary>'),
             f"<p><b>gold answer</b> {escape(gold)}{also}</p>"]
    if supporting:
        names = "; ".join(titles.get(doc, doc) for doc in sorted(supporting))
        lines.append(f"<p><b>supporting documents</b> ★ {escape(names)}</p>")
    lines.append('<div class="wide"><table class="drill"><thead><tr><th>strategy</th>'
                 "<th>answer</th><th>retrieved units (rank order, ★ supporting; click for the "
                 "text)</th><th>trace</th></tr></thead><tbody>")
    for number, (name, row, answer, cited) in enumerate(strategies):
        at = f"{anchor}-s{number}"
        trace = {} if row is None else json.loads(row["trace"])
        lines.append(f"<tr><td>{escape(name)}</td>"
                     f"<td>{'–' if answer is None else _answer(answer, cited, row, at)}</td>"
                     f"<td>{_units(row, titles, supporting, units, at, answer, cited)}</td>"
                     f"<td>{'–' if row is None else _trace(trace)}</td></tr>")
        figure = "" if row is None else walk_figure(trace, row["unit_ids"], at)
        if figure:
            lines.append(f'<tr class="walk"><td></td><td colspan="3">{figure}</td></tr>')
    lines.append("</tbody></table></div></details>")
    return "\n".join(lines)


def _answer(answer: str, cited: list[str] | None, row: dict[str, Any] | None,
            units: str) -> str:
    """The answer, and with citations each cited unit's number linked to its list item
    (the numbers are the units' ranks, as the prompt numbered them)."""
    if cited is None or row is None:
        return escape(answer)
    links = "".join(f' <a href="#{units}-{row["unit_ids"].index(unit) + 1}">'
                    f'[{row["unit_ids"].index(unit) + 1}]</a>' for unit in cited)
    return escape(answer) + (links or ' <span class="muted">(no valid citation)</span>')


def _units(row: dict[str, Any] | None, titles: dict[str, str], supporting: set[str],
           units: dict[str, Unit], anchor: str, answer: str | None,
           cited: list[str] | None) -> str:
    """The retrieved units in rank order: each its title, id and where it came from, its
    text on a click, and an id (``anchor`` and its rank) that a citation and the walk's
    figure link to; the ``cited`` ones are marked and open, the ``answer`` marked in
    their text."""
    if row is None:
        return '<span class="muted">not retrieved for this question</span>'
    items = []
    for rank, (unit, doc) in enumerate(zip(row["unit_ids"], row["doc_ids"]), 1):
        gold, quoted = doc in supporting, unit in (cited or ())
        label = (f'{"★ " if gold else ""}{escape(titles.get(doc, doc))} '
                 f"<code>{escape(unit)}</code>")
        found = units.get(unit)  # None for a triple or entity: it has no text of its own
        if found is not None and found.where:
            label += f' <span class="where">{escape(found.where)}</span>'
        if quoted:
            label += ' <span class="badge">cited</span>'
        if found is not None:
            label = unit_details(label, found.text, answer=answer if quoted else None,
                                 opened=quoted)
        classes = " ".join(name for name, on in (("gold", gold), ("cited", quoted)) if on)
        attributes = f' id="{anchor}-{rank}"' + (f' class="{classes}"' if classes else "")
        items.append(f"<li{attributes}>{label}</li>")
    return (f'<ol class="units">{"".join(items)}</ol>'
            f'<span class="muted">{len(row["unit_ids"])} units, '
            f'{row["context_tokens"]} context tokens</span>')


def _trace(trace: dict[str, Any]) -> str:
    """The trace as a list of its keys and values; a walk's edges are left to its figure."""
    shown = {key: value for key, value in trace.items() if key != "subgraph"}
    if not shown:
        return '<span class="muted">(none)</span>'
    items = "".join(f"<dt>{escape(key)}</dt><dd>{escape(_value(value))}</dd>"
                    for key, value in shown.items())
    return f'<dl class="trace">{items}</dl>'


def _value(value: Any) -> str:
    """A trace value on one line: ``name: value; …`` for a mapping, ``a, b`` for a list."""
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_value(inner)}" for key, inner in value.items())
    if isinstance(value, list):
        return ", ".join(_value(inner) for inner in value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
