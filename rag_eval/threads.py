"""An ordered map on a few threads, for work that runs without the GIL (Arrow compute, numpy sorts).

>>> list(ordered_map(lambda x: x * x, iter(range(5)), workers=2))
[(0, 0), (1, 1), (2, 4), (3, 9), (4, 16)]
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """Two threads where there are two CPUs or more (the measures' batches are hashed and sorted in C)."""
    return min(2, os.cpu_count() or 1)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], *, workers: int | None = None) -> Iterator[tuple[T, R]]:
    """``(item, fn(item))`` for every item, in the items' order, ``fn`` running on up to ``workers`` threads.

    At most ``workers`` items are taken from ``items`` before their results are handed on (a stream of
    batches read from disk stays a few batches in memory). An error of ``fn`` is raised where its item's
    result is handed on; the items already started are finished first.
    """
    n = workers or default_workers()
    if n <= 1:
        for item in items:
            yield item, fn(item)
        return
    with ThreadPoolExecutor(n, thread_name_prefix="rag-eval-map") as pool:
        pending: deque[tuple[T, Future[R]]] = deque()
        for item in items:
            pending.append((item, pool.submit(fn, item)))
            if len(pending) >= n:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
