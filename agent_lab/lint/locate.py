"""Where a tool is defined: a file (relative to the current directory) and a line, for reports.

Found from the registered handler: its source file is read and the first line that names the tool
(`name="get_ticket"` or `"name": "get_ticket"`) is taken; when no line names it (a name built at run
time), the handler's own definition line. A handler agent-lab wrapped around the user's function
(`@tool`) is looked through to that function. A file under the base directory is shown by its relative
path, one outside it by its absolute path (SARIF needs a physical location to show a finding on a
file). A tool imported from an MCP server is located at the server (its URL, or `mcp+stdio:` and its
command) with no line. A tool whose handler has no Python source has no location, and reports give its
logical location only.
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
    path: str  # relative to the base directory, else absolute, with forward slashes; or an MCP server's URI
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
    return _user_function(function)


def _shown_path(path: str, base: Path) -> str:
    """Relative to `base` when the file is under it, else absolute (forward slashes either way)."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(base).as_posix()
    except ValueError:
        return resolved.as_posix()


_PACKAGE = Path(__file__).resolve().parent.parent


def _user_function(function: Any) -> Any:
    """For a handler agent-lab made around the user's function (`@tool`, `ToolSpec.from_function`: a
    closure defined in agent_lab/signature/arguments.py), the user's function from the closure, so a finding
    points at the user's line rather than at ours."""
    for _ in range(4):
        code = getattr(function, "__code__", None)
        if code is None or not _in_package(code.co_filename):
            return function
        inner = [cell.cell_contents for cell in (function.__closure__ or ()) if _is_function(cell)]
        if not inner:
            return function
        function = inner[0]
    return function


@functools.lru_cache(maxsize=256)
def _in_package(filename: str) -> bool:
    """Whether the source file `filename` is agent-lab's own (every handler of a module shares one)."""
    return _PACKAGE in Path(filename).resolve().parents


def _is_function(cell: Any) -> bool:
    try:
        return inspect.isfunction(cell.cell_contents) or inspect.ismethod(cell.cell_contents)
    except ValueError:  # an empty cell
        return False


def _definition_line(function: Any) -> int:
    """The line `inspect.getsourcelines(function)` starts at (1-based; 0 for a module), and the same
    OSError or TypeError when the source cannot be found, without tokenizing the definition's block
    (only where it starts is used)."""
    target = inspect.unwrap(function)
    start = inspect.findsource(target)[1]
    return 0 if inspect.ismodule(target) else start + 1


_NAMING_PREFIX = re.compile(r"""(?:\bname\s*=\s*|["']name["']\s*:\s*)\Z""")


def _names_tool(text: str, name: str) -> bool:
    """Whether `text` says `name = "NAME"` or `"name": "NAME"` (either quote, either side): what
    `\\bname\\s*=\\s*["']NAME["']|["']name["']\\s*:\\s*["']NAME["']` finds, without compiling a
    pattern per tool (a tenth of a millisecond each): every quoted NAME is looked at, and the text
    before its opening quote must end with one of the two prefixes."""
    start = text.find(name)
    while start != -1:
        end = start + len(name)
        if 0 < start and end < len(text) and text[start - 1] in "\"'" and text[end] in "\"'" \
                and _NAMING_PREFIX.search(text, 0, start - 1):
            return True
        start = text.find(name, start + 1)
    return False


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
            first_line = _definition_line(function) if source_file else 0
        except (OSError, TypeError):
            continue
        if not source_file:
            continue
        shown = _shown_path(source_file, root)
        if source_file not in lines_of:
            try:
                lines_of[source_file] = Path(source_file).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                lines_of[source_file] = []
        line = next((number for number, text in enumerate(lines_of[source_file], start=1) if _names_tool(text, name)),
                    max(first_line, 1))
        found[name] = SourceLocation(shown, line)
    return found
