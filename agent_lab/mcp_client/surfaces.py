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
import tempfile
import weakref
from pathlib import Path
from typing import Any, Collection, Iterable, Sequence

from ..lab.definition import Lab, LabError, Surface
from ..lockfile import Lockfile
from ..policy import Actor
from .address import ServerAddress, parse_server
from .importing import LockSource, ServerRegistry, import_tools, load_lock
from .session import McpClient
from .tool_policy import PolicyError, ToolPolicy, load_policy
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
    size = path.stat().st_size
    if path.suffix in SQLITE_SUFFIXES and size:
        return _sqlite_records(path, relative)
    if size > MAX_EFFECT_FILE_BYTES or path.suffix not in (".jsonl", ".json"):
        return [{"file": relative, "bytes": size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}]
    text = path.read_text(encoding="utf-8", errors="replace")
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


def _policy_of(policy: ToolPolicy | str | os.PathLike[str] | None) -> ToolPolicy:
    if policy is None:
        return ToolPolicy()
    if isinstance(policy, ToolPolicy):
        return policy
    return load_policy(policy)


class ServerSurfaceBuild:
    """`build(world, **options)` for a Surface whose tools come from one MCP server, or from several that
    one agent uses at once (see the module)."""

    def __init__(self, server: str | ServerAddress | Sequence[str | ServerAddress], *,
                 policy: ToolPolicy | str | os.PathLike[str] | None = None, lock: LockSource | None = None,
                 surface: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, pass_env: Sequence[str] = (),
                 cwd: str | None = None) -> None:
        servers = (server,) if isinstance(server, (str, ServerAddress)) else tuple(server)
        if not servers:
            raise ValueError("a server surface needs at least one server")
        self.addresses = tuple(each if isinstance(each, ServerAddress) else parse_server(each) for each in servers)
        self.policy = _policy_of(policy)  # read once, when the lab is defined: a bad file fails at import time
        self.lock = load_lock(lock)  # likewise (LockfileError)
        self.surface = surface  # the lock's surface to check one server against first (the lab surface's name)
        self.timeout_s = timeout_s
        self.pass_env = tuple(pass_env)
        self.cwd = cwd

    def __call__(self, world: Any, **options: Any) -> ServerRegistry:
        """One registry over the world holding every server's tools, as one agent has them: each server
        labelled as `lock --mcp` labels it (`server_label`) and, among several, checked against the lock's
        surface of its label (`lock_for_server`); one server alone is checked as `import_tools` says (the
        lab surface's name first). Two servers listing one tool name are refused (LabError): one agent
        cannot be given both."""
        registry = ServerRegistry(**options)
        labels: list[str] = []
        owners: dict[str, str] = {}
        try:
            for address in self.addresses:
                client = self.connect(world, registry, address)
                label = server_label(client.name, labels)
                labels.append(label)
                if len(self.addresses) == 1:
                    self.import_into(registry, client, lock=self.lock, surface=self.surface)
                else:
                    self.import_into(registry, client, lock=lock_for_server(self.lock, label, alone=False),
                                     surface=label, owners=owners, server=label)
        except BaseException:
            registry.close()
            raise
        return registry

    def connect(self, world: Any, registry: ServerRegistry, address: ServerAddress | None = None) -> McpClient:
        """A client of the server (`address`, or the only one; its command's `{world}` replaced by the
        world's directory), owned by `registry`, which closes it."""
        address = address if address is not None else self.addresses[0]
        if address.mentions_world:
            try:
                address = address.with_world(os.fspath(world))
            except TypeError:
                raise TypeError(f"the server command uses {{world}}, but the world ({type(world).__name__}) is not a "
                                "directory (give it __fspath__, or use agent_lab.mcp_client.surfaces.McpWorld)") from None
        client = McpClient(address, timeout_s=self.timeout_s, pass_env=self.pass_env, cwd=self.cwd)
        registry.own(client)
        return client.connect()

    def import_into(self, registry: ServerRegistry, client: McpClient, *, lock: Any, surface: str | None,
                    owners: dict[str, str] | None = None, server: str | None = None) -> None:
        """Import the server's tools under the policy into `registry`, checked against `lock`'s surface
        `surface` (see `import_tools`); what the import left out is logged and kept in `skipped`. With
        `owners` (tool name: the label of the server that gave it), a name another server already gave
        is a LabError naming both servers."""
        imported = import_tools(client, policy=self.policy, lock=lock, surface=surface)
        if owners is not None:
            for tool in imported.tools:
                if tool.spec.name in owners:
                    raise LabError(f"servers {owners[tool.spec.name]!r} and {server!r} both list a tool "
                                   f"{tool.spec.name!r}: one agent cannot be given two tools of one name (to compare "
                                   "servers as alternatives, give each its own surface in a lab: Surface.from_mcp)")
                owners[tool.spec.name] = server or client.name
        imported.register(registry)
        registry.skipped = (*registry.skipped, *imported.skipped)
        for skipped in imported.skipped:
            logger.warning("mcp server %s: tool %r was not imported: %s", client.label, skipped.name, skipped.reason)


def server_label(name: str, taken: Collection[str]) -> str:
    """How a server is named among servers one agent uses: its own name, or `name#2`, `name#3`, ... for
    a later server that gives the same one (`lock --mcp` labels the lock's surfaces so, and each server's
    tools are checked at call time against the surface of its label)."""
    if name not in taken:
        return name
    number = 2
    while f"{name}#{number}" in taken:
        number += 1
    return f"{name}#{number}"


def lock_for_server(lock: Lockfile | None, label: str, *, alone: bool) -> Lockfile | None:
    """The lock a server labelled `label` is checked against among servers opened together: only the
    surface lint compares its tools with (`Lockfile.surface_of`), never another server's."""
    return lock.narrowed(lock.surface_of(label, alone=alone)) if lock is not None else None


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
    surface = Surface.from_mcp("server", list(servers), policy=_policy_of(policy), lock=load_lock(lock))
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
        rules = _policy_of(policy)
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
