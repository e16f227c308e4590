"""A stand-in deployed service for the client's tests: an MCP server over stdio (the SDK's ``MCPServer``) whose
``lookup_knowledge`` answers a payload naming the query, an error for a query containing ``error``, and ends
its process at the call given as its one argument (``python -m tests.unit.replay.mcp_fake 3``: the third)."""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

DIE_AT = 0  # the call that ends the process (0: none); set from the command line
calls = 0
server: MCPServer = MCPServer(name="fake")


async def lookup_knowledge(query: str) -> dict[str, Any]:
    global calls
    calls += 1
    if calls == DIE_AT:
        os._exit(1)
    if "error" in query:
        raise ToolError("the knowledge base is unavailable")
    return {"query": query, "evidence": [{"document_id": f"{query}#chunk-0", "content": query}], "hints": {}}


server.add_tool(lookup_knowledge, name="lookup_knowledge", structured_output=True)

if __name__ == "__main__":
    DIE_AT = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server.run("stdio")
