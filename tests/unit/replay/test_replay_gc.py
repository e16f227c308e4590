"""The garbage collector during a replay: the young generation collected every 50,000 allocations, what existed
before frozen, and both as they were once the last replay of the process ends (an error too, replays on several
threads at once too); a collector switched off stays off, a larger threshold is kept, a freeze of someone else's is
left alone."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from rag_eval.replay.batches import YOUNG_COLLECTION, replay_gc


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        if frozen:
            gc.freeze()


def test_a_replay_collects_the_young_generation_less_often_and_freezes_what_was_there() -> None:
    with replay_gc():
        assert gc.get_threshold() == (YOUNG_COLLECTION, 10, 10) == (50_000, 10, 10)
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_the_collector_is_restored_after_an_error() -> None:
    with pytest.raises(RuntimeError), replay_gc():
        raise RuntimeError("a batch failed")
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_replays_that_overlap_restore_it_when_the_last_one_ends() -> None:
    first, second = replay_gc(), replay_gc()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] == YOUNG_COLLECTION and gc.get_freeze_count() > 0  # the second still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_replays_on_threads_leave_the_collector_as_it_was() -> None:
    inside = threading.Barrier(4)
    seen: list[int] = []

    def replay() -> None:
        with replay_gc():
            inside.wait(timeout=10)
            seen.append(gc.get_threshold()[0])
            inside.wait(timeout=10)

    threads = [threading.Thread(target=replay) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert seen == [YOUNG_COLLECTION] * 4
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_a_collector_switched_off_stays_off_and_a_larger_threshold_is_kept() -> None:
    gc.set_threshold(0, 10, 10)
    with replay_gc():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)
    gc.set_threshold(200_000, 5, 5)
    with replay_gc():
        assert gc.get_threshold() == (200_000, 5, 5)
    assert gc.get_threshold() == (200_000, 5, 5)


def _collected(obj: object) -> bool:
    """Whether the collector scans ``obj``: a frozen object is in the permanent generation, outside
    ``gc.get_objects()``. (The freeze count is no witness: a frozen object that is freed leaves it.)"""
    return any(tracked is obj for tracked in gc.get_objects())


def test_a_freeze_of_someone_elses_is_left_alone() -> None:
    theirs: list[list[int]] = [[]]
    gc.freeze()
    ours: list[list[int]] = [[]]  # made after their freeze: a replay that froze again would freeze it too
    assert not _collected(theirs) and _collected(ours)
    with replay_gc():
        assert _collected(ours)
    assert not _collected(theirs) and _collected(ours)
