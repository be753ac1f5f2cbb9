"""Step 2 of reading a tool function: its docstring, the tool's description and its parameters'.

The summary (the prose before the first section) becomes the tool's description; a parameter's line
in a reST field list (``:param x: ...``) or a Google ``Args:`` section becomes its property's
description. Other sections (``Returns:``, ``:raises:``) are read past, never shown to the model.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["Docstring", "join_lines", "read_docstring"]

_REST_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(?P<name>\w+)\s*:\s*(?P<text>.*)$")
_REST_FIELD = re.compile(r"^:(?:param|type|returns?|rtype|raises?|var|ivar|cvar)\b")
_GOOGLE_SECTION = re.compile(r"^(?P<title>[A-Z][A-Za-z ]*):\s*$")
_GOOGLE_PARAM_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"})
_GOOGLE_ENTRY = re.compile(r"^(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")


@dataclass(frozen=True)
class Docstring:
    summary: str  # the prose before the first section, paragraphs joined
    parameters: Mapping[str, str]  # parameter name -> its description


def join_lines(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())


def read_docstring(fn: Callable[..., Any]) -> Docstring:
    """Step 2: the summary and per-parameter descriptions (reST ``:param x:`` or Google ``Args:``)."""
    text = inspect.getdoc(fn) or ""
    lines = text.splitlines()
    prose: list[str] = []
    parameters: dict[str, list[str]] = {}
    index = 0
    while index < len(lines) and not _starts_section(lines[index]):
        prose.append(lines[index])
        index += 1
    while index < len(lines):
        index = _read_section(lines, index, parameters)
    paragraphs = "\n".join(prose).strip().split("\n\n")
    summary = "\n\n".join(join_lines(paragraph.splitlines()) for paragraph in paragraphs if paragraph.strip())
    return Docstring(summary, {name: join_lines(parts) for name, parts in parameters.items()})


def _starts_section(line: str) -> bool:
    stripped = line.strip()
    return bool(_REST_FIELD.match(stripped)) or bool(_GOOGLE_SECTION.match(stripped) and line == line.lstrip())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _read_section(lines: list[str], index: int, parameters: dict[str, list[str]]) -> int:
    """Read one reST field or one Google section starting at `index`; return the next index."""
    line = lines[index]
    stripped = line.strip()
    rest = _REST_PARAM.match(stripped)
    if rest:
        parts = parameters.setdefault(rest.group("name"), [])
        parts.append(rest.group("text"))
        index += 1
        while index < len(lines) and lines[index].strip() and _indent(lines[index]) > _indent(line):
            parts.append(lines[index])
            index += 1
        return index
    google = _GOOGLE_SECTION.match(stripped)
    if google and not _REST_FIELD.match(stripped):
        return _read_google_section(lines, index + 1, google.group("title") in _GOOGLE_PARAM_SECTIONS, parameters)
    return index + 1  # another reST field (:returns: ...) or its continuation: not a parameter


def _read_google_section(lines: list[str], index: int, is_parameters: bool, parameters: dict[str, list[str]]) -> int:
    entry_indent: int | None = None
    current: list[str] | None = None
    while index < len(lines):
        line = lines[index]
        if line.strip() and _indent(line) == 0:
            break  # the next section
        if line.strip():
            if entry_indent is None:
                entry_indent = _indent(line)
            entry = _GOOGLE_ENTRY.match(line.strip())
            if _indent(line) == entry_indent and entry:
                current = parameters.setdefault(entry.group("name"), []) if is_parameters else None
                if current is not None:
                    current.append(entry.group("text"))
            elif current is not None:
                current.append(line)
        index += 1
    return index

