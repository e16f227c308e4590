"""Vectors from an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Azure OpenAI's v1 API, vLLM,
text-embeddings-inference, Ollama, infinity, LiteLLM), through the ``openai`` client.

The client's own retries are off (``max_retries=0``): the retries, their backoff and the request rate are
this module's, written against an injected clock and ``sleep`` so that their timing is tested without
waiting. Texts go in batches of ``batch_size``, at most ``concurrency`` requests at a time and at most
``requests_per_minute`` request starts a minute. A 429, a 5xx, a timeout or a refused connection is retried
``max_retries`` times, waiting ``Retry-After`` when the server sends one, else ``backoff * 2**attempt``
seconds (at most :data:`MAX_WAIT`); then :class:`~rag_eval.core.errors.EmbeddingEndpointError` (exit 3).
Any other 4xx is the request's own fault (a model the server does not serve, a wrong key):
:class:`~rag_eval.core.errors.EmbedderRequestError` (exit 2), never retried. Every message names the
endpoint without credentials, and the key (read from the variable ``api_key_env`` names) is scrubbed from
anything a server says back.

>>> RetryPolicy(max_retries=3, backoff=0.5).delay(2, None), RetryPolicy().delay(0, 7.0)
(2.0, 7.0)
"""

from __future__ import annotations

import email.utils
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_eval.core.errors import EmbedderRequestError, EmbeddingEndpointError, EmbeddingMismatchError
from rag_eval.redact import redact_value

MAX_WAIT = 120.0  # seconds: the longest wait between two tries, whatever Retry-After asks
CHARS_PER_TOKEN = 4  # the token estimate shown before sending (English text; no tokenizer is loaded)

Send = Callable[[Sequence[str]], list[list[float]]]  # one request: a batch of texts -> their vectors
Clock = Callable[[], float]
Sleep = Callable[[float], None]


class RetryableError(Exception):
    """A try that may succeed later (429, 5xx, timeout, connection): ``retry_after`` in seconds if the
    server said."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class RefusedError(Exception):
    """A request the server refused for a reason a retry cannot change (a 4xx other than 429)."""


class _NotSent(Exception):
    """A batch not sent because another one failed first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to wait: ``backoff * 2**attempt`` seconds, or the server's ``Retry-After``,
    never more than :data:`MAX_WAIT`."""

    max_retries: int = 5
    backoff: float = 1.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 0)."""
        wait = retry_after if retry_after is not None else self.backoff * 2.0**attempt
        return min(max(wait, 0.0), MAX_WAIT)


def with_retries(send: Callable[[], Any], policy: RetryPolicy, sleep: Sleep) -> Any:
    """``send()``, retried on :class:`RetryableError` as ``policy`` says; the last error is raised as it is."""
    attempt = 0
    while True:
        try:
            return send()
        except RetryableError as exc:
            if attempt >= policy.max_retries:
                raise
            sleep(policy.delay(attempt, exc.retry_after))
            attempt += 1


class RateLimiter:
    """At most ``per_minute`` request starts in any minute, spaced evenly (``60 / per_minute`` seconds
    apart); thread safe. ``None``: no limit.

    >>> now = [0.0]; waits = []
    >>> limiter = RateLimiter(120, clock=lambda: now[0], sleep=waits.append)
    >>> for _ in range(3): limiter.acquire()
    >>> waits
    [0.0, 0.5, 1.0]
    """

    def __init__(self, per_minute: float | None, *, clock: Clock, sleep: Sleep) -> None:
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self._clock = clock
        self._sleep = sleep
        self._next = -math.inf
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if self.interval == 0.0:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self.interval
        self._sleep(start - now)


def retry_after_seconds(headers: Any, *, now: float | None = None) -> float | None:
    """``Retry-After`` (seconds, or an HTTP date) or ``retry-after-ms`` as seconds; None when absent or
    unreadable.

    >>> retry_after_seconds({"retry-after": "3"}), retry_after_seconds({"retry-after-ms": "250"})
    (3.0, 0.25)
    >>> retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0)
    10.0
    >>> retry_after_seconds({"retry-after": "soon"}) is None
    True
    """
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def openai_send(
    *, base_url: str, model: str, api_key: str, dimensions: int | None, timeout: float
) -> tuple[Send, Callable[[], None]]:
    """One request through the ``openai`` client, its errors sorted into retryable and refused; and the
    client's close."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
    extra: dict[str, Any] = {} if dimensions is None else {"dimensions": dimensions}

    def send(texts: Sequence[str]) -> list[list[float]]:
        try:
            response = client.embeddings.create(model=model, input=list(texts), encoding_format="float", **extra)
        except openai.APIStatusError as exc:
            status = exc.status_code
            said = _said(exc)
            if status in (408, 429) or status >= 500:
                wait = retry_after_seconds(exc.response.headers)
                raise RetryableError(f"HTTP {status}{said}", retry_after=wait) from exc
            raise RefusedError(f"HTTP {status}{said}") from exc
        except openai.APITimeoutError as exc:
            raise RetryableError(f"no answer within {timeout:g} s") from exc
        except openai.APIConnectionError as exc:
            raise RetryableError(f"cannot connect ({type(exc.__cause__ or exc).__name__})") from exc
        except openai.APIError as exc:  # an answer that is not the API's JSON
            raise RetryableError(f"an answer that is not an embeddings response ({type(exc).__name__})") from exc
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise RetryableError(f"{len(rows)} vectors for {len(texts)} texts")
        indices = [d.index for d in rows]
        if indices != list(range(len(texts))):  # a vector given twice and another missing: never paired by guess
            shown = ", ".join(map(str, indices[:8])) + (", ..." if len(indices) > 8 else "")
            raise RetryableError(f"vectors indexed {shown} for {len(texts)} texts (0 to {len(texts) - 1}, once each)")
        return [list(map(float, d.embedding)) for d in rows]

    return send, client.close


def _said(exc: Any) -> str:
    """What the server said about an error, cut short (the key is scrubbed by the caller)."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
    text = str(message or getattr(exc, "message", "") or "").strip().replace("\n", " ")
    return f": {text[:200]}" if text else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointSettings:
    """What :class:`EndpointEmbedder` needs of the ``[embedder]`` table."""

    base_url: str
    model: str
    dimensions: int | None = None
    batch_size: int = 256
    concurrency: int = 2
    requests_per_minute: float | None = None
    timeout: float = 60.0
    retry: RetryPolicy = RetryPolicy()

    @property
    def endpoint(self) -> str:
        """The URL as shown in messages: no userinfo, query or fragment."""
        return f"{redact_value(self.base_url).rstrip('/')}/embeddings"


class EndpointEmbedder:
    """Batches of texts to an endpoint, concurrently, rate limited and retried; vectors checked on
    arrival (count, dimension, finite values). ``send``, ``clock`` and ``sleep`` are injected by tests."""

    def __init__(
        self, settings: EndpointSettings, *, send: Send, close: Callable[[], None] = lambda: None,
        secret: str = "", clock: Clock = time.monotonic, sleep: Sleep = time.sleep,
    ) -> None:  # fmt: skip
        self.settings = settings
        self._send = send
        self._close = close
        self._secret = secret
        self._sleep = sleep
        self._limiter = RateLimiter(settings.requests_per_minute, clock=clock, sleep=sleep)
        self.requests = 0  # requests that returned vectors
        self._failed = threading.Event()
        self.dim: int | None = settings.dimensions

    def close(self) -> None:
        self._close()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` in order."""
        out: dict[str, np.ndarray] = {}
        for batch, vectors in self.encode_batches(texts):
            out.update(zip(batch, vectors, strict=True))
        return np.stack([out[t] for t in texts]) if texts else np.zeros((0, self.dim or 0), dtype=np.float32)

    def encode_batches(self, texts: Sequence[str]) -> Iterator[tuple[list[str], np.ndarray]]:
        """(batch, vectors) as each request returns. After a failure, the requests already under way are
        let finish and yielded (the caller keeps them), those not started are dropped, then the failure
        is raised."""
        size = self.settings.batch_size
        batches = [list(texts[i : i + size]) for i in range(0, len(texts), size)]
        failure: BaseException | None = None
        self._failed.clear()
        with ThreadPoolExecutor(max_workers=max(1, self.settings.concurrency), thread_name_prefix="embed") as pool:
            futures: list[Future[np.ndarray]] = [pool.submit(self._request, b) for b in batches]
            batch_of = {id(f): b for f, b in zip(futures, batches, strict=True)}
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                error = future.exception()
                if isinstance(error, _NotSent):
                    continue
                if error is not None:
                    if failure is None:
                        failure = error
                        for pending in futures:
                            pending.cancel()
                    continue
                yield batch_of[id(future)], future.result()
        if failure is not None:
            raise failure

    def _request(self, batch: list[str]) -> np.ndarray:
        if self._failed.is_set():
            raise _NotSent()
        try:
            return self._checked(batch, self._sent(batch))
        except BaseException:
            self._failed.set()  # the batches not yet sent stay unsent
            raise

    def _sent(self, batch: list[str]) -> list[list[float]]:
        def once() -> list[list[float]]:
            self._limiter.acquire()
            return self._send(batch)

        try:
            rows: list[list[float]] = with_retries(once, self.settings.retry, self._sleep)
        except RetryableError as exc:
            tries = self.settings.retry.max_retries + 1
            raise EmbeddingEndpointError(
                f"embedding endpoint {self.settings.endpoint} failed {tries} time{'s' if tries != 1 else ''} "
                f"(last: {self._scrub(str(exc))}): check that it is up, or retry later (what was embedded is "
                "cached; the next run sends only the rest)",
                endpoint=self.settings.endpoint,
            ) from None
        except RefusedError as exc:
            raise EmbedderRequestError(
                f"embedding endpoint {self.settings.endpoint} refused the request ({self._scrub(str(exc))}): "
                f"check embedder.model ({self.settings.model!r}), embedder.api_key_env and embedder.dimensions",
                endpoint=self.settings.endpoint,
            ) from None
        self.requests += 1
        return rows

    def _checked(self, batch: Sequence[str], rows: list[list[float]]) -> np.ndarray:
        where = self.settings.endpoint
        dims = {len(r) for r in rows}
        if len(rows) != len(batch) or len(dims) != 1:
            raise EmbeddingMismatchError(
                f"returned {len(rows)} vectors of dimensions {sorted(dims)} for {len(batch)} texts", path=where
            )
        dim = dims.pop()
        expected = self.dim
        if expected is not None and dim != expected:
            said = "embedder.dimensions is" if self.settings.dimensions is not None else "earlier vectors were"
            raise EmbeddingMismatchError(
                f"returned {dim}-d vectors but {said} {expected}-d: check embedder.model and embedder.dimensions",
                path=where,
            )
        matrix = np.asarray(rows, dtype=np.float32)
        if not np.isfinite(matrix).all():
            raise EmbeddingMismatchError("returned NaN or infinite values: the endpoint's model is broken", path=where)
        self.dim = dim
        return matrix

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text


def token_estimate(texts: Sequence[str]) -> int:
    """About how many tokens ``texts`` are (:data:`CHARS_PER_TOKEN` characters a token, at least one each).

    >>> token_estimate(["abcdefgh", "a"])
    3
    """
    return sum(max(1, math.ceil(len(t) / CHARS_PER_TOKEN)) for t in texts)
