"""A small real HTTP server speaking the OpenAI ``POST /v1/embeddings`` JSON, on 127.0.0.1, for the error
cases a real model server will not produce on demand: a 429 with ``Retry-After``, 5xx answers, a server
that dies mid-run, vectors of the wrong dimension or of another model. Requests go through the real
``openai`` client over real HTTP; only the server is ours.

``plan`` says what each request gets, in order (then ``"ok"``): ``"ok"``, ``(status, headers)`` or ``"die"``
(the server closes the connection and stops listening: every later request is refused); ``indices`` and
``reversed`` how the vectors of an answer are indexed and listed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Vectors = Callable[[Sequence[str]], list[list[float]]]
Step = str | tuple[int, dict[str, str]]


@dataclass
class Seen:
    at: float
    texts: list[str]
    model: str
    authorization: str
    answered: int  # HTTP status sent (0: the connection was closed)


@dataclass
class Endpoint:
    vectors: Vectors
    plan: list[Step] = field(default_factory=list)
    # the index each vector of an answer carries (a broken server's: the same twice), and the vectors listed last
    # first (which the API allows: the indices say the order)
    indices: Callable[[int], Sequence[int]] = range
    reversed: bool = False
    seen: list[Seen] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def texts_sent(self) -> list[str]:
        """Every text of a request that was answered with vectors."""
        return [t for s in self.seen if s.answered == 200 for t in s.texts]

    def start(self, port: int = 0) -> Endpoint:
        """Serve on ``port`` (0: a free one; a port given again: the same endpoint back after a stop)."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                with endpoint.lock:
                    step = endpoint.plan.pop(0) if endpoint.plan else "ok"
                seen = Seen(at=time.monotonic(), texts=list(texts), model=body.get("model", ""),
                            authorization=self.headers.get("authorization", ""), answered=0)  # fmt: skip
                endpoint.seen.append(seen)
                if step == "die":
                    self.close_connection = True
                    threading.Thread(target=endpoint.stop, daemon=True).start()
                    return
                if step != "ok":
                    status, headers = step  # type: ignore[misc]
                    # the key said back, as a hosted API's "Incorrect API key provided: sk-..." does
                    said = f"status {status} for {self.headers.get('authorization', '')}"
                    self._answer(status, {"error": {"message": said, "type": "test"}}, headers)
                    seen.answered = status
                    return
                pairs = zip(endpoint.indices(len(texts)), endpoint.vectors(texts), strict=True)
                data = [{"object": "embedding", "index": i, "embedding": v} for i, v in pairs]
                data = data[::-1] if endpoint.reversed else data
                tokens = sum(len(t.split()) for t in texts)
                self._answer(200, {"object": "list", "data": data, "model": body.get("model", ""),
                                   "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, {})  # fmt: skip
                seen.answered = 200

            def _answer(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
