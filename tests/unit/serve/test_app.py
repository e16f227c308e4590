"""The MCP server with the SDK's own client, in process: the one tool and its input schema, the payload as
structured content and as text, failures as tool errors, and the health route."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient

from rag_eval.core.config import RagConfig
from rag_eval.serve.app import TOOL_NAME, build_server
from rag_eval.serve.service import LookupService
from tests.unit.serve.test_service import Slow, tool
from tests.unit.serve.test_tracing import QUERIES


def _calls(service: LookupService, queries: list[str]) -> tuple[Any, list[Any]]:
    async def main() -> tuple[Any, list[Any]]:
        async with Client(build_server(service)) as client:
            listed = await client.list_tools()
            return listed, [await client.call_tool(TOOL_NAME, {"query": q}) for q in queries]

    return anyio.run(main)


def test_one_tool_whose_input_is_the_query_alone() -> None:
    listed, _ = _calls(LookupService(tool()), [])
    [only] = listed.tools
    assert only.name == "lookup_knowledge"
    schema = only.input_schema
    assert schema["type"] == "object" and schema["required"] == ["query"]
    assert {k: v["type"] for k, v in schema["properties"].items()} == {"query": "string"}


@pytest.mark.parametrize("config", [RagConfig(), RagConfig.from_properties_text("rag.max-chunks-per-document=1")])
def test_the_result_is_the_in_process_payload_as_structured_content_and_text(config: RagConfig) -> None:
    queries = [q for q in QUERIES if q.strip()]
    _, results = _calls(LookupService(tool(config)), queries)
    for query, result in zip(queries, results, strict=True):
        expected = tool(config).lookup_knowledge(query).as_dict()
        assert not result.is_error
        assert result.structured_content == expected
        assert json.loads(result.content[0].text) == expected


def test_a_failed_lookup_is_a_tool_error_and_the_next_call_is_answered() -> None:
    service = LookupService(Slow(0.5), timeout=0.1)
    _, [blank, slow] = _calls(service, ["   ", "replica lag"])
    assert blank.is_error and "the query is blank" in blank.content[0].text
    assert slow.is_error and "longer than 0.1 s" in slow.content[0].text
    service.tool, service.timeout = tool(), 5.0
    _, [ok] = _calls(service, ["replica lag"])
    assert not ok.is_error and ok.structured_content["evidence"]


def test_the_health_route_answers_on_the_http_app() -> None:
    service = LookupService(tool())
    app = build_server(service).streamable_http_app()
    with TestClient(app) as http:
        response = http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "served": 0, "failed": 0, "in_flight": 0}
