"""The OpenAI-compatible embedder's batching, rate limit, retries and checks, on a fake clock (no sleeps):
``send`` stands for one HTTP request, ``sleep`` advances the clock instead of waiting."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.core.errors import EmbedderRequestError, EmbeddingEndpointError, EmbeddingMismatchError
from rag_eval.embed.openai_compat import (
    MAX_WAIT,
    EndpointEmbedder,
    EndpointSettings,
    RateLimiter,
    RefusedError,
    RetryableError,
    RetryPolicy,
    with_retries,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += seconds


def vec(text: str, dim: int = 4) -> list[float]:
    """A deterministic vector of a text (its first letters' codes)."""
    codes = [float(ord(c)) for c in text[:dim]]
    return codes + [1.0] * (dim - len(codes))


class Server:
    """What the endpoint does to each request, in order: a list of outcomes (an exception, or None for a
    normal answer); the requests it saw, with the clock's time."""

    def __init__(self, clock: FakeClock, outcomes: Sequence[BaseException | None] = (), dim: int = 4) -> None:
        self.clock = clock
        self.outcomes = list(outcomes)
        self.dim = dim
        self.seen: list[tuple[float, list[str]]] = []
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.seen.append((self.clock.now, list(texts)))
            outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome
        return [vec(t, self.dim) for t in texts]


def embedder(server: Server, clock: FakeClock, **settings: object) -> EndpointEmbedder:
    base = {"base_url": "http://user:pw@127.0.0.1:9/v1?key=k", "model": "m", "batch_size": 2, "concurrency": 1}
    return EndpointEmbedder(EndpointSettings(**{**base, **settings}), send=server, clock=clock, sleep=clock.sleep,
                            secret="sk-secret")  # type: ignore[arg-type]  # fmt: skip


def test_texts_go_in_batches_of_batch_size_and_come_back_in_order() -> None:
    clock = FakeClock()
    server = Server(clock)
    texts = [f"t{i}" for i in range(5)]
    out = embedder(server, clock).encode(texts)
    assert [batch for _, batch in server.seen] == [["t0", "t1"], ["t2", "t3"], ["t4"]]
    assert np.array_equal(out, np.asarray([vec(t) for t in texts], dtype=np.float32))
    assert clock.sleeps == []  # no limit, no failure: no wait


def test_the_rate_limit_spaces_request_starts_evenly() -> None:
    clock = FakeClock()
    server = Server(clock)
    embedder(server, clock, requests_per_minute=30).encode([f"t{i}" for i in range(6)])
    assert [t for t, _ in server.seen] == [0.0, 2.0, 4.0]  # 30 a minute: one every 2 s


def test_the_rate_limiter_lets_time_already_passed_count() -> None:
    clock = FakeClock()
    limiter = RateLimiter(60, clock=clock, sleep=clock.sleep)
    limiter.acquire()
    clock.now += 5.0  # the request took 5 s: the next may start at once
    limiter.acquire()
    limiter.acquire()
    assert clock.sleeps == [0.0, 0.0, 1.0]


def test_the_rate_limiter_holds_across_threads() -> None:
    """Four threads asking at the same instant start one second apart, whatever their order."""
    clock = FakeClock()
    limiter = RateLimiter(60, clock=lambda: 0.0, sleep=clock.sleep)
    threads = [threading.Thread(target=limiter.acquire) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(clock.sleeps) == [0.0, 1.0, 2.0, 3.0]


def test_a_429_waits_what_retry_after_says_then_succeeds() -> None:
    clock = FakeClock()
    server = Server(clock, [RetryableError("HTTP 429", retry_after=7.0)])
    out = embedder(server, clock).encode(["a"])
    assert clock.sleeps == [7.0] and [t for t, _ in server.seen] == [0.0, 7.0]
    assert out.shape == (1, 4)


def test_5xx_twice_backs_off_exponentially_then_succeeds() -> None:
    clock = FakeClock()
    server = Server(clock, [RetryableError("HTTP 500"), RetryableError("HTTP 502")])
    embedder(server, clock, retry=RetryPolicy(max_retries=5, backoff=0.5)).encode(["a"])
    assert clock.sleeps == [0.5, 1.0]
    assert len(server.seen) == 3


def test_the_backoff_doubles_up_to_its_cap_and_a_huge_retry_after_is_capped() -> None:
    policy = RetryPolicy(max_retries=20, backoff=1.0)
    assert [policy.delay(a, None) for a in range(9)] == [1, 2, 4, 8, 16, 32, 64, MAX_WAIT, MAX_WAIT]
    assert policy.delay(0, 10_000.0) == MAX_WAIT and policy.delay(3, 0.0) == 0.0


def test_after_max_retries_the_failure_is_exit_3_naming_the_endpoint_without_secrets() -> None:
    clock = FakeClock()
    server = Server(clock, [RetryableError("HTTP 503: key sk-secret is throttled")] * 10)
    with pytest.raises(EmbeddingEndpointError) as err:
        embedder(server, clock, retry=RetryPolicy(max_retries=3, backoff=1.0)).encode(["a"])
    assert err.value.exit_code == 3
    message = str(err.value)
    assert "http://127.0.0.1:9/v1/embeddings" in message and "failed 4 times" in message
    assert "sk-secret" not in message and "pw" not in message and "key=k" not in message
    assert clock.sleeps == [1.0, 2.0, 4.0] and len(server.seen) == 4


def test_a_refused_request_is_exit_2_and_never_retried() -> None:
    clock = FakeClock()
    server = Server(clock, [RefusedError("HTTP 404: model 'x' not found")])
    with pytest.raises(EmbedderRequestError) as err:
        embedder(server, clock).encode(["a"])
    assert err.value.exit_code == 2 and "embedder.model" in str(err.value)
    assert len(server.seen) == 1 and clock.sleeps == []


def test_a_failure_keeps_the_batches_that_arrived() -> None:
    clock = FakeClock()
    server = Server(clock, [None, None, RefusedError("HTTP 400")])
    got: list[list[str]] = []
    with pytest.raises(EmbedderRequestError):
        for batch, _ in embedder(server, clock).encode_batches([f"t{i}" for i in range(8)]):
            got.append(batch)
    assert got == [["t0", "t1"], ["t2", "t3"]]  # the fourth batch was never sent
    assert len(server.seen) == 3


def test_concurrent_requests_all_arrive_once() -> None:
    clock = FakeClock()
    server = Server(clock)
    texts = [f"text {i}" for i in range(37)]
    pairs = list(embedder(server, clock, concurrency=4, batch_size=5).encode_batches(texts))
    assert sorted(t for batch, _ in pairs for t in batch) == sorted(texts)
    assert len(server.seen) == 8


@pytest.mark.parametrize(
    ("dim", "dimensions", "why"),
    [(3, 4, "returned 3-d vectors but embedder.dimensions is 4-d"), (4, None, None)],
)
def test_the_dimension_is_checked_on_arrival(dim: int, dimensions: int | None, why: str | None) -> None:
    clock = FakeClock()
    server = Server(clock, dim=dim)
    emb = embedder(server, clock, dimensions=dimensions)
    if why is None:
        assert emb.encode(["a"]).shape == (1, 4)
        return
    with pytest.raises(EmbeddingMismatchError, match=why) as err:
        emb.encode(["a"])
    assert err.value.exit_code == 2


def test_a_later_batch_of_another_dimension_is_refused() -> None:
    clock = FakeClock()
    calls = iter([[[1.0, 2.0]], [[1.0, 2.0, 3.0]]])
    emb = EndpointEmbedder(EndpointSettings(base_url="http://h/v1", model="m", batch_size=1, concurrency=1),
                           send=lambda texts: next(calls), clock=clock, sleep=clock.sleep)  # fmt: skip
    with pytest.raises(EmbeddingMismatchError, match="earlier vectors were 2-d"):
        emb.encode(["a", "b"])


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_values_are_refused(bad: float) -> None:
    clock = FakeClock()
    emb = EndpointEmbedder(EndpointSettings(base_url="http://h/v1", model="m"), send=lambda texts: [[1.0, bad]],
                           clock=clock, sleep=clock.sleep)  # fmt: skip
    with pytest.raises(EmbeddingMismatchError, match="NaN or infinite"):
        emb.encode(["a"])


def test_with_retries_gives_up_with_the_last_error() -> None:
    clock = FakeClock()
    errors = iter([RetryableError("first"), RetryableError("second")])

    def send() -> None:
        raise next(errors)

    with pytest.raises(RetryableError, match="second"):
        with_retries(send, RetryPolicy(max_retries=1, backoff=2.0), clock.sleep)
    assert clock.sleeps == [2.0]


@given(
    per_minute=st.integers(min_value=1, max_value=600),
    gaps=st.lists(st.floats(min_value=0.0, max_value=30.0, allow_nan=False), min_size=1, max_size=60),
)
def test_no_minute_ever_holds_more_starts_than_the_limit(per_minute: int, gaps: list[float]) -> None:
    """Requests arriving at any times: in every 60-second window at most ``per_minute`` of them start, none
    starts before it arrived, and none waits when the limit did not require it."""
    clock = FakeClock()
    limiter = RateLimiter(per_minute, clock=clock, sleep=clock.sleep)
    starts: list[float] = []
    for gap in gaps:
        clock.now += gap
        arrived = clock.now
        limiter.acquire()
        assert clock.now >= arrived
        if clock.now > arrived:  # it waited: only because the previous start was too recent
            assert starts and clock.now - starts[-1] == pytest.approx(60.0 / per_minute)
        starts.append(clock.now)
    for i, first in enumerate(starts):
        in_window = sum(1 for s in starts[i:] if s < first + 60.0 - 1e-9)
        assert in_window <= per_minute
