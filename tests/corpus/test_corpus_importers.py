"""Importers read the real shared benchmark files and plain corpora correctly."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from kgrag.corpus import Corpus, load_corpus
from kgrag.corpus.corpus import DOCUMENT_SCHEMA, QUESTION_SCHEMA, SENTENCE_SCHEMA, TRIPLE_SCHEMA
from kgrag.errors import KgragError


def load(base_dir: Path, dataset: str, path: str | Path, **options: Any) -> Corpus:
    """Call load_corpus with a corpus section as the validated spec would give it."""
    cfg = {"dataset": dataset, "path": str(path), "limit": None, "questions": None, "fields": {}}
    return load_corpus({**cfg, **options}, base_dir)


def read_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def expected_id(title: str, text: str) -> str:
    return "d" + hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:12]


def titles_by_id(corpus: Corpus) -> dict[str, str]:
    return dict(zip(corpus.documents["doc_id"], corpus.documents["title"]))


# --- MuSiQue -------------------------------------------------------------------------------


def test_musique_limit_keeps_documents_of_first_questions(repo_root: Path, data_dir: Path):
    raw = read_lines(data_dir / "musique_200.jsonl")[:30]
    corpus = load(repo_root, "musique", "../shared/data/musique_200.jsonl", limit=30)

    pairs = [(p["title"], p["paragraph_text"]) for row in raw for p in row["paragraphs"]]
    unique_pairs = list(dict.fromkeys(pairs))
    assert corpus.documents.height == len(unique_pairs) < len(pairs)
    assert list(zip(corpus.documents["title"], corpus.documents["text"])) == unique_pairs
    assert corpus.documents["doc_id"].to_list() == [expected_id(*pair) for pair in unique_pairs]
    assert corpus.documents.schema == pl.Schema(DOCUMENT_SCHEMA)
    assert corpus.questions.schema == pl.Schema(QUESTION_SCHEMA)
    assert corpus.questions["question_id"].to_list() == [row["id"] for row in raw]


def test_musique_supporting_and_answers(repo_root: Path, data_dir: Path):
    raw = read_lines(data_dir / "musique_200.jsonl")
    corpus = load(repo_root, "musique", data_dir / "musique_200.jsonl")
    assert corpus.questions.height == 200
    doc_ids = set(corpus.documents["doc_id"])
    with_aliases = 0
    for row, question in zip(raw, corpus.questions.iter_rows(named=True)):
        gold = [
            expected_id(p["title"], p["paragraph_text"])
            for p in row["paragraphs"]
            if p["is_supporting"]
        ]
        assert question["supporting_doc_ids"] == list(dict.fromkeys(gold))
        assert len(question["supporting_doc_ids"]) >= 2
        assert set(question["supporting_doc_ids"]) <= doc_ids
        assert question["question"] == row["question"]
        assert question["answers"][0] == row["answer"].strip()
        if row["answer_aliases"]:
            with_aliases += 1
            assert set(question["answers"]) == {row["answer"], *row["answer_aliases"]}
        else:
            assert question["answers"] == [row["answer"]]
    assert with_aliases == 61


def test_doc_ids_are_stable_across_limits(repo_root: Path, data_dir: Path):
    small = load(repo_root, "musique", data_dir / "musique_200.jsonl", limit=5)
    large = load(repo_root, "musique", data_dir / "musique_200.jsonl", limit=80)
    later = load(
        repo_root,
        "musique",
        data_dir / "musique_200.jsonl",
        questions=[large.questions["question_id"][40]],
    )

    def id_map(corpus: Corpus) -> dict[tuple[str, str], str]:
        frame = corpus.documents
        return dict(zip(zip(frame["title"], frame["text"]), frame["doc_id"]))

    big = id_map(large)
    for subset in (small, later):
        ids = id_map(subset)
        assert ids.items() <= big.items()
    assert later.questions["supporting_doc_ids"][0].to_list() == (
        large.questions["supporting_doc_ids"][40].to_list()
    )


def test_question_selection_keeps_file_order(repo_root: Path, data_dir: Path):
    raw = read_lines(data_dir / "musique_200.jsonl")
    wanted = [raw[150]["id"], raw[3]["id"]]
    corpus = load(repo_root, "musique", data_dir / "musique_200.jsonl", questions=wanted)
    assert corpus.questions["question_id"].to_list() == [raw[3]["id"], raw[150]["id"]]
    pairs = {(p["title"], p["paragraph_text"]) for i in (3, 150) for p in raw[i]["paragraphs"]}
    assert set(zip(corpus.documents["title"], corpus.documents["text"])) == pairs


def test_selection_then_limit(repo_root: Path, data_dir: Path):
    raw = read_lines(data_dir / "musique_200.jsonl")
    wanted = [raw[i]["id"] for i in (9, 2, 7)]
    corpus = load(repo_root, "musique", data_dir / "musique_200.jsonl", questions=wanted, limit=2)
    assert corpus.questions["question_id"].to_list() == [raw[2]["id"], raw[7]["id"]]


def test_unknown_question_ids_are_listed(repo_root: Path, data_dir: Path):
    raw = read_lines(data_dir / "musique_200.jsonl")
    with pytest.raises(KgragError, match="not-a-question, also-missing"):
        load(
            repo_root,
            "musique",
            data_dir / "musique_200.jsonl",
            questions=[raw[0]["id"], "not-a-question", "also-missing"],
        )


def test_empty_selection_is_an_error(repo_root: Path, data_dir: Path):
    with pytest.raises(KgragError, match="select no questions"):
        load(repo_root, "musique", data_dir / "musique_200.jsonl", questions=[])


# --- HotpotQA and 2Wiki --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dataset", "file_name", "n_questions"),
    [("hotpotqa", "hotpotqa_200.jsonl", 200), ("2wiki", "2wiki_200.jsonl", 164)],
)
def test_context_datasets(
    repo_root: Path, data_dir: Path, dataset: str, file_name: str, n_questions: int
):
    raw = [row for row in read_lines(data_dir / file_name) if "context" in row]
    corpus = load(repo_root, dataset, data_dir / file_name)
    titles = titles_by_id(corpus)

    assert corpus.questions["question_id"].to_list() == [row["_id"] for row in raw]
    assert len(raw) == n_questions
    for row, question in zip(raw, corpus.questions.iter_rows(named=True)):
        gold_titles = {title for title, _ in row["supporting_facts"]}
        assert {titles[doc_id] for doc_id in question["supporting_doc_ids"]} == gold_titles
        assert question["answers"] == [row["answer"]]
    for text in corpus.documents["text"]:
        assert "  " not in text
        assert text == text.strip()
    n_paragraphs = sum(len(row["context"]) for row in raw)
    assert 0 < corpus.documents.height < n_paragraphs


def test_2wiki_evidences_survive_as_gold_triples(repo_root: Path, data_dir: Path):
    raw = [row for row in read_lines(data_dir / "2wiki_200.jsonl") if "context" in row][:3]
    corpus = load(repo_root, "2wiki", data_dir / "2wiki_200.jsonl", limit=3)
    assert corpus.triples.schema == pl.Schema(TRIPLE_SCHEMA)
    expected = [(row["_id"], *triple) for row in raw for triple in row["evidences"]]
    assert corpus.triples.rows() == expected
    assert ("Free Guy", "director", "Shawn Levy") in {row[1:] for row in expected}
    titles = set(corpus.documents["title"])
    assert {"Forbidden Ground", "Free Guy", "Shawn Levy"} <= titles  # subjects' paragraphs


def test_datasets_without_gold_facts_have_no_triples(repo_root: Path, data_dir: Path):
    for dataset, file_name in (("hotpotqa", "hotpotqa_200.jsonl"),
                               ("musique", "musique_200.jsonl")):
        corpus = load(repo_root, dataset, data_dir / file_name, limit=2)
        assert corpus.triples.is_empty()
        assert corpus.triples.schema == pl.Schema(TRIPLE_SCHEMA)


def test_malformed_evidences_name_the_line(tmp_path: Path, data_dir: Path):
    row = next(r for r in read_lines(data_dir / "2wiki_200.jsonl") if "context" in r)
    path = tmp_path / "2wiki.jsonl"
    path.write_text(json.dumps({**row, "evidences": [["Free Guy", "director"]]}) + "\n")
    with pytest.raises(KgragError, match=r"2wiki\.jsonl:1: 'evidences' entries must be"):
        load(tmp_path, "2wiki", path)


def test_hotpotqa_sentences_are_joined_with_single_spaces(repo_root: Path, data_dir: Path):
    corpus = load(repo_root, "hotpotqa", data_dir / "hotpotqa_200.jsonl", limit=1)
    porcaro = corpus.documents.filter(pl.col("title") == "Jeff Porcaro")["text"][0]
    assert porcaro.startswith(
        "Jeffrey Thomas Porcaro (April 1, 1954 – August 5, 1992) was an American drummer, "
        "songwriter, and record producer. In a career that spanned more than 20 years,"
    )
    assert corpus.documents.height == 10


# --- plain corpora -------------------------------------------------------------------------


def test_jsonl_with_custom_fields(tmp_path: Path):
    lines = [
        {"pid": "p1", "heading": "Alpha", "body": "First document."},
        {"pid": "p2", "body": "No heading, so the id is the title."},
        {"pid": "p3", "heading": "Alpha", "body": "First document."},
        {"pid": 4, "heading": "", "body": "Empty heading falls back to the id."},
        {"pid": "p5", "heading": "Blank", "body": "   "},
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    fields = {"id": "pid", "title": "heading", "text": "body"}

    corpus = load(tmp_path, "jsonl", "docs.jsonl", fields=fields)
    assert corpus.documents["title"].to_list() == ["Alpha", "p2", "4"]
    assert corpus.documents["text"][1] == "No heading, so the id is the title."
    assert corpus.documents["doc_id"][0] == expected_id("Alpha", "First document.")
    assert corpus.questions.is_empty()
    assert corpus.questions.schema == pl.Schema(QUESTION_SCHEMA)

    limited = load(tmp_path, "jsonl", path, fields=fields, limit=2)
    assert limited.documents["title"].to_list() == ["Alpha", "p2"]


def test_jsonl_missing_text_field_names_the_line(tmp_path: Path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "body": "wrong"}\n')
    with pytest.raises(KgragError, match=r"docs\.jsonl:2: missing field 'text'"):
        load(tmp_path, "jsonl", path)


def test_text_folder(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "b.md").write_text("# Bee\n\nBees make honey.\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("Ants carry leaves.", encoding="utf-8")
    (tmp_path / "sub" / "c.txt").write_text("  Cats sleep.  \n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    (tmp_path / "notes.csv").write_text("not,a,document\n", encoding="utf-8")
    (tmp_path / ".hidden" / "secret.txt").write_text("Skipped.", encoding="utf-8")

    corpus = load(tmp_path, "text", ".")
    assert corpus.documents["title"].to_list() == ["a.txt", "b.md", "sub/c.txt"]
    assert corpus.documents["text"].to_list() == [
        "Ants carry leaves.",
        "# Bee\n\nBees make honey.",
        "Cats sleep.",
    ]
    assert corpus.questions.is_empty()
    assert load(tmp_path, "text", ".", limit=1).documents["title"].to_list() == ["a.txt"]


def test_questions_option_rejected_for_plain_corpora(tmp_path: Path):
    (tmp_path / "a.txt").write_text("Ants.", encoding="utf-8")
    with pytest.raises(KgragError, match="remove corpus.questions"):
        load(tmp_path, "text", ".", questions=["q1"])


# --- errors --------------------------------------------------------------------------------


def test_missing_path(tmp_path: Path):
    with pytest.raises(KgragError, match="does not exist"):
        load(tmp_path, "musique", "nowhere.jsonl")


def test_empty_files_and_folders(tmp_path: Path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "blank.md").write_text("  \n")
    with pytest.raises(KgragError, match="empty corpus"):
        load(tmp_path, "musique", "empty.jsonl")
    with pytest.raises(KgragError, match="empty corpus"):
        load(tmp_path, "jsonl", "empty.jsonl")
    with pytest.raises(KgragError, match="empty corpus"):
        load(tmp_path, "text", "folder")


def test_bad_json_line_is_located(tmp_path: Path, data_dir: Path):
    good = (data_dir / "hotpotqa_200.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join([*good, '{"_id": "x", "question": ']) + "\n", encoding="utf-8")
    with pytest.raises(KgragError, match=r"broken\.jsonl:3: not valid JSON"):
        load(tmp_path, "hotpotqa", path)


def test_missing_required_field_is_located(tmp_path: Path, data_dir: Path):
    rows = read_lines(data_dir / "musique_200.jsonl")[:2]
    del rows[1]["paragraphs"]
    path = tmp_path / "musique.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    with pytest.raises(KgragError, match=r"musique\.jsonl:2: missing field 'paragraphs'"):
        load(tmp_path, "musique", path)


def test_folder_given_for_jsonl_and_file_for_text(tmp_path: Path, data_dir: Path):
    with pytest.raises(KgragError, match="expects a JSON Lines file"):
        load(tmp_path, "jsonl", tmp_path)
    with pytest.raises(KgragError, match="expects a folder"):
        load(tmp_path, "text", data_dir / "README.md")


def test_unknown_dataset_lists_known_ones(tmp_path: Path):
    with pytest.raises(KgragError, match="unknown corpus dataset 'squad'.*musique"):
        load(tmp_path, "squad", "x.jsonl")


# --- HolisQA -------------------------------------------------------------------------------


def holisqa_rows(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return read_lines(folder / "sentences.jsonl"), read_lines(folder / "qa.jsonl")


def test_holisqa_limit_keeps_a_contiguous_run_around_the_gold(data_dir: Path):
    folder = data_dir / "holisqa" / "biology"
    raw_sentences, raw_qa = holisqa_rows(folder)
    corpus = load(folder, "holisqa", folder, limit=10)

    article_order = list(dict.fromkeys(row["article_id"] for row in raw_sentences))
    article_of = {row["sentence_id"]: row["article_id"] for row in raw_sentences}
    gold_articles = {article_of[s] for row in raw_qa[:10] for s in row["context_sentence_ids"]}
    positions = sorted(article_order.index(article) for article in gold_articles)
    expected_titles = article_order[positions[0] : positions[-1] + 1]
    assert corpus.documents["title"].to_list() == expected_titles
    assert len(expected_titles) > len(gold_articles)  # neighbours come along as distractors
    assert corpus.documents["doc_id"].to_list() == [
        expected_id(title, text) for title, text in zip(corpus.documents["title"],
                                                        corpus.documents["text"])
    ]
    assert corpus.questions.schema == pl.Schema(QUESTION_SCHEMA)
    assert corpus.sentences.schema == pl.Schema(SENTENCE_SCHEMA)

    doc_of_title = {title: doc_id for doc_id, title in titles_by_id(corpus).items()}
    text_of = dict(zip(corpus.documents["doc_id"], corpus.documents["text"]))
    raw_text = {row["sentence_id"]: row["text"] for row in raw_sentences}
    spans = {row["sentence_id"]: row for row in corpus.sentences.iter_rows(named=True)}
    assert set(corpus.sentences["doc_id"]) == set(text_of)
    for sentence_id, row in spans.items():
        assert text_of[row["doc_id"]][row["start"] : row["end"]] == row["text"]
        assert row["text"] == " ".join(raw_text[sentence_id].split())

    assert corpus.questions["question_id"].to_list() == [row["qa_id"] for row in raw_qa[:10]]
    for row, question in zip(raw_qa, corpus.questions.iter_rows(named=True)):
        assert question["answers"] == [row["answer"].strip()]
        assert question["gold_sentence_ids"] == row["context_sentence_ids"]
        gold = [article_of[s] for s in row["context_sentence_ids"]]
        assert question["supporting_doc_ids"] == [doc_of_title[a] for a in dict.fromkeys(gold)]
        for sentence_id in question["gold_sentence_ids"]:
            assert spans[sentence_id]["doc_id"] == doc_of_title[article_of[sentence_id]]


def test_holisqa_article_text_joins_sentences_in_order(data_dir: Path):
    folder = data_dir / "holisqa" / "biology"
    raw_sentences, _ = holisqa_rows(folder)
    corpus = load(folder, "holisqa", folder)
    assert corpus.documents.height == 1111
    assert corpus.sentences.height == len(raw_sentences)
    first = [row for row in raw_sentences if row["article_id"] == "A000001"]
    first.sort(key=lambda row: row["sent_idx"])
    assert corpus.documents["title"][0] == "A000001"
    assert corpus.documents["text"][0] == " ".join(" ".join(r["text"] for r in first).split())


def test_holisqa_question_selection(data_dir: Path):
    folder = data_dir / "holisqa" / "business"
    _, raw_qa = holisqa_rows(folder)
    wanted = [raw_qa[200]["qa_id"], raw_qa[5]["qa_id"]]
    corpus = load(folder, "holisqa", folder, questions=wanted)
    assert corpus.questions["question_id"].to_list() == [wanted[1], wanted[0]]
    titles = corpus.documents["title"].to_list()
    numbers = [int(title[1:]) for title in titles]
    assert numbers == list(range(numbers[0], numbers[-1] + 1))  # contiguous, in file order
    kept = set(corpus.documents["doc_id"])
    for gold in corpus.questions["supporting_doc_ids"].to_list():
        assert set(gold) <= kept


def write_holisqa(folder: Path, sentences: list[dict], qa: list[dict]) -> Path:
    folder.mkdir()
    for name, rows in (("sentences.jsonl", sentences), ("qa.jsonl", qa)):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def holisqa_qa(qa_id: str, *sentence_ids: str) -> dict[str, Any]:
    return {"qa_id": qa_id, "category": "biology", "slice_id": "SL1", "question": "Why?",
            "answer": "Because.", "context_sentence_ids": list(sentence_ids),
            "context_text": "", "created_at": ""}


SMALL_SENTENCES = [
    {"sentence_id": "S2", "article_id": "A1", "sent_idx": 1, "text": "Second  one.\n"},
    {"sentence_id": "S1", "article_id": "A1", "sent_idx": 0, "text": " First one."},
    {"sentence_id": "S3", "article_id": "A2", "sent_idx": 0, "text": "Other article."},
    {"sentence_id": "S4", "article_id": "A3", "sent_idx": 0, "text": "Third article."},
]


def test_holisqa_spans_on_a_small_folder(tmp_path: Path):
    folder = write_holisqa(tmp_path / "small", SMALL_SENTENCES,
                           [holisqa_qa("Q1", "S2"), holisqa_qa("Q2", "S4", "S1")])
    corpus = load(tmp_path, "holisqa", "small", questions=["Q1"])
    assert corpus.documents["text"].to_list() == ["First one. Second one."]
    assert corpus.sentences.rows() == [
        ("S1", corpus.documents["doc_id"][0], 0, 10, "First one."),
        ("S2", corpus.documents["doc_id"][0], 11, 22, "Second one."),
    ]
    whole = load(tmp_path, "holisqa", folder, limit=2)
    assert whole.documents["title"].to_list() == ["A1", "A2", "A3"]
    assert whole.questions["supporting_doc_ids"][1].to_list() == [
        whole.documents["doc_id"][2], whole.documents["doc_id"][0]]


def test_holisqa_missing_sentences_file(tmp_path: Path):
    folder = tmp_path / "domain"
    folder.mkdir()
    (folder / "qa.jsonl").write_text(json.dumps(holisqa_qa("Q1", "S1")) + "\n")
    with pytest.raises(KgragError, match=r"domain/sentences\.jsonl is missing"):
        load(tmp_path, "holisqa", "domain")
    with pytest.raises(KgragError, match="expects a HolisQA domain folder"):
        load(tmp_path, "holisqa", folder / "qa.jsonl")


def test_holisqa_unknown_sentence_id_names_the_line(tmp_path: Path):
    write_holisqa(tmp_path / "domain", SMALL_SENTENCES,
                  [holisqa_qa("Q1", "S1"), holisqa_qa("Q2", "S3", "S99")])
    with pytest.raises(KgragError, match=r"qa\.jsonl:2: context sentence id 'S99' is not in"):
        load(tmp_path, "holisqa", "domain")


def test_a_line_nested_too_deeply_is_located(tmp_path: Path, data_dir: Path):
    good = (data_dir / "musique_200.jsonl").read_text(encoding="utf-8").splitlines()[:1]
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join([*good, '{"a": ' * 100_000 + "1" + "}" * 100_000]) + "\n")
    with pytest.raises(KgragError, match=r"deep\.jsonl:2: nested too deeply to read"):
        load(tmp_path, "musique", path)


def test_a_corpus_path_in_a_symbolic_link_loop_is_refused(tmp_path: Path):
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(KgragError, match=r"'loop': symbolic links loop back on themselves"):
        load(tmp_path, "jsonl", "loop")


@pytest.mark.parametrize(("dataset", "name", "change", "problem"), [
    ("musique", "musique_200.jsonl",
     lambda row: row["question_decomposition"][1].update(paragraph_support_idx=20),
     (":2: question_decomposition[1]: paragraph_support_idx 20 names none of the line's 20 "
      "paragraphs (by their 'idx')")),
    ("musique", "musique_200.jsonl",
     lambda row: row["question_decomposition"][0].update(paragraph_support_idx=True),
     ":2: question_decomposition[0]: field 'paragraph_support_idx' must be an integer"),
    ("musique", "musique_200.jsonl",
     lambda row: row["question_decomposition"][0].update(paragraph_support_idx=None),
     ":2: question_decomposition[0]: field 'paragraph_support_idx' must be an integer"),
    ("musique", "musique_200.jsonl",
     lambda row: row["question_decomposition"][0].update(paragraph_support_idx=3.0),
     ":2: question_decomposition[0]: field 'paragraph_support_idx' must be an integer"),
    ("musique", "musique_200.jsonl", lambda row: row["paragraphs"][0].update(idx="zero"),
     ":2: paragraphs[0]: field 'idx' must be an integer"),
    ("musique", "musique_200.jsonl", lambda row: row.update(answer=" ", answer_aliases=[]),
     ":2: field 'answer' is empty and no alias names another"),
    ("hotpotqa", "hotpotqa_200.jsonl", lambda row: row.update(answer=""),
     ":2: field 'answer' is empty and no alias names another"),
    ("musique", "musique_200.jsonl",
     lambda row: [p.update(paragraph_text="") for p in row["paragraphs"]],
     ":2: every paragraph of 'paragraphs' has empty text"),
    ("2wiki", "2wiki_200.jsonl",
     lambda row: [entry.__setitem__(1, [" ", ""]) for entry in row["context"]],
     ":2: every paragraph of 'context' has empty text"),
    ("musique", "musique_200.jsonl",
     lambda row: row["question_decomposition"][1].pop("answer"),
     ":2: question_decomposition[1]: missing field 'answer'"),
    ("musique", "musique_200.jsonl", lambda row: row.update(paragraphs=[]),
     ":2: field 'paragraphs' is empty; a question needs the paragraphs it is asked over"),
    ("hotpotqa", "hotpotqa_200.jsonl", lambda row: row.update(context=[]),
     ":2: field 'context' is empty; a question needs the paragraphs it is asked over"),
    ("musique", "musique_200.jsonl", lambda row: row.update(question=" "),
     ":2: field 'question' is empty"),
    ("2wiki", "2wiki_200.jsonl", lambda row: row.update(question=""),
     ":2: field 'question' is empty"),
    ("kgqa", "kgqa_webqsp.jsonl", lambda row: row.update(question="\n"),
     ":2: field 'question' is empty"),
], ids=["support-idx-past", "support-idx-bool", "support-idx-null", "support-idx-float",
        "idx-text", "blank-answer", "empty-answer", "empty-paragraphs", "empty-context",
        "step-no-answer", "no-paragraphs", "no-context", "blank-question", "empty-question",
        "kgqa-question"])
def test_a_benchmark_row_that_cannot_be_asked_is_refused_with_its_line(
        tmp_path: Path, data_dir: Path, dataset, name, change, problem):
    rows = read_lines(data_dir / name)[:2]
    change(rows[1])
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    with pytest.raises(KgragError) as caught:
        load(tmp_path, dataset, path)
    assert str(caught.value).startswith(f"{path}{problem}")


@pytest.mark.parametrize("key", [{"a": 1}, ["a"], 1.5, True])
def test_a_document_id_that_is_no_string_or_integer_is_refused(tmp_path: Path, key):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "fine"}) + "\n"
                    + json.dumps({"id": key, "title": "T", "text": "b"}) + "\n")
    with pytest.raises(KgragError, match=r"docs\.jsonl:2: field 'id' must be a string or an "
                                         r"integer \(or absent\)"):
        load(tmp_path, "jsonl", path)


@pytest.mark.parametrize(("dataset", "name", "field", "shown"), [
    ("musique", "musique_200.jsonl", "answer", "field answer"),
    ("musique", "musique_200.jsonl", "id", "field id"),
    ("hotpotqa", "hotpotqa_200.jsonl", "question", "field question"),
    ("musique", "musique_200.jsonl", "paragraph", "field paragraphs[3].paragraph_text"),
    ("2wiki", "2wiki_200.jsonl", "title", "field context[1][0]"),
])
def test_a_lone_surrogate_escape_is_refused_with_its_line_and_field(
        tmp_path: Path, data_dir: Path, dataset, name, field, shown):
    """Was: UnicodeEncodeError, far from the line, when the text was hashed or written."""
    rows = read_lines(data_dir / name)[:2]
    text = "Paris \ud800 France"
    if field == "paragraph":
        rows[1]["paragraphs"][3]["paragraph_text"] = text
    elif field == "title":
        rows[1]["context"][1][0] = text
    else:
        rows[1]["_id" if field == "id" and dataset != "musique" else field] = text
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    with pytest.raises(KgragError) as caught:
        load(tmp_path, dataset, path)
    assert str(caught.value) == (f"{path}:2: {shown} holds a lone surrogate escape (\\ud800), "
                                 "half of a character that UTF-8 cannot encode; fix this line")


def test_a_surrogate_pair_is_one_character_and_read(tmp_path: Path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "smile \U0001f600"}) + "\n")
    assert load(tmp_path, "jsonl", path).documents["text"].to_list() == ["smile \U0001f600"]


def test_an_integer_too_long_to_read_is_refused_with_its_line(tmp_path: Path):
    """Was: ValueError: Exceeds the limit (4300 digits) for integer string conversion."""
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "text": "fine"}\n{"id": ' + "7" * 5000 + ', "text": "b"}\n')
    with pytest.raises(KgragError) as caught:
        load(tmp_path, "jsonl", path)
    assert str(caught.value) == (f"{path}:2: holds an integer of more than 4300 digits, more "
                                 "than Python reads; fix this line")
