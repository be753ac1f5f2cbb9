"""A list of JSON records kept in a file: the part of a world that must outlive a process.

A crash case (`{"do": "crash_after_effect"}`) runs one call in a child process and kills it right after
the call's effect; the replay then goes on in the parent, against the same world. An in-memory world
would lose what the child did with the child, so a lab that wants crash cases gives its world factory a
`directory` keyword and keeps what the lab counts there. `Journal` is the smallest such store: one JSON
record a line, appended in one write under a lock that other processes respect too (`fcntl.flock`
where there is one), read back whole each time. Any world opened on the same directory, in any process,
sees the same records in the same order.

    class Shop:
        def __init__(self, directory=None):
            self.refunds = Journal(directory, "refunds") if directory is not None else []
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator, Union

__all__ = ["Journal"]


class Journal:
    """Records appended to `<directory>/<name>.jsonl` (created if missing). Thread-safe, and safe for
    several processes appending to one file. A line cut short by a crash is not a record: the next
    append starts a new line after it, and reading skips it (it is not JSON)."""

    def __init__(self, directory: Union[str, "os.PathLike[str]"], name: str = "effects") -> None:
        if not name or "/" in name or "\\" in name or name.startswith("."):
            raise ValueError("a journal's name must be a plain file name (no directories)")
        self.path = Path(directory) / f"{name}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch(exist_ok=True)
        self._lock = threading.Lock()

    def append(self, record: Any) -> None:
        """Add one record (any JSON value) at the end."""
        line = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
        with self._lock, open(self.path, "a+b") as file, _exclusive(file):
            file.seek(0, os.SEEK_END)
            cut = file.tell() > 0 and _last_byte(file) != b"\n"
            file.write((b"\n" if cut else b"") + line.encode("utf-8") + b"\n")  # one write: one record

    def records(self) -> list[Any]:
        """Every complete record, oldest first."""
        with self._lock, open(self.path, "rb") as file:
            data = file.read()
        lines = data.split(b"\n")[:-1]  # the text after the last newline is an unfinished line
        return [record for record in map(_decoded, lines) if record is not _CUT]

    def __len__(self) -> int:
        return len(self.records())

    def __iter__(self) -> Iterator[Any]:
        return iter(self.records())

    def __repr__(self) -> str:
        return f"Journal({str(self.path)!r})"


_CUT = object()


def _decoded(line: bytes) -> Any:
    """The record on one line, or `_CUT` for a blank line or one a crash cut short (not JSON)."""
    if not line.strip():
        return _CUT
    try:
        return json.loads(line)
    except ValueError:
        return _CUT


def _last_byte(file: Any) -> bytes:
    file.seek(-1, os.SEEK_END)
    byte: bytes = file.read(1)
    file.seek(0, os.SEEK_END)
    return byte


@contextlib.contextmanager
def _exclusive(file: Any) -> Iterator[None]:
    """Hold an exclusive advisory lock on `file` (other processes' appends wait); a no-op where the
    platform has no `fcntl` (the crash markers, which need a second process, need POSIX anyway)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fcntl.flock(file.fileno(), fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(file.fileno(), fcntl.LOCK_UN)
