"""Tasks on a Dask cluster: streamed a few at a time with each result handed on before the next is sent,
the first failing task's error raised as it is, the clean-up run on every worker, and a scheduler that
cannot be reached refused (exit 3). The workers here are threads of this process (no worker processes)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from rag_eval.cluster.settings import Cluster
from rag_eval.cluster.tasks import Stream, connect, stream
from rag_eval.core.errors import ClusterError, RunStoreError
from tests.budget import MUTATION

CLEANED: list[str] = []


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    if MUTATION:  # mutmut forks each mutant's tests from a process that ran them before: the cluster never starts
        pytest.skip("an in-process Dask cluster hangs in a process forked from one that started one")
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None,
                                       silence_logs=logging.ERROR)  # fmt: skip
    with cluster, distributed.Client(cluster, set_as_default=False) as c:
        yield c


def times(shared: int, task: int) -> int:
    return shared * task


def fails_on_three(shared: int, task: int) -> int:
    if task == 3:
        raise ValueError("task 3 failed")
    return task


def store_fails(shared: int, task: int) -> int:
    raise RunStoreError("cannot write a batch", path="/runs/x")


def clean(token: str) -> None:
    CLEANED.append(token)


def work(fn: Any = times, prefix: str = "t", **more: Any) -> Stream:
    return Stream(fn=fn, shared=10, prefix=prefix, key=str, what="the test", lost="run it again", **more)


LOCAL = Cluster(workers=1)


def test_every_task_runs_once_and_each_result_is_handed_on(client: Any) -> None:
    results: list[int] = []
    ran = stream(LOCAL, work(), range(9), done=results.append, client=client)
    assert ran == 9 and sorted(results) == [0, 10, 20, 30, 40, 50, 60, 70, 80]
    assert stream(LOCAL, work(), [], client=client) == 0


def test_the_first_failing_tasks_error_is_raised_as_it_is(client: Any) -> None:
    with pytest.raises(ValueError, match="task 3 failed"):
        stream(LOCAL, work(fails_on_three, prefix="f"), range(6), client=client)
    with pytest.raises(RunStoreError, match="cannot write a batch"):  # an OSError of the project's: not "lost"
        stream(LOCAL, work(store_fails, prefix="s"), range(2), client=client)


def test_an_error_of_the_result_handler_ends_the_stream(client: Any) -> None:
    seen: list[int] = []

    def done(result: int) -> None:
        seen.append(result)
        raise KeyError("handler")

    with pytest.raises(KeyError):
        stream(LOCAL, work(prefix="h"), range(20), done=done, client=client)
    assert len(seen) == 1


def test_the_cleanup_runs_on_every_worker_with_the_token(client: Any) -> None:
    CLEANED.clear()
    stream(LOCAL, work(prefix="c", cleanup=clean, token="replay-1"), range(3), client=client)
    assert CLEANED == ["replay-1"]  # one worker
    CLEANED.clear()
    with pytest.raises(ValueError):
        stream(LOCAL, work(fails_on_three, prefix="cf", cleanup=clean, token="replay-2"), range(5), client=client)
    assert CLEANED == ["replay-2"]  # after a failure too


def test_a_scheduler_that_cannot_be_reached_is_refused_as_infrastructure() -> None:
    pytest.importorskip("distributed")
    cluster = Cluster(scheduler="tcp://127.0.0.1:9", connect_timeout=0.5)
    with pytest.raises(ClusterError) as err, connect(cluster):
        pass
    assert err.value.exit_code == 3
    assert str(err.value).startswith("cannot reach the Dask scheduler at tcp://127.0.0.1:9 (")
    assert str(err.value).endswith("): start it, or check the address and the network")
