"""How a report names a file: relative as given, or by its name alone, never by an absolute path (reports
are committed and compared across machines). Below the report writers, which all use it. And where a
path leads, whatever a user's file system holds there (`resolved`)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["display_path", "resolved"]


def resolved(path: str | os.PathLike[str]) -> Path:
    """Where `path` leads (symbolic links and `..` resolved), or, when it leads nowhere because a link
    points back at itself, the absolute path as written: `Path.resolve()` raises RuntimeError on a
    symbolic link loop before Python 3.13 (OSError since), and a command given one (`--out`, `--cases`)
    must still answer with one line, which opening the path gives ("Too many levels of symbolic links")."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(path))


def display_path(path: str) -> str:
    """A path fit for a report: relative as given, or just the file name (never absolute)."""
    candidate = Path(path)
    if not candidate.is_absolute():
        return candidate.as_posix()
    try:
        return candidate.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return candidate.name
