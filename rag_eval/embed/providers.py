"""Where vectors come from: the ``[embedder]`` table's ``provider`` and what each needs.

========================  ==================================================================================
``sentence-transformers``  a local model (the default; the ``embed`` extra)
``openai``                 an OpenAI-compatible ``/v1/embeddings`` endpoint (:mod:`rag_eval.embed.openai_compat`)
``precomputed``            a file of query vectors (Parquet or JSONL: a query id or text, and its vector)
``python``                 ``callable = "package.module:function"``, a function from a list of texts to vectors
========================  ==================================================================================

Whatever the provider, a text is embedded once: :class:`~rag_eval.embed.embedders.VectorResolver` keeps
every vector in the on-disk cache under :attr:`EmbedSettings.model_id`, which names the provider, the
endpoint (without credentials), the model, the dimensions and whether vectors are normalised.

>>> EmbedSettings(provider="openai", base_url="http://u:pw@127.0.0.1:8080/v1?k=1", model="m", dimensions=64).model_id
'openai:http://127.0.0.1:8080/v1:m:64'
>>> EmbedSettings().model_id
'sentence-transformers/all-MiniLM-L6-v2'

A chunk is embedded as its text (``passage = "text"``, the default), or as BEIR and MTEB encode a passage,
``title + " " + text`` (``passage = "title+text"``; the title left out where a document has none):

>>> beir = EmbedSettings(passage="title+text")
>>> text = "Naps help."
>>> beir.passage_text("Sleep", text), beir.passage_text("", text), EmbedSettings().passage_text("Sleep", text)
('Sleep Naps help.', 'Naps help.', 'Naps help.')
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.core.errors import EmbedderUnavailableError, quoted
from rag_eval.embed.embedders import DEFAULT_MODEL, Embedder, EmbedderSpec
from rag_eval.embed.openai_compat import EndpointEmbedder, EndpointSettings, RetryPolicy, openai_send, token_estimate
from rag_eval.redact import redact_value

PROVIDERS = ("sentence-transformers", "openai", "precomputed", "python")
PASSAGES = ("text", "title+text")  # what of a chunk is embedded: its text, or BEIR's title + " " + text
FIT_SAMPLE = 50  # rows of a collection built elsewhere the fit check embeds and searches
FIT_K = 10  # a row finds itself when it is among its first FIT_K hits
FIT_MIN = 0.5  # the share of rows that must find themselves (measured figures: docs/existing-collection.md)
_CALLABLE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NO_KEY = "EMPTY"  # what is sent as the key to a server that takes none (the openai client needs one)


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbedSettings:
    """The ``[embedder]`` table: the provider and its settings, and the fit check's."""

    provider: str = "sentence-transformers"
    model: str = DEFAULT_MODEL
    normalize: bool = True
    base_url: str | None = None
    dimensions: int | None = None
    api_key_env: str | None = None  # the variable holding the key (the key itself is never stored)
    batch_size: int | None = None  # None: 256 for an endpoint, 64 for a local model
    concurrency: int = 2
    requests_per_minute: float | None = None
    timeout: float = 60.0
    max_retries: int = 5
    max_texts: int | None = None  # refuse to send more texts than this in one run
    file: Path | None = None  # precomputed query vectors
    callable: str | None = None  # python: "package.module:function"
    fit_sample: int = FIT_SAMPLE
    fit_k: int = FIT_K
    fit_min: float = FIT_MIN
    fit_seed: int = 0
    passage: str = "text"  # what of a chunk is embedded (PASSAGES)

    def passage_text(self, title: str, text: str) -> str:
        """The text embedded for a chunk of ``text`` in a document titled ``title``: BEIR's
        ``(title + " " + text).strip()`` under ``passage = "title+text"``, the text itself otherwise."""
        return (title + " " + text).strip() if self.passage == "title+text" else text

    @property
    def model_id(self) -> str:
        """What the cache keys vectors by (and what a precomputed vector file of the data set names)."""
        raw = "" if self.normalize else ":raw"
        if self.provider == "sentence-transformers":
            return EmbedderSpec(model=self.model, normalize=self.normalize).model_id
        if self.provider == "openai":
            dims = "" if self.dimensions is None else f":{self.dimensions}"
            return f"openai:{self.endpoint}:{self.model}{dims}{raw}"
        if self.provider == "python":
            return f"python:{self.callable}{raw}"
        return f"precomputed:{self.file}{raw}"

    @property
    def label(self) -> str:
        """The embedder in a line of the console."""
        if self.provider == "openai":
            return f"{self.model} at {self.endpoint}"
        if self.provider == "python":
            return f"{self.callable} (python)"
        if self.provider == "precomputed":
            return f"precomputed query vectors {self.file}"
        return self.model

    @property
    def endpoint(self) -> str:
        """``base_url`` without credentials (userinfo, query, fragment) and trailing slash."""
        return redact_value(self.base_url or "").rstrip("/")

    @property
    def sends(self) -> bool:
        """Whether texts leave this machine (or this process) to be embedded: announced, and budgeted."""
        return self.provider in {"openai", "python"}

    def as_dict(self) -> dict[str, Any]:
        """For the manifest: the settings without secrets (the variable's name, never its value)."""
        body: dict[str, Any] = {"provider": self.provider, "model": self.model, "normalize": self.normalize,
                                "model_id": self.model_id}  # fmt: skip
        if self.provider == "openai":
            body.update(base_url=self.endpoint, dimensions=self.dimensions, api_key_env=self.api_key_env)
        elif self.provider == "python":
            body["callable"] = self.callable
        elif self.provider == "precomputed":
            body["file"] = str(self.file)
        if self.passage != "text":
            body["passage"] = self.passage
        return body

    def build(self) -> Embedder:
        """The embedder (a local model is loaded, a callable imported, an endpoint's client made)."""
        if self.provider == "openai":
            return _endpoint(self)
        if self.provider == "python":
            return NamedEmbedder(CallableEmbedder(self), self)
        if self.provider == "precomputed":
            raise EmbedderUnavailableError(f"{self.file}: the precomputed provider embeds nothing, and a text "
                                           "has no vector there (embedder.file)")  # fmt: skip
        spec = EmbedderSpec(model=self.model, normalize=self.normalize, batch_size=self.batch_size or 64)
        return spec.build()


def settings_problems(s: EmbedSettings, *, existing: bool) -> list[tuple[str, str]]:
    """(key, message) for every value of ``s`` that cannot work; ``existing``: the experiment replays a
    collection built elsewhere."""
    out: list[tuple[str, str]] = []
    if s.provider not in PROVIDERS:
        return [("provider", f"{quoted(s.provider)} is not one of {', '.join(PROVIDERS)}")]
    if s.passage not in PASSAGES:
        out.append(("passage", f"{quoted(s.passage)} is not one of {', '.join(PASSAGES)}"))
    elif existing and s.passage != "text":
        out.append(("passage", "a [collection] is replayed with the vectors it holds: rag_eval embeds none of its "
                               "chunks (remove passage)"))  # fmt: skip
    if s.provider == "openai":
        if not s.base_url or "://" not in s.base_url:
            out.append(("base_url", "required: the endpoint's URL, such as http://127.0.0.1:8080/v1"))
        if not s.model.strip():
            out.append(("model", "required: the model the endpoint serves"))
    if s.api_key_env is not None and not _ENV_NAME.fullmatch(s.api_key_env):
        out.append(("api_key_env", f"{quoted(s.api_key_env)} is not an environment variable's name"))
    if s.provider == "python" and not (s.callable and _CALLABLE.fullmatch(s.callable)):
        out.append(("callable", f"expected 'package.module:function', got {quoted(s.callable)}"))
    if s.provider == "precomputed":
        if s.file is None:
            out.append(("file", "required: the file of query vectors (Parquet or JSONL)"))
        if not existing:
            out.append(("provider", "precomputed query vectors need a [collection] (the chunks of a collection "
                                    "rag_eval builds need vectors too)"))  # fmt: skip
    bounds = (("dimensions", s.dimensions, 1), ("batch_size", s.batch_size, 1), ("concurrency", s.concurrency, 1),
              ("max_retries", s.max_retries, 0), ("max_texts", s.max_texts, 0), ("fit_sample", s.fit_sample, 1),
              ("fit_k", s.fit_k, 1))  # fmt: skip
    for key, value, low in bounds:
        if value is not None and value < low:
            out.append((key, f"must be >= {low}, got {value}"))
    if s.requests_per_minute is not None and s.requests_per_minute <= 0:
        out.append(("requests_per_minute", f"must be > 0, got {s.requests_per_minute:g}"))
    if not 0 < s.timeout <= 3600:
        out.append(("timeout", f"must be > 0 and <= 3600 seconds, got {s.timeout:g}"))
    if not 0.0 <= s.fit_min <= 1.0:
        out.append(("fit_min", f"a share from 0 to 1 of the sampled rows, got {s.fit_min:g}"))
    return out


def api_key(s: EmbedSettings) -> str:
    """The key from the variable ``api_key_env`` names (:data:`NO_KEY` when none is named)."""
    if s.api_key_env is None:
        return NO_KEY
    value = os.environ.get(s.api_key_env, "")
    if not value:
        raise EmbedderUnavailableError(
            f"the variable {s.api_key_env} (embedder.api_key_env) is not set: export the endpoint's key in it"
        )
    return value


def _endpoint(s: EmbedSettings) -> NamedEmbedder:
    settings = EndpointSettings(
        base_url=s.base_url or "", model=s.model, dimensions=s.dimensions, batch_size=s.batch_size or 256,
        concurrency=s.concurrency, requests_per_minute=s.requests_per_minute, timeout=s.timeout,
        retry=RetryPolicy(max_retries=s.max_retries),
    )  # fmt: skip
    key = api_key(s)
    send, close = openai_send(base_url=settings.base_url, model=s.model, api_key=key, dimensions=s.dimensions,
                              timeout=s.timeout)  # fmt: skip
    return NamedEmbedder(EndpointEmbedder(settings, send=send, close=close, secret=key if key != NO_KEY else ""), s)


class NamedEmbedder:
    """An embedder under the settings' ``model_id``, normalising as they say, announcing what it sends and
    refusing to send more than ``max_texts`` in all."""

    def __init__(self, inner: Any, settings: EmbedSettings) -> None:
        self.inner = inner
        self.settings = settings
        self.planned = 0  # texts announced so far

    @property
    def model_id(self) -> str:
        return self.settings.model_id

    def announce(self, texts: Sequence[str]) -> str:
        """The line shown before ``texts`` are sent; refuses (exit 2) past ``max_texts``."""
        s = self.settings
        self.planned += len(texts)
        if s.max_texts is not None and self.planned > s.max_texts:
            raise EmbedderUnavailableError(
                f"the run would send {self.planned:,} texts to be embedded, over embedder.max_texts = "
                f"{s.max_texts:,}: raise it to send them"
            )
        where = f"to {s.endpoint}/embeddings ({s.model}), about {token_estimate(texts):,} tokens" if (
            s.provider == "openai") else f"through {s.callable}"  # fmt: skip
        return f"embedding {len(texts):,} text{'s' if len(texts) != 1 else ''} not in the cache {where}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._normalized(np.asarray(self.inner.encode(texts), dtype=np.float32))

    def encode_batches(self, texts: Sequence[str]) -> Any:
        batches = getattr(self.inner, "encode_batches", None)
        if batches is None:
            yield list(texts), self.encode(texts)
            return
        for batch, vectors in batches(texts):
            yield batch, self._normalized(vectors)

    def _normalized(self, vectors: np.ndarray) -> np.ndarray:
        if not self.settings.normalize or vectors.size == 0:
            return vectors
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.asarray(vectors / np.where(norms == 0, 1.0, norms), dtype=np.float32)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def load_callable(spec: str) -> Callable[[list[str]], Any]:
    """``package.module:function`` imported (a module of the working directory too)."""
    module_name, _, name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
        fn = getattr(module, name)
    except (ImportError, AttributeError) as exc:
        raise EmbedderUnavailableError(f"cannot import {spec!r} (embedder.callable): {exc}") from exc
    if not callable(fn):
        raise EmbedderUnavailableError(f"{spec!r} (embedder.callable) is not a function")
    return fn  # type: ignore[no-any-return]


class CallableEmbedder:
    """``callable(texts) -> vectors``: a list of texts in, one vector per text out (a list of lists or an
    array), checked for shape and finite values."""

    def __init__(self, settings: EmbedSettings) -> None:
        self.spec = settings.callable or ""
        self.fn = load_callable(self.spec)
        self.batch_size = settings.batch_size or 64

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        parts = [self._call(list(texts[i : i + self.batch_size])) for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)

    def _call(self, batch: list[str]) -> np.ndarray:
        try:
            out = np.asarray(self.fn(batch), dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbedderUnavailableError(f"{self.spec} did not return vectors ({exc}): it must return one "
                                           "list of numbers per text") from exc  # fmt: skip
        if out.ndim != 2 or out.shape[0] != len(batch):
            raise EmbedderUnavailableError(f"{self.spec} returned an array of shape {out.shape} for {len(batch)} "
                                           "texts: it must return one vector per text")  # fmt: skip
        if not np.isfinite(out).all():
            raise EmbedderUnavailableError(f"{self.spec} returned NaN or infinite values")
        return out

