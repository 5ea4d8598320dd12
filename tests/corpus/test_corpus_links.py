"""Symbolic links in a corpus folder: one that leads out of the folder is skipped, named
in ``Corpus.sources`` and not hashed, unless ``corpus.follow_links`` asks for it; one
that stays inside is read like any file. The same for ``text`` and ``documents``; a
HolisQA folder, whose two files are the dataset, refuses a link leading out."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from kgrag.errors import KgragError
from kgrag.pipeline.compile import source_sha256
from tests.corpus.test_corpus_importers import (
    SMALL_SENTENCES,
    holisqa_qa,
    load,
    write_holisqa,
)

SECRET = "root:x:0:0:a line of a file outside the corpus folder"


def linked_folder(tmp_path: Path) -> Path:
    """Two notes, a second name for one of them, and ``passwd.txt`` leading out."""
    outside = tmp_path / "elsewhere" / "passwd"
    outside.parent.mkdir()
    outside.write_text(SECRET + "\n")
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "paris.txt").write_text("Paris is the capital of France.\n")
    (folder / "sub" / "lyon.md").write_text("# Lyon\n\nLyon lies on the Rhone.\n")
    (folder / "capital.txt").symlink_to("paris.txt")  # inside: read under its own name
    (folder / "passwd.txt").symlink_to(outside)
    return folder


@pytest.mark.parametrize("dataset", ["text", "documents"])
def test_a_link_out_of_the_folder_is_skipped_and_named(tmp_path, dataset):
    folder = linked_folder(tmp_path)
    corpus = load(tmp_path, dataset, folder)
    assert not any(SECRET in text for text in corpus.documents["text"])
    assert corpus.documents.height == 3  # paris.txt, capital.txt, sub/lyon.md
    skipped = corpus.sources.filter(pl.col("status") == "outside")
    assert skipped["file"].to_list() == ["passwd.txt"] and skipped["sha256"].to_list() == [None]
    assert "corpus.follow_links: true" in skipped["detail"][0]
    followed = load(tmp_path, dataset, folder, follow_links=True)
    assert followed.documents.height == 4
    assert any(SECRET in text for text in followed.documents["text"])
    assert "outside" not in followed.sources["status"].to_list()


def test_the_corpus_hash_covers_the_files_its_importer_reads(tmp_path):
    folder = linked_folder(tmp_path)
    skipping, following = source_sha256(folder), source_sha256(folder, follow_links=True)
    assert skipping != following
    (tmp_path / "elsewhere" / "passwd").write_text("changed\n")
    assert source_sha256(folder) == skipping  # a file it does not read changes nothing
    assert source_sha256(folder, follow_links=True) != following
    (folder / "paris.txt").write_text("Paris is on the Seine.\n")
    assert source_sha256(folder) != skipping


@pytest.mark.parametrize("name", ["sentences.jsonl", "qa.jsonl"])
def test_a_holisqa_file_linked_from_outside_the_folder_is_not_read(tmp_path, name):
    """Was: the HolisQA importer opened ``qa.jsonl`` and ``sentences.jsonl`` wherever a
    link led, though the corpus hash and a bundle's copy leave such a link out."""
    real = write_holisqa(tmp_path / "elsewhere", SMALL_SENTENCES, [holisqa_qa("Q1", "S1")])
    folder = tmp_path / "domain"
    folder.mkdir()
    for file in ("sentences.jsonl", "qa.jsonl"):
        (folder / file).write_bytes((real / file).read_bytes())
    (folder / name).unlink()
    (folder / name).symlink_to(real / name)
    with pytest.raises(KgragError, match=(
            rf"domain/{name} is a symbolic link to a file outside the HolisQA folder "
            rf"\({real / name}\), which is not read; .* corpus\.follow_links: true")):
        load(tmp_path, "holisqa", folder)
    assert load(tmp_path, "holisqa", folder, follow_links=True).questions.height == 1
    (folder / "kept").mkdir()  # a link that stays inside the folder is read
    (folder / "kept" / name).write_bytes((real / name).read_bytes())
    (folder / name).unlink()
    (folder / name).symlink_to(Path("kept") / name)
    assert load(tmp_path, "holisqa", folder).questions.height == 1
