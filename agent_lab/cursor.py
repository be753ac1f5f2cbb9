"""Opaque, tamper-evident page cursors.

A paging tool hands the model a cursor and later gets it back as an argument, so the cursor is
untrusted input. `CursorCodec.issue` packs the position with an HMAC-SHA256 tag over the position and
the canonical JSON of the query (the filters the page was computed for); `CursorCodec.read` gives the
position back only when the tag verifies for *this* query under *this* secret. A forged, truncated,
edited or foreign cursor (issued for other filters, or by another registry) is `invalid_cursor`.

The codec a handler gets as `ctx.cursors` is also bound to the call's tool and actor, its id and its
tenant (`CursorCodec.bound`): a cursor one tool issued is foreign to every other tool, and one issued
to one actor is foreign to every other actor, of its tenant or another, whatever query the handler
passes.

A cursor lives `lifetime_s` seconds (default `DEFAULT_CURSOR_LIFETIME_S`, one hour) from when it was
issued, by the codec's clock (the registry's `clock`, so tests can move time). A genuine cursor past
its lifetime is `invalid_cursor` saying that it expired and what to do (call again without it); the
expiry is only ever told about a cursor whose tag verified, so a forger learns nothing from it. A clock
that reads no finite time fails closed: nothing is issued (ValueError) and every cursor reads as expired.

Token layout, url-safe base64 without padding (40 characters):
    version (1 byte) | issued at (5 bytes, whole seconds, unsigned big-endian) |
    position (8 bytes, signed big-endian) | tag (first 16 bytes of the HMAC)
A 128-bit tag is the usual truncation of HMAC-SHA256; it keeps tokens short without making forgery
feasible. The cursor hides nothing about the position or when it was issued (it is not encrypted); it
only proves origin. Cursors of version 1 (no time, bound to the tenant only) are no longer read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import re
import secrets
import struct
import time
from collections.abc import Mapping
from typing import Any, Callable

from .errors import ToolFailure
from .fingerprint import NotCanonicalJSON, canonical_json

__all__ = ["CURSOR_VERSION", "DEFAULT_CURSOR_LIFETIME_S", "MIN_SECRET_BYTES", "CursorCodec"]

CURSOR_VERSION = 2
MIN_SECRET_BYTES = 16
"""Shorter HMAC keys are refused: a guessable key would let anyone forge cursors."""

DEFAULT_CURSOR_LIFETIME_S = 3600.0
"""How long a cursor reads back after it was issued (`Registry(cursor_lifetime_s=...)`): long enough
for an agent to page through results in one task, short enough that a cursor copied into a log,
a transcript or another session is soon worth nothing."""

_TAG_BYTES = 16
_ISSUED_BYTES = 5  # whole seconds since the epoch: up to 2**40 - 1, far past any clock's reading
_POSITION = struct.Struct(">q")
_HEAD_BYTES = 1 + _ISSUED_BYTES + _POSITION.size
_TOKEN_BYTES = _HEAD_BYTES + _TAG_BYTES
_TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{40}")  # base64 of 30 bytes: no padding, no unused bits
_DOMAIN = b"agent_lab.cursor\x00"  # separates these tags from any other use of the same secret
_MAX_POSITION = 2**63 - 1
_INVALID_MESSAGE = (
    "The page cursor is not one this tool issued for this query; call again without a cursor to start "
    "from the first page."
)
_EXPIRED_MESSAGE = (
    "The page cursor has expired (cursors are valid for {lifetime}); call again without a cursor to "
    "start from the first page."
)


class CursorCodec:
    """Issues and checks page cursors under one secret (one per registry)."""

    __slots__ = ("_secret", "_scope", "_binding", "_lifetime_s", "_clock")

    def __init__(self, secret: bytes, *, lifetime_s: float = DEFAULT_CURSOR_LIFETIME_S,
                 clock: Callable[[], float] = time.time) -> None:
        if not isinstance(secret, (bytes, bytearray)):
            raise TypeError("CursorCodec secret must be bytes")
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError(f"CursorCodec secret must be at least {MIN_SECRET_BYTES} bytes long")
        if isinstance(lifetime_s, bool) or not isinstance(lifetime_s, (int, float)) or \
                not (math.isfinite(lifetime_s) and lifetime_s >= 1):
            raise ValueError("CursorCodec lifetime_s must be a finite number of seconds, at least 1")
        if not callable(clock):
            raise TypeError("CursorCodec clock must be a function returning wall-clock seconds")
        self._secret = bytes(secret)
        self._scope: bytes | None = b""
        self._binding: tuple[str, str, str] | None = None
        self._lifetime_s = float(lifetime_s)
        self._clock = clock

    def bound(self, tool: str, tenant: str, actor_id: str) -> CursorCodec:
        """This codec (secret, lifetime, clock), with every tag also over `tool`, `tenant` and
        `actor_id`: its cursors verify only for the same tool and the same actor of the same tenant.
        (The scope is canonical JSON ending in NUL, so no scope, query or unbound token can be read as
        another: an unbound message goes on with the version byte.) Every call whose handler takes a
        ctx gets one, so the scope is encoded on first use only."""
        codec = object.__new__(CursorCodec)
        codec._secret = self._secret
        codec._scope = None
        codec._binding = (tool, tenant, actor_id)
        codec._lifetime_s = self._lifetime_s
        codec._clock = self._clock
        return codec

    @classmethod
    def random(cls) -> CursorCodec:
        """A codec with a fresh per-process secret: its cursors stop verifying after a restart."""
        return cls(secrets.token_bytes(32))

    @property
    def lifetime_s(self) -> float:
        """Seconds a cursor reads back after it was issued."""
        return self._lifetime_s

    def __repr__(self) -> str:  # the secret never appears in logs
        return "CursorCodec(<secret hidden>)"

    def issue(self, position: int, query: Mapping[str, Any]) -> str:
        """A cursor for `position` in the results of `query` (the filters, not the cursor argument),
        valid for `lifetime_s` from now.

        Raises ValueError for a position that is not a non-negative int, a query that is not JSON, or
        a clock that reads no usable time.
        """
        if isinstance(position, bool) or not isinstance(position, int):
            raise ValueError("cursor position must be an int")
        if not 0 <= position <= _MAX_POSITION:
            raise ValueError("cursor position must be between 0 and 2**63 - 1")
        now = self._now()
        if now is None or not 0 <= now < 2 ** (8 * _ISSUED_BYTES):
            raise ValueError("the cursor codec's clock reads no usable wall-clock time; no cursor is issued")
        head = bytes([CURSOR_VERSION]) + int(now).to_bytes(_ISSUED_BYTES, "big") + _POSITION.pack(position)
        token = head + self._tag(head, _query_bytes(query))
        return base64.urlsafe_b64encode(token).rstrip(b"=").decode("ascii")

    def read(self, token: object, query: Mapping[str, Any]) -> int:
        """The position `token` carries, if this codec issued it for exactly `query` (and, bound, for
        this tool and actor) less than `lifetime_s` ago.

        Raises ToolFailure("invalid_cursor") otherwise: for a non-string, malformed, edited, forged
        or foreign token alike, with the same message (a forger learns nothing from the answer); a
        genuine token past its lifetime with a message saying that it expired.
        """
        query_bytes = _query_bytes(query)
        raw = _decode(token)
        if raw is None or raw[0] != CURSOR_VERSION:
            raise _invalid()
        head, tag = raw[:_HEAD_BYTES], raw[_HEAD_BYTES:]
        if not hmac.compare_digest(tag, self._tag(head, query_bytes)):
            raise _invalid()
        issued = int.from_bytes(head[1 : 1 + _ISSUED_BYTES], "big")
        (position,) = _POSITION.unpack(head[1 + _ISSUED_BYTES :])
        if position < 0:  # never issued; refuse even a correctly tagged one
            raise _invalid()
        now = self._now()
        if now is None or now >= issued + self._lifetime_s:  # a broken clock fails closed
            raise ToolFailure("invalid_cursor", _EXPIRED_MESSAGE.format(lifetime=_duration(self._lifetime_s)),
                              details={"cursor": "expired", "cursor_lifetime_s": self._lifetime_s})
        if issued > now + self._lifetime_s:  # "issued" further ahead than any cursor lives: not a clock's skew
            raise _invalid()
        return position

    def _now(self) -> float | None:
        """The clock's reading as a plain finite float, or None (NaN, an infinity, no number, a raise)."""
        try:
            reading = self._clock()
        except Exception:  # noqa: BLE001 - a clock that fails reads no time
            return None
        if isinstance(reading, bool) or not isinstance(reading, (int, float)):
            return None
        try:
            value = float(reading)
        except (OverflowError, ValueError):
            return None
        return value if math.isfinite(value) else None

    def _tag(self, head: bytes, query_bytes: bytes) -> bytes:
        scope = self._scope
        if scope is None:
            scope = self._scope = canonical_json(list(self._binding or ())).encode("utf-8") + b"\x00"
        message = _DOMAIN + scope + head + query_bytes
        return hmac.new(self._secret, message, hashlib.sha256).digest()[:_TAG_BYTES]


def _query_bytes(query: Mapping[str, Any]) -> bytes:
    if not isinstance(query, Mapping):
        raise ValueError("cursor query must be a mapping of the filters the page was computed for")
    try:
        return canonical_json(dict(query)).encode("utf-8")
    except NotCanonicalJSON as exc:
        raise ValueError(f"cursor query must be plain JSON ({exc.reason})") from None


def _decode(token: object) -> bytes | None:
    """The token's bytes, or None unless it is exactly the canonical encoding of a whole token."""
    if not isinstance(token, str) or not _TOKEN_PATTERN.fullmatch(token):
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "==")
    except (binascii.Error, ValueError):  # pragma: no cover - the pattern admits only valid base64
        return None
    canonical = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    if len(raw) != _TOKEN_BYTES or canonical != token:  # unused low bits set: an edited token
        return None
    return raw


def _invalid() -> ToolFailure:
    return ToolFailure("invalid_cursor", _INVALID_MESSAGE)


def _duration(seconds: float) -> str:
    """`seconds` in words for the expiry message: "1 hour", "15 minutes", "90 seconds"."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"
