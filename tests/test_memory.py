"""Freed memory handed back to the system (``kgrag.memory.give_back``): the holes a heap
keeps below a block still in use, which the dense step's parts left behind."""

from __future__ import annotations

import psutil
import pytest

from kgrag.memory import _trim, give_back


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


@pytest.mark.skipif(_trim() is None, reason="the C library has no malloc_trim")
def test_the_holes_below_a_block_in_use_are_given_back() -> None:
    # 200 MB in blocks of 64 KB, below the allocator's mmap threshold: on the heap
    blocks = [bytearray(64 * 1024) for _ in range(3200)]
    kept = blocks[-1]
    del blocks  # freed, but held below the block still in use
    held = rss_mb()
    give_back()
    assert held - rss_mb() > 100
    assert len(kept) == 64 * 1024
