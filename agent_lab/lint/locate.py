"""Where a tool is defined: a file (relative to the current directory) and a line, for reports.

Found from the registered handler: its source file is read and the first line that names the tool
(`name="get_ticket"` or `"name": "get_ticket"`) is taken; when no line names it (a name built at run
time), the handler's own definition line. A tool imported from an MCP server is located at the server
(its URL, or `mcp+stdio:` and its command) with no line. A tool whose handler has no Python source, or whose file lies
outside the base directory, has no location: reports then give its logical location only, so no
absolute path ever appears in a report.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..registry import Registry

__all__ = ["SourceLocation", "handler_function", "locate_tools"]


@dataclass(frozen=True)
class SourceLocation:
    path: str  # relative to the base directory, with forward slashes (or an MCP server's URI)
    line: int  # 1-based (0: no line, for a tool imported from an MCP server)


def handler_function(registry: Registry, name: str) -> Optional[Callable[..., Any]]:
    """The function the user registered for `name` (`Registry.handler`, unwrapped from decorators and
    partials), or None when there is no such tool."""
    try:
        function: Any = registry.handler(name)
    except KeyError:
        return None
    for _ in range(16):
        if isinstance(function, functools.partial):
            function = function.func
        elif function is not None and hasattr(function, "__wrapped__"):
            function = inspect.unwrap(function)
        else:
            break
    if function is not None and not (inspect.isfunction(function) or inspect.ismethod(function)):
        function = type(function)  # a callable object: where its class is defined
    return function


def _relative(path: str, base: Path) -> Optional[str]:
    try:
        relative = Path(path).resolve().relative_to(base)
    except ValueError:
        return None
    return relative.as_posix()


def locate_tools(registry: Registry, *, base: Optional[str] = None) -> dict[str, SourceLocation]:
    """{tool name: where it is defined} for the tools of `registry` whose definition can be found."""
    root = Path(base or os.getcwd()).resolve()
    lines_of: dict[str, list[str]] = {}
    found: dict[str, SourceLocation] = {}
    for name in registry.names():
        provenance = registry.spec(name).provenance
        if provenance is not None:  # imported from an MCP server: the server is where it is defined
            found[name] = SourceLocation(provenance.artifact_uri, 0)
            continue
        function = handler_function(registry, name)
        if function is None:
            continue
        try:
            source_file = inspect.getsourcefile(function)
            first_line = inspect.getsourcelines(function)[1] if source_file else 0
        except (OSError, TypeError):
            continue
        if not source_file:
            continue
        relative = _relative(source_file, root)
        if relative is None:
            continue
        if source_file not in lines_of:
            try:
                lines_of[source_file] = Path(source_file).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                lines_of[source_file] = []
        naming = re.compile(rf"""\bname\s*=\s*["']{re.escape(name)}["']|["']name["']\s*:\s*["']{re.escape(name)}["']""")
        line = next((number for number, text in enumerate(lines_of[source_file], start=1) if naming.search(text)),
                    max(first_line, 1))
        found[name] = SourceLocation(relative, line)
    return found
