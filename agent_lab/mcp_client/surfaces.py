"""MCP servers as tool surfaces: for `--mcp` on the commands, and as surfaces of a lab.

- `open_server_surfaces(servers, policy=...)`: one registry per server, for `lint`, `inspect`, `export`
  and `catalog-cost --mcp SERVER` (each registry owns its client and closes it).
- `ServerSurfaceBuild`: what `Surface.from_mcp(name, server, ...)` builds with: for each case a fresh
  server (the command's `{world}` replaced by the case's world directory), its tools imported under the
  policy into a registry on the lab's receipt store and clock; given several servers, one registry
  holding all their tools, as one agent uses them.
- `McpWorld` and `world_effects`: the world a foreign server writes to, a fresh temporary directory per
  case; its side effects are what the server left there, read back as JSON records: one per line of a
  `.jsonl` file, one per `.json` file, one per row of each table of an SQLite file (`.db`, `.sqlite`,
  `.sqlite3`), and a digest of any other file.
- `server_lab(servers, ...)`: a Lab of one such surface over such worlds, holding every server's tools,
  which `mcp = ...` in `[tool.agent-lab]` (or `tool-eval --mcp A --mcp B`) runs with the project's cases.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import stat
import tempfile
import weakref
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..lab.definition import Lab, LabError, Surface
from ..policy import Actor
from .address import parse_server
from .importing import LockSource, ServerRegistry, load_lock
from .surface_build import ServerSurfaceBuild, lock_for_server, policy_of, server_label
from .tool_policy import PolicyError, ToolPolicy
from .wire import DEFAULT_TIMEOUT_S, McpError

__all__ = ["McpWorld", "ServerSurfaceBuild", "lock_for_server", "open_server_surfaces", "server_label", "server_lab",
           "world_effects"]

logger = logging.getLogger("agent_lab.mcp_client")

MAX_EFFECT_FILE_BYTES = 4 * 1024 * 1024  # a larger file counts as one effect: its digest
MAX_EFFECT_RECORDS = 10_000
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class McpWorld:
    """A fresh temporary directory, removed when the world is dropped (or the process ends)."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="agent-lab-world-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.path, True)

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"McpWorld({self.path!r})"


def new_world(**options: Any) -> McpWorld:
    if options:
        raise TypeError(f"an MCP server lab's world takes no options (got {', '.join(sorted(options))})")
    return McpWorld()


def world_effects(world: Any) -> list[dict[str, Any]]:
    """The records the server left in the world's directory, file by file in path order."""
    root = Path(os.fspath(world))
    records: list[dict[str, Any]] = []
    for path in _files_in(root):
        relative = path.relative_to(root).as_posix()
        if path.name.endswith(("-journal", "-wal", "-shm")):
            continue  # SQLite's own bookkeeping
        if path.is_symlink():  # never followed: a server could point one at any file of this machine
            records.append({"file": relative, "symlink": True})
        else:
            records.extend(_file_records(path, relative))
        if len(records) > MAX_EFFECT_RECORDS:
            raise ValueError(f"the world holds more than {MAX_EFFECT_RECORDS} records")
    return records


def _files_in(root: Path) -> list[Path]:
    """Every file and symlink under `root`, in path order; symlinked directories are not entered."""
    found: list[Path] = []
    for directory, folders, files in os.walk(root, followlinks=False):
        found += [Path(directory, name) for name in files]
        found += [Path(directory, name) for name in folders if Path(directory, name).is_symlink()]
    return sorted(found)


def _file_records(path: Path, relative: str) -> list[dict[str, Any]]:
    """The records of one file. A named pipe, socket or device the server left is recorded by its kind and
    never read (reading a pipe with no writer blocks for ever): it is opened without blocking and without
    following a link, and judged by what was opened, so swapping a file for a pipe after a look cannot
    hang the reader either."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:
        return [{"file": relative, "unreadable": error.strerror or type(error).__name__}]
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            return [{"file": relative, "special": _special_kind(status.st_mode)}]
        size = status.st_size
        if path.suffix in SQLITE_SUFFIXES and size:
            return _sqlite_records(path, relative)
        if size > MAX_EFFECT_FILE_BYTES or path.suffix not in (".jsonl", ".json"):
            digest = hashlib.sha256()
            for block in iter(lambda: os.read(descriptor, 1 << 20), b""):
                digest.update(block)
            return [{"file": relative, "bytes": size, "sha256": digest.hexdigest()}]
        chunks, left = [], MAX_EFFECT_FILE_BYTES  # a file still growing is read as far as the limit
        for block in iter(lambda: os.read(descriptor, min(1 << 20, left)) if left > 0 else b"", b""):
            chunks.append(block)
            left -= len(block)
        data = b"".join(chunks)
    finally:
        os.close(descriptor)
    text = data.decode("utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            return [{"file": relative, "record": json.loads(text)}]
        except ValueError:
            return [{"file": relative, "text": text}]
    lines = []
    for line in text.splitlines():
        if line.strip():
            try:
                lines.append({"file": relative, "record": json.loads(line)})
            except ValueError:
                lines.append({"file": relative, "text": line})
    return lines


def _special_kind(mode: int) -> str:
    for kind, test in (("named pipe", stat.S_ISFIFO), ("socket", stat.S_ISSOCK), ("device", stat.S_ISCHR),
                       ("device", stat.S_ISBLK), ("directory", stat.S_ISDIR)):
        if test(mode):
            return kind
    return "not a regular file"


def _sqlite_records(path: Path, relative: str) -> list[dict[str, Any]]:
    """Every row of every table (tables by name, rows in rowid order where there is one), read-only."""
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        tables = [row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        records: list[dict[str, Any]] = []
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            cursor = connection.execute(f"SELECT * FROM {quoted}")  # noqa: S608 - a name read from the schema, quoted
            columns = [column[0] for column in cursor.description]
            for row in cursor.fetchmany(MAX_EFFECT_RECORDS + 1 - len(records)):
                records.append({"file": relative, "table": table,
                                "row": {column: _plain(value) for column, value in zip(columns, row)}})
            if len(records) > MAX_EFFECT_RECORDS:
                break
        return records
    except sqlite3.DatabaseError:
        return [{"file": relative, "bytes": path.stat().st_size,
                 "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}]
    finally:
        connection.close()


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and value != value:
        return None
    return value


def server_lab(servers: Sequence[str], *, policy: ToolPolicy | str | os.PathLike[str] | None = None,
               cases: Iterable[str] = (), name: str = "mcp", actor: Actor | None = None,
               lock: LockSource | None = None) -> Lab:
    """A lab whose one candidate, `server`, holds every server's tools in one registry, as one agent uses
    them (what `lint --mcp A --mcp B` judges too); each case in a fresh `McpWorld` (`{world}` in a
    command names its directory, shared by the servers), effects read by `world_effects`. With `lock`,
    every server's tools are checked against it (see `ServerSurfaceBuild`). Servers to compare as
    alternatives are surfaces of a lab of your own, one `Surface.from_mcp` each (a baseline and a
    candidate, say)."""
    if not servers:
        raise LabError("an MCP server lab needs at least one server")
    surface = Surface.from_mcp("server", list(servers), policy=policy_of(policy), lock=load_lock(lock))
    return Lab(name=name, world=new_world, surfaces=[surface], effects=world_effects, actor=actor, cases=tuple(cases))


def open_server_surfaces(servers: Sequence[str], *, policy: str | None = None, lock: LockSource | None = None,
                         timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Any]:
    """One open surface per server for the commands that take `--mcp` (LabError with one line otherwise),
    named by the server's own name (`name#2` for a second server of one name: `server_label`), as `lock
    --mcp` labels the lock's surfaces. With `lock`, each server's tools are checked against the lock's
    surface of its label, as lint compares them (`lock_for_server`; `Provenance.lock` says how they fared,
    and a call would be refused). Tools left out of the import are logged as warnings (the command
    prints them on stderr) and kept in the registry's `skipped`."""
    from ..lab.inspection import OpenSurface

    try:
        rules = policy_of(policy)
        locked = load_lock(lock)
        addresses = [parse_server(server) for server in servers]
    except (PolicyError, ValueError) as error:  # LockfileError is a ValueError
        raise LabError(str(error)) from None
    opened: list[Any] = []
    names: list[str] = []
    try:
        for address in addresses:
            world = McpWorld() if address.mentions_world else None  # a command that writes to {world}
            build = ServerSurfaceBuild(address, policy=rules, timeout_s=timeout_s)
            registry = ServerRegistry()
            registry.world = world  # kept (and its directory) while the registry is open
            try:
                client = build.connect(world, registry)
                name = server_label(client.name, names)  # checked against the lock's surface of that label
                build.import_into(registry, client, surface=name,
                                  lock=lock_for_server(locked, name, alone=len(addresses) == 1))
            except BaseException:
                registry.close()
                raise
            names.append(name)
            opened.append(OpenSurface(name, "server", registry, None, None))
    except (McpError, PolicyError) as error:
        for surface in opened:
            surface.registry.close()
        raise LabError(str(error)) from None
    except BaseException:
        for surface in opened:
            surface.registry.close()
        raise
    return opened
