"""The audit trail: one record per `Registry.invoke`, written to a sink.

A record says who called which tool, how far the call got through the fixed steps, and how it ended;
it never holds arguments or output, and the registry redacts what it passes anyway. Every record has
exactly the keys in `AUDIT_FIELDS` (build it with `audit_record`), so every sink sees one shape.

Sinks never fail on a value they cannot serialise: it becomes a placeholder naming its type. They can
still fail on I/O (a full disk), which the caller should contain.
"""

from __future__ import annotations

import enum
import json
import math
import os
import threading
from typing import Any, Mapping, Protocol, runtime_checkable

__all__ = [
    "AUDIT_FIELDS",
    "AUDIT_STEPS",
    "MAX_AUDIT_DEPTH",
    "AuditSink",
    "JsonlAuditSink",
    "MemoryAuditSink",
    "audit_record",
    "read_audit_file",
]

AUDIT_FIELDS = (
    "call_id",
    "tool",
    "actor_id",
    "tenant",
    "fingerprint",
    "step",  # the last step the call reached (one of AUDIT_STEPS)
    "outcome",
    "error_code",
    "duration_ms",
    "replayed",
    "approval_id",
    "receipt",  # what became of the idempotency receipt: stored, released, refused, pending, late (or None)
    "attempt",  # which attempt of a retried call this was (1, 2, ...; see agent_lab.retry), None for a lone call
)

AUDIT_STEPS = ("route", "schema", "permission", "approval", "deadline", "idempotency", "execute", "output", "record")
"""The steps of `Registry.invoke`, in order; a record's `step` names the last one reached."""

MAX_AUDIT_DEPTH = 16
"""Records are flat; containers nested deeper than this (the record itself is the first level) are
written as a placeholder, never recursed into, so a cyclic value cannot hang or crash a sink."""


@runtime_checkable
class AuditSink(Protocol):
    """Where audit records go. `write` is called once per invoke, possibly from several threads."""

    def write(self, record: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def audit_record(**fields: Any) -> dict[str, Any]:
    """A record with every key of `AUDIT_FIELDS` (missing ones None); enum values become their values.

    Raises TypeError for a name that is not an audit field, so a typo cannot silently change the shape.
    """
    unknown = sorted(set(fields) - set(AUDIT_FIELDS))
    if unknown:
        raise TypeError(f"not audit fields: {', '.join(unknown)} (fields are: {', '.join(AUDIT_FIELDS)})")
    return {name: _plain(fields.get(name), 1) for name in AUDIT_FIELDS}  # members of a level-0 object


def _plain(value: Any, depth: int) -> Any:
    """`value` as plain JSON data; anything else becomes a placeholder naming its type."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value, depth)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else "<non-finite number>"
    if depth >= MAX_AUDIT_DEPTH and isinstance(value, (Mapping, list, tuple)):
        return "<nested too deep>"
    if isinstance(value, Mapping):
        return {_plain_key(key): _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item, depth + 1) for item in value]
    return f"<non-JSON: {type(value).__name__}>"


def _plain_key(key: Any) -> str:
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, (bool, int)) or (isinstance(key, float) and math.isfinite(key)):
        return json.dumps(key)
    return f"<non-JSON: {type(key).__name__}>"


# JSON allows these raw inside strings, but line splitters (str.splitlines) treat them as line breaks.
_LINE_BREAKS_JSON_ALLOWS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}


def _json_line(record: Mapping[str, Any]) -> bytes:
    """One compact JSON line (sorted keys, UTF-8), ending in exactly one newline."""
    if not isinstance(record, Mapping):
        raise TypeError("an audit record must be a mapping (build it with audit_record)")
    text = json.dumps(_plain(record, 0), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in _LINE_BREAKS_JSON_ALLOWS.items():
        text = text.replace(raw, escaped)
    # A lone surrogate cannot be UTF-8; "\udXXX" written out is the JSON escape for it.
    return (text + "\n").encode("utf-8", errors="backslashreplace")


class JsonlAuditSink:
    """Appends one JSON line per record to `path`; safe to share between threads.

    The file is opened (append mode, created if missing) on the first write. Each line goes out in a
    single unbuffered append, so it is on disk (in the OS cache) when `write` returns, and lines from
    threads or processes sharing the file are never interleaved. `close` is idempotent; writing after
    it raises ValueError.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._file: Any = None
        self._closed = False

    def write(self, record: Mapping[str, Any]) -> None:
        line = _json_line(record)
        with self._lock:
            if self._closed:
                raise ValueError("write to a closed JsonlAuditSink")
            if self._file is None:
                self._file = open(self.path, "ab", buffering=0)
            view = memoryview(line)
            while view:
                written = self._file.write(view)
                view = view[written:]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> JsonlAuditSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonlAuditSink({self.path!r})"


class MemoryAuditSink:
    """Keeps records in `records` (as plain JSON data, the same shape a file would hold); for tests."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._closed = False

    def write(self, record: Mapping[str, Any]) -> None:
        if not isinstance(record, Mapping):
            raise TypeError("an audit record must be a mapping (build it with audit_record)")
        plain = _plain(record, 0)
        with self._lock:
            if self._closed:
                raise ValueError("write to a closed MemoryAuditSink")
            self.records.append(plain)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def __enter__(self) -> MemoryAuditSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_audit_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records a `JsonlAuditSink` wrote to `path`, in order (for tests, tools and reports)."""
    with open(path, "rb") as file:
        data = file.read().decode("utf-8")
    return [json.loads(line) for line in data.split("\n") if line]
