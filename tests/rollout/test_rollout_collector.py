"""Full garbage collections held off for a run, and the collector's thresholds given back after it."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from agentenvs.rollout.collector import FULL_COLLECTIONS_HELD, full_collections_held


def test_full_collections_wait_inside_and_the_threshold_comes_back():
    before = gc.get_threshold()
    with full_collections_held():
        assert gc.get_threshold() == (before[0], before[1], FULL_COLLECTIONS_HELD)
    assert gc.get_threshold() == before


def test_the_threshold_comes_back_after_an_error():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), full_collections_held():
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == before


def test_overlapping_runs_restore_the_threshold_only_when_the_last_ends():
    before = gc.get_threshold()
    inner_entered, outer_done = threading.Event(), threading.Event()

    def other_run() -> None:
        with full_collections_held():
            inner_entered.set()
            outer_done.wait(10)
            assert gc.get_threshold()[2] == FULL_COLLECTIONS_HELD, "the other run still holds them"

    with full_collections_held():
        thread = threading.Thread(target=other_run)
        thread.start()
        assert inner_entered.wait(10)
    outer_done.set()
    thread.join(10)
    assert gc.get_threshold() == before


def test_young_collections_still_free_cycles_inside():
    class Node:
        pass

    with full_collections_held():
        node = Node()
        node.self = node
        ref = weakref.ref(node)
        del node
        gc.collect(0)
        assert ref() is None, "a young cycle is collected while full collections are held"
