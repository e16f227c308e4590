"""The label-free overlap of two configs' payloads, 100,000 query pairs at once (`make bench`).

Each pair is a baseline payload of 5 to 10 evidence keys and a candidate's: the same in half the pairs,
otherwise with two neighbours swapped, a key replaced, the last dropped or a key repeated (a legacy payload),
or all of these. The keys are new string objects in every round, as a run's rows give them (Python caches a
string's hash once computed, which would flatter the columns' hashing). Untimed (``make test``): 2,000 pairs.
"""

from __future__ import annotations

import random

import pytest

from rag_eval.traffic.overlap import overlap_frame
from tests.benchmarks.conftest import Results, timed

Pairs = tuple[list[list[str]], list[list[str]]]


def payload_pairs(n: int, seed: int = 5) -> Pairs:
    rng = random.Random(seed)
    baseline, candidate = [], []
    for _ in range(n):
        keys = [f"doc-{rng.randrange(50_000)}#{rng.randrange(40)}" for _ in range(rng.randint(5, 10))]
        other = list(keys)
        if rng.random() < 0.5:
            if rng.random() < 0.5:
                i = rng.randrange(len(other) - 1)
                other[i], other[i + 1] = other[i + 1], other[i]
            if rng.random() < 0.3:
                other[rng.randrange(len(other))] = f"doc-{rng.randrange(50_000)}#0"
            if rng.random() < 0.2:
                other.pop()
            if rng.random() < 0.05:
                other.append(other[0])
        baseline.append(keys)
        candidate.append(other)
    return baseline, candidate


def _fresh(pairs: Pairs) -> tuple[Pairs, dict[str, object]]:
    """New string objects (no cached hash) for a round."""
    return tuple([[key.encode().decode() for key in keys] for keys in side] for side in pairs), {}  # type: ignore[return-value]


@pytest.fixture(scope="module")
def pairs(pytestconfig: pytest.Config) -> Pairs:
    return payload_pairs(100_000 if timed(pytestconfig) else 2_000)


def test_overlap_frame_100000_pairs(benchmark, results: Results, pairs: Pairs) -> None:  # type: ignore[no-untyped-def]
    frame = benchmark.pedantic(overlap_frame, setup=lambda: _fresh(pairs), rounds=5, iterations=1)
    results.record("overlap[100000]", benchmark)
    assert all(len(values) == len(pairs[0]) for values in frame.values())
    assert 0.0 < frame["rbo"].mean() < 1.0 and 0.0 < frame["changed"].mean() < 1.0
