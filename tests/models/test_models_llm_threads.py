"""llama.cpp's thread count: never more threads than the cores this process may run on."""

from __future__ import annotations

import logging

import pytest

from kgrag.host import usable_cores
from kgrag.models.llamacpp import thread_count


def test_null_runs_every_usable_core_and_a_count_within_them_is_kept():
    assert thread_count(None) == usable_cores()
    assert thread_count(1) == 1


@pytest.mark.parametrize("past", [1, 1000])
def test_a_count_past_the_cores_runs_one_thread_per_core_with_a_warning(past, caplog):
    with caplog.at_level(logging.WARNING, logger="kgrag.models.llamacpp"):
        assert thread_count(usable_cores() + past) == usable_cores()
    assert f"n_threads is {usable_cores() + past} but this process may run on" in caplog.text
