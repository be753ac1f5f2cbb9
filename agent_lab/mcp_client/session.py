"""The MCP session: negotiate a protocol revision, then list and call tools, each request under a deadline.

Negotiation follows the reference clients: `server/discover` at 2026-07-28 first (the stateless revision:
no handshake, the version and capabilities travel in every request's `_meta`); anything that is not
positive evidence of a 2026-07-28 server (an error, an HTTP 4xx, no answer within
`DISCOVER_TIMEOUT_S`) falls back to the `initialize` handshake, offering 2025-11-25 and accepting
2025-06-18 or 2025-03-26 in return. A server that answers with a version it was not offered, or that
only speaks revisions this client does not, is refused with a one-line error.

Every request has a deadline; when it passes (or the caller's `cancel_event` is set) the request is
cancelled the way its transport and era say (`notifications/cancelled` on stdio and in the handshake
era, a closed connection over HTTP) and `McpTimeout` is raised. An answer that comes later is dropped.
A transport that breaks fails every pending request at once with the reason (the server exited, with
the end of its stderr; it sent a message over the size limit; ...). Nothing here raises anything but
`McpError` subclasses for what the server does.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any, Callable, Mapping, Sequence

from .. import __version__
from ..redaction import SecretMask
from .address import ServerAddress, parse_server
from .pending import Pending, PendingRequests, restated
from .streamable_http import HttpStatusError, HttpTransport
from .stdio import CLOSE_GRACE_S, STUCK_GRACE_S, StdioTransport
from .toolheaders import param_headers, parameter_header_map
from .wire import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TIMEOUT_S,
    DISCOVER_TIMEOUT_S,
    HANDSHAKE_VERSIONS,
    MAX_LIST_PAGES,
    MAX_SERVER_REQUEST_REPLIES,
    MAX_TOOLS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    METHOD_NOT_FOUND_CODE,
    MODERN_VERSIONS,
    UNSUPPORTED_VERSION_CODE,
    McpConnectionError,
    McpError,
    McpProtocolError,
    McpRemoteError,
    McpTimeout,
    quote_server_text,
    valid_id,
)

__all__ = ["McpClient", "connect"]

logger = logging.getLogger("agent_lab.mcp_client")

CANCEL_POLL_S = 0.05  # how often a waiting request looks at its caller's cancel_event


class McpClient:
    """A connection to one MCP server. Use as a context manager, or call `connect()` and `close()`.

    `server` is a command line or an http(s):// URL (see `agent_lab.mcp_client.address`). `timeout_s`
    bounds each request, `connect_timeout_s` starting the server and negotiating, `max_message_bytes`
    each message it sends. `pass_env` names more variables of this process a stdio server may see.
    `versions` restricts the revisions offered (default: all four, newest first)."""

    def __init__(self, server: str | ServerAddress, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, pass_env: Sequence[str] = (),
                 cwd: str | None = None, versions: Sequence[str] | None = None) -> None:
        self.address = server if isinstance(server, ServerAddress) else parse_server(server)
        for name, value in (("timeout_s", timeout_s), ("connect_timeout_s", connect_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"McpClient {name} must be a positive number of seconds")
        if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int) or max_message_bytes < 1024:
            raise ValueError("McpClient max_message_bytes must be an integer of at least 1024")
        offered = tuple(versions) if versions is not None else MODERN_VERSIONS + HANDSHAKE_VERSIONS
        unknown = [v for v in offered if v not in MODERN_VERSIONS + HANDSHAKE_VERSIONS]
        if unknown or not offered:
            raise ValueError(f"McpClient versions must be among {', '.join(MODERN_VERSIONS + HANDSHAKE_VERSIONS)}")
        self.versions = offered
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.label = self.address.label
        self.transport: StdioTransport | HttpTransport
        if self.address.transport == "stdio":
            self.transport = StdioTransport(self.address, label=self.label, max_message_bytes=max_message_bytes,
                                            pass_env=pass_env, cwd=cwd)
        else:
            self.transport = HttpTransport(self.address, label=self.label, max_message_bytes=max_message_bytes)
        self.era: str | None = None  # "modern" (2026-07-28) or "handshake"
        self.protocol_version: str | None = None
        self.server_info: dict[str, str] = {}
        self.capabilities: dict[str, Any] = {}
        self.tools_changed = False  # set by notifications/tools/list_changed
        self._requests = PendingRequests(self.label)
        self._header_maps: dict[str, dict[tuple[str, ...], str]] = {}
        self._opened = False
        self._when_dropped: weakref.finalize | None = None  # closes the transport of a client dropped open
        self._stuck = False  # a request went unanswered: closing gives the server no grace
        self._discover_unanswered = False
        # A server's requests (ping, ...) are answered with at most this many replies not yet written: over
        # HTTP each is a POST on a thread of its own, over stdio a line queued for a server that may never
        # read its stdin; a server sending thousands would hold as many threads, or as much memory, here.
        self._replies = threading.BoundedSemaphore(MAX_SERVER_REQUEST_REPLIES)

    def __repr__(self) -> str:
        return f"<McpClient {self.label} {self.protocol_version or 'not connected'}>"

    # -- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> McpClient:
        if not self._opened:
            self.connect()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def connect(self) -> McpClient:
        """Start or reach the server and agree on a protocol revision (McpError otherwise)."""
        try:
            return self._connect()
        except McpError as error:
            error.hide(self.secret_mask)
            raise

    def _connect(self) -> McpClient:
        if self._opened:
            return self
        # The transport's threads get weak callbacks: they must not keep a client nobody holds alive,
        # whose finalizer then closes the transport (a stdio server would otherwise run on, its reader
        # threads with it, for the life of the process: its stdin is never closed).
        deliver, lost, fail = _weakly(self._deliver), _weakly(self._lost), _weakly(self._fail)
        if isinstance(self.transport, HttpTransport):
            self.transport.open(deliver, lost, fail)
        else:
            self.transport.open(deliver, lost)
        self._opened = True
        self._when_dropped = weakref.finalize(self, _close_dropped, self.transport)
        self._when_dropped.atexit = False  # at exit the server sees its stdin close with this process
        try:
            self._negotiate(time.monotonic() + self.connect_timeout_s)
        except McpTimeout as timeout:
            self.close()
            what = "it answered neither server/discover nor initialize" + _garbage_note(self.transport) \
                if self._discover_unanswered else timeout.detail
            raise McpTimeout(self.label, f"did not agree on a protocol within {self.connect_timeout_s:g} s ({what})",
                             sent=timeout.sent) from None
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Fail what is pending, end the session and stop the server (stdio). Safe to call twice."""
        stuck = self._stuck or self._requests.broken is not None
        # Not sent=False: a request already on its way may reach the server (a stdio server reads its pipe
        # in the grace below, an HTTP exchange has posted), so each waiting one says what its own handle
        # does (_await withdraws one not yet on its way); a request opened after this is refused unsent.
        self._lost(McpConnectionError(self.label, "the client closed the connection"))
        if self._opened:
            self._opened = False
            if self._when_dropped is not None:
                self._when_dropped.detach()
            self.transport.close(grace_s=STUCK_GRACE_S if stuck else CLOSE_GRACE_S)

    @property
    def secret_mask(self) -> SecretMask:
        """The client's own secrets (the server's credentials: see `address.credential_values`, and the
        bearer token), which no error of the client and no server text it hands on may quote."""
        return self.transport.mask

    @property
    def name(self) -> str:
        """The server's own name (serverInfo.name, untrusted, shortened), else its address."""
        return quote_server_text(self.server_info.get("name") or "", 64) or self.label

    # -- negotiation -----------------------------------------------------------------------------

    def _negotiate(self, deadline: float) -> None:
        modern = [v for v in self.versions if v in MODERN_VERSIONS]
        handshake = [v for v in self.versions if v in HANDSHAKE_VERSIONS]
        if modern and self._discover(modern[0], deadline, fallback=bool(handshake)):
            return
        if not handshake:
            raise McpProtocolError(self.label, f"does not speak {modern[0]}, the only revision offered")
        try:
            result = self.request("initialize", {"protocolVersion": handshake[0], "capabilities": {},
                                                 "clientInfo": {"name": "agent-lab", "version": __version__}},
                                  deadline=deadline)
        except McpRemoteError as error:
            supported = _supported(error.data)
            if error.code == UNSUPPORTED_VERSION_CODE and modern and modern[0] in supported:
                if self._discover(modern[0], deadline, fallback=False):  # a slow discover locked it modern
                    return
            raise
        version = result.get("protocolVersion")
        if version not in handshake:
            shown = quote_server_text(version, 40) if isinstance(version, str) else type(version).__name__
            raise McpProtocolError(self.label, f"answered initialize with protocol version {shown!r}, which it was "
                                   f"not offered (this client speaks {', '.join(handshake)})")
        self.era, self.protocol_version = "handshake", version
        self._take_server_info(result.get("serverInfo"), result.get("capabilities"))
        if isinstance(self.transport, HttpTransport):
            self.transport.protocol_version = version
        self.notify("notifications/initialized", {}, wait_s=max(0.0, deadline - time.monotonic()))

    def _discover(self, version: str, deadline: float, *, fallback: bool) -> bool:
        """True when the server speaks `version` (2026-07-28); False to fall back to the handshake."""
        now = time.monotonic()
        probe_deadline = min(deadline, now + DISCOVER_TIMEOUT_S, now + (deadline - now) / 2) if fallback else deadline
        self.era, self.protocol_version = "modern", version
        if isinstance(self.transport, HttpTransport):
            self.transport.protocol_version = version
        try:
            result = self.request("server/discover", {}, deadline=probe_deadline)
        except (McpRemoteError, HttpStatusError, McpTimeout) as error:
            self.era = self.protocol_version = None
            if isinstance(self.transport, HttpTransport):
                self.transport.protocol_version = None
            supported = _supported(getattr(error, "data", None))
            if isinstance(error, McpRemoteError) and error.code == UNSUPPORTED_VERSION_CODE and supported \
                    and not any(v in HANDSHAKE_VERSIONS for v in supported):
                raise McpProtocolError(self.label, f"speaks only {', '.join(supported[:5])}; this client speaks "
                                       f"{', '.join(self.versions)}") from None
            if not fallback:
                raise
            if isinstance(error, McpTimeout):
                self._discover_unanswered = True
            return False
        offered = result.get("supportedVersions")
        versions = [v for v in offered if isinstance(v, str)] if isinstance(offered, list) else []
        if version not in versions:
            self.era = self.protocol_version = None
            if isinstance(self.transport, HttpTransport):
                self.transport.protocol_version = None
            return False
        meta: Any = result.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        self._take_server_info(result.get("serverInfo") or meta.get(META_SERVER_INFO), result.get("capabilities"))
        return True

    def _take_server_info(self, info: Any, capabilities: Any) -> None:
        if isinstance(info, dict):
            self.server_info = {key: info[key] for key in ("name", "version", "title") if isinstance(info.get(key), str)}
        if isinstance(capabilities, dict):
            self.capabilities = capabilities

    # -- requests --------------------------------------------------------------------------------

    def _envelope(self, params: Mapping[str, Any]) -> dict[str, Any]:
        shaped = dict(params)
        if self.era == "modern":
            meta = dict(shaped.get("_meta") or {})
            meta[META_PROTOCOL_VERSION] = self.protocol_version
            meta[META_CLIENT_CAPABILITIES] = {}
            meta[META_CLIENT_INFO] = {"name": "agent-lab", "version": __version__}
            shaped["_meta"] = meta
        return shaped

    def _http_headers(self, method: str, params: Mapping[str, Any]) -> dict[str, str]:
        if self.era != "modern":
            return {}
        headers = {"Mcp-Method": method}
        if method == "tools/call" and isinstance(params.get("name"), str):
            headers["Mcp-Name"] = params["name"]
            arguments = params.get("arguments")
            header_map = self._header_maps.get(params["name"])
            if header_map and isinstance(arguments, Mapping):
                headers.update(param_headers(header_map, arguments))
        return headers

    def request(self, method: str, params: Mapping[str, Any], *, timeout_s: float | None = None,
                deadline: float | None = None, cancel_event: threading.Event | None = None) -> dict[str, Any]:
        """Send one request and wait for its result (a dict); McpError for anything but a result, its
        message never quoting the client's own secrets (`secret_mask`), whatever the server echoed."""
        try:
            return self._request(method, params, timeout_s=timeout_s, deadline=deadline, cancel_event=cancel_event)
        except McpError as error:
            error.hide(self.secret_mask)
            raise

    def _request(self, method: str, params: Mapping[str, Any], *, timeout_s: float | None,
                 deadline: float | None, cancel_event: threading.Event | None) -> dict[str, Any]:
        if deadline is None:
            deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        request_id, pending = self._requests.open()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": self._envelope(params)}
        try:
            if isinstance(self.transport, HttpTransport):
                pending.handle = self.transport.send(message, deadline=deadline,
                                                     headers=self._http_headers(method, params))
            else:
                pending.handle = self.transport.send(message)
        except McpError:
            self._requests.close(request_id)
            raise
        return self._await(method, request_id, pending, deadline, cancel_event)

    def _await(self, method: str, request_id: int, pending: Pending, deadline: float,
               cancel_event: threading.Event | None) -> dict[str, Any]:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (cancel_event is not None and cancel_event.is_set()):
                break
            if pending.done.wait(min(remaining, CANCEL_POLL_S) if cancel_event is not None else remaining):
                break
        self._requests.close(request_id)
        timed_out = isinstance(pending.error, McpTimeout) and not isinstance(self._requests.broken, McpTimeout)
        if not pending.done.is_set() or timed_out:  # (the HTTP socket's own timeout may come first)
            self._stuck = True
            self._cancel(request_id, pending)
            note = _garbage_note(self.transport)
            why = "was cancelled by the caller" if cancel_event is not None and cancel_event.is_set() else \
                "did not answer in time"
            raise McpTimeout(self.label, f"{why}: {method} (request {request_id}){note}", sent=pending.sent)
        if pending.error is not None:
            error = pending.error
            if isinstance(error, McpRemoteError):
                raise error
            # Withdrawn before `sent` is read, as at a timeout: one still queued or connecting when the
            # connection was lost or closed is then never sent later, so its "not sent" holds for good.
            self.transport.abort(pending.handle)
            raise restated(error, f"{error.detail} (during {method})", sent=pending.sent and error.sent)
        return self._result(method, pending.response or {})

    def _result(self, method: str, response: dict[str, Any]) -> dict[str, Any]:
        if "error" in response:
            error = response["error"]
            if not isinstance(error, dict):
                raise McpProtocolError(self.label, f"answered {method} with an error that is not an object")
            raise McpRemoteError(self.label, method, error.get("code"), error.get("message"), error.get("data"),
                                 mask=self.secret_mask)
        result = response.get("result")
        if not isinstance(result, dict):
            raise McpProtocolError(self.label, f"answered {method} with a result that is not an object")
        if self.era == "modern":
            kind = result.get("resultType", "complete")
            if kind == "input_required":
                raise McpProtocolError(self.label, f"asked for input to {method} (resultType input_required); this "
                                       "client has no person or model to answer it")
            if kind != "complete":
                raise McpProtocolError(self.label, f"answered {method} with an unknown resultType "
                                       f"{quote_server_text(str(kind), 40)!r}")
        return result

    def notify(self, method: str, params: Mapping[str, Any], *, wait_s: float = 0.0) -> None:
        """Send a notification (no answer); failures are logged, never raised. Over HTTP, `wait_s` is how
        long to wait for the server to have taken it (so the next request cannot overtake it)."""
        message = {"jsonrpc": "2.0", "method": method, "params": self._envelope(params)}
        try:
            if isinstance(self.transport, HttpTransport):
                exchange = self.transport.send(message, deadline=time.monotonic() + self.timeout_s,
                                               headers=self._http_headers(method, params))
                if wait_s > 0:
                    exchange.finished.wait(wait_s)
            else:
                self.transport.send(message)
        except McpError as error:
            logger.debug("mcp client: could not send %s: %s", method, error)

    def _cancel(self, request_id: int, pending: Pending) -> None:
        self.transport.abort(pending.handle)  # one not yet on its way is withdrawn: never sent, nothing to cancel
        if pending.sent and (self.transport.cancels_by_notification or self.era == "handshake"):
            self.notify("notifications/cancelled", {"requestId": request_id, "reason": "timed out or cancelled"})

    # -- what the transport hands over -----------------------------------------------------------

    def _deliver(self, message: Any) -> None:
        self._requests.deliver(message, self._server_message)

    def _server_message(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if "id" not in message:
            if method == "notifications/tools/list_changed":
                self.tools_changed = True
            return
        if not valid_id(message.get("id")):
            return
        if method == "ping":
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        else:  # this client offers no capabilities: no sampling, elicitation or roots to answer with
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "error": {"code": METHOD_NOT_FOUND_CODE, "message": "Method not found"}}
        if not self._replies.acquire(blocking=False):  # MAX_SERVER_REQUEST_REPLIES still in flight
            logger.debug("mcp client: %s sent requests faster than it takes replies; one left unanswered", self.label)
            return
        try:
            if isinstance(self.transport, HttpTransport):
                self.transport.send(reply, deadline=time.monotonic() + self.timeout_s, on_finished=self._replies.release)
            else:
                self.transport.send(reply, on_written=self._replies.release)
        except BaseException as error:
            self._replies.release()
            if not isinstance(error, McpError):
                raise

    def _fail(self, request_id: Any, error: McpError) -> None:
        self._requests.fail(request_id, error)

    def _lost(self, error: McpError) -> None:
        self._requests.lose(error)

    # -- tools -----------------------------------------------------------------------------------

    def list_tools(self, *, timeout_s: float | None = None) -> list[dict[str, Any]]:
        """Every tool the server lists, following `nextCursor` (at most MAX_LIST_PAGES pages and
        MAX_TOOLS tools, all within `timeout_s`). Each is the server's own JSON object, unchecked but
        for being an object; `agent_lab.mcp_client.importing` checks the rest."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        tools: list[dict[str, Any]] = []
        cursors: set[str] = set()
        cursor: str | None = None
        self.tools_changed = False  # a change announced while this listing runs is listed again next time
        for _ in range(MAX_LIST_PAGES):
            try:
                page = self.request("tools/list", {"cursor": cursor} if cursor is not None else {}, deadline=deadline)
            except McpRemoteError as error:
                if error.code == METHOD_NOT_FOUND_CODE and not tools:
                    return []  # a server with no tools capability
                raise
            listed = page.get("tools")
            if not isinstance(listed, list) or not all(isinstance(tool, dict) for tool in listed):
                raise McpProtocolError(self.label, "answered tools/list without a list of tool objects")
            tools += listed
            if len(tools) > MAX_TOOLS:
                raise McpProtocolError(self.label, f"lists more than {MAX_TOOLS} tools")
            following = page.get("nextCursor")
            if following is None:
                self._header_maps = {tool["name"]: parameter_header_map(tool.get("inputSchema"))
                                     for tool in tools if isinstance(tool.get("name"), str)}
                return tools
            if not isinstance(following, str) or following in cursors:
                raise McpProtocolError(self.label, "answered tools/list with a nextCursor that is not a new string "
                                       "(the listing would never end)")
            cursors.add(following)
            cursor = following
        raise McpProtocolError(self.label, f"lists tools over more than {MAX_LIST_PAGES} pages")

    def call_tool(self, name: str, arguments: Mapping[str, Any], *, timeout_s: float | None = None,
                  deadline: float | None = None, cancel_event: threading.Event | None = None) -> dict[str, Any]:
        """tools/call: the server's CallToolResult, checked for shape (content a list of objects,
        structuredContent an object, isError a boolean)."""
        result = self.request("tools/call", {"name": name, "arguments": dict(arguments)}, timeout_s=timeout_s,
                              deadline=deadline, cancel_event=cancel_event)
        content = result.get("content", [])
        if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
            raise McpProtocolError(self.label, f"answered tools/call of {name!r} with content that is not a list of "
                                   "objects")
        if "structuredContent" in result and not isinstance(result["structuredContent"], (dict, type(None))):
            raise McpProtocolError(self.label, f"answered tools/call of {name!r} with structuredContent that is not "
                                   "an object")
        if not isinstance(result.get("isError", False), bool):
            raise McpProtocolError(self.label, f"answered tools/call of {name!r} with isError that is not a boolean")
        return result


def _supported(data: Any) -> list[str]:
    supported = data.get("supported") if isinstance(data, dict) else None
    return [v for v in supported if isinstance(v, str)][:20] if isinstance(supported, list) else []


def connect(server: str | ServerAddress, **options: Any) -> McpClient:
    """A connected `McpClient` (see its options); use it as a context manager to close it."""
    return McpClient(server, **options).connect()


def _weakly(method: Callable[..., None]) -> Callable[..., None]:
    """`method` of a client as a callback that does not keep the client alive (nothing once it is gone)."""
    reference = weakref.WeakMethod(method)

    def call(*arguments: Any) -> None:
        bound = reference()
        if bound is not None:
            bound(*arguments)

    return call


def _close_dropped(transport: StdioTransport | HttpTransport) -> None:
    """Close the transport of a client dropped without `close()`, on a thread of its own: closing waits
    for a stdio server to exit, and a finalizer runs wherever the client's last reference went."""
    threading.Thread(target=transport.close, name="mcp-client-dropped", daemon=True).start()


def _garbage_note(transport: object) -> str:
    """What a stdio server wrote that is not JSON-RPC, for the error that says it answered nothing."""
    if isinstance(transport, StdioTransport) and transport.ignored_lines:
        return f" (it wrote {transport.ignored_lines} line(s) that are not JSON-RPC; first: {transport.first_ignored})"
    return ""
