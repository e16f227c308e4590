"""A small knowledge base for the served tool's tests: a hashed bag-of-words query embedder (deterministic, no
model) and a Milvus collection of runbooks, several chunks each, built with it.

``python -m tests.integration.serve_kit`` is never run; the tests import :func:`build_kb` and name
``tests.integration.serve_kit:encode`` as the ``python`` embedder of the service they start.
"""

from __future__ import annotations

import hashlib
import math
import re
import subprocess
import threading
from pathlib import Path

from rag_eval.search.milvus import ChunkRow, IndexSpec, MilvusStore, SearchTarget

DIM = 32
TOPICS = {
    "replica-lag": "replica lag relay log SQL thread seconds behind master",
    "disk-full": "disk full volume space inode cleanup logs rotate",
    "oom-kill": "out of memory OOM killer process heap limit container",
    "cert-expiry": "certificate expiry TLS renew chain handshake",
    "dns-timeout": "DNS resolver timeout lookup nameserver cache",
    "queue-backlog": "queue backlog consumer lag partition rebalance",
}
QUERIES = [
    "why is the replica behind the master",
    "disk is full on the volume",
    "process killed by the OOM killer",
    "TLS certificate about to expire",
    "DNS lookup timeout",
    "consumer lag on the queue",
    "relay log space",
    "heap limit of the container",
    "rotate logs to free space",
    "renew the certificate chain",
    "nameserver cache",
    "partition rebalance backlog",
]


def encode(texts: list[str]) -> list[list[float]]:
    """Each text as the normalised sum of its words' hashed one-hot vectors (DIM dimensions)."""
    out = []
    for text in texts:
        v = [0.0] * DIM
        for word in re.findall(r"\w+", text.lower()):
            h = hashlib.sha256(word.encode()).digest()
            v[h[0] % DIM] += 1.0
            v[h[1] % DIM] += 0.5
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / norm for x in v])
    return out


def build_kb(uri: str | Path, collection: str = "kb") -> SearchTarget:
    """The runbooks' chunks (five a topic, words of several topics mixed in) in Milvus (a Lite file or a server)."""
    rows, n = [], 0
    names = list(TOPICS)
    for d, (doc, words) in enumerate(TOPICS.items()):
        other = TOPICS[names[(d + 1) % len(names)]].split()
        for i in range(5):
            n += 1
            text = f"{doc} step {i}: " + " ".join(words.split()[i:] + other[: i + 1])
            rows.append(ChunkRow(vector_id=n, doc_id=doc, chunk_index=i, content=text, title=doc.title(),
                                 source=f"runbooks/{doc}.md", category="ops", start=None, end=None,
                                 vector=encode([text])[0]))  # fmt: skip
    target = SearchTarget(uri=str(uri), collection=collection, index=IndexSpec.flat())
    with MilvusStore(target) as store:
        store.create(dim=DIM, index=IndexSpec.flat(), manifest={})
        store.insert(rows)
        store.finalize()
    return target


ROOT = Path(__file__).resolve().parents[2]


def serve_argv(properties: Path, uri: str, collection: str, *extra: str) -> list[str]:
    """``rag-eval serve`` of this tree (as ``python -m rag_eval.cli``) with the test embedder."""
    import sys

    return [sys.executable, "-m", "rag_eval.cli", "serve", "--properties", str(properties), "--milvus-uri", uri,
            "--collection", collection, "--embedder-provider", "python", "--embedder-callable",
            "tests.integration.serve_kit:encode", *extra]  # fmt: skip


def env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(port: int, process: subprocess.Popen[bytes], seconds: float = 60.0) -> None:
    """Until ``GET /healthz`` answers 200 (the process must not have ended)."""
    import time
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service ended with {process.returncode} before it answered")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"the service on port {port} did not answer within {seconds:g} s")


_SHIPPED: dict[str, list[float]] = {}
_LOADING = threading.Lock()  # a service embeds on several threads at once


def shipped_encode(texts: list[str]) -> list[list[float]]:
    """The shipped knowledge base's precomputed all-MiniLM-L6-v2 vector of a text it has (a chunk, a labelled
    query), else a hashed 384-d vector: a model-free embedder that retrieves as the real one does on the data set,
    the same in a run and in a service it starts."""
    import pyarrow.parquet as pq

    from rag_eval.embed.vector_files import text_sha256

    with _LOADING:
        if not _SHIPPED:
            loaded: dict[str, list[float]] = {}
            for path in sorted((ROOT / "datasets" / "incident-kb" / "vectors").glob("*.parquet")):
                table = pq.read_table(path, columns=["text_sha256", "vector"])
                hashes, vectors = table.column("text_sha256").to_pylist(), table.column("vector").to_pylist()
                loaded.update(zip(hashes, vectors, strict=True))
            _SHIPPED.update(loaded)
    out = []
    for text in texts:
        known = _SHIPPED.get(text_sha256(text))
        out.append(list(known) if known is not None else _hashed(text, 384))
    return out


def _hashed(text: str, dim: int) -> list[float]:
    v = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        h = hashlib.sha256(word.encode()).digest()
        v[int.from_bytes(h[:4], "big") % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


def slow_encode(texts: list[str]) -> list[list[float]]:
    """:func:`encode`, two seconds late, having first created the file ``$SERVE_KIT_STARTED`` (when set): a test
    knows a lookup is under way when that file appears, and signals the service while it still is."""
    import os
    import time

    if marker := os.environ.get("SERVE_KIT_STARTED"):
        Path(marker).touch()
    time.sleep(2.0)
    return encode(texts)
