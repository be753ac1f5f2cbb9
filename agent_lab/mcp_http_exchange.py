"""The HTTP side of `agent_lab.mcp_http`: one POST in, checked and routed to its dispatcher.

`_Handler` checks each request in a fixed order before anything is dispatched: the path, the `Origin`
(DNS rebinding), the bearer token, the body's size and type, then the JSON; then it routes the message
to the stateless 2026-07-28 dispatcher or to its handshake-era session, and waits for the answer on the
request's `_Exchange`; how that answer reaches the connection (JSON or an event stream) is its base
class's, `agent_lab.mcp_http_answers._Answering`.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from typing import Any, Mapping

from .mcp import (
    INVALID_REQUEST,
    MODERN_VERSIONS,
    PARSE_ERROR,
    SERVER_BUSY,
    _encoded,
    _error,
    _Held,
    _is_response,
    _refuse_constant,
    _RepeatedKey,
    _unique_members,
    _valid_id,
)
from .mcp_http_answers import HEADER_MISMATCH, _Answering, _restore_id

__all__ = ["HEADER_MISMATCH"]

logger = logging.getLogger("agent_lab.mcp")

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
_META_VERSION = "io.modelcontextprotocol/protocolVersion"
_SINGLE_HEADERS = ("Content-Length", "Content-Type", SESSION_HEADER, VERSION_HEADER, "Mcp-Method", "Mcp-Name")


def _read_json(body: bytes) -> tuple[Any, str | None]:
    """A POST body as JSON, read as strictly as stdio lines are (no NaN, no repeated keys), or why not."""
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_refuse_constant,
                          object_pairs_hook=_unique_members), None
    except UnicodeDecodeError:
        return None, "Parse error: the body is not valid UTF-8"
    except _RepeatedKey:
        return None, _RepeatedKey.MESSAGE
    except RecursionError:
        return None, "Parse error: the message is nested too deeply to read"
    except ValueError:  # not JSON, NaN or Infinity, an integer of more digits than Python reads
        return None, "Parse error: the body is not valid JSON"


def _modern_request(message: Any) -> bool:
    """A request carrying the 2026-07-28 envelope (older clients never send its reserved key)."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and _META_VERSION in meta


def _header_mismatch(message: Mapping[str, Any], headers: Any) -> str | None:
    """2026-07-28: what routing header disagrees with the body (a proxy may have routed on it), or None."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or _META_VERSION not in meta:
        return None  # no envelope: the dispatcher says what is missing
    if headers.get(VERSION_HEADER) != meta[_META_VERSION]:
        return f"the {VERSION_HEADER} header does not match params._meta's protocol version"
    if headers.get("Mcp-Method") != message.get("method"):
        return "the Mcp-Method header does not match the request's method"
    if message.get("method") == "tools/call" and isinstance(params, dict) and isinstance(params.get("name"), str):
        if _decoded_header(headers.get("Mcp-Name")) != params["name"]:
            return "the Mcp-Name header does not match the tool's name"
    return None


def _param_mismatch(registry: Any, actor: Any, params: Any, headers: Any) -> str | None:
    """2026-07-28: a tool may mark input properties `x-mcp-header: NAME`, and a client mirrors each such
    argument in `Mcp-Param-NAME` so a proxy can route on it: each must match its argument (present
    together, equal), or a proxy and the tool would act on two different values."""
    from .mcp_client.toolheaders import parameter_header_map

    name = params.get("name") if isinstance(params, dict) else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if not isinstance(name, str) or (arguments is not None and not isinstance(arguments, dict)):
        return None  # the dispatcher refuses the request itself
    try:
        spec = registry.spec(name)
        if not actor.may(spec.required_permission):
            return None  # a hidden tool is answered like an unknown one, by the dispatcher
    except Exception:  # noqa: BLE001 - an unknown tool
        return None
    for path, token in parameter_header_map(spec.input_schema).items():
        header = f"Mcp-Param-{token}"
        sent = headers.get_all(header) or []
        value: Any = arguments or {}
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if len(sent) > 1:
            return f"the {header} header appears more than once"
        if isinstance(value, bool):
            rendered: str | None = "true" if value else "false"
        elif isinstance(value, (str, int)):
            rendered = str(value) if not isinstance(value, int) or abs(value) < 10 ** 30 else None
        else:
            rendered = None
        if rendered is None:
            if sent:
                return f"the {header} header has no argument to match"
            continue
        if not sent:
            return f"the {header} header is missing for its argument"
        if _decoded_header(sent[0]) != rendered:
            return f"the {header} header does not match its argument"
    return None


def _decoded_header(value: str | None) -> str | None:
    """A header value, unwrapped when it is `=?base64?...?=` (how a value a header cannot carry travels)."""
    import base64
    import binascii

    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


class _Handler(_Answering):
    """One connection; `app` (the McpHttpServer) holds the configuration, sessions and dispatchers."""

    server_version = "agent-lab-mcp"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the head and the body are two writes: no 40 ms wait between them
    server: Any

    def version_string(self) -> str:
        return self.server_version  # not the Python version

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.app.limits.socket_timeout_s)

    def handle_one_request(self) -> None:
        """The request's head and body must arrive within read_timeout_s (idle keep-alive included)."""
        self.app.watchdog.arm(self.connection, self.app.limits.read_timeout_s)
        try:
            super().handle_one_request()
        except (OSError, ValueError):  # the watchdog (or the client) closed the socket mid-request
            self.close_connection = True
        finally:
            self.app.watchdog.disarm(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        logger.debug("http: " + format, *args)  # the request line only; never a header (the token)

    def refuse(self, status: int, text: str, *, code: int = INVALID_REQUEST,
               headers: Mapping[str, str] | None = None) -> None:
        """A transport-level refusal: the status, and a JSON-RPC error without an id saying why."""
        self.reply(status, _error(None, code, text), headers)

    def admitted(self) -> bool:
        """Path, Host and Origin, the token, then no routing header twice; False once refused."""
        if urllib.parse.urlsplit(self.path).path != self.app.path:
            self.refuse(404, f"Not Found: the MCP endpoint is {self.app.path}")
            return False
        if not self.app.host_allowed(self.headers.get_all("Host") or []):
            self.refuse(403, "Forbidden: this Host is not the server's (DNS rebinding protection)")
            return False
        origins = self.headers.get_all("Origin") or []
        if len(origins) > 1 or not self.app.origin_allowed(origins[0] if origins else None):
            self.refuse(403, "Forbidden: this Origin may not use the server (DNS rebinding protection)")
            return False
        authorizations = self.headers.get_all("Authorization") or []
        if len(authorizations) > 1 or not self.app.token_matches(authorizations[0] if authorizations else None):
            self.refuse(401, "Unauthorized: a valid bearer token is required",
                        headers={"WWW-Authenticate": 'Bearer realm="agent-lab"'})
            return False
        for name in _SINGLE_HEADERS:  # a first-copy and a last-copy reader would disagree (a proxy and us)
            if len(self.headers.get_all(name) or []) > 1:
                self.close_connection = True
                self.refuse(400, f"Bad Request: the {name} header appears more than once")
                return False
        return True

    # -- methods ---------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.app.watchdog.disarm(self.connection)
        self.close_connection = True  # rare, and a body it may carry is never read
        if self.admitted():
            self.refuse(405, "Method Not Allowed: this server opens no GET event stream",
                        headers={"Allow": "POST, DELETE"})

    def do_DELETE(self) -> None:  # noqa: N802
        self.app.watchdog.disarm(self.connection)
        self.close_connection = True  # rare, and a body it may carry is never read
        if not self.admitted():
            return
        session_id = self.headers.get(SESSION_HEADER)
        if session_id is None:
            self.refuse(400, "Bad Request: DELETE ends a session; name it with Mcp-Session-Id")
        elif self.app.end_session(session_id):
            self.reply(204)
        else:
            self.refuse(404, "Not Found: no such session (it ended, or this server never issued it)")

    def do_PUT(self) -> None:  # noqa: N802
        self.app.watchdog.disarm(self.connection)
        self.close_connection = True
        if self.admitted():
            self.refuse(405, "Method Not Allowed", headers={"Allow": "POST, DELETE"})

    do_PATCH = do_PUT

    def do_POST(self) -> None:  # noqa: N802
        keep = self.close_connection
        self.close_connection = True  # a refusal leaves the body unread: the connection ends with it
        if not self.admitted():
            self.unread_body = True
            return
        self.close_connection = keep
        body = self.read_body()
        self.app.watchdog.disarm(self.connection)
        if body is None:
            return
        message, failure = _read_json(body)
        if failure is not None:
            self.refuse(400, failure, code=PARSE_ERROR)
            return
        if isinstance(message, list):
            self.refuse(400, "Invalid Request: JSON-RPC batches are not served over HTTP; send one message a POST")
            return
        if not isinstance(message, dict):
            self.refuse(400, "Invalid Request: a message must be a JSON object")
            return
        self.route(message, len(body))

    def read_body(self) -> bytes | None:
        self.unread_body = True  # until it is read
        if self.headers.get("Transfer-Encoding") is not None:
            self.close_connection = True
            self.refuse(411, "Length Required: send the body with a Content-Length")
            return None
        length_text = self.headers.get("Content-Length")
        # ASCII digits only: str.isdigit() says yes to "²", which int() refuses (and the connection was
        # dropped without an answer); a number too long to read is too large, whatever it says.
        if length_text is None or not length_text.isascii() or not length_text.isdigit():
            self.close_connection = True
            self.refuse(411, "Length Required: send the body with a Content-Length")
            return None
        length = int(length_text) if len(length_text) <= 18 else self.app.limits.max_body_bytes + 1
        if length > self.app.limits.max_body_bytes:
            self.close_connection = True
            self.refuse(413, f"Payload Too Large: a message is at most {self.app.limits.max_body_bytes} bytes")
            return None
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            self.close_connection = True
            self.refuse(415, "Unsupported Media Type: send Content-Type: application/json")
            return None
        try:
            body = self.rfile.read(length)
        except OSError:
            body = b""
        self.unread_body = False
        if len(body) != length:
            self.close_connection = True
            return None  # the client went away (or the watchdog closed a trickling one)
        return body

    # -- routing ---------------------------------------------------------------------------------

    def route(self, message: dict[str, Any], size: int) -> None:
        session_id = self.headers.get(SESSION_HEADER)
        version = self.headers.get(VERSION_HEADER)
        is_request = "method" in message and "id" in message
        if session_id is None and (version in MODERN_VERSIONS or message.get("method") == "server/discover"
                                   or _modern_request(message)):
            self.route_modern(message, size, is_request)
            return
        if session_id is None:
            if message.get("method") == "initialize" and is_request:
                self.open_session(message, size)
            else:
                self.refuse(400, "Bad Request: no Mcp-Session-Id; open a session with initialize first")
            return
        session = self.app.session(session_id)
        if session is None:
            self.refuse(404, "Not Found: no such session (it ended, or this server never issued it)")
            return
        negotiated = session.dispatch.session.protocol_version
        if version is not None and negotiated is not None and version != negotiated:
            self.refuse(400, f"Bad Request: {VERSION_HEADER} {version[:40]!r} is not this session's "
                        f"negotiated version {negotiated}")
            return
        if not is_request:
            self.accept(session.dispatch, message, size)
            return
        self.answer(session.dispatch, session.channel, message, size, modern=False)

    def route_modern(self, message: dict[str, Any], size: int, is_request: bool) -> None:
        if not is_request:
            if _is_response(message):
                self.refuse(400, "Invalid Request: 2026-07-28 clients answer no server requests over HTTP")
            else:  # no client notification acts on anything here (cancellation is closing the answer)
                self.reply(202)
            return
        mismatch = _header_mismatch(message, self.headers)
        if mismatch is None and message.get("method") == "tools/call":
            mismatch = _param_mismatch(self.app.registry, self.app.modern.actor, message.get("params"), self.headers)
        if mismatch is not None:
            request_id = message.get("id")
            self.reply(400, _error(request_id if isinstance(request_id, (str, int)) else None,
                                   HEADER_MISMATCH, f"Header mismatch: {mismatch}"))
            return
        self.answer(self.app.modern, self.app.modern_channel, message, size, modern=True)

    def open_session(self, message: dict[str, Any], size: int) -> None:
        session = self.app.new_session()
        if session is None:
            self.refuse(503, "Server busy: every session is in use; retry later", code=SERVER_BUSY,
                        headers={"Retry-After": "1"})
            return
        self.answer(session.dispatch, session.channel, message, size, modern=False, opening=session)

    def accept(self, dispatch: Any, message: dict[str, Any], size: int) -> None:
        """A notification, or the client's answer to the server's question: 202, no body."""
        dispatch.reading = _Held(size)
        answer = dispatch.handle_message(message, in_batch=False)
        if answer is not None:  # a malformed message the dispatcher answers with an error
            self.reply(400, answer)
        else:
            self.reply(202)

    def answer(self, dispatch: Any, channel: Any, message: dict[str, Any], size: int, *, modern: bool,
               opening: Any = None) -> None:
        """Dispatch one request and write its answer (with what the server sends it meanwhile)."""
        original = message["id"]
        if not _valid_id(original):
            if opening is not None:
                opening.dispatch.close()
            self.refuse(400, "Invalid Request: id must be a string or an integer")
            return
        if not self.app.in_flight.acquire(blocking=False):
            if opening is not None:
                opening.dispatch.close()
            self.refuse(503, "Server busy: too many requests in flight; retry later", code=SERVER_BUSY,
                        headers={"Retry-After": "1"})
            return
        self.holds_slot = True
        try:
            opened = channel.open(original, unique=not modern)
            if opened is None:
                self.reply(200, _error(original, INVALID_REQUEST,
                                       "Invalid Request: this id is already in use by a running request"))
                return
            internal, exchange = opened
            try:
                dispatch.reading = _Held(size)
                response = dispatch.handle_message(dict(message, id=internal), in_batch=False)
                headers: dict[str, str] = {}
                if opening is not None:
                    if response is not None and "result" in response:
                        self.app.register(opening)
                        headers[SESSION_HEADER] = opening.id
                    else:
                        opening.dispatch.close()
                if response is not None:
                    line = _restore_id(_encoded(response), internal, original)
                    channel.close(internal)  # before the answer: a client may reuse the id once it has it
                    self.let_go()
                    self.reply(self.status_of(line, modern), line, headers)
                    return
                self.stream(dispatch, exchange, internal, modern=modern)
            finally:
                channel.close(internal)
        finally:
            self.let_go()
