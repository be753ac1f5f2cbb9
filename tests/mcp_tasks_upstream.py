"""A slow upstream for the gateway's task tests, built with the official MCP Python SDK (`mcp`), that
counts its calls: `python mcp_tasks_upstream.py COUNT_FILE`. `long_export` appends "started ROWS" to
COUNT_FILE when a call reaches it and "finished ROWS" when it answers, after a pause long enough that a
client gets a task handle first and polls while it runs. The server itself knows nothing of tasks: the
gateway holds the call (its policy says `task_support`).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TypedDict

from mcp.server import MCPServer

COUNT_FILE = sys.argv[1] if len(sys.argv) > 1 else "calls.log"
PAUSE_S = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
server = MCPServer("slow-exports")
_lock = threading.Lock()


def _log(line: str) -> None:
    with _lock, open(COUNT_FILE, "a", encoding="utf-8") as calls:
        calls.write(line + "\n")


class Export(TypedDict):
    exported: int


@server.tool()
def long_export(rows: int) -> Export:
    """Export a report of the given size; it takes a while."""
    _log(f"started {rows}")
    time.sleep(PAUSE_S)
    _log(f"finished {rows}")
    return {"exported": rows}


if __name__ == "__main__":
    server.run()
