"""What the client's transports and session share: protocol constants, named limits, the errors it
raises, and a strict reader of one JSON-RPC message.

The server is untrusted, so everything it sends is read with limits (message size, nesting depth) and
refused when ambiguous (an object that repeats a key, NaN), and every error the client raises is one
line that names the server. Text the server controls (an error message, a line of its stderr) is
shortened and stripped of control characters before it is quoted, so it cannot forge lines in a log.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..mcp import (
    HANDSHAKE_VERSIONS,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MODERN_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TIMEOUT_S",
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSIONS",
    "McpConnectionError",
    "McpError",
    "McpProtocolError",
    "McpRemoteError",
    "McpTimeout",
    "decode_message",
    "quote_server_text",
]

# The 2026-07-28 per-request envelope (the same reserved keys `agent_lab.mcp` reads as a server).
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

METHOD_NOT_FOUND_CODE = METHOD_NOT_FOUND
INVALID_PARAMS_CODE = INVALID_PARAMS
UNSUPPORTED_VERSION_CODE = UNSUPPORTED_PROTOCOL_VERSION

# Named limits (each can be lowered or raised per client; see McpClient).
DEFAULT_TIMEOUT_S = 30.0  # one request, start to last byte of its answer
DEFAULT_CONNECT_TIMEOUT_S = 30.0  # spawning or reaching the server and agreeing on a protocol
DISCOVER_TIMEOUT_S = 5.0  # a handshake-era server may ignore server/discover: fall back after this
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # one message from the server; a longer one breaks the connection
MAX_STDERR_BYTES = 64 * 1024  # the tail of a stdio server's stderr kept for error messages
MAX_LIST_PAGES = 100  # tools/list pages followed before the listing counts as endless
MAX_TOOLS = 10_000  # tools one server may list
MAX_QUOTED_CHARS = 200  # server text quoted in one of our error messages
MAX_SERVER_REQUEST_REPLIES = 8  # replies to the server's own requests (ping, ...) not yet written, at once
MAX_IGNORED_LINES = 1_000  # stdout lines that are not JSON-RPC before a stdio server counts as broken


class McpError(Exception):
    """Anything that went wrong talking to an MCP server: one line, naming the server.

    `server` is how the error names it (its address); `sent` is False only when the request certainly
    never left this process, so a tool call that failed that way had no effect anywhere."""

    def __init__(self, server: str, message: str, *, sent: bool = True) -> None:
        self.server = server
        self.sent = sent
        self.detail = message
        super().__init__(f"mcp server {server}: {message}")

    def hide(self, mask: Any) -> McpError:
        """This error with the client's own secrets (a `SecretMask`) masked in its message, in place, so
        that whoever catches it, wherever it was raised, never quotes them; returns it."""
        self.detail = mask.text(self.detail)
        self.args = (f"mcp server {self.server}: {self.detail}",)
        return self


class McpConnectionError(McpError):
    """The server could not be started or reached, or went away (exited, closed the connection)."""


class McpTimeout(McpError):
    """The server did not answer within the time allowed (the request was cancelled)."""


class McpProtocolError(McpError):
    """The server broke the protocol: a message that is not JSON-RPC, a result of the wrong shape, a
    protocol version it was not offered, a message over the size limit."""


class McpRemoteError(McpError):
    """The server answered a request with a JSON-RPC error (`code`, and its message, shortened)."""

    def __init__(self, server: str, method: str, code: Any, message: Any, data: Any = None, *,
                 mask: Any = None) -> None:
        self.code = code if isinstance(code, int) and not isinstance(code, bool) else None
        self.data = data
        text = message if isinstance(message, str) else ""
        # The whole message, the client's secrets masked: a caller that knows more secrets (a call's
        # redacted arguments) masks them in it before cutting it, as this cut does for the client's.
        self.remote_text = mask.text(text) if mask is not None else text
        self.remote_message = quote_server_text(self.remote_text)  # masked, then cut
        super().__init__(server, f"{method} answered error {self.code}: {self.remote_message or '(no message)'}")

    def hide(self, mask: Any) -> McpError:
        self.remote_text = mask.text(self.remote_text)
        self.remote_message = mask.text(self.remote_message)
        return super().hide(mask)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")


def quote_server_text(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """Text the server controls, fit to quote in one line: control and bidirectional characters become
    spaces, whitespace is collapsed, and it is cut at `limit` characters (marked with an ellipsis)."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    flat = flat.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates in our messages
    return flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"


class _RepeatedKey(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _RepeatedKey("an object repeats a key")
    return members


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_message(data: bytes) -> Any:
    """One JSON value from the server's bytes; ValueError with a short reason when it is not one
    (not UTF-8, not JSON, NaN or Infinity, an object repeating a key, nested too deeply to read)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("a message that is not UTF-8") from None
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant)
    except _RepeatedKey:
        raise ValueError("a JSON object that repeats a key") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    except ValueError:
        raise ValueError("a message that is not JSON") from None


def encode_message(message: Any) -> bytes:
    """One compact JSON line (ASCII only, so the frame can never contain a raw line separator)."""
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")


def valid_id(value: Any) -> bool:
    """JSON-RPC ids in MCP: strings or integers, never null or a bool."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
