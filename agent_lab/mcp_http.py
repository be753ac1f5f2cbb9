"""MCP over Streamable HTTP, standard library only: `serve-mcp --http [HOST:]PORT`.

    agent-lab serve-mcp --http 8080                         # http://127.0.0.1:8080/mcp
    agent-lab serve-mcp --http 0 --http-token-env MCP_TOKEN  # any free port; the URL goes to stderr

One endpoint (`/mcp`) takes each JSON-RPC message as one POST and answers it with one JSON message, or
with a stream of Server-Sent Events when the server speaks first (a gateway's `elicitation/create`
asking the user to confirm a call, on the handshake era). The messages themselves are handled by the
very same `_Server` (or the gateway's `_GatewayServer`) that serves stdio, so both transports share one
behaviour: every `tools/call` goes through `Registry.invoke` as the actor the server was started with.

Protocol eras over HTTP:
- handshake era (2025-11-25, 2025-06-18, 2025-03-26): `initialize` opens a session; the answer carries
  an `Mcp-Session-Id` the server chose (192 random bits; a client's own id is never adopted: an id this
  server did not issue, or one that ended, is 404). Every later request names it, and the
  `MCP-Protocol-Version` header, when sent, must be the negotiated one. `DELETE` ends a session. Each
  session has its own dispatcher, so its negotiated version and capabilities are its own.
- 2026-07-28: no session. Each POST is a self-contained request whose `MCP-Protocol-Version`, `Mcp-Method`
  and `Mcp-Name` headers must match its body (else -32020, header mismatch, 400); notifications are
  acknowledged (202) and dropped, so one client can never cancel another's call by guessing its id;
  closing the answer's connection cancels the call.

What a client (or a web page) cannot make it do, checked before anything is read or dispatched:
- DNS rebinding: a request whose `Origin` is not loopback (`http(s)://localhost|127.0.0.1|[::1]`, any
  port) nor an origin allowed with `allowed_origins` is 403. No Origin (a non-browser client) is allowed.
  A server bound to loopback also refuses a `Host` that names another host (403).
- disagree with a proxy: a routing or credential header sent twice is refused, whichever copy counts.
- without the bearer token, when one is configured: 401 with `WWW-Authenticate: Bearer`. Both sides are
  hashed before a constant-time compare (neither content nor length leaks through timing); the token is
  never logged, echoed or put in an answer.
- hold memory or threads: a body over `max_body_bytes` is 413 unread; past `max_in_flight` requests in
  flight a request is 503 (answers to the server's own questions are always taken), and past
  `max_waiting` (below it) requests that wait (tool calls, tasks/result waiting for its task; all
  sessions) one more is refused "server busy", so what never waits is always served; past
  `max_connections` open connections a new one is answered 503 and closed; past `max_pending_calls`
  tool calls not yet finished (all sessions; a call whose client left runs to its end), or
  `max_pending_calls_per_session` of one session's (a 2026-07-28 client's unit is its connection), a call is refused
  "server busy" and never runs; past `max_result_waits` tasks/result requests waiting (all sessions, on
  one pool of that many threads, well under `max_in_flight`), or `max_result_waits_per_session` of one
  session's, one is refused "server busy" (one whose task has ended takes no place), and a wait whose client left (its stream
  closed, its session ended, or cancelled) ends at once, as does a call's wait for its user's
  confirmation, which then is not approved; `http.server` bounds the header count and line size; a request's head
  and body must arrive within `read_timeout_s`, and each answer or event must be taken within it too
  (a watchdog shuts the socket down: a client trickling bytes cannot hold its thread); each socket
  operation times out after `socket_timeout_s`. Sessions are at most `max_sessions`: the one idle
  longest (nothing in flight) makes room for a new one, and any idle for `session_idle_s` ends.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import hmac
import logging
import re
import secrets
import socket
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any, Callable, Mapping, Sequence

from . import __version__
from .mcp import (
    DEFAULT_MAX_WORKERS,
    MAX_MESSAGE_BYTES,
    SERVER_BUSY,
    ApprovalSource,
    _Backlog,
    _Held,
    _ProtocolError,
    _Server,
)
from .mcp_http_answers import _Channel
from .mcp_http_exchange import HEADER_MISMATCH, _Handler
from .mcp_tasks import TaskAnswers, TaskOwners, TaskScope
from .policy import Actor

__all__ = [
    "HEADER_MISMATCH",
    "HttpLimits",
    "HttpServeError",
    "McpHttpServer",
    "gateway_http_server",
    "parse_listen",
    "run_http_server",
    "serve_gateway_http",
    "serve_http",
    "token_from_env",
]

logger = logging.getLogger("agent_lab.mcp")

DEFAULT_PATH = "/mcp"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_POLL_S = 0.25  # how often the watchdog looks at the clock


class HttpServeError(ValueError):
    """An HTTP server that cannot start as configured (a bad address, an unset token variable); one line."""


@dataclass(frozen=True)
class HttpLimits:
    """What one client can hold. Defaults suit a local server with a handful of clients."""

    max_body_bytes: int = MAX_MESSAGE_BYTES  # one POST body (413 over it, unread)
    max_in_flight: int = 32  # requests being answered at once (503 past it)
    # requests waiting for something while in flight (a tools/call, a tasks/result whose task runs), every
    # session together: below max_in_flight, so what never waits (initialize, ping, tasks/get,
    # tasks/cancel) always has room. None: three quarters of max_in_flight (24)
    max_waiting: int | None = None
    max_connections: int = 64  # open connections, each a thread (503 and closed past it)
    max_sessions: int = 64  # handshake-era sessions (the longest idle one makes room)
    max_pending_calls: int = 64  # tools/call accepted and not yet finished, every session together
    # and one session's (a 2026-07-28 connection carries one at a time): with the waits below, well under
    # max_in_flight, so one client's calls never leave another's requests (initialize) without room
    max_pending_calls_per_session: int = 8
    # tasks/result waiting for their task (one thread each), every session together and one session: well
    # under max_in_flight, and shared, so waits never leave short requests (tasks/get) without room
    max_result_waits: int = 16
    max_result_waits_per_session: int = 4
    read_timeout_s: float = 30.0  # a request's head and body must arrive within this
    socket_timeout_s: float = 30.0  # one socket read or write
    session_idle_s: float = 1800.0  # a session unused this long ends
    sse_ping_s: float = 15.0  # a comment line keeps an event stream alive behind proxies

    def __post_init__(self) -> None:
        for name in ("max_in_flight", "max_waiting"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"HttpLimits.{name} must be an integer, not {type(value).__name__}")
        if self.max_waiting is None:
            object.__setattr__(self, "max_waiting", self.max_in_flight * 3 // 4)
        if not 1 <= self.waiting_places < self.max_in_flight:
            raise ValueError(f"HttpLimits.max_waiting ({self.max_waiting}) must be at least 1 and below max_in_flight "
                             f"({self.max_in_flight}): requests that wait must leave room for those that never do")

    @property
    def waiting_places(self) -> int:
        """max_waiting, resolved (the type checker's view of it)."""
        return self.max_waiting if self.max_waiting is not None else self.max_in_flight * 3 // 4


def parse_listen(text: str) -> tuple[str, int]:
    """`PORT`, `HOST:PORT` or `[IPV6]:PORT` as (host, port); the host defaults to 127.0.0.1."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isdigit() or int(port_text) > 65535:
        raise HttpServeError(f"--http {text!r}: expected [HOST:]PORT with PORT 0-65535 (0: any free port)")
    if sep and not host:
        raise HttpServeError(f"--http {text!r}: the host before ':' is empty")
    return host or "127.0.0.1", int(port_text)


def token_from_env(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The bearer token held by the environment variable `name` (never shown in an error)."""
    import os

    value = (environ if environ is not None else os.environ).get(name)
    if not value:
        raise HttpServeError(f"--http-token-env {name}: the environment variable {name} is not set or empty")
    if not re.fullmatch(r"[\x21-\x7e]+", value):
        raise HttpServeError(f"--http-token-env {name}: the token must be visible ASCII without spaces")
    return value


def _origin_of(text: str) -> str | None:
    """`scheme://host[:port]` in lower case, or None for anything that is not an http(s) origin."""
    try:
        parts = urllib.parse.urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username is not None:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port == {"http": 80, "https": 443}[parts.scheme]:
        port = None
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def _allowed_origin(origin: str, allowed: frozenset[str]) -> bool:
    normal = _origin_of(origin)
    if normal is None:
        return False  # "null" (a sandboxed page, a file), garbage
    if normal in allowed:
        return True
    host = urllib.parse.urlsplit(normal).hostname
    return host in LOOPBACK_HOSTS


# -- routing answers to the POST that waits for them ------------------------------------------------


class _WaitPlaces:
    """The in-flight slots requests that wait may hold, every session together (`HttpLimits.max_waiting`,
    below `max_in_flight`). Each session's calls and waits had a share, but nothing bounded the shares
    together: 4 sessions of 8 slow calls held all 32 slots, and a new client's initialize, another's
    ping, tasks/get and tasks/cancel were 503 (reproduced by review). A request takes its place on its
    connection's thread when the dispatcher finds that it will wait (a call submitted, a tasks/result
    whose task runs), and gives it back with its in-flight slot (`give_back`), once answered or its
    client gone; a call whose client left runs on, on its call slot, in no slot of these."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.slots = threading.BoundedSemaphore(limit)
        self.local = threading.local()  # one request at a time on a connection's thread

    def take(self, what: str) -> None:
        if getattr(self.local, "held", False):
            return
        if not self.slots.acquire(blocking=False):
            raise _ProtocolError(SERVER_BUSY, f"Server busy: {self.limit} requests are waiting (tool calls and "
                                 f"tasks/result); {what}")
        self.local.held = True

    def give_back(self) -> None:
        if getattr(self.local, "held", False):
            self.local.held = False
            self.slots.release()


class _Unshared:
    """A share of a 2026-07-28 client's: its connection, which carries one request at a time, so there is
    nothing to count (the server-wide caps bound them all; see `McpHttpServer.__init__`)."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return True

    def release(self) -> None:
        pass


class _ConnectionBacklog(_Backlog):
    """The stateless side's backlog, as if each connection were a session of one request: its one line (at
    most max_body_bytes) never fills a session's backlog, so it is counted and never refused. Shared by
    every 2026-07-28 client, the bounds of one session's (MAX_HELD_BYTES) let one client's two 4 MiB
    calls make every other's call busy; what all of them hold is bounded by max_pending_calls."""

    def bounds(self) -> tuple[int, int]:
        return sys.maxsize, sys.maxsize


class _ResultWaits:
    """Where every session's tasks/result waits: at most `limit` at once, on one pool of `limit` threads
    (a session's own pool would keep every thread it ever grew until the session ends), and at most
    `per_session` of them one session's (`share`): one client's 32 waits took every in-flight slot, and
    every other client, its tasks/get included, was answered 503 (reproduced by review)."""

    def __init__(self, limit: int, per_session: int, places: _WaitPlaces) -> None:
        self.limit = limit
        self.per_session = per_session
        self.places = places
        self.slots = threading.BoundedSemaphore(limit)
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=limit, thread_name_prefix="mcp-task-result")

    def share(self, *, shared: bool = True) -> threading.BoundedSemaphore | _Unshared:
        """One session's places (`shared=False`: the stateless side's, counted by connection)."""
        return threading.BoundedSemaphore(self.per_session) if shared else _Unshared()

    def submit(self, share: threading.BoundedSemaphore | _Unshared, wait: Callable[..., Any],
               *args: Any) -> concurrent.futures.Future:
        if not share.acquire(blocking=False):
            raise _ProtocolError(SERVER_BUSY, f"Server busy: this session has {self.per_session} tasks/result "
                                 "requests waiting; poll tasks/get, or retry later")
        if not self.slots.acquire(blocking=False):
            share.release()
            raise _ProtocolError(SERVER_BUSY, f"Server busy: {self.limit} tasks/result requests are waiting; "
                                 "poll tasks/get, or retry later")
        try:
            self.places.take("poll tasks/get, or retry later")
            future = self.pool.submit(wait, *args)
        except BaseException:
            self.slots.release()
            share.release()
            raise

        def release(_: concurrent.futures.Future) -> None:
            self.slots.release()
            share.release()

        future.add_done_callback(release)
        return future


class _CallThreads(concurrent.futures.Executor):
    """Where one session's tools/call run: each on a thread of its own that ends with it. A session's
    thread pool kept every thread it ever grew until the session ended (30 minutes idle later), up to 64
    a session (reproduced: 8 sessions that ran 4 calls each held 32 idle threads). How many run at once
    is the call slots' to bound (the server's and the session's), taken before a call is submitted; a
    thread costs its start, a fraction of a millisecond a call. `shutdown(wait=True)` waits for the
    session's calls, as the pool's did."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.threads: set[threading.Thread] = set()
        self.stopped = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args, **kwargs)
                    except BaseException as exc:  # noqa: BLE001 - handed to the future, as a pool does
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                with self.lock:
                    self.threads.discard(threading.current_thread())

        # not a daemon: the interpreter's exit waits for a running call, as it does for a pool's
        thread = threading.Thread(target=run, name="mcp-call", daemon=False)
        with self.lock:
            if self.stopped:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self.threads.add(thread)
        try:
            thread.start()
        except BaseException:
            with self.lock:
                self.threads.discard(thread)
            raise
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self.lock:
            self.stopped = True
            running = list(self.threads)
        if wait:
            for thread in running:
                if thread is not threading.current_thread():
                    thread.join()


class _HttpDispatch(_Server):
    """The stdio dispatcher, answering through a _Channel: a call's own messages reach its exchange, a
    cancelled call's exchange ends, and each request's held bytes are its own (thread-local). Its tasks
    are its own (`TaskOwners`), and its tasks/result requests wait on the server's `_ResultWaits`."""

    writer: Any

    def __init__(self, *args: Any, call_slots: threading.BoundedSemaphore, calls_per_session: int,
                 result_waits: _ResultWaits, task_owners: TaskOwners, shared: bool = True, **options: Any) -> None:
        self._local = threading.local()
        self.call_slots = call_slots
        self.calls_per_session = calls_per_session
        self.call_share = threading.BoundedSemaphore(calls_per_session) if shared else _Unshared()
        self.result_waits = result_waits
        self.result_share = result_waits.share(shared=shared)
        super().__init__(*args, **options)
        self.pool.shutdown(wait=False)  # (it has no thread yet)
        self.pool = _CallThreads()
        if not shared:  # the stateless side: a session of one request per connection (`McpHttpServer`)
            self.run_slots = _Unshared()  # type: ignore[assignment]
            self.backlog = _ConnectionBacklog()
        self.tasks = TaskAnswers(self.registry, self.actor, owners=task_owners, scope=TaskScope())
        # A session's end waits for its calls, not for every task of the registry: one thread per ended
        # session waited out the longest task (200 sessions deleted during one 18 s task: 207 threads).
        # The server's own stop drains them once (`McpHttpServer.close`, through the stateless dispatcher).
        self.drains_tasks = False

    def submit_wait(self, wait: Callable[..., str | None], request: Any, *args: Any) -> concurrent.futures.Future:
        """A tasks/result whose task has ended needs no wait: it is answered here, taking no place (with
        every place taken it was answered "server busy", reproduced by review)."""
        if not self.tasks.ended(request.params):
            return self.result_waits.submit(self.result_share, wait, request, *args)
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(wait(request, *args))
        return future

    def close(self) -> None:
        """The session has ended (or the server stops): its waits end now, its tasks are no longer its own."""
        self.abandon_all()
        if self.tasks.owners is not None:
            self.tasks.owners.release(self.tasks.scope)
        super().close()

    def start_call(self, request: Any, *, in_batch: bool, shape: Any) -> Any:
        """A call holds one of the server's call slots and one of its session's until its worker ends (a
        waiting confirmation included), so clients that start calls and go away cannot pile up threads,
        and one session's calls cannot take every request in flight: one session's 32 calls waiting on
        a slow handler left every other client 503, initialize included (reproduced by review)."""
        if not self.call_share.acquire(blocking=False):
            raise _ProtocolError(SERVER_BUSY, f"Server busy: this session has {self.calls_per_session} tool calls "
                                 "pending; retry later")
        if not self.call_slots.acquire(blocking=False):
            self.call_share.release()
            raise _ProtocolError(SERVER_BUSY, "Server busy: too many tool calls are pending; retry later")
        try:
            self.result_waits.places.take("retry later")
            return super().start_call(request, in_batch=in_batch, shape=shape)
        except BaseException:
            self.call_slots.release()
            self.call_share.release()
            raise

    @property
    def reading(self) -> _Held:
        held = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _Held(0)
        return held

    @reading.setter
    def reading(self, held: _Held) -> None:
        self._local.held = held

    def run_call(self, request_id: Any, *args: Any) -> str | None:
        self.writer.local.request_id = request_id
        try:
            return super().run_call(request_id, *args)
        finally:
            self.writer.local.request_id = None
            self.call_slots.release()
            self.call_share.release()

    def cancel(self, request_id: Any) -> None:
        """notifications/cancelled names the client's id: the call running under it is cancelled."""
        internal = self.writer.internal_for(request_id)
        if internal is not None:
            self.cancel_exchange(internal)

    def cancel_exchange(self, internal: str) -> None:
        super().cancel(internal)
        self.writer.end(internal)


_DISPATCH_CLASSES: dict[type, type] = {}


def _dispatch_class(base: type) -> type:
    """`base` (_Server or a subclass such as the gateway's) answering over HTTP."""
    if base not in _DISPATCH_CLASSES:
        _DISPATCH_CLASSES[base] = _HttpDispatch if base is _Server else \
            type(f"Http{base.__name__.lstrip('_')}", (_HttpDispatch, base), {})
    return _DISPATCH_CLASSES[base]


@dataclass
class _Session:
    """One handshake-era session: its own dispatcher (negotiated version, capabilities) and channel."""

    id: str
    dispatch: Any
    channel: _Channel
    last_used: float


class _Watchdog:
    """Shuts down a connection's socket when its request has not arrived in time (one thread for all),
    and ends sessions idle too long."""

    def __init__(self, app: McpHttpServer) -> None:
        self.app = app
        self.deadlines: dict[socket.socket, float] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, name="mcp-http-watchdog", daemon=True)

    def arm(self, sock: socket.socket, seconds: float) -> None:
        with self.lock:
            self.deadlines[sock] = time.monotonic() + seconds

    def disarm(self, sock: socket.socket) -> None:
        with self.lock:
            self.deadlines.pop(sock, None)

    def run(self) -> None:
        while not self.stopped.wait(_POLL_S):
            now = time.monotonic()
            with self.lock:
                late = [sock for sock, deadline in self.deadlines.items() if deadline <= now]
                for sock in late:
                    del self.deadlines[sock]
            for sock in late:
                logger.info("closed a connection whose request did not arrive within %gs",
                            self.app.limits.read_timeout_s)
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.app.end_idle_sessions(now)


class _HttpServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with a bound on open connections (each is a thread)."""

    daemon_threads = True
    app: McpHttpServer

    def __init__(self, address: tuple[str, int], app: McpHttpServer) -> None:
        self.app = app
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.slots = threading.BoundedSemaphore(app.limits.max_connections)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\n"
                                b"Connection: close\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.app.watchdog.disarm(request)
            self.slots.release()


class McpHttpServer:
    """A registry served over MCP Streamable HTTP (see the module). `start()` serves on a thread of its
    own, `serve_forever()` on the caller's; `url` is where, `close()` stops it."""

    def __init__(
        self,
        registry: Any,
        *,
        actor: Actor,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        allowed_origins: Sequence[str] = (),
        approvals: ApprovalSource | None = None,
        page_size: int = 50,
        server_name: str = "agent-lab",
        server_version: str = __version__,
        max_workers: int = DEFAULT_MAX_WORKERS,
        limits: HttpLimits | None = None,
        path: str = DEFAULT_PATH,
        dispatcher: type = _Server,
        dispatcher_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(actor, Actor):
            raise TypeError("McpHttpServer needs actor=Actor(...): the identity every tool call runs as")
        if token is not None and not re.fullmatch(r"[\x21-\x7e]+", token):
            raise HttpServeError("the bearer token must be visible ASCII without spaces")
        origins = set()
        for origin in allowed_origins:
            normal = _origin_of(origin)
            if normal is None:
                raise HttpServeError(f"--allow-origin {origin!r}: expected an origin like https://app.example.com")
            origins.add(normal)
        self.registry = registry
        self.limits = limits or HttpLimits()
        self.path = path
        self.allowed_origins = frozenset(origins)
        self._token_digest = hashlib.sha256(token.encode("ascii")).digest() if token is not None else None
        self.in_flight = threading.BoundedSemaphore(self.limits.max_in_flight)
        self.dispatcher = _dispatch_class(dispatcher)
        self.options: dict[str, Any] = dict(actor=actor, approvals=approvals, page_size=page_size,
                                            server_info={"name": server_name, "version": server_version},
                                            max_workers=max_workers, **dict(dispatcher_options or {}))
        self.call_slots = threading.BoundedSemaphore(self.limits.max_pending_calls)
        self.options["call_slots"] = self.call_slots
        self.options["calls_per_session"] = self.limits.max_pending_calls_per_session
        self.wait_places = _WaitPlaces(self.limits.waiting_places)
        self.result_waits = _ResultWaits(self.limits.max_result_waits, self.limits.max_result_waits_per_session,
                                         self.wait_places)
        self.options["result_waits"] = self.result_waits
        self.options["task_owners"] = TaskOwners()
        self.modern_channel = _Channel()
        # Every 2026-07-28 client shares one dispatcher, and counted as one session (its shares of calls and
        # waits, its 4 run slots, its backlog) one client's calls left every other one's busy, or queued
        # until their deadline (reproduced by review). Its unit is its connection, which carries one request
        # at a time and so needs no count: the stateless side is bounded by the server-wide caps
        # (max_connections, max_pending_calls, max_result_waits, max_waiting), as many sessions together are.
        self.modern = self.dispatcher(registry, writer=self.modern_channel, shared=False, **self.options)
        self.modern.session.era = "modern"  # locked: an unenveloped initialize can never turn it handshake-era
        self.modern.drains_tasks = True  # closed last, when the server stops
        self.bound_host = host
        self.sessions: dict[str, _Session] = {}
        self.sessions_lock = threading.Lock()
        self.watchdog = _Watchdog(self)
        try:
            self.httpd = _HttpServer((host, port), self)
        except OSError as error:
            self.modern.close()
            self.result_waits.pool.shutdown(wait=False)
            raise HttpServeError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
        self._thread: threading.Thread | None = None
        self.watchdog.thread.start()

    @property
    def url(self) -> str:
        host, port = str(self.httpd.server_address[0]), self.httpd.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}{self.path}"

    def start(self) -> McpHttpServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.1,), name="mcp-http", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        """Stop accepting, end every session and the watchdog (calls still running finish first)."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
        self.httpd.server_close()
        self.watchdog.stopped.set()
        with self.sessions_lock:
            ending = list(self.sessions.values())
            self.sessions.clear()
        for session in ending:
            session.dispatch.close()
        self.modern.close()
        self.result_waits.pool.shutdown(wait=True)  # every wait was abandoned by its session's close

    def __enter__(self) -> McpHttpServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- checks ----------------------------------------------------------------------------------

    def token_matches(self, header: str | None) -> bool:
        if self._token_digest is None:
            return True
        scheme, _, presented = (header or "").partition(" ")
        if scheme.lower() != "bearer":
            presented = ""
        digest = hashlib.sha256(presented.strip().encode("utf-8", "surrogateescape")).digest()
        return hmac.compare_digest(digest, self._token_digest) and bool(presented)

    def origin_allowed(self, origin: str | None) -> bool:
        return origin is None or _allowed_origin(origin, self.allowed_origins)

    def host_allowed(self, hosts: list[str]) -> bool:
        """A server bound to loopback answers only requests naming a loopback host (a page whose own name
        was rebound to 127.0.0.1 sends that name); a server bound elsewhere was named on purpose."""
        if len(hosts) > 1:
            return False
        if self.bound_host not in LOOPBACK_HOSTS or not hosts:
            return True
        try:
            name = urllib.parse.urlsplit("//" + hosts[0].strip()).hostname
        except ValueError:
            return False
        return name in LOOPBACK_HOSTS

    # -- sessions --------------------------------------------------------------------------------

    def new_session(self) -> _Session | None:
        """A fresh session (not yet registered), or None when every slot holds a busy session."""
        with self.sessions_lock:
            if len(self.sessions) >= self.limits.max_sessions:
                idle = [each for each in self.sessions.values() if not each.channel.busy()]
                if not idle:
                    return None
                oldest = min(idle, key=lambda each: each.last_used)
                del self.sessions[oldest.id]
                self._close_later(oldest)
        channel = _Channel()
        return _Session(secrets.token_urlsafe(24), self.dispatcher(self.registry, writer=channel, **self.options),
                        channel, time.monotonic())

    def register(self, session: _Session) -> None:
        with self.sessions_lock:
            self.sessions[session.id] = session

    def session(self, session_id: str) -> _Session | None:
        with self.sessions_lock:
            session = self.sessions.get(session_id)
            if session is not None:
                session.last_used = time.monotonic()
            return session

    def end_session(self, session_id: str) -> bool:
        with self.sessions_lock:
            session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        self._close_later(session)
        return True

    def end_idle_sessions(self, now: float) -> None:
        with self.sessions_lock:
            idle = [each for each in self.sessions.values()
                    if now - each.last_used > self.limits.session_idle_s and not each.channel.busy()]
            for each in idle:
                del self.sessions[each.id]
        for each in idle:
            self._close_later(each)

    @staticmethod
    def _close_later(session: _Session) -> None:
        """A session's pool is shut down off the request path (a cancelled call may still be running)."""
        threading.Thread(target=session.dispatch.close, name="mcp-http-close", daemon=True).start()


def serve_http(
    registry: Any,
    *,
    actor: Actor,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    allowed_origins: Sequence[str] = (),
    approvals: ApprovalSource | None = None,
    page_size: int = 50,
    server_name: str = "agent-lab",
    server_version: str = __version__,
    max_workers: int = DEFAULT_MAX_WORKERS,
    limits: HttpLimits | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> int:
    """Serve `registry` over MCP Streamable HTTP until interrupted (Ctrl-C); returns the exit code (0).

    As `serve` over stdio: `actor` is who every tool call runs as (the server's configuration decides,
    never the client), `approvals(call, actor)` may hold a person's approval for exactly that call.
    `on_ready(url)` is called once the socket listens (port 0 picks a free one)."""
    server = McpHttpServer(registry, actor=actor, host=host, port=port, token=token,
                           allowed_origins=allowed_origins, approvals=approvals, page_size=page_size,
                           server_name=server_name, server_version=server_version, max_workers=max_workers,
                           limits=limits)
    return run_http_server(server, on_ready)


def serve_gateway_http(
    registry: Any,
    *,
    actor: Actor,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    allowed_origins: Sequence[str] = (),
    page_size: int = 50,
    server_name: str = "agent-lab-gateway",
    server_version: str = __version__,
    max_workers: int = DEFAULT_MAX_WORKERS,
    limits: HttpLimits | None = None,
    confirm_key: bytes | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> int:
    """Serve a gateway `registry` (from `agent_lab.gateway.open_gateway`) over MCP Streamable HTTP, asking
    the client's user to confirm calls that need approval as `serve_gateway` does over stdio."""
    server = gateway_http_server(registry, actor=actor, host=host, port=port, token=token,
                                 allowed_origins=allowed_origins, page_size=page_size, server_name=server_name,
                                 server_version=server_version, max_workers=max_workers, limits=limits,
                                 confirm_key=confirm_key)
    return run_http_server(server, on_ready)


def gateway_http_server(registry: Any, *, confirm_key: bytes | None = None, **options: Any) -> McpHttpServer:
    """An McpHttpServer dispatching through the gateway's server (approvals over MCP), not yet started."""
    from .gateway import _GatewayServer, _Seal

    options.setdefault("server_name", "agent-lab-gateway")
    return McpHttpServer(registry, dispatcher=_GatewayServer, dispatcher_options={"seal": _Seal(confirm_key)},
                         **options)


def run_http_server(server: McpHttpServer, on_ready: Callable[[str], None] | None = None) -> int:
    """Serve `server` on this thread until Ctrl-C or SIGTERM, then close it; returns the exit code (0)."""
    import signal

    def stop(*_: Any) -> None:
        threading.Thread(target=server.httpd.shutdown, daemon=True).start()

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, stop)
    try:
        if on_ready is not None:
            on_ready(server.url)
        logger.info("serving MCP over HTTP at %s", server.url)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        server.close()
    return 0
