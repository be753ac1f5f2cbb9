"""What `Surface.from_mcp(name, server, ...)` builds a lab's surface with: for each case fresh MCP
servers (a command's `{world}` replaced by the case's world directory), their tools imported under the
policy into one registry on the lab's receipt store and clock, as one agent has them. A module of its
own, below the lab engine (it imports no lab module, so `agent_lab.lab.definition` can build on it
without an import circle); `agent_lab.mcp_client.surfaces` (server labs, `--mcp`) builds on it too.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Collection, Mapping, Sequence

from ..lockfile import Lockfile
from .address import ServerAddress, parse_server
from .importing import LockSource, ServerRegistry, import_tools, load_lock
from .session import McpClient
from .tool_policy import ToolPolicy, as_policy
from .wire import DEFAULT_TIMEOUT_S

__all__ = ["ServerSurfaceBuild", "ServerToolClash", "lock_for_server", "policy_of", "server_label"]

logger = logging.getLogger("agent_lab.mcp_client")


class ServerToolClash(ValueError):
    """Two servers one agent is given list a tool of one name (the message names both)."""


def policy_of(policy: ToolPolicy | str | os.PathLike[str] | Mapping[str, Any] | None) -> ToolPolicy:
    """The policy a server surface or a gateway is given: see `tool_policy.as_policy`."""
    return as_policy(policy)


class ServerSurfaceBuild:
    """`build(world, **options)` for a Surface whose tools come from one MCP server, or from several that
    one agent uses at once (see the module)."""

    def __init__(self, server: str | ServerAddress | Sequence[str | ServerAddress], *,
                 policy: ToolPolicy | str | os.PathLike[str] | Mapping[str, Any] | None = None, lock: LockSource | None = None,
                 surface: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, pass_env: Sequence[str] = (),
                 cwd: str | None = None) -> None:
        servers = (server,) if isinstance(server, (str, ServerAddress)) else tuple(server)
        if not servers:
            raise ValueError("a server surface needs at least one server")
        self.addresses = tuple(each if isinstance(each, ServerAddress) else parse_server(each) for each in servers)
        self.policy = policy_of(policy)  # read once, when the lab is defined: a bad file fails at import time
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
        cannot be given both (ServerToolClash)."""
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
        is a ServerToolClash naming both servers."""
        imported = import_tools(client, policy=self.policy, lock=lock, surface=surface)
        if owners is not None:
            for tool in imported.tools:
                if tool.spec.name in owners:
                    raise ServerToolClash(f"servers {owners[tool.spec.name]!r} and {server!r} both list a tool "
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
