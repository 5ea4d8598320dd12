"""Freed memory handed back to the system between the parts of a long step.

glibc's allocator keeps what a process frees inside its heap while live blocks sit above
it. A step that computes large arrays part after part (the embedder's batches, each shaped
by its own texts) then keeps the freed holes of every earlier part resident, and its
memory grows with the corpus although it holds nothing more. ``malloc_trim(0)`` hands
those pages back. Where the C library has no such call (musl, macOS), there is nothing to
do.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def give_back() -> None:
    """Return the pages the process has freed to the system, where the C library can."""
    trim = _trim()
    if trim is not None:
        trim(0)
