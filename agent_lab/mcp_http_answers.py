"""How an answer reaches the HTTP connection waiting for it (`agent_lab.mcp_http`).

`_Channel` is the dispatcher's writer: it routes each line it is given to the `_Exchange` of the POST
waiting for it. `_Answering`, the connection's handler below `_Handler`, writes what arrives there: one
JSON answer, or an event stream carrying what the server sends first (a gateway's elicitation) and then
the answer, while it watches whether its client is still there. It is apart from `mcp_http_exchange`
(which checks and routes each request) because it changes for other reasons: the HTTP status an answer
gets, how a waiting connection sees its client leave, what becomes of bytes the client sends meanwhile,
and how a connection ends so that its last answer is read.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import queue
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Mapping

from .mcp import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION, _encoded, _error

if TYPE_CHECKING:
    from .mcp_http import McpHttpServer

__all__ = ["HEADER_MISMATCH"]

logger = logging.getLogger("agent_lab.mcp")

HEADER_MISMATCH = -32020  # 2026-07-28: a routing header that disagrees with the body
REQUEST_CANCELLED = -32800  # the answer to a request the client cancelled while its POST was still open
POLL_S = 0.25  # how often a waiting exchange looks for a vanished client
DRAIN_BYTES = 1 << 20  # at most this much a waiting exchange reads from its client a look
HELD_BYTES = 1 << 20  # what a waiting request keeps of the requests pipelined behind it, to answer after it
# (a connection's, until they are read: at most max_connections times this, under their bodies in progress)
LINGER_S = 1.0  # how long a refused request's unread body is drained after the answer
LINGER_BYTES = 1024 * 1024  # and how much of it
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


def _restore_id(line: str, internal: str, original: Any) -> str:
    """An answer line with the client's own id in place of the internal one."""
    prefix = f'{{"jsonrpc":"2.0","id":"{internal}"'
    if line.startswith(prefix):
        return '{"jsonrpc":"2.0","id":' + json.dumps(original, ensure_ascii=True) + line[len(prefix):]
    return line


def _error_code(line: str) -> int | None:
    match = _ERROR_CODE.match(line)
    return int(match.group(1)) if match else None


class _Unread(io.RawIOBase):
    """The connection's bytes as its requests are read: first those a waiting request read ahead (requests
    the client pipelined behind it), then the socket's."""

    def __init__(self, connection: socket.socket) -> None:
        self.source = connection.makefile("rb", buffering=0)
        self.held = bytearray()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if not self.held:
            return self.source.readinto(buffer)
        count = min(len(buffer), len(self.held))
        buffer[:count] = self.held[:count]
        del self.held[:count]
        return count

    def close(self) -> None:
        self.source.close()
        super().close()


class _Answering(BaseHTTPRequestHandler):
    """The connection's side of an answer: written whole, or relayed as events while the request waits."""

    server: Any
    unread: _Unread

    @property
    def app(self) -> McpHttpServer:
        return self.server.app

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # (unused yet) read through `unread`, which a waiting request may hold bytes for
        self.unread = _Unread(self.connection)
        self.rfile = io.BufferedReader(self.unread)

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

    # -- answering -------------------------------------------------------------------------------

    holds_slot = False  # the request holds an in-flight slot (`_Handler.answer`)

    def let_go(self) -> None:
        """The request's in-flight slot, and its place among those that wait (`_WaitPlaces`), are let go
        once its answer is made, before it is written: a client that reads no answers blocks that write
        until read_timeout_s, and 32 such clients of pings held every slot, so every request of every
        other client was 503 whatever the cap on waiting requests (reproduced by review). A connection
        still holds its thread (max_connections); an event stream holds its place until it ends."""
        if self.holds_slot:
            self.holds_slot = False
            self.app.wait_places.give_back()
            self.app.in_flight.release()

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
                    self.client_gone()  # holds what it sent meanwhile (a pipelined request: answered next)
                    self.let_go()
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
        """The client closed its side (a readable socket with nothing left to read). Whether it has is seen
        only past what it sent before (a peek saw a byte sent before hanging up, never the end behind it,
        and the wait held its places until its task ended: reproduced by review), so that is read, and
        kept (`hold`). A client that keeps sending is alive (at most DRAIN_BYTES a look). The socket is
        read without blocking, not watched with select(), which refuses a descriptor of 1024 or more:
        in a process with that many files open every wait was taken for gone at its first look and its
        client never answered (reproduced by review)."""
        try:
            self.connection.settimeout(0.0)
            try:
                looked = 0
                while looked < DRAIN_BYTES:
                    try:
                        chunk = self.connection.recv(65536)
                    except BlockingIOError:
                        return False  # nothing to read: the client is still there
                    if not chunk:
                        return True
                    looked += len(chunk)
                    self.hold(chunk)
                return False
            finally:
                self.connection.settimeout(self.app.limits.socket_timeout_s)
        except (OSError, ValueError):
            return True

    def hold(self, chunk: bytes) -> None:
        """Keep what the client sent behind the waiting request: HTTP/1.1 lets it pipeline requests, which
        are read and answered after this one (they were read and dropped, and the connection ended: a
        client never had their answers). Past HELD_BYTES, or once this connection ends with its answer
        (an event stream, a client that said close), nothing more is kept: the answer says `Connection:
        close`, and an HTTP/1.1 client sends again what was not answered."""
        held = self.unread.held
        if self.close_connection or len(held) + len(chunk) > HELD_BYTES:
            held.clear()
            self.close_connection = True
            self.unread_body = True  # a lingering close: what it sends meanwhile must not reset the answer
            return
        held += chunk
