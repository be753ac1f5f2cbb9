"""A server built with the official MCP Python SDK (`mcp`), for the client's interop tests:
`python mcp_sdk_server.py stdio` or `python mcp_sdk_server.py http PORT [stateless]`."""

from __future__ import annotations

import sys
import time

from mcp.server import MCPServer

server = MCPServer("sdk-test-server")
NOTES: list[str] = []


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def remember(note: str) -> dict:
    """Keep a note in memory and say how many there are."""
    NOTES.append(note)
    return {"notes": len(NOTES)}


@server.tool()
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "awake"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]),
                   stateless_http=len(sys.argv) > 3 and sys.argv[3] == "stateless", json_response=False)
