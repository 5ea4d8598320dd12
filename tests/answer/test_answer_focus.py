"""An extractive answer's free answer is written from the context's evidence sentences:
the sentences most like the question, each under its unit's title, in the units' order.
Real spaCy sentences and the real bundled MiniLM; a scripted model that records the prompt
it is given, behind the real call cache."""

from __future__ import annotations

import pytest

from kgrag.answer.focus import focused
from kgrag.answer.reader import read
from kgrag.answer.spans import parse
from kgrag.models.cache import CallCache
from kgrag.models.embed.embedder import CachedEmbedder, EmbedderSettings
from kgrag.models.registry import resolve_embedder
from tests.answer.test_answer_extractive import SETTINGS, Scripted
from tests.conftest import toy_llm

UNITS = [
    ("# Rhine\nThe Rhine rises in the Swiss Alps. It flows north through Basel. Barges "
     "carry coal on it. Its delta lies in the Netherlands. Salmon returned to it in 1990s."),
    ("# Basel\nBasel is a city on the Rhine. Its zoo opened in 1874. The city hosts Art "
     "Basel every June. The university was founded in 1460 by Pope Pius II."),
    ("# Lyon\nLyon lies where the Rhone meets the Saone. It is known for its cuisine. The "
     "Lumiere brothers made films there. Its old town is a World Heritage Site."),
]
QUESTION = "In which year was the university of Basel founded?"


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> CachedEmbedder:
    model = resolve_embedder("all-MiniLM-L6-v2")
    settings = EmbedderSettings(name=model.name, path=model.path, sha256=model.sha256)
    return CachedEmbedder(settings, CallCache(tmp_path_factory.mktemp("cache")))


def test_the_evidence_is_the_sentences_most_like_the_question_under_their_titles(embedder):
    text = focused(UNITS, QUESTION, embedder, 3)
    # the founding sentence is in; the title it stands under names its subject
    assert "# Basel\n" in text and "The university was founded in 1460 by Pope Pius II." in text
    assert "Lyon" not in text and "cuisine" not in text
    groups = [group.split("\n") for group in text.split("\n\n")]
    # each group is a unit's title line, then its kept sentences; the units' order holds
    assert [g[0] for g in groups] == [u.split("\n")[0] for u in UNITS if u.split("\n")[0]
                                      in [g[0] for g in groups]]
    assert all(len(g) == 2 for g in groups)
    assert sum(g[1].count(". ") + 1 for g in groups) == 3  # three sentences in all


def test_a_context_of_no_more_sentences_than_asked_is_given_whole(embedder):
    assert focused(UNITS[:1], QUESTION, embedder, 5) == UNITS[0]


def test_the_model_reads_the_evidence_and_its_answer_snaps_to_a_span_of_every_unit(
        tmp_path, embedder):
    backend = Scripted("founded 1460", "Basel")
    prompts: list[str] = []
    generate = backend.generate
    backend.generate = lambda request: (prompts.append(request["prompt"]), generate(request))[1]
    llm = toy_llm(CallCache(tmp_path), backend)
    reply = read(llm, UNITS, QUESTION, {**SETTINGS, "focus": 3}, None, embedder)
    assert reply.text == "1460" and reply.cited == [2]  # cites the unit that holds it
    asked = prompts[0].rsplit("Context:\n", 1)[1]
    assert "Pope Pius II" in asked and "Lumiere" not in asked
    whole = read(toy_llm(CallCache(tmp_path / "whole"), backend), UNITS, QUESTION,
                 {**SETTINGS, "focus": 0})
    assert whole.text == "1460" and "Lumiere" in prompts[-1]  # focus 0: the whole context


def test_a_units_first_sentence_is_evidence_though_spacy_glues_it_to_the_title(embedder):
    """spaCy parses a unit's title line and its first sentence as one sentence ("# Basel
    Zoo\nThe Basel Zoo opened …"), for most units of the shared samples; that sentence
    is evidence all the same, without the title line."""
    units = ["# Basel Zoo\nThe Basel Zoo opened to visitors in 1874. Its lions came later.",
             "# Cities\nMany cities keep a zoo for visitors. Some zoos are old."]
    assert next(s.text for s in parse(units)[0].sents).startswith("# Basel Zoo\nThe Basel")
    text = focused(units, "When did the Basel Zoo open?", embedder, 1)
    assert text == "# Basel Zoo\nThe Basel Zoo opened to visitors in 1874."
