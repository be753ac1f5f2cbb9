"""A Model Context Protocol client, standard library only: reach a foreign server and gate its tools.

    from agent_lab.mcp_client import connect

    with connect("npx -y @modelcontextprotocol/server-memory") as server:
        tools = server.list_tools()
        result = server.call_tool("read_graph", {})

and its tools gated by a Registry under a policy you write (`import_tools`, `agent_lab.mcp_client.importing`):

    with connect(...) as server, Registry() as registry:
        import_tools(server, policy="memory-policy.toml", lock="agent-lab.lock.json").register(registry)

The client speaks 2026-07-28 (stateless: `server/discover`, the version in every request's `_meta`) and
the handshake era (2025-11-25, 2025-06-18, 2025-03-26), negotiating down, over stdio (a command line)
or Streamable HTTP (an http(s):// URL). The server is untrusted: every request has a deadline, every
message a size limit, and whatever the server does wrong is an `McpError` of one line naming it.
"""

from __future__ import annotations

from .address import ServerAddress, parse_server
from .importing import ImportedTool, LockSource, ServerImport, ServerRegistry, SkippedTool, import_tools, load_lock
from .session import McpClient, connect
from .tool_policy import (
    STRICTEST_DEFAULTS,
    TEXT_CONTENT_SCHEMA,
    UNREVIEWED_PERMISSION,
    PolicyError,
    ToolPolicy,
    load_policy,
)
from .wire import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TIMEOUT_S,
    McpConnectionError,
    McpError,
    McpProtocolError,
    McpRemoteError,
    McpTimeout,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TIMEOUT_S",
    "STRICTEST_DEFAULTS",
    "TEXT_CONTENT_SCHEMA",
    "UNREVIEWED_PERMISSION",
    "ImportedTool",
    "LockSource",
    "McpClient",
    "McpConnectionError",
    "McpError",
    "McpProtocolError",
    "McpRemoteError",
    "McpTimeout",
    "PolicyError",
    "ServerAddress",
    "ServerImport",
    "ServerRegistry",
    "SkippedTool",
    "ToolPolicy",
    "connect",
    "import_tools",
    "load_lock",
    "load_policy",
    "parse_server",
]
