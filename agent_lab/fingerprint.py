"""Canonical JSON and keyed argument fingerprints.

Two proposals that mean the same thing (key order, ``1`` versus ``1.0``) must get the same fingerprint,
and two that mean different things (``true`` versus ``1``) never do: the fingerprint binds a receipt
and an approval to one exact call. It is also shown to people and models (audit lines, the details of
``approval_required``), so it must not give the arguments away: a redacted 4-digit PIN hashed without
a secret is found by trying all 10,000 values. So the fingerprint is a keyed hash, with a secret the
registry holds (see ``Registry``: a durable receipt store keeps the key, so fingerprints stay the same
across restarts and processes), of the canonical JSON text of the call.

Two schemes, named by a fingerprint's prefix: ``blake2b-mac:``, BLAKE2b-256 in its own keyed mode (RFC
7693), which a registry gives every call since it costs about half as much; and ``hmac-sha256:``,
HMAC-SHA-256, which ``fingerprint()`` computes and which receipts and approvals made before carry. A
stored fingerprint is compared in the scheme its prefix names (``Fingerprinter.for_scheme``), so an
older receipt still replays and an older approval still matches.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import math
import re
import secrets
from typing import Any, Dict, List, Mapping, Union

from .jsonvalue import compact_json_encoder, compact_json_writer

__all__ = [
    "BLAKE2B_PREFIX",
    "FINGERPRINT_KEY_BYTES",
    "FINGERPRINT_PREFIX",
    "Blake2bFingerprinter",
    "Fingerprinter",
    "MAX_CANONICAL_DEPTH",
    "MAX_INTEGER_BITS",
    "MIN_FINGERPRINT_KEY_BYTES",
    "NotCanonicalJSON",
    "canonical_json",
    "check_fingerprint_key",
    "fingerprint",
    "fingerprint_key_id",
    "has_lone_surrogate",
    "new_fingerprint_key",
]

FINGERPRINT_PREFIX = "hmac-sha256:"
"""``fingerprint()``'s scheme, HMAC-SHA-256 (then 64 hex digits): a reader tells it apart from the
unkeyed ``sha256:`` fingerprints of receipts written before keys, and from ``BLAKE2B_PREFIX``."""

BLAKE2B_PREFIX = "blake2b-mac:"
"""The scheme a registry gives calls (`Blake2bFingerprinter`): keyed BLAKE2b-256, then 64 hex digits."""

FINGERPRINT_KEY_BYTES = 32
"""The size of a key made by ``new_fingerprint_key`` (the output size of SHA-256)."""

MIN_FINGERPRINT_KEY_BYTES = 16
"""A shorter key is refused: it could be guessed, and then every fingerprint guessed with it."""

MAX_CANONICAL_DEPTH = 64
"""How many arrays/objects may nest inside one another (``[]`` is one level).  Deeper values are
refused, so hostile input can neither exhaust the stack nor loop forever on a cyclic structure."""

MAX_INTEGER_BITS = 14_000
"""Integers wider than this (about 4,200 decimal digits) are refused: no real argument needs them,
and Python 3.11+ refuses to print much larger ones anyway."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# Built once: json.dumps with options builds a new encoder on every call (a third of its cost here).
_write_canonical = compact_json_writer(sort_keys=True)
_encode_sorted = compact_json_encoder(sort_keys=True)


class NotCanonicalJSON(ValueError):
    """A value that has no canonical JSON form.

    ``pointer`` is the JSON Pointer of the offending place ("" for the root) and ``reason`` says
    what is wrong with it.  Neither ever contains the value itself (it could be a secret).
    """

    def __init__(self, pointer: str, reason: str) -> None:
        self.pointer = pointer
        self.reason = reason
        where = f"at {pointer!r}" if pointer else "at the root"
        super().__init__(f"not canonical JSON {where}: {reason}")


def canonical_json(value: object) -> str:
    """Return the one canonical JSON text for ``value``.

    Rules: object keys sorted (by code point), separators ``,`` and ``:`` with no spaces, non-ASCII
    written as itself (UTF-8 when encoded) except lone surrogates, which are escaped as ``\\uXXXX``
    so the text always encodes.  Integral floats are written as integers (``1.0`` -> ``1``, ``-0.0``
    -> ``0``, ``1e20`` -> ``100000000000000000000``) because JSON does not tell them apart; other
    floats use Python's shortest round-tripping ``repr``.  ``True`` stays ``true`` and never equals
    ``1``.

    Only ``dict`` (with ``str`` keys), ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``
    are accepted (subclasses are written as their base type).  NaN, Infinity, tuples, sets, bytes,
    other objects, non-string keys and nesting deeper than ``MAX_CANONICAL_DEPTH`` raise
    ``NotCanonicalJSON`` naming the JSON Pointer of the first offending place.
    """
    try:
        if not _has_float(value, 0):  # exact JSON types, nothing to rewrite: the encoder writes it as it is
            return _escape_lone_surrogates(_write_canonical(value))
    except (_NeedsTheFullWalk, ValueError, TypeError, RecursionError):
        pass  # the full walk says what is wrong, where (or rewrites subclasses and integral floats)
    plain = _plain_value(value, [], 0)
    return _escape_lone_surrogates(_write_canonical(plain))


class _NeedsTheFullWalk(Exception):
    """Raised by `_has_float` for anything but exact, valid JSON types."""


def _has_float(value: object, depth: int) -> bool:
    """Whether `value`, made of exact JSON types only and valid as canonical JSON, holds a float;
    `_NeedsTheFullWalk` for anything else (a subclass, NaN, a non-string key, a too-wide integer,
    nesting too deep). The common case, a value the encoder can write exactly as it is, is then one
    quick walk with no copy, no path bookkeeping and no sorting (the encoder sorts the keys)."""
    kind = type(value)
    if kind is dict:
        if depth >= MAX_CANONICAL_DEPTH:
            raise _NeedsTheFullWalk()
        found = False
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _NeedsTheFullWalk()
            item_kind = type(item)
            if item_kind is str or item_kind is bool or item is None:
                continue
            if item_kind is int:
                if item.bit_length() > MAX_INTEGER_BITS:
                    raise _NeedsTheFullWalk()
            elif _has_float(item, depth + 1):
                found = True
        return found
    if kind is list:
        if depth >= MAX_CANONICAL_DEPTH:
            raise _NeedsTheFullWalk()
        found = False
        for item in value:  # type: ignore[attr-defined]
            item_kind = type(item)
            if item_kind is str or item_kind is bool or item is None:
                continue
            if item_kind is int:
                if item.bit_length() > MAX_INTEGER_BITS:
                    raise _NeedsTheFullWalk()
            elif _has_float(item, depth + 1):
                found = True
        return found
    if kind is str or kind is bool or value is None:
        return False
    if kind is int:
        if value.bit_length() > MAX_INTEGER_BITS:  # type: ignore[attr-defined]
            raise _NeedsTheFullWalk()
        return False
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _NeedsTheFullWalk()
        return True
    raise _NeedsTheFullWalk()


def new_fingerprint_key() -> bytes:
    """A fresh random key for ``fingerprint`` (what an in-memory store or a new SQLite file gets)."""
    return secrets.token_bytes(FINGERPRINT_KEY_BYTES)


def check_fingerprint_key(key: object) -> bytes:
    """``key`` as bytes, or a TypeError/ValueError saying what a fingerprint key must be."""
    if not isinstance(key, (bytes, bytearray)):
        raise TypeError(f"a fingerprint key must be bytes, not {type(key).__name__}")
    if len(key) < MIN_FINGERPRINT_KEY_BYTES:
        raise ValueError(f"a fingerprint key must be at least {MIN_FINGERPRINT_KEY_BYTES} bytes long")
    return bytes(key)


def fingerprint_key_id(key: bytes) -> str:
    """A short public name for a key: tells two keys apart without revealing either.

    A durable store keeps it, so opening the store with another key is refused instead of silently
    making every stored fingerprint unmatchable.
    """
    return hmac.new(check_fingerprint_key(key), b"agent-lab fingerprint key id", hashlib.sha256).hexdigest()[:32]


def fingerprint(tool: str, arguments: object, *, key: bytes) -> str:
    """Return ``"hmac-sha256:" + hex`` of the HMAC-SHA-256, under ``key``, of
    ``canonical_json({"tool": tool, "arguments": arguments})``.

    Without the key nobody can test a guess against a fingerprint, however few values an argument
    can take. The text is assembled from the canonical arguments directly, so the wrapper object
    does not count towards ``MAX_CANONICAL_DEPTH`` and error pointers point *into the arguments*
    (the same pointers a schema violation would use). ``Fingerprinter(key)`` computes the same,
    faster, for many calls under one key.
    """
    return Fingerprinter(key).fingerprint(tool, arguments)


class Fingerprinter:
    """``fingerprint`` under one key, with the key's HMAC pads hashed once (RFC 2104): every call
    then hashes only the call's text, about three times faster than building an HMAC each time.
    `Blake2bFingerprinter` is the same over keyed BLAKE2b (what a registry gives calls)."""

    __slots__ = ("_inner", "_outer")
    scheme = FINGERPRINT_PREFIX

    def __init__(self, key: bytes) -> None:
        secret = check_fingerprint_key(key)
        if len(secret) > _SHA256_BLOCK_BYTES:
            secret = hashlib.sha256(secret).digest()
        padded = secret.ljust(_SHA256_BLOCK_BYTES, b"\0")
        self._inner = hashlib.sha256(bytes(byte ^ 0x36 for byte in padded))
        self._outer = hashlib.sha256(bytes(byte ^ 0x5C for byte in padded))

    @staticmethod
    def for_scheme(fingerprint: str, key: bytes) -> Fingerprinter | None:
        """The fingerprinter, under `key`, of the scheme `fingerprint`'s prefix names (None: no keyed
        scheme of ours, such as an unkeyed ``sha256:`` one, which nothing matches)."""
        if not isinstance(fingerprint, str):
            return None
        if fingerprint.startswith(BLAKE2B_PREFIX):
            return Blake2bFingerprinter(key)
        if fingerprint.startswith(FINGERPRINT_PREFIX):
            return Fingerprinter(key)
        return None

    def fingerprint(self, tool: str, arguments: object) -> str:
        """``fingerprint(tool, arguments, key=...)`` for this key, in this scheme."""
        if not isinstance(tool, str):
            raise NotCanonicalJSON("", "the tool name must be a string")
        # Sorted keys: "arguments" comes before "tool". A name is a string: no need to walk it as a value.
        return self._digest('{"arguments":' + canonical_json(arguments) + _tool_member(str.__str__(tool)))

    def fingerprint_exact(self, tool: str, arguments: object) -> str:
        """`fingerprint` of arguments known to be exact JSON types without a float, within the canonical
        limits (exact str keys, integers of at most 64 bits, nesting under `MAX_CANONICAL_DEPTH`), as the
        registry's schema step proves of its copy in the walk that makes it: the JSON encoder writes
        such a value canonically as it is, so no second walk is needed. `tool` is a registered name."""
        text = "".join(_encode_sorted(arguments, 0))  # what `_write_canonical` does, one call less
        if not text.isascii():
            text = _escape_lone_surrogates(text)
        return self._digest('{"arguments":' + text + _tool_member(tool))

    def _digest(self, text: str) -> str:
        inner = self._inner.copy()
        inner.update(text.encode("utf-8"))
        outer = self._outer.copy()
        outer.update(inner.digest())
        return FINGERPRINT_PREFIX + outer.hexdigest()

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(...)"


class Blake2bFingerprinter(Fingerprinter):
    """`Fingerprinter` over keyed BLAKE2b-256 (RFC 7693's MAC mode, the key in the first block, hashed
    once here), with its own personalisation string, so the same key can serve other uses. One state
    copy and one compression a call: about 5,000 instructions against HMAC-SHA-256's 13,500."""

    __slots__ = ("_keyed", "_suffixes")
    scheme = BLAKE2B_PREFIX

    def __init__(self, key: bytes) -> None:
        secret = check_fingerprint_key(key)
        if len(secret) > _BLAKE2B_MAX_KEY_BYTES:
            secret = hashlib.blake2b(secret).digest()
        self._keyed = hashlib.blake2b(key=secret, digest_size=32, person=b"agent-lab call")
        self._suffixes: dict[str, bytes] = {}  # tool name -> the hashed end of its calls' text

    def fingerprint_exact(self, tool: str, arguments: object) -> str:
        """`Fingerprinter.fingerprint_exact`, with the digest made here (every keyed call of a registry
        comes here: one call less)."""
        text = "".join(_encode_sorted(arguments, 0))
        if not text.isascii():
            text = _escape_lone_surrogates(text)
        keyed = self._keyed.copy()  # the same text as `fingerprint` hashes, fed in three pieces
        keyed.update(_ARGUMENTS_MEMBER)
        keyed.update(text.encode("utf-8"))
        suffix = self._suffixes.get(tool)
        if suffix is None:
            suffix = _tool_member(tool).encode("utf-8")
            if len(self._suffixes) < _MAX_KEPT_SUFFIXES:  # a registry's few names (bounded all the same)
                self._suffixes[tool] = suffix
        keyed.update(suffix)
        return BLAKE2B_PREFIX + keyed.hexdigest()

    def _digest(self, text: str) -> str:
        keyed = self._keyed.copy()
        keyed.update(text.encode("utf-8"))
        return BLAKE2B_PREFIX + keyed.hexdigest()


_BLAKE2B_MAX_KEY_BYTES = 64
_MAX_KEPT_SUFFIXES = 4096
_SHA256_BLOCK_BYTES = 64


@functools.lru_cache(maxsize=1024)
def _tool_member(tool: str) -> str:
    """The end of a fingerprinted text: `,"tool":<name>}` (a registry asks for the same few names)."""
    return ',"tool":' + _escape_lone_surrogates(_write_canonical(tool)) + "}"


_ARGUMENTS_MEMBER = b'{"arguments":'
"""The start of a fingerprinted text (sorted keys: "arguments" comes before "tool")."""

def _plain_value(value: object, path: List[str], depth: int) -> object:
    """Return ``value`` rebuilt from exact JSON types, or raise ``NotCanonicalJSON``.

    ``path`` holds the pointer tokens of the place being visited (only joined when reporting);
    ``depth`` counts the containers enclosing ``value``.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return _plain_int(value, path)  # type: ignore[arg-type]
    if kind is float:
        return _plain_float(value, path)  # type: ignore[arg-type]
    if isinstance(value, dict):
        return _plain_object(value, path, depth)
    if isinstance(value, list):
        return _plain_array(value, path, depth)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # bool cannot be subclassed, so this is a true integer (e.g. IntEnum)
        return _plain_int(int.__int__(value), path)
    if isinstance(value, float):
        return _plain_float(float.__float__(value), path)
    raise NotCanonicalJSON(_pointer(path), f"a value of type {kind.__name__} is not JSON")


def _plain_int(value: int, path: List[str]) -> int:
    if value.bit_length() > MAX_INTEGER_BITS:
        raise NotCanonicalJSON(_pointer(path), f"an integer wider than {MAX_INTEGER_BITS} bits is refused")
    return value


def _plain_float(value: float, path: List[str]) -> Union[int, float]:
    if not math.isfinite(value):
        raise NotCanonicalJSON(_pointer(path), "NaN and Infinity are not JSON numbers")
    if value.is_integer():
        return int(value)  # 1.0 -> 1, -0.0 -> 0, 1e20 -> 100000000000000000000
    return value


def _plain_object(value: Mapping[Any, Any], path: List[str], depth: int) -> Dict[str, object]:
    _check_depth(path, depth)
    for key in value:
        if not isinstance(key, str):
            raise NotCanonicalJSON(_pointer(path), f"an object key of type {type(key).__name__} is not a string")
    plain: Dict[str, object] = {}
    for key in sorted(value):  # visit in canonical order so the first error reported is canonical too
        path.append(key)
        plain[str.__str__(key)] = _plain_value(value[key], path, depth + 1)
        path.pop()
    return plain


def _plain_array(value: List[Any], path: List[str], depth: int) -> List[object]:
    _check_depth(path, depth)
    plain: List[object] = []
    for index, item in enumerate(value):
        path.append(str(index))
        plain.append(_plain_value(item, path, depth + 1))
        path.pop()
    return plain


def _check_depth(path: List[str], depth: int) -> None:
    if depth >= MAX_CANONICAL_DEPTH:
        raise NotCanonicalJSON(_pointer(path), f"nesting deeper than {MAX_CANONICAL_DEPTH} levels is refused")


def _pointer(path: List[str]) -> str:
    """JSON Pointer (RFC 6901) for a list of reference tokens."""
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in path)


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a surrogate code point, which no UTF-8 text (a file, a database) can hold."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def _escape_lone_surrogates(text: str) -> str:
    """Escape surrogate code points, which ``ensure_ascii=False`` leaves raw and UTF-8 cannot encode.

    They can only occur inside strings (all JSON syntax is ASCII), where ``\\uXXXX`` means the same.
    """
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub(lambda match: "\\u%04x" % ord(match.group()), text)
