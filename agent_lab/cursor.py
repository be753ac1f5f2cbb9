"""Opaque, tamper-evident page cursors.

A paging tool hands the model a cursor and later gets it back as an argument, so the cursor is
untrusted input. `CursorCodec.issue` packs the position with an HMAC-SHA256 tag over the position and
the canonical JSON of the query (the filters the page was computed for); `CursorCodec.read` gives the
position back only when the tag verifies for *this* query under *this* secret. A forged, truncated,
edited or foreign cursor (issued for other filters, or by another registry) is `invalid_cursor`.

The codec a handler gets as `ctx.cursors` is also bound to the call's tool and the actor's tenant
(`CursorCodec.bound`): a cursor one tool issued is foreign to every other tool, and one issued to one
tenant is foreign to every other tenant, whatever query the handler passes.

Token layout, url-safe base64 without padding (34 characters):
    version (1 byte) | position (8 bytes, signed big-endian) | tag (first 16 bytes of the HMAC)
A 128-bit tag is the usual truncation of HMAC-SHA256; it keeps tokens short without making forgery
feasible. The cursor hides nothing about the position (it is not encrypted); it only proves origin.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import struct
from typing import Any, Mapping

from .errors import ToolFailure
from .idempotency import NotCanonicalJSON, canonical_json

__all__ = ["CURSOR_VERSION", "MIN_SECRET_BYTES", "CursorCodec"]

CURSOR_VERSION = 1
MIN_SECRET_BYTES = 16
"""Shorter HMAC keys are refused: a guessable key would let anyone forge cursors."""

_TAG_BYTES = 16
_POSITION = struct.Struct(">q")
_TOKEN_BYTES = 1 + _POSITION.size + _TAG_BYTES
_TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{34}")  # base64 of 25 bytes, unpadded
_DOMAIN = b"agent_lab.cursor\x00"  # separates these tags from any other use of the same secret
_MAX_POSITION = 2**63 - 1
_INVALID_MESSAGE = (
    "The page cursor is not one this tool issued for this query; call again without a cursor to start "
    "from the first page."
)


class CursorCodec:
    """Issues and checks page cursors under one secret (one per registry)."""

    __slots__ = ("_secret", "_scope", "_binding")

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, (bytes, bytearray)):
            raise TypeError("CursorCodec secret must be bytes")
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError(f"CursorCodec secret must be at least {MIN_SECRET_BYTES} bytes long")
        self._secret = bytes(secret)
        self._scope: bytes | None = b""
        self._binding: tuple[str, str] | None = None

    def bound(self, tool: str, tenant: str) -> CursorCodec:
        """This codec's secret, with every tag also over `tool` and `tenant`: its cursors verify only
        for the same tool and tenant. (The scope is canonical JSON ending in NUL, so no scope, query or
        unbound token can be read as another: an unbound message goes on with the version byte, 0x01.)
        Every call whose handler takes a ctx gets one, so the scope is encoded on first use only."""
        codec = object.__new__(CursorCodec)
        codec._secret = self._secret
        codec._scope = None
        codec._binding = (tool, tenant)
        return codec

    @classmethod
    def random(cls) -> CursorCodec:
        """A codec with a fresh per-process secret: its cursors stop verifying after a restart."""
        return cls(secrets.token_bytes(32))

    def __repr__(self) -> str:  # the secret never appears in logs
        return "CursorCodec(<secret hidden>)"

    def issue(self, position: int, query: Mapping[str, Any]) -> str:
        """A cursor for `position` in the results of `query` (the filters, not the cursor argument).

        Raises ValueError for a position that is not a non-negative int, or a query that is not JSON.
        """
        if isinstance(position, bool) or not isinstance(position, int):
            raise ValueError("cursor position must be an int")
        if not 0 <= position <= _MAX_POSITION:
            raise ValueError("cursor position must be between 0 and 2**63 - 1")
        head = bytes([CURSOR_VERSION]) + _POSITION.pack(position)
        token = head + self._tag(head, _query_bytes(query))
        return base64.urlsafe_b64encode(token).rstrip(b"=").decode("ascii")

    def read(self, token: object, query: Mapping[str, Any]) -> int:
        """The position `token` carries, if this codec issued it for exactly `query`.

        Raises ToolFailure("invalid_cursor") otherwise: for a non-string, malformed, edited, forged
        or foreign token alike, with the same message (a forger learns nothing from the answer).
        """
        query_bytes = _query_bytes(query)
        raw = _decode(token)
        if raw is None or raw[0] != CURSOR_VERSION:
            raise _invalid()
        head, tag = raw[: 1 + _POSITION.size], raw[1 + _POSITION.size :]
        if not hmac.compare_digest(tag, self._tag(head, query_bytes)):
            raise _invalid()
        (position,) = _POSITION.unpack(head[1:])
        if position < 0:  # never issued; refuse even a correctly tagged one
            raise _invalid()
        return position

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
