"""The Streamable HTTP transport: each JSON-RPC message is one POST to the server's URL, answered with
one JSON message or a stream of Server-Sent Events. It only moves messages; the session speaks MCP.

What an untrusted server (or anyone between) cannot make it do:
- send the bearer token anywhere but the URL's own origin: it connects to that host and port only and
  never follows a redirect (a 3xx is an error naming where it pointed, origin only);
- read without end: a JSON body or one SSE event is at most `max_message_bytes`, the whole answer at
  most `MAX_ANSWER_FACTOR` times that, and the session aborts the exchange at the request's deadline
  by shutting its socket down (so a server that trickles one byte a second is cut off on time);
- forge headers: the token and every header value are refused or base64-wrapped if they hold line
  breaks or other bytes a header cannot carry.

Each exchange runs on a thread of its own with its own connection (no keep-alive), so a call that is
cancelled is simply disconnected, which is how 2026-07-28 signals cancellation over HTTP.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Mapping

from .. import __version__
from ..redaction import SecretMask
from .address import ServerAddress, credential_values, origin_of
from .wire import McpConnectionError, McpError, McpProtocolError, McpTimeout, decode_message, encode_message

__all__ = ["HttpStatusError", "HttpTransport"]

logger = logging.getLogger("agent_lab.mcp_client")

MAX_ANSWER_FACTOR = 4  # an SSE answer may carry notifications besides the response
READ_CHUNK = 64 * 1024
CLOSE_TIMEOUT_S = 2.0  # the DELETE that ends a handshake-era HTTP session, best effort
_HEADER_SAFE = re.compile(r"[\x20-\x7e]*")
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,256}")


class HttpStatusError(McpConnectionError):
    """The server answered with an HTTP status that carries no JSON-RPC answer (`status`)."""

    def __init__(self, server: str, message: str, status: int, *, sent: bool = True) -> None:
        self.status = status
        super().__init__(server, message, sent=sent)


def header_value(value: str) -> str:
    """`value` as it can travel in a header: as it is when printable ASCII without edge spaces, else
    wrapped as `=?base64?...?=` (the MCP convention for Mcp-Name and Mcp-Param-* values)."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not value.startswith("=?base64?"):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii") + "?="


class Exchange:
    """One POST in flight; `abort()` disconnects it (from any thread)."""

    def __init__(self, request_id: Any, on_finished: Callable[[], None] | None = None) -> None:
        self.request_id = request_id
        self.on_finished = on_finished  # called once, on the exchange's thread, when it is over
        self.started = threading.Event()  # set once the request may have reached the server
        self.finished = threading.Event()  # set when the exchange is over, however it ended
        self.connection: http.client.HTTPConnection | None = None
        self.aborted = False
        self.lock = threading.Lock()

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            connection = self.connection
        sock = getattr(connection, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class HttpTransport:
    """A server at an http(s):// URL. `open(deliver, lost, fail)`: `deliver(message)` for each JSON-RPC
    message read from an answer, `fail(request_id, error)` when one exchange fails."""

    kind = "streamable-http"
    cancels_by_notification = False  # closing the answer is the cancellation (the handshake era adds a notice)

    def __init__(self, address: ServerAddress, *, label: str, max_message_bytes: int) -> None:
        assert address.url is not None
        self.address = address
        self.label = label
        self.max_message_bytes = max_message_bytes
        parts = urllib.parse.urlsplit(address.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._target = parts.path + (f"?{parts.query}" if parts.query else "")
        self._origin = origin_of(address.url)
        self._token: str | None = None
        self.mask = SecretMask(credential_values(address))  # and the token, once read (open)
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._deliver: Callable[[Any], None] = lambda message: None
        self._fail: Callable[[Any, McpError], None] = lambda request_id, error: None

    def __repr__(self) -> str:  # never the token
        return f"<HttpTransport {self.label}>"

    def open(self, deliver: Callable[[Any], None], lost: Callable[[McpError], None],
             fail: Callable[[Any, McpError], None] | None = None) -> None:
        self._deliver = deliver
        if fail is not None:
            self._fail = fail
        name = self.address.token_env
        if name is not None:
            token = os.environ.get(name)
            if not token:
                raise McpConnectionError(self.label, f"the environment variable {name} (named after '#' for its "
                                         "bearer token) is not set", sent=False)
            if not _HEADER_SAFE.fullmatch(token) or token != token.strip():
                raise McpConnectionError(self.label, f"the bearer token in {name} holds characters a header cannot "
                                         "carry (a line break, a control character or a non-ASCII letter)", sent=False)
            self._token = token
            self.mask = SecretMask((*credential_values(self.address), token))

    # -- sending ---------------------------------------------------------------------------------

    def send(self, message: Any, *, deadline: float, headers: Mapping[str, str] | None = None,
             on_finished: Callable[[], None] | None = None) -> Exchange:
        """POST `message` on a thread of its own; answers are delivered as they are read. `on_finished` is
        called once the exchange is over (not when this raises: then nothing was started)."""
        request_id = message.get("id") if isinstance(message, dict) and "method" in message else None
        exchange = Exchange(request_id, on_finished)
        body = encode_message(message)
        if len(body) > self.max_message_bytes:
            raise McpProtocolError(self.label, f"a request of {len(body)} bytes is over the message limit "
                                   f"({self.max_message_bytes}); not sent", sent=False)
        thread = threading.Thread(target=self._exchange, args=(exchange, message, body, deadline, dict(headers or {})),
                                  name="mcp-http", daemon=True)
        thread.start()
        return exchange

    def abort(self, handle: Any) -> None:
        if isinstance(handle, Exchange):
            handle.abort()

    def _headers(self, message: Any, extra: Mapping[str, str]) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "User-Agent": f"agent-lab/{__version__}"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        for name, value in extra.items():
            headers[name] = header_value(value)
        return headers

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _exchange(self, exchange: Exchange, message: Any, body: bytes, deadline: float, extra: dict[str, str]) -> None:
        request_id = exchange.request_id
        try:
            self._post(exchange, message, body, deadline, extra)
        except McpError as error:
            if request_id is not None and not exchange.aborted:
                self._fail(request_id, error)
        except Exception as error:  # noqa: BLE001 - whatever the socket or parser raised
            if exchange.aborted or request_id is None:
                return
            if isinstance(error, (socket.timeout, TimeoutError)):
                self._fail(request_id, McpTimeout(self.label, "did not answer in time", sent=exchange.started.is_set()))
            elif isinstance(error, ssl.SSLError):
                self._fail(request_id, McpConnectionError(self.label, f"TLS failed: {error.reason or error}",
                                                          sent=exchange.started.is_set()))
            elif isinstance(error, OSError):
                reason = error.strerror or type(error).__name__
                self._fail(request_id, McpConnectionError(self.label, f"connection failed: {reason}",
                                                          sent=exchange.started.is_set()))
            else:
                self._fail(request_id, McpProtocolError(self.label, f"sent an HTTP answer that cannot be read "
                                                        f"({type(error).__name__})", sent=exchange.started.is_set()))
        finally:
            connection = exchange.connection
            if connection is not None:
                connection.close()
            exchange.finished.set()
            if exchange.on_finished is not None:
                exchange.on_finished()

    def _post(self, exchange: Exchange, message: Any, body: bytes, deadline: float, extra: dict[str, str]) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise McpTimeout(self.label, "did not answer in time", sent=False)
        connection = self._connection(remaining)
        with exchange.lock:
            if exchange.aborted:
                return
            exchange.connection = connection
        connection.connect()  # a refused connection: the request certainly never left
        with exchange.lock:  # given up while connecting: its caller was told it was not sent, so it never is
            if exchange.aborted:
                return
            exchange.started.set()
        connection.request("POST", self._target, body=body, headers=self._headers(message, extra))
        response = connection.getresponse()
        request_id = exchange.request_id
        is_initialize = isinstance(message, dict) and message.get("method") == "initialize"
        status = response.status
        if 300 <= status < 400:
            location = response.getheader("Location") or ""
            where = origin_of(urllib.parse.urljoin(self.address.url or "", location)) if location else "nowhere"
            raise HttpStatusError(self.label, f"answered HTTP {status}, a redirect to {where}; redirects are not "
                                  "followed (a token is never sent to another address): use the final URL", status)
        content_type = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
        if request_id is None:  # a notification or a response of ours: 202 Accepted, nothing to read
            return
        if status == 202:
            raise HttpStatusError(self.label, "answered a request with 202 Accepted and no answer", status)
        if status >= 400 and content_type != "application/json":
            raise HttpStatusError(self.label, self._status_message(status), status)
        if is_initialize:
            self._take_session_id(response.getheader("Mcp-Session-Id"))
        if content_type == "application/json":
            self._read_json(response, status, request_id)
        elif content_type == "text/event-stream":
            self._read_events(response, exchange)
        else:
            raise McpProtocolError(self.label, f"answered with Content-Type {content_type or '(none)'!r}, not "
                                   "application/json or text/event-stream")

    def _status_message(self, status: int) -> str:
        if status in (401, 403):
            how = f"the token in {self.address.token_env}" if self.address.token_env else "no bearer token"
            return f"refused the request with HTTP {status} ({how}; name a variable holding a token after '#')"
        if status == 404 and self.session_id is not None:
            return "answered HTTP 404: its session has ended"
        return f"answered HTTP {status}"

    def _take_session_id(self, value: str | None) -> None:
        if value is None:
            return
        if not _SESSION_ID.fullmatch(value):
            raise McpProtocolError(self.label, "sent an Mcp-Session-Id that is not 1-256 visible ASCII characters")
        self.session_id = value

    def _read_json(self, response: http.client.HTTPResponse, status: int, request_id: Any) -> None:
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > self.max_message_bytes:
            raise McpProtocolError(self.label, f"sent a message larger than {self.max_message_bytes} bytes (the limit)")
        data = bytearray()
        while True:
            chunk = response.read1(READ_CHUNK)
            if not chunk:
                break
            data += chunk
            if len(data) > self.max_message_bytes:
                raise McpProtocolError(self.label, f"sent a message larger than {self.max_message_bytes} bytes (the limit)")
        try:
            message = decode_message(bytes(data))
        except ValueError as error:
            if status >= 400:
                raise HttpStatusError(self.label, self._status_message(status), status) from None
            raise McpProtocolError(self.label, f"answered with {error}") from None
        if isinstance(message, dict) and "error" in message and message.get("id") is None:
            message = dict(message, id=request_id)  # refused before its id was read: it answers this request
        self._deliver(message)

    def _read_events(self, response: http.client.HTTPResponse, exchange: Exchange) -> None:
        """Server-Sent Events: `data:` lines joined into one message per event, until the answer to
        this request has come (the session marks it delivered) or the stream ends."""
        reader = _EventReader(self.max_message_bytes)
        total = 0
        limit = self.max_message_bytes * MAX_ANSWER_FACTOR
        while True:
            chunk = response.read1(READ_CHUNK)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise McpProtocolError(self.label, f"sent an event stream longer than {limit} bytes for one request")
            try:
                events = reader.feed(chunk)
            except ValueError as error:
                raise McpProtocolError(self.label, str(error)) from None
            for data in events:
                try:
                    message = decode_message(data)
                except ValueError as error:
                    raise McpProtocolError(self.label, f"sent an event with {error}") from None
                self._deliver(message)
                if _answers(message, exchange.request_id):
                    return
        raise McpConnectionError(self.label, "ended the event stream without answering the request")

    # -- ending ----------------------------------------------------------------------------------

    def close(self, *, grace_s: float = CLOSE_TIMEOUT_S) -> None:
        """End a handshake-era session with DELETE (best effort: a server may not allow it), within
        `grace_s` (at most CLOSE_TIMEOUT_S) in all: the socket's timeout bounds each read only, and a
        server that answers a byte at a time would otherwise hold the closing caller (a gateway's
        shutdown) for as long as it likes. Past it the connection is shut down and left."""
        if self.session_id is None:
            return
        wait_s = max(0.1, min(grace_s, CLOSE_TIMEOUT_S))
        exchange = Exchange(None)
        headers = self._headers({}, {})
        thread = threading.Thread(target=self._delete, args=(exchange, headers, wait_s), name="mcp-client-delete",
                                  daemon=True)
        thread.start()
        thread.join(wait_s)
        if thread.is_alive():
            exchange.abort()
        self.session_id = None

    def _delete(self, exchange: Exchange, headers: dict[str, str], timeout: float) -> None:
        try:
            connection = self._connection(timeout)
            with exchange.lock:
                if exchange.aborted:
                    return
                exchange.connection = connection
            connection.connect()
            with exchange.lock:  # given up while connecting: abort() found no socket to shut down
                if exchange.aborted:
                    return
            connection.request("DELETE", self._target, headers=headers)
            connection.getresponse().read1(READ_CHUNK)
        except Exception:  # noqa: BLE001 - the server may be gone already
            pass
        finally:
            if exchange.connection is not None:
                exchange.connection.close()


def _answers(message: Any, request_id: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and message.get("id") == request_id


class _EventReader:
    """Splits an SSE byte stream into the data of its events (a `data:` event of type message)."""

    def __init__(self, max_event_bytes: int) -> None:
        self.max_event_bytes = max_event_bytes
        self.pending = bytearray()
        self.data: list[bytes] = []
        self.size = 0
        self.event = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self.pending += chunk
        ready: list[bytes] = []
        while True:
            match = re.search(rb"\r\n|\n|\r", self.pending)
            if match is None or (match.group() == b"\r" and match.end() == len(self.pending)):
                break  # a lone \r at the end may be the first half of \r\n
            line = bytes(self.pending[: match.start()])
            del self.pending[: match.end()]
            event = self._line(line)
            if event is not None:
                ready.append(event)
        if len(self.pending) > self.max_event_bytes:
            raise ValueError(f"sent an event larger than {self.max_event_bytes} bytes (the limit)")
        return ready

    def _line(self, line: bytes) -> bytes | None:
        if not line:  # the blank line that ends an event
            data, event = self.data, self.event
            self.data, self.size, self.event = [], 0, b""
            if data and event in (b"", b"message"):
                return b"\n".join(data)
            return None
        if line.startswith(b":"):
            return None  # a comment (keep-alive)
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self.size += len(value) + 1
            if self.size > self.max_event_bytes:
                raise ValueError(f"sent an event larger than {self.max_event_bytes} bytes (the limit)")
            self.data.append(value)
        elif name == b"event":
            self.event = value
        return None
