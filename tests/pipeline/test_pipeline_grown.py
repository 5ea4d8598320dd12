"""A documents folder that changes between runs (a page added, one edited, one removed):
the rerun in the same run folder takes what still holds from its earlier artefacts (the
unchanged documents' chunks, the extractions of unchanged chunks, the vector table with
its ANN index) and writes the tables a cold build of the changed folder writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from kgrag import api
from kgrag.contents.chunks import read_chunks
from kgrag.contents.dense import open_dense
from kgrag.contents.entities import read_entities, read_relationships
from kgrag.contents.extraction import read_counts
from kgrag.errors import KgragError
from kgrag.pipeline.artefacts import CALLS_RECORD
from kgrag.report.run_folder import RunFolder
from kgrag.session import Session
from tests.conftest import write_spec
from tests.corpus.own_docs import PAGES

ADDED, EDITED, REMOVED = "embedding-backends.md", "architecture.md", "spec.md"
SECTIONS = {
    "corpus": {"dataset": "documents", "path": "../documents"},
    "chunking": {"size": 128, "overlap": 16},
    "dense_index": {"ann": {"min_rows": 100}},
    "extraction": {"method": "nlp"},
    "graphs": [{"name": "kg", "kind": "entities"}],
    "query": [{"name": "ppr", "strategy": "ppr", "entities": "kg", "budget_tokens": 500}],
    "answer": {"questions": 0},
}


def notes(session: Session, step: str) -> dict:
    return json.loads((session.artefact(step) / "build.json").read_text())["notes"]


def tables(session: Session) -> dict[str, pl.DataFrame]:
    ids, vectors = open_dense(session.artefact("dense")).rows()
    return {"chunks": read_chunks(session.artefact("chunks")),
            "counts": read_counts(session.artefact("extract.kg")),
            "entities": read_entities(session.artefact("extract.kg")),
            "relationships": read_relationships(session.artefact("extract.kg")),
            "vectors": pl.DataFrame({"id": ids, "vector": vectors}).sort("id")}


def built_without_added(project: Path) -> tuple[Path, Path]:
    """A documents folder of every page but ``ADDED``, and its spec, run once."""
    folder = project / "documents"
    folder.mkdir()
    for page in PAGES:
        if page.name != ADDED:
            shutil.copyfile(page, folder / page.name)
    spec = write_spec(project, "grown", **SECTIONS)
    api.run(spec)
    return folder, spec


def in_small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps that work a part at a time cut, write, extract, merge and embed a few
    documents or chunks at a time."""
    for name, size in (("kgrag.steps.chunks.CUT_DOCUMENTS", 2),
                       ("kgrag.contents.chunks.ROW_GROUP", 5),
                       ("kgrag.steps.skeleton.EXTRACT_ROWS", 7),
                       ("kgrag.contents.extraction.KEPT_BATCH", 3),
                       ("kgrag.contents.dense.PART_ROWS", 9)):
        monkeypatch.setattr(name, size)


def test_a_folder_built_in_small_parts_gives_the_tables_of_one_part(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = project / "documents"
    folder.mkdir()
    for page in PAGES:
        shutil.copyfile(page, folder / page.name)
    whole = write_spec(project, "whole", **SECTIONS)
    api.run(whole)
    in_small_parts(monkeypatch)
    parts = write_spec(project, "parts", **SECTIONS)
    api.run(parts)
    assert notes(api.open_session(parts), "chunks")["chunks"] > 5 * 5
    built = tables(api.open_session(parts))
    for name, table in tables(api.open_session(whole)).items():
        assert built[name].equals(table), name


def test_a_grown_folder_is_rebuilt_from_what_still_holds_into_the_cold_builds_tables(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, spec = built_without_added(project)
    before = api.open_session(spec)
    first = tables(before)
    in_small_parts(monkeypatch)  # the rerun and the cold build: a few at a time

    shutil.copyfile(next(p for p in PAGES if p.name == ADDED), folder / ADDED)
    with (folder / EDITED).open("a", encoding="utf-8") as page:
        page.write("\n\nA paragraph added later names Copenhagen and the Danube.\n")
    (folder / REMOVED).unlink()
    said: list[str] = []
    api.run(spec, echo=said.append)
    after = api.open_session(spec)
    grown = tables(after)
    started = [line.split()[0] for line in said if "; started from " in line]
    assert started == ["chunks", "extract.kg", "dense"]  # the run says what it reused

    # each step started from its earlier artefact, and did only the new work
    kept_pages = len(PAGES) - 3  # all but the added, the edited and the removed page
    assert notes(after, "chunks")["reused_documents"] == kept_pages
    assert notes(after, "chunks")["reused_from"] == before.artefact("chunks").name
    new_chunks = grown["chunks"].filter(~pl.col("text").is_in(first["chunks"]["text"].implode()))
    assert 0 < new_chunks.height < grown["chunks"].height // 5
    extracted = notes(after, "extract.kg")
    assert extracted["reused_chunks"] == grown["chunks"].height - new_chunks.height
    assert extracted["parsed"] == new_chunks.height
    # an edited document has a new id, so its unchanged chunks are new rows of the table
    new_ids = grown["chunks"].filter(~pl.col("chunk_id").is_in(
        first["chunks"]["chunk_id"].implode()))
    assert notes(after, "dense")["folded_rows"] == new_ids.height > new_chunks.height
    # the report says that the build's cost is the rerun's, not a cold build's
    build = next(b for b in RunFolder.open(after.run_dir).builds if b["graph"] == "kg")
    assert build["started_from"] == before.artefact("extract.kg").name
    assert "started from an earlier build" in api.report(after.run_dir).read_text()

    cold_spec = write_spec(project, "cold", **SECTIONS)
    api.run(cold_spec)
    cold = api.open_session(cold_spec)
    assert "reused_chunks" not in notes(cold, "extract.kg")
    built = tables(cold)
    for name, table in built.items():
        assert grown[name].equals(table), name
    # the chunks taken from the earlier artefact still name their parses, so a bundle of
    # the grown run ships every call a replay from scratch makes
    grown_calls, cold_calls = (
        set(json.loads((run.artefact("extract.kg") / CALLS_RECORD).read_text()))
        for run in (after, cold))
    assert grown_calls == cold_calls
    assert {Path(f).name for f in grown["chunks"]["file"]} == {p.name for p in folder.iterdir()}


def test_an_earlier_build_that_cannot_be_read_costs_the_shortcut_not_the_run(
        project: Path, monkeypatch, caplog) -> None:
    """Damage that an artefact's listing does not show (its large files are checked by
    size): the rerun says so once per step and builds those steps anew."""
    folder = project / "documents"
    folder.mkdir()
    pages = [p for p in PAGES if p.name != ADDED]
    for page in pages[:3]:
        shutil.copyfile(page, folder / page.name)
    spec = write_spec(project, "grown", **SECTIONS)
    api.run(spec)
    shutil.copyfile(pages[3], folder / pages[3].name)

    def unreadable(*args):
        raise OSError("not a parquet file")

    monkeypatch.setattr("kgrag.steps.chunks.read_kept", unreadable)
    monkeypatch.setattr("kgrag.steps.skeleton.read_members", unreadable)
    monkeypatch.setattr("kgrag.steps.dense.grow_dense", unreadable)
    api.run(spec)
    after = api.open_session(spec)
    assert "reused_documents" not in notes(after, "chunks")
    assert "reused_chunks" not in notes(after, "extract.kg")
    assert "folded_rows" not in notes(after, "dense")
    for step in ("chunks", "extract.kg", "dense"):
        assert f"{step}: what {step}-" in caplog.text
        assert "reused_from" not in notes(after, step)
    assert read_chunks(after.artefact("chunks"))["file"].n_unique() == 4
    assert len(open_dense(after.artefact("dense"))) == read_chunks(after.artefact("chunks")).height


def test_an_embedding_that_fails_while_the_table_grows_fails_as_itself(
        project: Path, monkeypatch, caplog) -> None:
    """The step's own work inside the shortcut (embedding the new chunks while the earlier
    table grows) fails as it fails in a cold build: once, with its own message, not as an
    earlier table that cannot be read and then a cold build that fails again."""
    folder, spec = built_without_added(project)
    shutil.copyfile(next(p for p in PAGES if p.name == ADDED), folder / ADDED)
    calls = []

    def gone(self, texts, *args, **kwargs):
        calls.append(len(texts))
        raise KgragError("the embedder is gone")

    monkeypatch.setattr("kgrag.models.embed.embedder.CachedEmbedder.encode", gone)
    with pytest.raises(KgragError, match="the embedder is gone"):
        api.run(spec)
    assert len(calls) == 1
    assert "cannot be read" not in caplog.text


def test_an_earlier_artefact_holding_a_link_is_not_read(project: Path) -> None:
    """kgrag writes no symbolic link into an artefact: one that holds a link (to a file
    outside the run folder) is passed over, so nothing outside is read or copied in."""
    folder = project / "documents"
    folder.mkdir()
    for page in PAGES[:2]:
        shutil.copyfile(page, folder / page.name)
    spec = write_spec(project, "grown", **SECTIONS)
    api.run(spec)
    before = api.open_session(spec)
    outside = project / "elsewhere.parquet"
    outside.write_bytes(b"not the run's")
    (before.artefact("chunks") / "extra.parquet").symlink_to(outside)
    shutil.copyfile(PAGES[2], folder / PAGES[2].name)
    api.run(spec)
    after = api.open_session(spec)
    assert "reused_from" not in notes(after, "chunks")
    assert notes(after, "extract.kg")["reused_from"] == before.artefact("extract.kg").name
