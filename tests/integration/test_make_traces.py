"""The example trace file's generator on a few queries: a Milvus Lite collection built as ``rag-eval run``
builds it, the traced tool called, and the spans it wrote read back as OTLP JSON lines. Run in a child
process that refuses every Internet connection made through Python's sockets and reports the modules it
loaded: it needs no network and no model."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SHIPPED

pytestmark = pytest.mark.milvus_lite

SCRIPT = ROOT / "examples" / "traffic" / "make_traces.py"
CHILD = """
import json, runpy, socket, sys
real = socket.socket.connect
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1", "localhost"):
        raise OSError(f"no network here: {address!r}")
    return real(self, address)
socket.socket.connect = connect
script, *args = sys.argv[1:]
sys.argv = [script, *args]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as stop:
    if stop.code not in (0, None):
        raise
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""
MODELS = {"sentence_transformers", "torch", "transformers", "huggingface_hub", "openai"}


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def test_the_generator_writes_traced_calls_of_the_queries(tmp_path: Path) -> None:
    out = tmp_path / "traces.otlp.jsonl"
    args = ["--out", str(out), "--limit", "6", "--calls", "15", "--seed", "4", "--quiet",
            "--milvus-uri", str(tmp_path / "milvus.db"), "--cache-dir", str(tmp_path / "cache")]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", CHILD, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "opentelemetry" in loaded and not MODELS & loaded
    assert not list(tmp_path.glob("*.partial")) and not (tmp_path / "cache").exists()  # nothing embedded

    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    spans, services = [], set()
    for request in lines:
        for rs in request["resourceSpans"]:
            services.add(attributes(rs["resource"])["service.name"])
            spans += [s for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert services == {"knowledge-service"} and len(spans) == 30
    tools = {s["spanId"]: s for s in spans if attributes(s)["openinference.span.kind"] == "TOOL"}
    searches = [s for s in spans if attributes(s)["openinference.span.kind"] == "RETRIEVER"]
    assert len(tools) == len(searches) == 15
    assert all(len(x["traceId"]) == 32 and len(x["spanId"]) == 16 for x in spans)

    texts = [json.loads(line)["text"] for line in (SHIPPED / "queries.jsonl").read_text().splitlines()[:6]]
    asked = Counter(json.loads(attributes(s)["input.value"])["query"] for s in tools.values())
    maker = load_script()
    want = Counter({t: n for t, n in zip(texts, maker.call_counts(6, calls=15, seed=4), strict=True)})
    assert asked == want
    for search in searches:
        tool = tools[search["parentSpanId"]]
        a, t = attributes(search), attributes(tool)
        assert search["traceId"] == tool["traceId"] and t["tool.name"] == "lookup_knowledge"
        assert a["input.value"] == " ".join(json.loads(t["input.value"])["query"].split())
        assert 0 < len([k for k in a if k.endswith(".document.id")]) <= 20  # the evidence config: retrieve-k 20
        payload = json.loads(t["output.value"])
        assert 0 < len(payload["evidence"]) <= 5 and payload["query"] == json.loads(t["input.value"])["query"]
        ids = [e["document_id"] for e in payload["evidence"]]
        assert len(set(ids)) == len(ids)  # one excerpt a chunk-scoped document_id (D5)


def load_script() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_traces", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
