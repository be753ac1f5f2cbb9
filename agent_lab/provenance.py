"""Where a tool's contract came from, when it is not this process: the MCP server it was imported from.

A `ToolSpec` built by `agent_lab.mcp_client.importing` carries a `Provenance`: which server (its own name
and version, as it says: untrusted, shown for people), how it was reached (transport and address), which
protocol revision, the hash of the model-facing definition exactly as the server listed it (so a
reviewer, a lockfile or a later run can tell whether it changed), which policy entry supplied the
runtime half, and which checks the server's own hints raised above that policy. `inspect`, the lint
reports (SARIF names the server as the artifact) and the tool-eval reports show it. Local tools have none.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

__all__ = ["HINT_NAMES", "Provenance"]

HINT_NAMES = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """The MCP server a tool was imported from (see the module docstring)."""

    server: str  # the server's own name (serverInfo.name), else its address
    server_version: str | None
    transport: str  # "stdio" or "streamable-http"
    address: str  # the command line without its environment, or the URL without its query
    protocol_version: str
    contract_hash: str  # "sha256:<hex>" of the tool's model-facing definition as listed
    policy: str | None = None  # the policy entry that gave the runtime half (None: the strictest defaults)
    raised: tuple[str, ...] = ()  # checks the server's hints raised above the policy, one sentence each
    # The MCP hints the server declared (readOnlyHint, destructiveHint, idempotentHint, openWorldHint:
    # those it set to true or false), untrusted: hosts act on them, so tool-eval checks them against what
    # the tool's calls did (agent_lab.lab.observed). Not in `to_dict`: the contract hash covers them.
    hints: tuple[tuple[str, bool], ...] = ()

    def __post_init__(self) -> None:
        for name in ("server", "transport", "address", "protocol_version", "contract_hash"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"Provenance.{name} must be a non-empty string")
        if self.server_version is not None and not isinstance(self.server_version, str):
            raise ValueError("Provenance.server_version must be a string or None")
        if self.policy is not None and not isinstance(self.policy, str):
            raise ValueError("Provenance.policy must be a string or None")
        if isinstance(self.raised, str) or not all(isinstance(item, str) for item in self.raised):
            raise ValueError("Provenance.raised must be a collection of sentences")
        object.__setattr__(self, "raised", tuple(self.raised))
        hints = tuple((name, value) for name, value in self.hints)
        if not all(name in HINT_NAMES and isinstance(value, bool) for name, value in hints):
            raise ValueError(f"Provenance.hints must be (name, true or false) pairs of {', '.join(HINT_NAMES)}")
        object.__setattr__(self, "hints", hints)

    @staticmethod
    def hints_of(annotations: Any) -> tuple[tuple[str, bool], ...]:
        """The hints a server's `annotations` declare (only true or false values of the four MCP hints)."""
        if not isinstance(annotations, dict):
            return ()
        return tuple((name, annotations[name]) for name in HINT_NAMES if isinstance(annotations.get(name), bool))

    @property
    def artifact_uri(self) -> str:
        """The server as a URI, for SARIF's artifact location: its URL, or `mcp+stdio:` and the command."""
        if self.transport == "stdio":
            return "mcp+stdio:" + urllib.parse.quote(self.address, safe="/@:+-_.~")
        return self.address

    def to_dict(self) -> dict[str, Any]:
        return {"server": self.server, "server_version": self.server_version, "transport": self.transport,
                "address": self.address, "protocol_version": self.protocol_version,
                "contract_hash": self.contract_hash, "policy": self.policy, "raised": list(self.raised)}
