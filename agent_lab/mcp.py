"""A Model Context Protocol server over stdio, standard library only.

`serve(registry, actor=...)` lets any MCP client use a `Registry` with all of its contracts enforced:
every `tools/call` goes through the full `Registry.invoke` pipeline as the actor the server was started
with (never one named by the client). The wire is JSON-RPC 2.0, one compact JSON message per line.

Two error channels, as the MCP specification separates them:
- protocol errors (JSON-RPC `error`): malformed JSON, malformed requests, unknown methods, unknown
  tools, `tools/call` params that break the request schema (no name, arguments not an object);
- tool errors (a normal result with `isError: true`): everything the registry refuses or a tool
  fails with (invalid_arguments, permission_denied, approval_required, timeouts, ...), carrying our
  structured error so a model can act on it.

Protocol eras. The handshake era (2025-11-25, 2025-06-18, 2025-03-26) opens with `initialize`; the
stateless 2026-07-28 revision has no handshake: every request carries its protocol version in
`params._meta` and `server/discover` says what the server supports. The client's first request decides
the era of the connection, once, as the reference implementation does.

stdout carries protocol messages only: while `serve` owns the process's real stdout, it keeps a private
duplicate of file descriptor 1 for the protocol and points descriptor 1 and `sys.stdout` at stderr, so
neither a stray `print` in a handler nor a child process or a raw write to descriptor 1 can corrupt the
stream. Logs go to the `agent_lab.mcp` logger (stderr when the application configures nothing).

Back-pressure. What the server owes a client and holds in memory meanwhile is bounded, whatever the
client does: an accepted tools/call holds its place (`_Backlog`), with the bytes of the line that carried
it (a batch's line once, for all its responses), from its arrival until its answer is written to stdout,
not merely computed. At most `MAX_PENDING_CALLS` calls and `MAX_HELD_BYTES` of lines are held; a call
beyond either is refused at once (`SERVER_BUSY`) by the reader, which writes every other answer itself.
So a client that stops reading stdout stops the reader too, on the full pipe, once the backlog is full.
Nothing raised while a call runs on a worker, `sys.exit` included, leaves its request unanswered.

Layout. This module reads lines, negotiates the protocol era and dispatches (`_Server`); the tools/call
and tasks/ path it dispatches to is `agent_lab.mcp_calls` (a mixin of `_Server`), and the JSON-RPC
messages both build are `agent_lab.mcp_messages`. Their names stay importable from here.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import json
import logging
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Iterator, Mapping, TextIO, Union, cast

from . import __version__
from .adapters import mcp_tool
from .calls import ToolCall
from .errors import ToolFailure
from .mcp_calls import _Held, _InFlight, _settle, _ToolCallPath
from .mcp_messages import (
    _META_CLIENT_CAPABILITIES,
    _META_PROTOCOL_VERSION,
    _META_SERVER_INFO,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVER_BUSY,
    UNSUPPORTED_PROTOCOL_VERSION,
    _encoded,
    _error,
    _is_response,
    _parse_request,
    _ProtocolError,
    _Request,
    _RequestId,
    _result,
    _UnanswerableNotification,
    _valid_id,
)
from .mcp_tasks import TaskAnswers
from .policy import Actor, Approval

__all__ = [
    "HANDSHAKE_VERSIONS",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LATEST_VERSION",
    "MAX_BATCH_ANSWER_BYTES",
    "MAX_HELD_BYTES",
    "MAX_PENDING_CALLS",
    "METHOD_NOT_FOUND",
    "MODERN_VERSIONS",
    "PARSE_ERROR",
    "SERVER_BUSY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "ApprovalSource",
    "serve",
]

logger = logging.getLogger("agent_lab.mcp")

# Protocol revisions, newest first. The handshake era negotiates one of these through `initialize`.
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_VERSION = HANDSHAKE_VERSIONS[0]
# Revisions without a handshake: the version travels in every request's `_meta`.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
# Only 2025-03-26 allowed JSON-RPC batches; 2025-06-18 removed them again.
_BATCH_VERSIONS = frozenset({"2025-03-26"})

# Named limits.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # one line; a longer one is refused and skipped, never buffered whole
DEFAULT_MAX_WORKERS = 4  # tools/call running at once; ping and cancellation are answered meanwhile
MAX_PENDING_CALLS = 64  # tools/call whose answer is not yet written (running, waiting, or blocked on stdout)
MAX_HELD_BYTES = 8 * 1024 * 1024  # their request lines (a batch's once) and a waiting batch's answers, as JSON
MAX_BATCH_ANSWER_BYTES = 4 * 1024 * 1024  # one batch's answers, as JSON; the rest of it is refused unserved
# So the server holds at most MAX_HELD_BYTES, plus the line being read (MAX_MESSAGE_BYTES) and its batch's
# answers (MAX_BATCH_ANSWER_BYTES, and a short "Server busy" for each request past it), plus the answers
# of the calls running (max_workers, each within its tool's max_output_bytes), whatever the client does;
# measured under every flood of a client that never reads: 29-147 MB peak RSS (README, "serve-mcp").
# A call's deadline runs from its arrival: one waiting for a worker (all held by slow calls) is answered
# deadline_exceeded when its tool's timeout passes, not whenever a worker frees up. So each pending call
# has a thread of its own (at most MAX_PENDING_CALLS) that waits for one of `max_workers` run slots.

# Gives the approval (if any) a person granted for exactly this call; MCP has no approval channel of its
# own, so the application that starts the server supplies it.
ApprovalSource = Callable[[ToolCall, Actor], Union[Approval, None]]

_JSON = Any


# -- wire: framing ---------------------------------------------------------------------------------


class _LineWriter:
    """Writes one compact JSON message per line and flushes it; safe to call from several threads."""

    def __init__(self, stream: BinaryIO | TextIO) -> None:
        self._stream = stream
        self._text = isinstance(stream, io.TextIOBase)
        self._lock = threading.Lock()
        self.broken = False

    def send(self, message: Mapping[str, Any]) -> None:
        self.send_line(_encoded(message) + "\n")

    def send_batch(self, answers: list[str]) -> None:
        """One batch's answers, each already encoded (`_encoded`), as one JSON array on one line."""
        self.send_line("[" + ",".join(answers) + "]\n")

    def send_line(self, line: str) -> None:
        with self._lock:
            if self.broken:
                return
            try:
                if self._text:
                    cast(TextIO, self._stream).write(line)
                else:
                    cast(BinaryIO, self._stream).write(line.encode("ascii"))
                self._stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.broken = True
                logger.warning("stdout is closed; no further messages can be sent")


def _read_lines(stream: BinaryIO | TextIO) -> Iterator[bytes | None]:
    """Yields each line of `stream` without its newline; None for a line longer than MAX_MESSAGE_BYTES."""
    while True:
        raw = stream.readline(MAX_MESSAGE_BYTES + 1)
        if not raw:
            return
        line = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
        if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
            _skip_rest_of_line(stream)
            yield None
            continue
        yield line.rstrip(b"\r\n")


def _skip_rest_of_line(stream: BinaryIO | TextIO) -> None:
    while True:
        chunk = stream.readline(MAX_MESSAGE_BYTES)
        if not chunk:
            return
        if (chunk.endswith("\n") if isinstance(chunk, str) else chunk.endswith(b"\n")):
            return


# -- the server ------------------------------------------------------------------------------------


@dataclass
class _Session:
    """What the connection has agreed so far. Touched only by the reader thread."""

    era: str | None = None  # "handshake" or "modern", fixed by the first request
    protocol_version: str | None = None  # negotiated by initialize (handshake era)
    initialized: bool = False  # notifications/initialized received
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)  # as the client declared them


class _Backlog:
    """The answers the server owes and the memory they hold: accepted calls (at most MAX_PENDING_CALLS)
    and the request lines that carried them (at most MAX_HELD_BYTES), each from its acceptance (by the
    reader) until its answer has been written or dropped (by whichever thread sends it). `peak_calls`
    and `peak_bytes` are the most ever held at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.bytes = 0
        self.peak_calls = 0
        self.peak_bytes = 0

    def take(self, held: _Held) -> str | None:
        """Hold one more call of `held`'s line; None when done, else why not (the busy message)."""
        with self._lock:
            max_calls, max_bytes = self.bounds()
            if self.calls >= max_calls:
                return f"Server busy: {max_calls} tools/call requests are pending; retry later"
            extra = 0 if held.charged else held.size
            if self.bytes + extra > max_bytes:
                return (f"Server busy: the pending tools/call requests hold {max_bytes} bytes or more "
                        "(the client may not be reading its answers); retry later")
            self.calls += 1
            self.bytes += extra
            held.calls += 1
            held.charged = True
            self.peak_calls = max(self.peak_calls, self.calls)
            self.peak_bytes = max(self.peak_bytes, self.bytes)
            return None

    def full(self) -> bool:
        """The held lines and answers reach MAX_HELD_BYTES: no call should start making another answer."""
        return self.bytes >= self.bounds()[1]

    def bounds(self) -> tuple[int, int]:
        """How many calls, and bytes, it holds at most (read when used; the HTTP stateless side has none)."""
        return MAX_PENDING_CALLS, MAX_HELD_BYTES

    def hold_answers(self, held: _Held, size: int) -> None:
        """A batch of `held`'s line waits for its running calls with `size` bytes of answers made already:
        they count too (taken without asking: the batch is accepted, its calls are running)."""
        with self._lock:
            held.answers += size
            self.bytes += size
            self.peak_bytes = max(self.peak_bytes, self.bytes)

    def give_back(self, held: _Held) -> None:
        """`held`'s line is answered (or will never be): its calls and bytes are held no more."""
        with self._lock:
            self.calls -= held.calls
            self.bytes -= (held.size if held.charged else 0) + held.answers
            held.calls, held.charged, held.answers = 0, False, 0


class _Server(_ToolCallPath):
    """Dispatches decoded messages; tools/call runs on a small pool so ping and cancel stay answered
    (the call path itself, shared by every subclass, is `agent_lab.mcp_calls._ToolCallPath`)."""

    def __init__(
        self,
        registry: Any,
        *,
        actor: Actor,
        writer: _LineWriter,
        approvals: ApprovalSource | None,
        page_size: int,
        server_info: Mapping[str, str],
        max_workers: int,
    ) -> None:
        self.registry = registry
        self.actor = actor
        self.writer = writer
        self.approvals = approvals
        self.page_size = page_size
        self.server_info = dict(server_info)
        self.session = _Session()
        # One waiting thread per pending call (bounded by MAX_PENDING_CALLS); `run_slots` bounds how many run.
        self.pool: concurrent.futures.Executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=MAX_PENDING_CALLS, thread_name_prefix="mcp-call")
        self.backlog = _Backlog()
        self.reading = _Held(0)  # the line the reader is handling (touched by the reader thread only)
        self.run_slots = threading.BoundedSemaphore(max_workers)
        self.in_flight: dict[_RequestId, _InFlight] = {}
        self.in_flight_lock = threading.Lock()
        self.closing = False  # the session ends: no new call or wait is accepted (`abandon_all`)
        self.tasks = TaskAnswers(registry, actor)  # long calls as tasks (`agent_lab.mcp_tasks`)

    # -- reading ---------------------------------------------------------------------------------

    def handle_line(self, line: bytes | None) -> None:
        """One line of input: a message, a batch, or something that is not JSON at all."""
        if line is None:
            self.writer.send(
                _error(
                    None, INVALID_REQUEST, f"Invalid Request: a message is larger than {MAX_MESSAGE_BYTES} bytes"
                )
            )
            return
        if not line.strip():
            return
        self.reading = _Held(len(line))
        try:
            message = json.loads(line.decode("utf-8"), parse_constant=_refuse_constant,
                                 object_pairs_hook=_unique_members)
        except UnicodeDecodeError:
            self.writer.send(_error(None, PARSE_ERROR, "Parse error: the line is not valid UTF-8"))
            return
        except _RepeatedKey:
            self.writer.send(_error(None, PARSE_ERROR, _RepeatedKey.MESSAGE))
            return
        except RecursionError:
            self.writer.send(_error(None, PARSE_ERROR, "Parse error: the message is nested too deeply to read"))
            return
        except ValueError:  # not JSON, NaN or Infinity, an integer of more digits than Python reads
            self.writer.send(_error(None, PARSE_ERROR, "Parse error: the line is not valid JSON"))
            return
        if isinstance(message, list):
            self.handle_batch(message)
        else:
            response = self.handle_message(message, in_batch=False)
            if response is not None:
                self.writer.send(response)

    def handle_batch(self, messages: list[Any]) -> None:
        """JSON-RPC batches exist only in 2025-03-26; other revisions (and the handshake) refuse them."""
        if self.session.protocol_version not in _BATCH_VERSIONS:
            self.writer.send(
                _error(
                    None,
                    INVALID_REQUEST,
                    "Invalid Request: JSON-RPC batches are not supported by the negotiated protocol version",
                )
            )
            return
        if not messages:
            self.writer.send(_error(None, INVALID_REQUEST, "Invalid Request: an empty batch"))
            return
        # Answers are kept encoded (a few bytes each, where a dict of a dict costs hundreds), and once
        # they pass MAX_BATCH_ANSWER_BYTES the rest of the batch is answered without being served.
        pending: list[Any] = []  # encoded answers, and futures of calls still running
        size = 0
        for message in messages:
            answer = self.handle_message(message, in_batch=True) if size <= MAX_BATCH_ANSWER_BYTES \
                else self.answer_unserved(message)
            if answer is None:
                continue
            if not isinstance(answer, concurrent.futures.Future):
                answer = _encoded(answer)
                size += len(answer) + 1
            pending.append(answer)
        running = [item for item in pending if isinstance(item, concurrent.futures.Future)]
        if not running:
            if pending:
                self.writer.send_batch(pending)
            return
        # The batch is answered once its last call ends, by the worker that ends it: the reader goes on
        # reading meanwhile, so a ping is answered and a cancellation of a batch's call is seen in time.
        # The batch's line and its answers stay in the backlog until that answer is written.
        left = [len(running)]
        left_lock = threading.Lock()
        held = self.reading
        self.backlog.hold_answers(held, size)

        def one_ended(_: concurrent.futures.Future) -> None:
            with left_lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                try:
                    self.send_batch(pending)
                finally:
                    self.backlog.give_back(held)

        for future in running:
            future.add_done_callback(one_ended)

    def send_batch(self, pending: list[Any]) -> None:
        """A batch's answers, once its last call has ended: the encoded ones, and each call's (none for
        a cancelled call)."""
        answers = [item if isinstance(item, str) else _settle(item) for item in pending]
        encoded = [answer for answer in answers if answer is not None]
        if encoded:
            self.writer.send_batch(encoded)

    def answer_unserved(self, message: Any) -> Any:
        """A batch's answer to `message` once the batch's answers are over MAX_BATCH_ANSWER_BYTES: a
        request is refused unserved (SERVER_BUSY, "Server busy": short, since a batch may hold a hundred
        thousand); a notification is handled as usual (a cancellation is still seen); and a malformed
        message, whose error could only carry a null id that matches nothing, is not answered."""
        try:
            request = _parse_request(message)
        except (_ProtocolError, _UnanswerableNotification):
            return None
        if request.is_notification:
            self.handle_notification(request)
            return None
        return _error(request.id, SERVER_BUSY, "Server busy")

    def handle_message(self, message: Any, *, in_batch: bool) -> Any:
        """Returns the response (a dict, a Future of one, or None); tools/call outside a batch answers itself."""
        if _is_response(message):
            self.handle_client_response(message)
            return None
        try:
            request = _parse_request(message)
        except _ProtocolError as exc:
            return _error(exc.request_id, exc.code, exc.message)
        except _UnanswerableNotification as exc:
            logger.info("dropped notification %.80r: its params are not an object", str(exc))
            return None
        if request.is_notification:
            self.handle_notification(request)
            return None
        try:
            return self.handle_request(request, in_batch=in_batch)
        except _ProtocolError as exc:
            return _error(request.id, exc.code, exc.message, exc.data)
        except Exception:  # a bug of ours: the client gets a generic error, the details stay in the log
            logger.exception("internal error while handling %.80r", request.method)
            return _error(request.id, INTERNAL_ERROR, "Internal error")

    def handle_client_response(self, message: Mapping[str, Any]) -> None:
        """A client's response to a request this server sent; this server sends none (a gateway that
        asks the user to confirm a call does: `agent_lab.gateway`)."""
        logger.info("ignored a response from the client; this server sends no requests")

    # -- notifications ---------------------------------------------------------------------------

    def handle_notification(self, request: _Request) -> None:
        if request.method == "notifications/initialized":
            self.session.initialized = True
        elif request.method == "notifications/cancelled":
            self.cancel(request.params.get("requestId"))
        else:
            logger.debug("ignored notification %.80r", request.method)

    def cancel(self, request_id: Any) -> None:
        """Marks an in-flight tools/call (or tasks/result) as cancelled: it gets no response (a call may
        still finish its work), and what it waits for (a task, the user's confirmation) it waits for no more."""
        if not _valid_id(request_id):
            return
        with self.in_flight_lock:
            call = self.in_flight.get(request_id)
        if call is not None:
            call.cancelled.set()
            self.abandon(request_id)
            logger.info("request %r cancelled by the client", request_id)

    # -- requests --------------------------------------------------------------------------------

    def handle_request(self, request: _Request, *, in_batch: bool) -> Any:
        if (
            _carries_envelope(request.params)
            and request.method != "initialize"
            and self.session.era != "handshake"
        ):
            return self.handle_modern(request, in_batch=in_batch)
        if request.method == "server/discover" and self.session.era is None:
            return self.handle_modern(request, in_batch=in_batch)  # the envelope check refuses it
        if self.session.era == "modern":
            return self.handle_unenveloped_on_modern(request)
        return self.handle_handshake_era(request, in_batch=in_batch)

    def handle_handshake_era(self, request: _Request, *, in_batch: bool) -> Any:
        method = request.method
        if _carries_envelope(request.params) and method != "initialize":
            raise _ProtocolError(
                INVALID_REQUEST,
                "Invalid Request: this connection uses the initialize handshake; requests carrying the "
                "2026-07-28 envelope are not accepted on it",
            )
        if method == "ping":
            return _result(request.id, {})
        if method == "initialize":
            if in_batch:
                raise _ProtocolError(INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch")
            return _result(request.id, self.initialize(request.params))
        if self.session.protocol_version is None:
            raise _ProtocolError(
                INVALID_REQUEST, "Invalid Request: the server is not initialized; send initialize first"
            )
        if method == "tools/list":
            return _result(request.id, self.list_tools(request.params))
        if method == "tools/call":
            return self.start_call(request, in_batch=in_batch, shape=_plain)
        if method.startswith("tasks/"):
            return self.answer_tasks(request, in_batch=in_batch, shape=_plain)
        raise _ProtocolError(METHOD_NOT_FOUND, "Method not found")

    def initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Version negotiation: echo a supported version, else answer the latest one we speak."""
        if self.session.protocol_version is not None:
            raise _ProtocolError(INVALID_REQUEST, "Invalid Request: the session is already initialized")
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise _ProtocolError(INVALID_PARAMS, "Invalid params: initialize needs protocolVersion, a string")
        if "capabilities" in params and not isinstance(params["capabilities"], dict):
            raise _ProtocolError(INVALID_PARAMS, "Invalid params: capabilities must be an object")
        version = requested if requested in HANDSHAKE_VERSIONS else LATEST_VERSION
        self.session.era = "handshake"
        self.session.protocol_version = version
        self.session.client_capabilities = dict(params.get("capabilities") or {})
        client = params.get("clientInfo")
        client_name = client.get("name") if isinstance(client, dict) else None
        logger.info(
            "initialized with protocol %s (client asked %.40r, client %.80r)", version, requested, client_name
        )
        return {
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": dict(self.server_info),
        }

    def capabilities(self) -> dict[str, Any]:
        return self.tasks.capabilities({"tools": {"listChanged": False}})

    # -- the stateless 2026-07-28 revision -------------------------------------------------------

    def handle_modern(self, request: _Request, *, in_batch: bool) -> Any:
        """A request with the per-request envelope: check it, then answer in the modern shape."""
        if in_batch:
            raise _ProtocolError(
                INVALID_REQUEST, "Invalid Request: batches are not part of the 2026-07-28 protocol"
            )
        _check_envelope(request.params)
        self.session.era = "modern"
        self.session.client_capabilities = dict(request.params["_meta"][_META_CLIENT_CAPABILITIES])
        method = request.method
        if method == "server/discover":
            return _result(request.id, self.modern_shape(self.discover(), cacheable=True))
        if method == "tools/list":
            listing = self.list_tools(request.params)
            return _result(request.id, self.modern_shape(listing, cacheable=True))
        if method == "tools/call":
            return self.start_call(request, in_batch=False, shape=self.modern_shape)
        if method == "ping":
            return _result(request.id, self.modern_shape({}))
        if method.startswith("tasks/"):
            return self.answer_tasks(request, in_batch=False, shape=self.modern_shape)
        raise _ProtocolError(METHOD_NOT_FOUND, "Method not found")

    def handle_unenveloped_on_modern(self, request: _Request) -> Any:
        """A stateless connection: initialize is refused naming the versions served, ping is answered,
        and anything else lacks the envelope every 2026-07-28 request carries."""
        if request.method == "initialize":
            requested = request.params.get("protocolVersion")
            raise _ProtocolError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "This connection serves the 2026-07-28 protocol; the initialize handshake is not accepted",
                {"supported": list(MODERN_VERSIONS), "requested": requested if isinstance(requested, str) else ""},
            )
        if request.method == "ping":
            return _result(request.id, {})
        raise _ProtocolError(
            INVALID_PARAMS, f"Invalid params: this connection needs {_META_PROTOCOL_VERSION} in params._meta"
        )

    def discover(self) -> dict[str, Any]:
        return {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": self.capabilities(),
            "serverInfo": dict(self.server_info),
        }

    def modern_shape(self, result: Mapping[str, Any], *, cacheable: bool = False) -> dict[str, Any]:
        """Every 2026-07-28 result says it is complete and who answered; list results carry cache hints."""
        shaped = dict(result)
        shaped["resultType"] = "complete"
        if cacheable:
            shaped["ttlMs"] = 0
            shaped["cacheScope"] = "private"
        meta = dict(shaped.get("_meta") or {})
        meta[_META_SERVER_INFO] = dict(self.server_info)
        shaped["_meta"] = meta
        return shaped

    # -- tools/list ------------------------------------------------------------------------------

    def list_tools(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """One page of the actor's catalogue; the cursor is opaque and bound to this listing."""
        names = [entry["name"] for entry in self.registry.catalog(self.actor)]
        start = self.read_cursor(params.get("cursor"), len(names))
        page = names[start : start + self.page_size]
        result: dict[str, Any] = {"tools": [self.tool_definition(name) for name in page]}
        following = start + len(page)
        if following < len(names):
            result["nextCursor"] = self.registry.cursors.issue(following, self.cursor_query())
        return result

    def cursor_query(self) -> dict[str, Any]:
        return {"mcp": "tools/list", "actor": self.actor.id, "tenant": self.actor.tenant}

    def read_cursor(self, cursor: Any, total: int) -> int:
        if cursor is None:
            return 0
        if not isinstance(cursor, str):
            raise _ProtocolError(INVALID_PARAMS, "Invalid params: cursor must be a string")
        try:
            position = self.registry.cursors.read(cursor, self.cursor_query())
        except ToolFailure:
            raise _ProtocolError(
                INVALID_PARAMS, "Invalid params: the cursor is not one this server issued"
            ) from None
        if not 0 <= position <= total:
            raise _ProtocolError(INVALID_PARAMS, "Invalid params: the cursor is out of range")
        return position

    def tool_definition(self, name: str) -> dict[str, Any]:
        return mcp_tool(self.registry.spec(name))

    # -- stopping --------------------------------------------------------------------------------

    drains_tasks = True  # whether close() waits for the registry's running tasks (the process stops)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        if self.drains_tasks:
            self.tasks.drain()  # a graceful stop lets running tasks record their results


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _RepeatedKey(ValueError):
    """An object that names one member twice: which one counts differs between readers (Python keeps
    the last, many the first), so a gateway could check one tool name or argument and we run the other."""

    MESSAGE = "Parse error: an object repeats a key, so its meaning is ambiguous"


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _RepeatedKey(_RepeatedKey.MESSAGE)
    return members


def _plain(result: Mapping[str, Any]) -> dict[str, Any]:
    return dict(result)


def _carries_envelope(params: Mapping[str, Any]) -> bool:
    """The 2026-07-28 envelope's version key is the signal; older clients never send that reserved key."""
    meta = params.get("_meta")
    return isinstance(meta, dict) and _META_PROTOCOL_VERSION in meta


def _check_envelope(params: Mapping[str, Any]) -> None:
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise _ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: params._meta must carry {_META_PROTOCOL_VERSION} and {_META_CLIENT_CAPABILITIES}",
        )
    missing = [key for key in (_META_PROTOCOL_VERSION, _META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise _ProtocolError(INVALID_PARAMS, "Invalid params: params._meta is missing " + ", ".join(missing))
    version = meta[_META_PROTOCOL_VERSION]
    if not isinstance(version, str):
        raise _ProtocolError(INVALID_PARAMS, f"Invalid params: {_META_PROTOCOL_VERSION} must be a string")
    if version not in MODERN_VERSIONS:
        raise _ProtocolError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS), "requested": version},
        )
    if not isinstance(meta[_META_CLIENT_CAPABILITIES], dict):
        raise _ProtocolError(INVALID_PARAMS, f"Invalid params: {_META_CLIENT_CAPABILITIES} must be an object")




# -- the front door --------------------------------------------------------------------------------


def serve(
    registry: Any,
    *,
    actor: Actor,
    stdin: BinaryIO | TextIO | None = None,
    stdout: BinaryIO | TextIO | None = None,
    approvals: ApprovalSource | None = None,
    page_size: int = 50,
    server_name: str = "agent-lab",
    server_version: str = __version__,
    max_workers: int = DEFAULT_MAX_WORKERS,
) -> int:
    """Serve `registry` over MCP until stdin closes; returns the process exit code (0: clean end of input).

    `actor` is who every tool call runs as: the server's configuration decides it, never the client.
    `approvals(call, actor)` may return a person's Approval for exactly that call (None: not approved).
    """
    if not isinstance(actor, Actor):
        raise TypeError("serve() needs actor=Actor(...): the identity every tool call runs as")
    for value, name in ((page_size, "page_size"), (max_workers, "max_workers")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"serve() {name} must be a positive integer")
    source = stdin if stdin is not None else sys.stdin.buffer
    with _protocol_stream(stdout) as sink:
        return _serve_lines(
            registry,
            actor=actor,
            source=source,
            writer=_LineWriter(sink),
            approvals=approvals,
            page_size=page_size,
            server_info={"name": server_name, "version": server_version},
            max_workers=max_workers,
        )


@contextlib.contextmanager
def _protocol_stream(stdout: BinaryIO | TextIO | None) -> Iterator[BinaryIO | TextIO]:
    """The stream protocol messages go to. Given none, the process's stdout becomes the protocol's alone:
    the protocol writes to a private duplicate of descriptor 1, while descriptor 1 itself (inherited by
    child processes, used by raw writes) and `sys.stdout` point at stderr until serving ends."""
    if stdout is not None:
        yield stdout
        return
    try:
        sys.stdout.flush()
        protocol_fd = os.dup(1)
    except (OSError, ValueError):  # no real descriptor 1 (an embedded interpreter): guard print only
        original = getattr(sys.stdout, "buffer", sys.stdout)
        with contextlib.redirect_stdout(sys.stderr):
            yield original
        return
    protocol = os.fdopen(protocol_fd, "wb")
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield protocol
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(protocol_fd, 1)
        with contextlib.suppress(OSError, ValueError):
            protocol.close()


def _serve_lines(
    registry: Any,
    *,
    actor: Actor,
    source: BinaryIO | TextIO,
    writer: _LineWriter,
    approvals: ApprovalSource | None,
    page_size: int,
    server_info: Mapping[str, str],
    max_workers: int,
    server_class: Callable[..., _Server] | None = None,
) -> int:
    """Reads and answers messages until the input ends (0) or the output is gone (1); `server_class`
    is a _Server subclass to dispatch with (the gateway's), else _Server."""
    server = (server_class or _Server)(
        registry,
        actor=actor,
        writer=writer,
        approvals=approvals,
        page_size=page_size,
        server_info=server_info,
        max_workers=max_workers,
    )
    logger.info("serving %d tools over MCP stdio to actor %s", len(registry.catalog(actor)), actor.id)
    try:
        for line in _read_lines(source):
            server.handle_line(line)
            if writer.broken:
                break
    finally:
        server.close()  # the last call finishes while stdout is still redirected: its noise goes to stderr
    logger.info("end of input; MCP server stopped")
    return 1 if writer.broken else 0
