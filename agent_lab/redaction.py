"""Masking values that must never leave the process.

`ToolSpec.redact` names argument and output fields whose values are secrets (an API token, a
customer's e-mail). `redact` masks those members wherever they occur in a structure before it is
shown to a model, written to an audit trail or put in a report; `redact_text` masks known secret
values inside free text (summaries, report lines) where no field name is left to match.

Both are transforms: they return new values and never mutate their input. `redact` walks with an
explicit stack, so a hostile, very deep (or cyclic) structure cannot raise RecursionError; past
`MAX_REDACTION_DEPTH` levels the remainder is replaced by `REDACTED` rather than risk a leak.
"""

from __future__ import annotations

import json
import re
from typing import Any, Collection, Iterable, Mapping

__all__ = [
    "MAX_REDACTION_DEPTH",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "collect_secrets",
    "redact",
    "redact_text",
]

REDACTED = "[redacted]"

MAX_REDACTION_DEPTH = 128
"""Containers nested deeper than this are replaced whole by `REDACTED`. Twice the validator's and the
fingerprint's depth limit (64), so no value that passed the schema step is ever cut short."""

MIN_SECRET_LENGTH = 4
"""`redact_text` ignores secrets shorter than this: masking every "a" or "42" in a sentence would
destroy the text while protecting nothing (a value that short is guessable anyway)."""


_OBJECT, _ARRAY, _TUPLE = "object", "array", "tuple"
_LEAF_TYPES = frozenset((str, int, float, bool, type(None)))


def _kind(value: Any) -> str | None:
    """Which container `value` is (None for a leaf); exact types first, ABCs only for the rest."""
    exact = type(value)
    if exact is dict:
        return _OBJECT
    if exact is list:
        return _ARRAY
    if exact in _LEAF_TYPES:
        return None
    if isinstance(value, Mapping):
        return _OBJECT
    if isinstance(value, list):
        return _ARRAY
    if isinstance(value, tuple):
        return _TUPLE
    return None


def redact(value: Any, fields: Collection[str]) -> Any:
    """Return a copy of `value` in which every object member named in `fields` holds `REDACTED`.

    Objects (any Mapping) come back as dicts, lists as lists, tuples as tuples; other values are
    returned as they are. Member names match exactly (case-sensitive), at any depth; a single string
    for `fields` is one name. A container that contains itself, or one nested deeper than
    `MAX_REDACTION_DEPTH`, is replaced by `REDACTED`.
    """
    kind = _kind(value)
    if kind is None:
        return value
    return _redacted_copy(value, kind, _names(fields))


def _redacted_copy(root: Any, kind: str, names: frozenset[str]) -> Any:
    """Depth-first copy with an explicit stack instead of recursion.

    A stack entry is [source, kind, remaining items, copy so far, slot in the parent's copy]. An entry
    is left only to descend into a container item, and resumed (its iterator keeps the place) once
    that item's copy is finished; leaves are copied in the tight inner loops.
    """
    stack = [_entry(root, kind, None)]
    active = {id(root)}  # containers on the current path, to cut cycles
    while True:
        source, kind, items, copy, _ = stack[-1]
        deeper_allowed = len(stack) < MAX_REDACTION_DEPTH
        child = None
        if kind is _OBJECT:
            for key, item in items:
                if key in names and isinstance(key, str):
                    copy[key] = REDACTED
                    continue
                item_kind = None if type(item) in _LEAF_TYPES else _kind(item)
                if item_kind is None:
                    copy[key] = item
                elif not deeper_allowed or id(item) in active:
                    copy[key] = REDACTED
                else:
                    child = _entry(item, item_kind, key)
                    break
        else:
            for item in items:
                item_kind = None if type(item) in _LEAF_TYPES else _kind(item)
                if item_kind is None:
                    copy.append(item)
                elif not deeper_allowed or id(item) in active:
                    copy.append(REDACTED)
                else:
                    child = _entry(item, item_kind, None)
                    break
        if child is not None:
            active.add(id(child[0]))
            stack.append(child)
            continue
        finished = stack.pop()
        active.discard(id(source))
        value = tuple(copy) if kind is _TUPLE else copy
        if not stack:
            return value
        parent = stack[-1]
        if parent[1] is _OBJECT:
            parent[3][finished[4]] = value
        else:
            parent[3].append(value)


def _entry(source: Any, kind: str, slot: Any) -> list[Any]:
    items = iter(source.items()) if kind is _OBJECT else iter(source)
    return [source, kind, items, {} if kind is _OBJECT else [], slot]


def _names(fields: Collection[str]) -> frozenset[str]:
    """The member names to mask; one string is one name (not a set of one-letter names)."""
    if isinstance(fields, str):
        return frozenset((fields,))
    return frozenset(name for name in fields if isinstance(name, str))


def redact_text(text: str, secrets: Collection[str]) -> str:
    """Return `text` with every occurrence of each secret replaced by `REDACTED`.

    Secrets are matched literally, longest first (so a secret that contains another is masked whole).
    Non-strings and secrets shorter than `MIN_SECRET_LENGTH` are ignored (see that constant); a
    single string for `secrets` is one secret.
    """
    candidates = (secrets,) if isinstance(secrets, str) else secrets
    usable = sorted(
        {secret for secret in candidates if isinstance(secret, str) and len(secret) >= MIN_SECRET_LENGTH},
        key=len,
        reverse=True,
    )
    if not usable or not isinstance(text, str):
        return text
    pattern = re.compile("|".join(re.escape(secret) for secret in usable))
    return pattern.sub(REDACTED, text)


def collect_secrets(value: Any, fields: Collection[str]) -> list[str]:
    """The secret values held under members named in `fields`, as text `redact_text` can mask.

    Strings are taken as they are; numbers as their JSON text; anything nested under a secret member
    is collected too. Used to mask summaries and report lines built from arguments or outputs.
    """
    names = _names(fields)
    found: list[str] = []
    for item, secret in _walk(value, names):
        if secret:
            text = _as_text(item)
            if text is not None and text not in found:
                found.append(text)
    return found


def _as_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):  # pragma: no cover - ints and floats always serialise
            return None
    return None


def _walk(value: Any, names: frozenset[str]) -> Iterable[tuple[Any, bool]]:
    """Every leaf of `value` with whether it sits under a secret member; bounded like `redact`."""
    stack: list[tuple[Any, bool, int]] = [(value, False, 0)]
    seen: set[tuple[int, bool]] = set()  # a shared container is walked once per secrecy
    while stack:
        item, secret, depth = stack.pop()
        if _kind(item) is None:
            yield item, secret
            continue
        if depth >= MAX_REDACTION_DEPTH or (id(item), secret) in seen:
            continue
        seen.add((id(item), secret))
        if isinstance(item, Mapping):
            for key, member in item.items():
                stack.append((member, secret or (isinstance(key, str) and key in names), depth + 1))
        else:
            stack.extend((member, secret, depth + 1) for member in item)
