"""Who is calling (Actor) and what a person approved (Approval).

The actor always comes from the application's trusted session, never from model-written arguments.
An approval is bound to one exact call: the tool, the argument fingerprint and the actor's tenant.
It never grants a permission: the registry checks permission first, approval second. Both are checked
when built: their identity fields are plain non-empty strings and an approval's expiry is finite, so
no value can compare equal to every tenant or fingerprint, or never expire.
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass, field
from typing import AbstractSet, Any, Callable, Mapping, Protocol

from .calls import ToolCall

__all__ = ["Actor", "Approval", "ResourceGuard"]


@dataclass(frozen=True, kw_only=True)
class Actor:
    """The caller, as the application's session established it."""

    id: str
    tenant: str
    permissions: AbstractSet[str] = field(default_factory=frozenset)  # stored as a frozenset

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", _plain_text(self.id, "Actor.id"))
        object.__setattr__(self, "tenant", _plain_text(self.tenant, "Actor.tenant"))
        if isinstance(self.permissions, str):
            raise TypeError("Actor.permissions must be a collection of strings, not one string")
        object.__setattr__(
            self, "permissions", frozenset(_plain_text(scope, "each of Actor.permissions") for scope in self.permissions)
        )

    def may(self, permission: str | None) -> bool:
        """True when this actor holds `permission` (a tool with no permission is open to every actor)."""
        return permission is None or permission in self.permissions


class Fingerprints(Protocol):
    """What an approval needs from the registry: the keyed fingerprint it gives a call."""

    def fingerprint(self, tool: str, arguments: Any) -> str: ...


# A resource guard decides whether this actor may touch the resource the arguments name.
ResourceGuard = Callable[[Mapping[str, Any], Actor], bool]


@dataclass(frozen=True, kw_only=True)
class Approval:
    """A person's approval of one exact call, valid until `expires_at` (wall-clock seconds)."""

    approval_id: str
    tool: str
    fingerprint: str
    tenant: str
    approver: str
    expires_at: float

    def __post_init__(self) -> None:
        for name in ("approval_id", "tool", "fingerprint", "tenant", "approver"):
            object.__setattr__(self, name, _plain_text(getattr(self, name), f"Approval.{name}"))
        expires_at = self.expires_at
        if isinstance(expires_at, bool) or not isinstance(expires_at, (int, float)) or not math.isfinite(expires_at):
            raise ValueError("Approval.expires_at must be a finite number of wall-clock seconds")
        object.__setattr__(self, "expires_at", float(expires_at))

    @classmethod
    def for_call(
        cls,
        call: ToolCall,
        *,
        actor: Actor,
        approver: str,
        registry: Fingerprints,
        ttl_s: float = 300.0,
        now: float | None = None,
    ) -> Approval:
        """Approve exactly `call` for `actor`'s tenant; any change to its arguments voids the approval.

        The approval binds to the call's fingerprint, which is keyed by the registry (so that it
        gives nothing away about the arguments): pass the `registry` that will run the call (or use
        `registry.approval_for(...)`, which does)."""
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or not 0 < ttl_s < math.inf:
            raise ValueError("ttl_s must be a positive number of seconds (finite: every approval expires)")
        if not callable(getattr(registry, "fingerprint", None)):
            raise TypeError("Approval.for_call needs registry=: the Registry that will run the call")
        issued = time.time() if now is None else now
        return cls(
            approval_id="apr_" + secrets.token_hex(8),
            tool=call.name,
            fingerprint=registry.fingerprint(call.name, call.arguments),
            tenant=actor.tenant,
            approver=approver,
            expires_at=issued + float(ttl_s),
        )

    def expired(self, now: float) -> bool:
        return now >= self.expires_at


def _plain_text(value: Any, what: str) -> str:
    """`value` as an exact, non-empty `str`.

    Identity and binding fields are compared with `==`; a str subclass could claim to equal every
    tenant or fingerprint, so only its text is kept, and anything else is refused.
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    return str.__str__(value)
