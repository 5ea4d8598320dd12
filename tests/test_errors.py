"""Which errors mean "this folder cannot take the writes", as the libraries raise them."""

from __future__ import annotations

import errno
from pathlib import Path

import polars as pl
import pytest

from kgrag.errors import KgragError, storage_cause, writing


@pytest.mark.parametrize("exc, cause", [
    (OSError(errno.ENOSPC, "No space left on device"), "no space left on its disk"),
    (OSError(errno.EROFS, "Read-only file system"), "it is on a read-only file system"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "the disk quota is used up"),
    # as polars and LanceDB raised them on a full or read-only tmpfs: the OS error as text
    (pl.exceptions.ComputeError("parquet: File out of specification: underlying IO error: "
                                "No space left on device (os error 28)"),
     "no space left on its disk"),
    (RuntimeError("lance error: LanceError(IO): No space left on device (os error 28), "
                  "structural.rs:191:9"), "no space left on its disk"),
    (OSError("Read-only file system (os error 30): /x/y.parquet"),
     "it is on a read-only file system"),
    (OSError(errno.ENOENT, "No such file or directory"), None),
    (ValueError("no vector table 'chunks'"), None),
])
def test_full_and_read_only_disks_are_told_apart_from_other_errors(exc, cause, tmp_path):
    assert storage_cause(exc, tmp_path) == cause


def test_denied_access_is_the_folders_only_inside_it(tmp_path: Path) -> None:
    inside = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "run" / "a"))
    outside = PermissionError(errno.EACCES, "Permission denied", "/models/m.gguf")
    assert storage_cause(inside, tmp_path) == "permission denied"
    assert storage_cause(outside, tmp_path) is None


def test_writing_turns_only_disk_problems_into_one_error(tmp_path: Path) -> None:
    with pytest.raises(KgragError) as raised, writing(tmp_path, "the table", "free space"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert str(raised.value) == (f"cannot write the table in {tmp_path}: no space left on its "
                                 "disk; free space")
    with pytest.raises(KeyError), writing(tmp_path, "the table", "free space"):
        raise KeyError("not a disk problem")


def test_a_full_disk_elsewhere_is_named_where_it_is(tmp_path: Path) -> None:
    with pytest.raises(KgragError) as raised, writing(tmp_path / "run", "the run", "free space"):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "hf" / "x.bin"))
    assert str(raised.value).startswith(f"cannot write the run in {tmp_path / 'hf'}: no space")
