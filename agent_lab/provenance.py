"""Where a tool's contract came from, when it is not this process: the MCP server it was imported from.

A `ToolSpec` built by `agent_lab.mcp_client.importing` carries a `Provenance`: which server (its own name
and version, as it says: untrusted, shown for people), how it was reached (transport and address), which
protocol revision, the hash of the model-facing definition exactly as the server listed it (so a
reviewer, a lockfile or a later run can tell whether it changed), which policy entry supplied the
runtime half, which checks the server's own hints raised above that policy, the data-flow labels that
entry gave the tool (`labels`, read by the toxic-flow lint rules: `agent_lab.lint.flows`), and what a
contract lockfile said of the definition when the tool was imported (`lock`: match, drifted, unlocked;
None without a lock; `refusal`: what every call of a drifted or unlocked tool answers). `inspect`, the lint reports (SARIF names the server as the artifact and carries the
rest in properties) and the tool-eval reports show it. Local tools have none.

`definition` is the tool exactly as listed (read-only), and `contract_hash` is
`agent_lab.contract.contract_hash` of its contract: the one hash a lockfile pins, so a tool's
provenance and its lock entry can be compared directly. It is not in `to_dict()` (reports show the hash).
"""

from __future__ import annotations

import unicodedata
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ToolError
from .frozenjson import freeze

__all__ = ["HINT_NAMES", "Provenance", "server_uri"]

HINT_NAMES = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")

MAX_VERSION_CHARS = 64
"""A server's version as shown: longer is cut (it is the server's text, shown to people)."""


def server_uri(transport: str, address: str) -> str:
    """A server as a URI (SARIF's artifact location): its URL, or `mcp+stdio:` and the command line."""
    if transport == "stdio":
        return "mcp+stdio:" + urllib.parse.quote(address, safe="/@:+-_.~")
    return address


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
    labels: tuple[str, ...] = ()  # the policy entry's data-flow labels ("private-data", "-external-sink", ...)
    lock: str | None = None  # the lockfile's verdict at import: "match", "drifted", "unlocked" (None: no lock)
    definition: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)  # the tool as listed
    # The MCP hints the server declared (readOnlyHint, destructiveHint, idempotentHint, openWorldHint:
    # those it set to true or false), untrusted: hosts act on them, so tool-eval checks them against what
    # the tool's calls did (agent_lab.lab.observed). Not in `to_dict`: the contract hash covers them.
    hints: tuple[tuple[str, bool], ...] = ()
    # For a tool whose definition is not the reviewed one (lock "drifted" or "unlocked"): the error every
    # call answers, before any other check (the plan's first step, `agent_lab.steps.admit.check_contract`):
    # its arguments are not checked against a schema nobody reviewed, nor is a person asked to approve it.
    refusal: ToolError | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("server", "transport", "address", "protocol_version", "contract_hash"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"Provenance.{name} must be a non-empty string")
        if self.server_version is not None and not isinstance(self.server_version, str):
            raise ValueError("Provenance.server_version must be a string or None")
        if self.server_version is not None:  # the server's own text, printed by inspect: no escape sequence
            object.__setattr__(self, "server_version", _printable(self.server_version))
        if self.policy is not None and not isinstance(self.policy, str):
            raise ValueError("Provenance.policy must be a string or None")
        if isinstance(self.raised, str) or not all(isinstance(item, str) for item in self.raised):
            raise ValueError("Provenance.raised must be a collection of sentences")
        object.__setattr__(self, "raised", tuple(self.raised))
        if isinstance(self.labels, str) or not all(isinstance(item, str) for item in self.labels):
            raise ValueError("Provenance.labels must be a collection of labels")
        object.__setattr__(self, "labels", tuple(self.labels))
        if self.lock not in (None, "match", "drifted", "unlocked"):
            raise ValueError("Provenance.lock must be 'match', 'drifted', 'unlocked' or None")
        if self.definition is not None:
            if not isinstance(self.definition, Mapping):
                raise ValueError("Provenance.definition must be the tool as listed (a mapping) or None")
            object.__setattr__(self, "definition", freeze(self.definition))
        if self.refusal is not None and (not isinstance(self.refusal, ToolError)
                                         or self.refusal.code != "tool_contract_changed"):
            raise ValueError("Provenance.refusal must be a tool_contract_changed ToolError or None")
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
        return server_uri(self.transport, self.address)

    def to_dict(self) -> dict[str, Any]:
        return {"server": self.server, "server_version": self.server_version, "transport": self.transport,
                "address": self.address, "protocol_version": self.protocol_version,
                "contract_hash": self.contract_hash, "policy": self.policy, "raised": list(self.raised),
                "labels": list(self.labels), "lock": self.lock}


def _printable(text: str) -> str:
    """`text` with control, format and other invisible characters written as \\uXXXX (an ESC cannot reach a
    terminal as itself: `inspect` prints a server's version), cut at MAX_VERSION_CHARS."""
    shown = "".join(f"\\u{ord(char):04X}" if unicodedata.category(char) in ("Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp")
                    else char for char in text)
    return shown if len(shown) <= MAX_VERSION_CHARS else shown[: MAX_VERSION_CHARS - 1] + "…"
