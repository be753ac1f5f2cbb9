"""The messages an MCP server reads and writes, apart from any transport or session.

JSON-RPC 2.0 envelopes (a request checked, a result or error built, an answer encoded), the error
codes, and the reserved `_meta` keys of the 2026-07-28 per-request envelope. They live apart from the
dispatcher (`agent_lab.mcp`) because every part of the server shares them: the stdio reader, the
tools/call path (`agent_lab.mcp_calls`), the gateway and the Streamable HTTP transport. Everything
here is re-exported by `agent_lab.mcp`, where other modules and tests import it from.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Mapping, Union

logger = logging.getLogger("agent_lab.mcp")  # the server's one logger, whichever module logs

# JSON-RPC 2.0 error codes, and the one MCP adds for the stateless revision.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_BUSY = -32000  # JSON-RPC's range for server-defined errors: the backlog is full (see MAX_HELD_BYTES)
UNSUPPORTED_PROTOCOL_VERSION = -32022

# Reserved `_meta` keys of the 2026-07-28 per-request envelope.
_META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
_META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
_META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

_RequestId = Union[str, int]


class _ProtocolError(Exception):
    """A JSON-RPC error response for the request being handled. Messages are safe to show the client."""

    def __init__(self, code: int, message: str, data: Any = None, *, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id if _valid_id(request_id) else None


class _UnanswerableNotification(Exception):
    """A notification whose params are malformed: JSON-RPC forbids answering a notification, even with
    an error, so it is logged and dropped."""


@dataclass(frozen=True, kw_only=True)
class _Request:
    """One well-formed JSON-RPC request or notification (id is None for a notification)."""

    method: str
    params: Mapping[str, Any]
    id: _RequestId | None = None
    is_notification: bool = False



def _encoded(message: Mapping[str, Any]) -> str:
    """One answer as compact JSON, without its newline (ensure_ascii: it can never contain a raw line
    separator). One that is not JSON becomes an internal error for its id: the client still gets an answer."""
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        logger.error("a response could not be encoded as JSON")
        request_id = message.get("id") if isinstance(message, dict) else None
        return json.dumps(_error(request_id if _valid_id(request_id) else None, INTERNAL_ERROR, "Internal error"),
                          separators=(",", ":"))


def _result(request_id: _RequestId | None, result: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: _RequestId | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _valid_id(value: Any) -> bool:
    """MCP request ids are strings or integers (never null, never a bool)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _parse_request(message: Any) -> _Request:
    """Checks the JSON-RPC 2.0 envelope of one message; raises _ProtocolError for a malformed one."""
    if not isinstance(message, dict):
        raise _ProtocolError(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    has_id = "id" in message
    if has_id and not _valid_id(message["id"]):
        raise _ProtocolError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    request_id = message["id"] if has_id else None
    if message.get("jsonrpc") != "2.0":
        raise _ProtocolError(INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"', request_id=request_id)
    method = message.get("method")
    if not isinstance(method, str):
        raise _ProtocolError(INVALID_REQUEST, "Invalid Request: method must be a string", request_id=request_id)
    params = message.get("params", {})
    if not isinstance(params, dict):
        if not has_id:
            raise _UnanswerableNotification(method)
        raise _ProtocolError(INVALID_PARAMS, "Invalid params: params must be a JSON object", request_id=request_id)
    return _Request(method=method, params=params, id=request_id, is_notification=not has_id)


def _is_response(message: Any) -> bool:
    """A client's response to a server request (we send none, so it is logged and dropped)."""
    return isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)
