"""Who is calling (Actor) and what a person approved (Approval).

The actor always comes from the application's trusted session, never from model-written arguments.
An approval is bound to one exact call by one actor: the tool, the argument fingerprint, the actor's
id and the actor's tenant; another actor of the same tenant cannot use it. It never grants a permission: the registry checks permission first, approval second. Both are checked
when built: their identity fields are plain non-empty strings and an approval's expiry is finite, so
no value can compare equal to every tenant or fingerprint, or never expire. Time fails closed: a clock
reading that is not a finite number (NaN compares as "not yet" with everything) counts as expired.
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass, field
from typing import AbstractSet, Any, Callable, Mapping, Protocol

from .calls import ToolCall
from .fingerprint import has_lone_surrogate

__all__ = ["Actor", "Approval", "ResourceGuard", "is_wall_clock_time"]


@dataclass(frozen=True, kw_only=True)
class Actor:
    """The caller, as the application's session established it."""

    id: str
    tenant: str
    permissions: AbstractSet[str] = field(default_factory=frozenset)  # stored as a frozenset

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", _plain_text(self.id, "Actor.id"))
        object.__setattr__(self, "tenant", _storable_text(_plain_text(self.tenant, "Actor.tenant"), "Actor.tenant"))
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
    """A person's approval of one exact call by one actor (`actor_id` of `tenant`), valid until
    `expires_at` (wall-clock seconds)."""

    approval_id: str
    tool: str
    fingerprint: str
    tenant: str
    actor_id: str
    approver: str
    expires_at: float

    def __post_init__(self) -> None:
        for name in ("approval_id", "tool", "fingerprint", "tenant", "actor_id", "approver"):
            object.__setattr__(self, name, _plain_text(getattr(self, name), f"Approval.{name}"))
        if not is_wall_clock_time(self.expires_at):
            raise ValueError("Approval.expires_at must be a finite number of wall-clock seconds")
        object.__setattr__(self, "expires_at", _plain_seconds(self.expires_at))

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
        """Approve exactly `call` for `actor` (its id and tenant); any change to its arguments, or any
        other actor, voids the approval.

        The approval binds to the call's fingerprint, which is keyed by the registry (so that it
        gives nothing away about the arguments): pass the `registry` that will run the call (or use
        `registry.approval_for(...)`, which does)."""
        if not is_wall_clock_time(ttl_s) or not _plain_seconds(ttl_s) > 0:
            raise ValueError("ttl_s must be a positive number of seconds (finite: every approval expires)")
        if not callable(getattr(registry, "fingerprint", None)):
            raise TypeError("Approval.for_call needs registry=: the Registry that will run the call")
        issued = time.time() if now is None else now
        if not is_wall_clock_time(issued):
            raise ValueError("now must be a finite number of wall-clock seconds (when the approval is given)")
        expires_at = _plain_seconds(issued) + _plain_seconds(ttl_s)
        if not math.isfinite(expires_at):
            raise ValueError("now + ttl_s must be a finite number of wall-clock seconds")
        return cls(
            approval_id="apr_" + secrets.token_hex(8),
            tool=call.name,
            fingerprint=registry.fingerprint(call.name, call.arguments),
            tenant=actor.tenant,
            actor_id=actor.id,
            approver=approver,
            expires_at=expires_at,
        )

    def expired(self, now: float) -> bool:
        """Whether the approval has expired at wall-clock time `now`. A `now` that is not a finite number
        (a broken clock: NaN, infinity, None) counts as expired: an approval must never outlive its ttl."""
        if not is_wall_clock_time(now):
            return True
        return _plain_seconds(now) >= self.expires_at


def is_wall_clock_time(value: Any) -> bool:
    """True for a finite int or float (not a bool): a usable reading of a clock or a duration."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large to be a float is no time either
        return False


def _plain_seconds(value: Any) -> float:
    """A value `is_wall_clock_time` accepted, as a plain float (a subclass could compare as it likes)."""
    return float.__float__(value) if isinstance(value, float) else float(int.__int__(value))


def _storable_text(value: str, what: str) -> str:
    """`value`, refused if no receipt store can keep it: receipts and spent approvals are scoped by
    the tenant, and a NUL or a lone surrogate would only surface as a failed store call on the first
    keyed call (an internal error), long after the session that built the actor."""
    if "\x00" in value or has_lone_surrogate(value):
        raise ValueError(f"{what} must be text without NUL or lone surrogates")
    return value


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
