"""JSON-RPC correlation for the client: request ids, the requests waiting for an answer, and what
becomes of them when an answer, a failure or the end of the connection arrives. It knows nothing of MCP.

Answers are matched by id only to requests still waiting: a late answer (after a timeout or a
cancellation) and an answer to an id never issued are dropped. An answer that is not JSON-RPC 2.0
(`"jsonrpc": "2.0"`, exactly one of `result` and `error`) fails its request with McpProtocolError.
Once the connection is lost, every waiting request fails with the reason, and so does every later one.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any, Callable

from .streamable_http import HttpStatusError
from .wire import McpError, McpProtocolError, McpRemoteError, valid_id

__all__ = ["Pending", "PendingRequests", "restated"]

logger = logging.getLogger("agent_lab.mcp_client")
MAX_BATCH_ITEMS = 1000  # messages read from one 2025-03-26 batch


class Pending:
    """One request waiting: `done` is set once `response` (the JSON-RPC answer) or `error` is there;
    `handle` is what its transport gave back (it says whether the request may have left)."""

    __slots__ = ("done", "response", "error", "handle")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: dict[str, Any] | None = None
        self.error: McpError | None = None
        self.handle: Any = None

    @property
    def sent(self) -> bool:
        started = getattr(self.handle, "started", None)
        return started.is_set() if isinstance(started, threading.Event) else self.handle is not None


class PendingRequests:
    """The requests of one connection waiting for answers (safe to use from any thread)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._ids = itertools.count(1)
        self._waiting: dict[Any, Pending] = {}
        self._lock = threading.Lock()
        self.broken: McpError | None = None  # why the connection ended, once it has

    def open(self) -> tuple[int, Pending]:
        """A new id and its Pending; the connection's end as an error (not sent) if it has ended."""
        if self.broken is not None:
            raise restated(self.broken, self.broken.detail, sent=False)
        with self._lock:
            request_id = next(self._ids)
            pending = self._waiting[request_id] = Pending()
        return request_id, pending

    def close(self, request_id: Any) -> None:
        """Stop waiting for `request_id`: an answer that comes later is dropped."""
        with self._lock:
            self._waiting.pop(request_id, None)

    def deliver(self, message: Any, server_message: Callable[[dict[str, Any]], None]) -> None:
        """One message from the server: an answer settles its request; a request or notification of the
        server's goes to `server_message`; anything else is dropped."""
        if isinstance(message, list):  # a 2025-03-26 batch
            for item in message[:MAX_BATCH_ITEMS]:
                self.deliver(item, server_message)
            return
        if not isinstance(message, dict):
            return
        if "method" in message:
            server_message(message)
            return
        request_id = message.get("id")
        with self._lock:
            pending = self._waiting.get(request_id) if valid_id(request_id) else None
        if pending is None:
            logger.debug("mcp client: %s answered request %.40r, which is not waiting; dropped", self.label, request_id)
            return
        if message.get("jsonrpc") != "2.0" or ("result" in message) == ("error" in message):
            pending.error = McpProtocolError(self.label, 'answered with a message that is not JSON-RPC 2.0 (it needs '
                                             '"jsonrpc": "2.0" and exactly one of result and error)')
        else:
            pending.response = message
        pending.done.set()

    def fail(self, request_id: Any, error: McpError) -> None:
        """One request's exchange failed (an HTTP answer that could not be read, say)."""
        with self._lock:
            pending = self._waiting.get(request_id)
        if pending is not None:
            pending.error = error
            pending.done.set()

    def lose(self, error: McpError) -> None:
        """The connection ended: every waiting request, and every later one, fails with `error`."""
        with self._lock:
            if self.broken is None:
                self.broken = error
            waiting = list(self._waiting.values())
        for pending in waiting:
            if not pending.done.is_set():
                pending.error = error
                pending.done.set()


def restated(error: McpError, detail: str, *, sent: bool) -> McpError:
    """A new error of the same kind about the same server, with `detail` and `sent`."""
    if isinstance(error, HttpStatusError):
        return HttpStatusError(error.server, detail, error.status, sent=sent)
    if isinstance(error, McpRemoteError):
        return error
    return type(error)(error.server, detail, sent=sent)
