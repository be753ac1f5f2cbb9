"""How a report names a file: relative as given, or by its name alone, never by an absolute path (reports
are committed and compared across machines). Below the report writers, which all use it."""

from __future__ import annotations

from pathlib import Path

__all__ = ["display_path"]


def display_path(path: str) -> str:
    """A path fit for a report: relative as given, or just the file name (never absolute)."""
    candidate = Path(path)
    if not candidate.is_absolute():
        return candidate.as_posix()
    try:
        return candidate.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return candidate.name
