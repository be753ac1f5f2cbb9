"""Compiled validators shared by schema content: build two equal schemas, compile once.

`tool-eval` rebuilds every `ToolSpec` for every case, and an application may build the same registry
per request or per tenant; compiling a schema and checking it against its meta-schema is most of what
building a spec costs. A `Validator` is immutable once built and safe to share between threads (the
state of a call lives in a thread-local), so one compiled validator can serve every equal schema.

Keying. Two schemas share a validator only when their compact JSON text is the same, byte for byte
(keys in their own order: the order decides the order `errors()` reports in), and so are the options
that change compilation: the default `dialect`, `format_assertion` and the table of `format` checkers
in force (`formats.FORMAT_CHECKERS`). The table is indexed by the
SHA-256 of (options, text); a hit is then confirmed by comparing the text of the cached validator's
own schema with the probe's, so even a hash collision cannot hand out another schema's validator.
Python equality is not used: `{"const": 1}` and `{"const": true}` are == in Python, not in JSON. A
schema that is not plain JSON (a non-string key, NaN, a tuple, ...) is never looked up: it is
compiled on its own and refused as before. A schema that fails to compile raises, and nothing is
stored, so it raises again next time.

Bound. The `max_entries` most recently used validators are held (least recently used dropped
first); beyond that a validator is found only while something else (a spec) still holds it, through
a weak reference, so the table never keeps alive more than `max_entries` validators nobody uses.
Each cached validator's schema is a frozen copy (`agent_lab.frozenjson`), never the caller's dict.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections import OrderedDict
from typing import Any, Optional, Tuple

from ..frozenjson import FrozenObject, freeze
from . import formats  # its FORMAT_CHECKERS is read at each look-up: a test may put another table there
from ._shared import SharedTable  # (it lived here; the compiler imports it from `_shared`)
from .model import MAX_SCHEMA_DEPTH

__all__ = ["DEFAULT_MAX_ENTRIES", "SharedTable", "ValidatorCache", "shared_validator", "validator_cache"]

DEFAULT_MAX_ENTRIES = 512
"""Validators held for reuse although no spec holds them. A tool's validators are some tens of KiB,
so the cache holds at most a few tens of MiB of otherwise unused validators."""


def content_text(schema: Any) -> Optional[str]:
    """The compact JSON text two schemas must share to share a validator, or None when `schema` is not
    plain JSON (then it is never cached).

    `json.dumps` refuses what has no JSON form (NaN, sets, objects) but writes a non-string key as a
    string, so `{1: ...}` and `{"1": ...}` would read alike: keys are checked first. (What it does
    convert faithfully, a tuple to an array, an int or str enum to its value, the Validator converts
    the same way.)"""
    if isinstance(schema, bool):
        return "true" if schema else "false"
    if not isinstance(schema, dict) or not _string_keys(schema, MAX_SCHEMA_DEPTH):
        return None
    return _text(schema)


def _text(schema: Any) -> Optional[str]:
    try:
        return json.dumps(schema, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _string_keys(value: Any, depth: int) -> bool:
    """Every object key is a string, and containers nest at most `depth` levels."""
    if depth <= 0:
        return False
    if isinstance(value, dict):
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                return False
            if isinstance(item, (dict, list, tuple)) and not _string_keys(item, depth - 1):
                return False
        return True
    for item in value:
        if isinstance(item, (dict, list, tuple)) and not _string_keys(item, depth - 1):
            return False
    return True


class ValidatorCache:
    """A bounded, thread-safe table of compiled validators keyed by schema content and options."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
            raise ValueError("max_entries must be an integer >= 0")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._recent: "OrderedDict[bytes, Any]" = OrderedDict()  # strong references, least recent first
        # id(the frozen schema a validator in `_recent` holds) -> (digest, validator): see `_held_copy`
        self._by_copy: dict[int, Tuple[bytes, Any]] = {}
        self._live: "weakref.WeakValueDictionary[bytes, Any]" = weakref.WeakValueDictionary()
        self.hits = 0
        self.misses = 0

    def validator(self, schema: Any, *, dialect: Optional[str] = None, format_assertion: bool = False) -> Any:
        """The shared Validator for `schema` with these options: the cached one when an equal schema was
        compiled before, else a new one (compiled from a frozen copy of `schema`) that is then cached.
        Raises SchemaError exactly as `Validator(schema, ...)` would, every time."""
        from .validator import Validator

        held = self._held_copy(schema, dialect, format_assertion)
        if held is not None:
            return held
        probe = _probe(schema, dialect, format_assertion)
        if probe is None:
            return Validator(freeze(schema), dialect=dialect, format_assertion=format_assertion)
        digest, text, options = probe
        found = self._find(digest, text, options)
        if found is not None:
            return found
        built = Validator(freeze(schema), dialect=dialect, format_assertion=format_assertion)
        # What it was compiled with, and the text of its own (frozen, so unchanging) schema, for the
        # check on a hit: written once here instead of once per hit.
        object.__setattr__(built, "_content", (options, _text(built.schema)))
        with self._lock:
            self.misses += 1
            existing = self._live.get(digest)
            if existing is not None and _same_content(existing, text, options):
                built = existing  # another thread compiled it meanwhile: everyone gets the first one
            else:
                self._live[digest] = built
            self._remember(digest, built)
        return built

    def cached(self, schema: Any, *, dialect: Optional[str] = None, format_assertion: bool = False) -> Any:
        """The cached Validator for an equal schema with these options, or None; never compiles."""
        held = self._held_copy(schema, dialect, format_assertion)
        if held is not None:
            return held
        probe = _probe(schema, dialect, format_assertion)
        return None if probe is None else self._find(*probe)

    def _held_copy(self, schema: Any, dialect: Optional[str], format_assertion: bool) -> Any:
        """The cached validator whose own frozen copy `schema` is, or None. A spec rebuilt from another
        (`dataclasses.replace(spec, resource_guard=...)`) passes that copy back in: found by identity,
        without writing its text again. Frozen, the copy still reads as what was compiled (short of
        `dict.__setitem__` on it, which `frozenjson` says no read-only value can stop)."""
        if type(schema) is not FrozenObject:
            return None
        with self._lock:
            entry = self._by_copy.get(id(schema))
        if entry is None or entry[1].schema is not schema or not isinstance(format_assertion, bool) or (
                dialect is not None and not isinstance(dialect, str)):
            return None
        digest, found = entry
        if found._content[0] != (dialect, format_assertion, _interned(tuple(formats.FORMAT_CHECKERS.items()))):
            return None
        with self._lock:
            self.hits += 1
            self._remember(digest, found)
        return found

    def _find(self, digest: bytes, text: str, options: tuple) -> Any:
        with self._lock:
            found = self._live.get(digest)
            if found is None or not _same_content(found, text, options):
                return None
            self.hits += 1
            self._remember(digest, found)
            return found

    def _remember(self, digest: bytes, validator: Any) -> None:
        """Hold `validator` as the most recently used; drop the least recently used beyond the bound."""
        recent = self._recent
        replaced = recent.get(digest)
        if replaced is not None and replaced is not validator:
            self._forget_copy(replaced)
        recent[digest] = validator
        recent.move_to_end(digest)
        self._by_copy[id(validator.schema)] = (digest, validator)
        while len(recent) > self.max_entries:
            self._forget_copy(recent.popitem(last=False)[1])

    def _forget_copy(self, validator: Any) -> None:
        entry = self._by_copy.get(id(validator.schema))
        if entry is not None and entry[1] is validator:
            del self._by_copy[id(validator.schema)]

    def __len__(self) -> int:
        """How many validators the cache itself holds (never more than `max_entries`)."""
        with self._lock:
            return len(self._recent)

    def live(self) -> int:
        """How many validators can be found: those held here plus those something else still holds."""
        with self._lock:
            return len(self._live)

    def clear(self) -> None:
        with self._lock:
            self._recent.clear()
            self._by_copy.clear()
            self._live.clear()
            self.hits = self.misses = 0


def _probe(schema: Any, dialect: Any, format_assertion: Any) -> Optional[Tuple[bytes, str, tuple]]:
    """(digest, text, options) to look `schema` up by, or None when it cannot be cached."""
    if (dialect is not None and not isinstance(dialect, str)) or not isinstance(format_assertion, bool):
        return None
    text = content_text(schema)
    if text is None:
        return None
    checkers = _interned(tuple(formats.FORMAT_CHECKERS.items()))  # compiled `format` checks are looked up in this table
    options = (dialect, format_assertion, checkers)
    key = f"{dialect!s}\x00{format_assertion:d}\x00{hash(checkers)}\x00{text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).digest(), text, options


_CHECKER_TABLES: dict = {}


def _interned(checkers: tuple) -> tuple:
    """One tuple object per state of the format-checker table, however many validators remember it."""
    found = _CHECKER_TABLES.get(checkers)
    if found is None:
        if len(_CHECKER_TABLES) >= 16:
            _CHECKER_TABLES.clear()
        found = _CHECKER_TABLES.setdefault(checkers, checkers)
    return found


def _same_content(validator: Any, text: str, options: tuple) -> bool:
    """The confirmation a hit needs beyond the digest: same options, same JSON text."""
    # The cached schema is a frozen copy that compiled, so plain JSON: its text needs no key check.
    return getattr(validator, "_content", None) == (options, text)


validator_cache = ValidatorCache()
"""The process-wide cache `ToolSpec` compiles its schemas through."""


def shared_validator(schema: Any, *, dialect: Optional[str] = None, format_assertion: bool = False) -> Any:
    """A Validator for `schema` from the process-wide cache (see the module docstring); its `schema`
    attribute is a frozen copy, shared by every caller with equal content."""
    return validator_cache.validator(schema, dialect=dialect, format_assertion=format_assertion)
