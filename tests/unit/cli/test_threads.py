"""rag_eval.threads.ordered_map: results in the items' order, a bounded read-ahead, errors raised in place."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from rag_eval.threads import ordered_map


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_come_in_the_items_order_whatever_finishes_first(workers: int) -> None:
    def slow_first(x: int) -> int:
        time.sleep(0.02 if x % 3 == 0 else 0.0)  # earlier items finish later
        return x * 10

    assert list(ordered_map(slow_first, range(10), workers=workers)) == [(x, x * 10) for x in range(10)]


def test_no_items_no_results() -> None:
    assert list(ordered_map(lambda x: x, [], workers=2)) == []


def test_at_most_workers_items_are_taken_before_a_result_is_handed_on() -> None:
    taken: list[int] = []

    def items() -> Iterator[int]:
        for i in range(100):
            taken.append(i)
            yield i

    results = ordered_map(lambda x: x, items(), workers=2)
    assert next(results) == (0, 0)
    assert len(taken) == 2  # the first two, no more: a stream of batches stays a few batches in memory
    assert next(results) == (1, 1)
    assert len(taken) == 3


def test_two_workers_really_run_side_by_side() -> None:
    both = threading.Barrier(2, timeout=5)  # broken (an error) unless two calls wait at once

    def meet(x: int) -> int:
        both.wait()
        return x

    assert [r for _, r in ordered_map(meet, range(4), workers=2)] == [0, 1, 2, 3]


def test_an_error_is_raised_where_its_item_is_handed_on() -> None:
    def fails_on_three(x: int) -> int:
        if x == 3:
            raise ValueError("three")
        return x

    results = ordered_map(fails_on_three, range(6), workers=2)
    assert [next(results) for _ in range(3)] == [(0, 0), (1, 1), (2, 2)]
    with pytest.raises(ValueError, match="three"):
        next(results)
