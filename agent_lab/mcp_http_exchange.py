"""The HTTP side of `agent_lab.mcp_http`: one POST in, its answer out (JSON, or an event stream).

`_Handler` checks each request in a fixed order before anything is dispatched: the path, the `Origin`
(DNS rebinding), the bearer token, the body's size and type, then the JSON; then it routes the message
to the stateless 2026-07-28 dispatcher or to its handshake-era session, and waits for the answer on the
request's `_Exchange`, writing whatever the dispatcher sends that request meanwhile (a gateway's
elicitation) as Server-Sent Events. `_Channel` is the dispatcher's writer: it routes each line it is
given to the exchange waiting for it.
"""

from __future__ import annotations

import itertools
import json
import logging
import queue
import re
import select
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Mapping

from .mcp import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MODERN_VERSIONS,
    PARSE_ERROR,
    SERVER_BUSY,
    UNSUPPORTED_PROTOCOL_VERSION,
    _encoded,
    _error,
    _Held,
    _is_response,
    _refuse_constant,
    _RepeatedKey,
    _unique_members,
    _valid_id,
)

if TYPE_CHECKING:
    from .mcp_http import McpHttpServer

__all__ = ["HEADER_MISMATCH"]

logger = logging.getLogger("agent_lab.mcp")

HEADER_MISMATCH = -32020  # 2026-07-28: a routing header that disagrees with the body
REQUEST_CANCELLED = -32800  # the answer to a request the client cancelled while its POST was still open
POLL_S = 0.25  # how often a waiting exchange looks for a vanished client
DRAIN_BYTES = 1 << 20  # at most this much a waiting exchange reads and drops from its client a look
LINGER_S = 1.0  # how long a refused request's unread body is drained after the answer
LINGER_BYTES = 1024 * 1024  # and how much of it
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
_META_VERSION = "io.modelcontextprotocol/protocolVersion"
_SINGLE_HEADERS = ("Content-Length", "Content-Type", SESSION_HEADER, VERSION_HEADER, "Mcp-Method", "Mcp-Name")
_INTERNAL_ID = re.compile(r'^\{"jsonrpc":"2\.0","id":"(h-[0-9]+)"')
_ERROR_CODE = re.compile(r'^\{"jsonrpc":"2\.0","id":(?:"(?:[^"\\]|\\.)*"|-?[0-9]+|null),"error":\{"code":(-?[0-9]+)')
# 2026-07-28: the HTTP status of a JSON-RPC error answered as JSON (others: 200).
_MODERN_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
                  UNSUPPORTED_PROTOCOL_VERSION: 400, METHOD_NOT_FOUND: 404}
_ENDED = object()  # the request was cancelled: it will get no answer from the dispatcher


class _Exchange:
    """One POSTed request waiting for what the dispatcher sends it: encoded lines, then its answer."""

    def __init__(self, original_id: Any) -> None:
        self.original_id = original_id
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()


class _Channel:
    """The dispatcher's writer over HTTP: each line goes to the exchange it answers (by the internal id
    each request was given), or, sent by a call while it runs (an elicitation), to that call's exchange."""

    broken = False

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.exchanges: dict[str, _Exchange] = {}
        self.internal_of: dict[Any, str] = {}  # a client id in flight -> its internal id (a session's)
        self.counter = itertools.count(1)
        self.local = threading.local()

    def open(self, original_id: Any, *, unique: bool) -> tuple[str, _Exchange] | None:
        """A fresh internal id and exchange; None when `unique` and that client id is in flight."""
        with self.lock:
            key = (type(original_id).__name__, original_id)
            if unique and key in self.internal_of:
                return None
            internal = f"h-{next(self.counter)}"
            exchange = _Exchange(original_id)
            self.exchanges[internal] = exchange
            if unique:
                self.internal_of[key] = internal
            return internal, exchange

    def close(self, internal: str) -> None:
        with self.lock:
            exchange = self.exchanges.pop(internal, None)
            if exchange is not None:
                self.internal_of.pop((type(exchange.original_id).__name__, exchange.original_id), None)

    def internal_for(self, original_id: Any) -> str | None:
        with self.lock:
            return self.internal_of.get((type(original_id).__name__, original_id))

    def end(self, internal: str) -> None:
        with self.lock:
            exchange = self.exchanges.get(internal)
        if exchange is not None:
            exchange.items.put(_ENDED)

    def busy(self) -> bool:
        with self.lock:
            return bool(self.exchanges)

    # the _LineWriter interface the dispatcher writes through
    def send(self, message: Mapping[str, Any]) -> None:
        self.send_line(_encoded(message))

    def send_batch(self, answers: list[str]) -> None:  # batches are refused over HTTP; never reached
        logger.warning("dropped a batch answer: batches are not served over HTTP")

    def send_line(self, line: str) -> None:
        line = line.rstrip("\n")
        match = _INTERNAL_ID.match(line)
        with self.lock:
            target = self.exchanges.get(match.group(1)) if match else None
            if target is None:
                target = self.exchanges.get(getattr(self.local, "request_id", None) or "")
        if target is None:
            logger.info("dropped a message for a request whose client is gone")
            return
        target.items.put(line)



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


def _restore_id(line: str, internal: str, original: Any) -> str:
    """An answer line with the client's own id in place of the internal one."""
    prefix = f'{{"jsonrpc":"2.0","id":"{internal}"'
    if line.startswith(prefix):
        return '{"jsonrpc":"2.0","id":' + json.dumps(original, ensure_ascii=True) + line[len(prefix):]
    return line


def _error_code(line: str) -> int | None:
    match = _ERROR_CODE.match(line)
    return int(match.group(1)) if match else None


def _busy_error() -> dict[str, Any]:
    return _error(None, SERVER_BUSY, "Server busy: too many requests in flight; retry later")



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


class _Handler(BaseHTTPRequestHandler):
    """One connection; `app` (the McpHttpServer) holds the configuration, sessions and dispatchers."""

    server_version = "agent-lab-mcp"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the head and the body are two writes: no 40 ms wait between them
    server: Any

    def version_string(self) -> str:
        return self.server_version  # not the Python version

    @property
    def app(self) -> McpHttpServer:
        return self.server.app

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

    unread_body = False

    def finish(self) -> None:
        """A refused request's unread body is drained a little after the answer (a lingering close): closing
        a socket with unread input resets it, and the reset could destroy the answer before it is read."""
        try:
            super().finish()
        finally:
            if self.unread_body:
                self.linger()

    def linger(self) -> None:
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(LINGER_S)
            deadline, drained = time.monotonic() + LINGER_S, 0
            while drained < LINGER_BYTES and time.monotonic() < deadline:
                chunk = self.connection.recv(65536)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        logger.debug("http: " + format, *args)  # the request line only; never a header (the token)

    # -- answering -------------------------------------------------------------------------------

    def reply(self, status: int, message: Any = None, headers: Mapping[str, str] | None = None) -> None:
        """One complete answer: a JSON message (a dict, or an encoded line) or, with None, no body."""
        body = b"" if message is None else \
            (message if isinstance(message, str) else _encoded(message)).encode("ascii")
        self.app.watchdog.arm(self.connection, self.app.limits.read_timeout_s)  # a client that reads slowly
        try:
            self.send_response(status)
            if message is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            self.app.watchdog.disarm(self.connection)

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
                    self.reply(self.status_of(line, modern), line, headers)
                    return
                self.stream(dispatch, exchange, internal, modern=modern)
            finally:
                channel.close(internal)
        finally:
            self.app.in_flight.release()

    @staticmethod
    def status_of(line: str, modern: bool) -> int:
        code = _error_code(line)
        return _MODERN_STATUS.get(code, 200) if modern and code is not None else 200

    def stream(self, dispatch: Any, exchange: Any, internal: str, *, modern: bool) -> None:
        """Wait for the call's answer: JSON when it comes first, else an event stream carrying what the
        server sends first (an elicitation) and then the answer. A vanished client stops the wait; on
        2026-07-28 that is the call's cancellation, and on either era the request is abandoned: what it
        waits for (a task's end, the user's confirmation) it waits for no more (a running call runs on)."""
        if not self.relay(dispatch, exchange, internal, modern=modern):
            dispatch.abandon(internal)

    def relay(self, dispatch: Any, exchange: Any, internal: str, *, modern: bool) -> bool:
        """`stream`'s loop; True once the answer is written (or the request was cancelled)."""
        streaming = False
        last_write = time.monotonic()
        while True:
            try:
                item = exchange.items.get(timeout=POLL_S)
            except queue.Empty:
                if self.client_gone():
                    if modern:
                        dispatch.cancel_exchange(internal)
                    self.close_connection = True
                    return False
                if streaming and time.monotonic() - last_write >= self.app.limits.sse_ping_s:
                    if not self.write_event(None):
                        return False
                    last_write = time.monotonic()
                continue
            if item is _ENDED:
                item = _encoded(_error(internal, REQUEST_CANCELLED, "Request cancelled"))
            final = _INTERNAL_ID.match(item) is not None and _INTERNAL_ID.match(item).group(1) == internal  # type: ignore[union-attr]
            if final:
                item = _restore_id(item, internal, exchange.original_id)
                dispatch.writer.close(internal)  # before the answer: a client may reuse the id once it has it
                if not streaming:
                    self.client_gone()  # drops what it sent meanwhile (a POST is never pipelined), then closes
                    self.reply(self.status_of(item, modern), item)
                    return True
            if not streaming:
                if not self.start_stream():
                    return False
                streaming = True
            if not self.write_event(item) or final:
                self.close_connection = True
                return final
            last_write = time.monotonic()

    def start_stream(self) -> bool:
        self.close_connection = True  # the stream ends when the connection does
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache, no-transform")
            self.send_header("X-Accel-Buffering", "no")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            return True
        except OSError:
            return False

    def write_event(self, line: str | None) -> bool:
        """One `message` event (None: a keep-alive comment); False when the client is gone."""
        data = b": ping\n\n" if line is None else b"event: message\ndata: " + line.encode("ascii") + b"\n\n"
        self.app.watchdog.arm(self.connection, self.app.limits.read_timeout_s)
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:
            return False
        finally:
            self.app.watchdog.disarm(self.connection)

    def client_gone(self) -> bool:
        """The client closed its side (a readable socket with nothing left to read). A waiting request
        expects nothing more from its client, so what it sends meanwhile is read and dropped, and the
        connection ends with this answer: a peek saw only a byte sent before hanging up, never the end
        behind it, and the wait held its places until its task ended (reproduced by review: 32 waits so
        left made every request 503). A client that keeps sending is alive (at most DRAIN_BYTES a look)."""
        try:
            drained = 0
            while drained < DRAIN_BYTES:
                readable, _, _ = select.select([self.connection], [], [], 0)
                if not readable:
                    return False
                chunk = self.connection.recv(65536)
                if not chunk:
                    return True
                drained += len(chunk)
                self.close_connection = True  # what was dropped may have been a request: none is read after
            return False
        except (OSError, ValueError):
            return True
