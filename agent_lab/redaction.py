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
from typing import Any, Collection, Iterable, Iterator, Mapping

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


_DONE = object()  # marks an exhausted iterator


class _Frame:
    """One container being copied: where its items come from and the copies made so far."""

    __slots__ = ("source", "items", "copied", "pending_key")

    def __init__(self, source: Any, items: Iterator[Any]) -> None:
        self.source = source
        self.items = items
        self.copied: list[Any] = []
        self.pending_key: Any = None  # the member name waiting for its (nested) value

    def finish(self) -> Any:
        """The finished copy, of the same JSON kind as the source."""
        if isinstance(self.source, Mapping):
            return dict(self.copied)
        if isinstance(self.source, tuple):
            return tuple(self.copied)
        return self.copied


def _is_container(value: Any) -> bool:
    return isinstance(value, (Mapping, list, tuple))


def _open(value: Any) -> _Frame:
    items = iter(value.items()) if isinstance(value, Mapping) else iter(value)
    return _Frame(value, items)


def redact(value: Any, fields: Collection[str]) -> Any:
    """Return a copy of `value` in which every object member named in `fields` holds `REDACTED`.

    Objects (any Mapping) come back as dicts, lists as lists, tuples as tuples; other values are
    returned as they are. Member names match exactly (case-sensitive), at any depth; a single string
    for `fields` is one name. A container that contains itself, or one nested deeper than
    `MAX_REDACTION_DEPTH`, is replaced by `REDACTED`.
    """
    names = _names(fields)
    if not _is_container(value):
        return value
    stack = [_open(value)]
    active = {id(value)}  # containers on the current path, to cut cycles
    while True:
        frame = stack[-1]
        entry = next(frame.items, _DONE)
        if entry is _DONE:
            finished = stack.pop()
            active.discard(id(finished.source))
            if not stack:
                return finished.finish()
            _attach(stack[-1], finished.finish())
            continue
        if isinstance(frame.source, Mapping):
            key, item = entry
            if isinstance(key, str) and key in names:
                frame.copied.append((key, REDACTED))
                continue
            frame.pending_key = key
        else:
            item = entry
        if not _is_container(item):
            _attach(frame, item)
        elif len(stack) >= MAX_REDACTION_DEPTH or id(item) in active:
            _attach(frame, REDACTED)
        else:
            active.add(id(item))
            stack.append(_open(item))


def _names(fields: Collection[str]) -> frozenset[str]:
    """The member names to mask; one string is one name (not a set of one-letter names)."""
    if isinstance(fields, str):
        return frozenset((fields,))
    return frozenset(name for name in fields if isinstance(name, str))


def _attach(frame: _Frame, value: Any) -> None:
    if isinstance(frame.source, Mapping):
        frame.copied.append((frame.pending_key, value))
        frame.pending_key = None
    else:
        frame.copied.append(value)


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
        if not _is_container(item):
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
