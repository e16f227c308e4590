"""A comparison's work as tasks: wherever and in whatever order they run, the document is the same."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

from rag_eval.compare.comparison import compare
from rag_eval.compare.gates import load_gates
from rag_eval.compare.runs import ComparedRun
from rag_eval.compare.tasks import Names, stable
from tests.unit.runs import config, make_run, pair_rows

GATES = load_gates("nightly")


def three_configs() -> ComparedRun:
    rows = pair_rows(40, "base") + pair_rows(40, "a", lose=6) + pair_rows(40, "b", lose=14)
    return make_run(rows, [config("base"), config("a"), config("b")], baseline="base")


class Shipped:
    """A task map as a cluster is one: every task and the shared part pickled (as sent to a worker), the
    tasks run last first, each result pickled back; the calls recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, fn: Callable[[Any, Any], Any], tasks: Sequence[Any], shared: Any) -> list[Any]:
        self.calls.append((fn.__name__, len(tasks)))
        sent = [pickle.loads(pickle.dumps(t)) for t in tasks]
        common = pickle.loads(pickle.dumps(shared))
        done = {i: pickle.loads(pickle.dumps(fn(sent[i], common))) for i in reversed(range(len(sent)))}
        return [done[i] for i in range(len(sent))]


def test_comparisons_shipped_and_run_in_another_order_give_the_same_document() -> None:
    run = three_configs()
    here = compare(run, None, GATES)
    shipped = Shipped()
    there = compare(run, None, GATES, tasks=shipped)
    assert there.document == here.document and there.exit_code == here.exit_code
    assert shipped.calls[0] == ("measure", 2)  # one task per comparison: two candidates against the baseline
    assert all(name == "redraw" for name, _ in shipped.calls[1:])


def test_seeds_are_the_names_and_the_stream_not_the_process() -> None:
    names = Names("base", "cand", "run")
    assert stable(names, "chunk:nDCG@5") == stable(Names("base", "cand", "run"), "chunk:nDCG@5")
    assert len({stable(names, "m"), stable(Names("base", "cand", "against"), "m"), stable(names, "n")}) == 3
