"""The collector paused over a burst, and on again only as it was."""

from __future__ import annotations

import gc

import pytest

from jobrelay.vocabulary.collection_pause import collection_paused


def test_the_collector_is_off_inside_and_on_again_after() -> None:
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_still_turns_it_on_again() -> None:
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("a pass that failed")
    assert gc.isenabled()


def test_a_collector_someone_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
