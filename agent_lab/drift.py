"""What changed between a tool's locked contract and its contract now, and how much it matters.

`compare_contracts(locked, current)` walks two canonical contracts (`agent_lab.contract`) side by side
and gives one `Change` per place that differs, with its JSON Pointer, its kind and a sentence that
says what changed. The kinds, from the reviewer's point of view:

- TEXT: model-visible text changed: the name, title or description, or inside a schema a description,
  title, default, example, `$comment`, an `x-` keyword or any keyword that only annotates. Text is
  what steers a model, so any edit is a possible rug pull (the text is shown as a word diff).
- LOOSENED: a schema now accepts something it refused (or may: see below), so more can flow than
  was reviewed. TIGHTENED: it now refuses something it accepted, and nothing more is accepted.
- ANNOTATIONS_WEAKENED: a hint now claims less safety (`readOnlyHint` true -> false, `destructiveHint`
  false -> true, `idempotentHint` true -> false, `openWorldHint` false -> true; absent hints read as
  MCP's cautious defaults). ANNOTATIONS_CHANGED: any other change of the annotations.
- OUTPUT_SCHEMA_DROPPED: the tool no longer declares what it returns.

Loosening is decided conservatively, keyword by keyword: whatever cannot be shown to only narrow
what is accepted counts as loosening. Precisely:

- `type`: the new set of types is not within the old (`integer` is within `number`); removed: loosened.
- `enum`: a value added, or the keyword removed; `const` changed or removed.
- `required`: a name removed. Upper bounds (`maxLength`, `maxItems`, `maxProperties`, `maximum`,
  `exclusiveMaximum`, `maxContains`) raised or removed; lower bounds (`minLength`, `minItems`,
  `minProperties`, `minimum`, `exclusiveMinimum`, `minContains`) lowered or removed.
- `pattern`, `format`, `multipleOf` (unless the new one is a multiple of the old), `$ref`,
  `$dynamicRef`, `$schema`, `patternProperties` keys, `dependentRequired`: changed or removed.
- `additionalProperties`, `unevaluatedProperties`, `items`, ...: compared as schemas (absent is `true`),
  so `false` -> absent or `true` is loosened.
- `properties`: a property added is loosened (a new field the model is invited to fill, a channel
  for data that was never reviewed), a property removed is loosened unless the object is closed
  (`additionalProperties: false`, no `patternProperties`).
- `anyOf` gains a branch, `allOf` loses one; any constraint change inside `not`, `if` or a `oneOf`
  branch (where narrowing a part can widen the whole).
- `uniqueItems` dropped; a boolean schema `false` made anything else.
- Anything else that changed and is not text: loosened.
- In a schema that refers to its own parts (`$ref`, `$dynamicRef`, `$recursiveRef`) and also has a
  `not`, `if` or `oneOf` anywhere, no change counts as tightening: a definition narrowed in `$defs` may
  be what a `not` refuses, and then the whole accepts more.

Values are compared as JSON (`1` and `1.0` are one number, `true` is not `1`), as the contract hash
compares them, so a change the hash sees always has its place here.

Every string shown comes from a server and is escaped: control, format and invisible characters are
written as `\\uXXXX`, so a diff cannot hide what it reports. Nor can its length: a long value is shown
from a little before the place where the two versions part, and a long word diff shows every edit
(each cut to its share), or says how many it left out.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from .contract import ANNOTATION_DEFAULTS
from .text import escaped  # (it lived here; lockfile and lint's output still import it from here)

__all__ = ["Change", "ChangeKind", "compare_contracts", "escaped", "word_diff"]


class ChangeKind(str, enum.Enum):
    TEXT = "text"
    LOOSENED = "loosened"
    TIGHTENED = "tightened"
    ANNOTATIONS_WEAKENED = "annotations-weakened"
    ANNOTATIONS_CHANGED = "annotations-changed"
    OUTPUT_SCHEMA_DROPPED = "output-schema-dropped"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Change:
    """One difference: where (a JSON Pointer into the contract: `/description`,
    `/input_schema/properties/path/maxLength`), what kind, and a sentence saying what changed."""

    pointer: str
    kind: ChangeKind
    summary: str

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.summary}"


_T, _L, _N = ChangeKind.TEXT, ChangeKind.LOOSENED, ChangeKind.TIGHTENED

_TEXT_KEYWORDS = frozenset({"description", "title", "$comment", "default", "examples", "deprecated", "readOnly",
                            "writeOnly", "contentEncoding", "contentMediaType", "contentSchema"})
_UPPER_BOUNDS = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum", "maxContains")
_LOWER_BOUNDS = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum", "minContains")
_ADD_NARROWS = ("pattern", "format", "multipleOf", "uniqueItems", "dependentRequired")
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef", "$schema", "$id", "$anchor", "$dynamicAnchor",
               "$recursiveAnchor", "$vocabulary")
_ABSENT_IS_TRUE = ("items", "additionalItems", "additionalProperties", "unevaluatedProperties", "unevaluatedItems",
                   "propertyNames", "then", "else")
_INVERTING = ("not", "if")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
MAX_DEPTH = 64
MAX_SHOWN = 160
CONTEXT_SHOWN = 16  # characters shown before and after the place where two long values part
MIN_EDIT_SHOWN = 24  # characters an edit of a long word diff keeps, at least
_INVERTING_KEYWORDS = frozenset({"not", "if", "oneOf"})
_REFERRING_KEYWORDS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})
MAX_NODES_SCANNED = 100_000


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    except (ValueError, TypeError, RecursionError):
        return repr(value)


def _value(value: Any) -> str:
    """A JSON value shown briefly and safely."""
    text = escaped(_json_text(value))
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _pair(before: Any, after: Any) -> tuple[str, str]:
    """Two values shown briefly and safely, so that they never look alike: when either is too long to
    show whole, each is shown from a little before the place where the two part to a little after
    the place where they meet again (cut at MAX_SHOWN, the start of the difference always in view)."""
    old, new = _json_text(before), _json_text(after)
    if len(escaped(old)) <= MAX_SHOWN and len(escaped(new)) <= MAX_SHOWN:
        return escaped(old), escaped(new)
    limit = min(len(old), len(new))
    start = 0
    while start < limit and old[start] == new[start]:
        start += 1
    common_end = 0
    while common_end < limit - start and old[-1 - common_end] == new[-1 - common_end]:
        common_end += 1
    return _excerpt(old, start, len(old) - common_end), _excerpt(new, start, len(new) - common_end)


def _excerpt(text: str, start: int, end: int) -> str:
    """`text[start:end]` with a little context either side, escaped, marked where cut, within MAX_SHOWN."""
    before = text[max(0, start - CONTEXT_SHOWN):start]
    while len(escaped(before)) > 3 * CONTEXT_SHOWN:  # invisible characters take 6-10 to show
        before = before[1:]
    after = text[end:end + CONTEXT_SHOWN]
    while len(escaped(after)) > 3 * CONTEXT_SHOWN:
        after = after[:-1]
    head = "…" if start - len(before) > 0 else ""
    tail = "…" if end + len(after) < len(text) else ""
    middle = escaped(text[start:end])
    room = MAX_SHOWN - len(head) - len(escaped(before)) - len(escaped(after)) - len(tail)
    if len(middle) > room:
        return head + escaped(before) + middle[: max(room - 1, 1)] + "…"
    return head + escaped(before) + middle + escaped(after) + tail


def _same(before: Any, after: Any) -> bool:
    """JSON equality, as the contract hash sees it: `1 == 1.0`, but `true` is not `1`."""
    if before is after:
        return True
    try:
        return _json_equal(before, after)
    except RecursionError:
        return False


def _json_equal(before: Any, after: Any) -> bool:
    if isinstance(before, bool) or isinstance(after, bool):
        return isinstance(before, bool) and isinstance(after, bool) and before == after
    if isinstance(before, (int, float)) and isinstance(after, (int, float)):
        return before == after
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        return len(before) == len(after) and all(key in after and _json_equal(value, after[key])
                                                 for key, value in before.items())
    if isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)):
        return len(before) == len(after) and all(_json_equal(a, b) for a, b in zip(before, after))
    if isinstance(before, (Mapping, list, tuple, int, float)) or isinstance(after, (Mapping, list, tuple, int, float)):
        return False
    return bool(before == after)


def word_diff(before: str, after: str, *, limit: int = 400) -> str:
    """A one-line word diff: unchanged runs shortened, `[-removed-]` and `{+added+}` in full, every
    character escaped. Longer than `limit`, no edit is cut out unseen: unchanged runs become `…`, each
    edit keeps its share of `limit` (its start in view), and edits that do not fit even so are counted
    (`… and 3 more edits`)."""
    import difflib  # only where a description changed (lint reads this module for every catalog)

    old, new = before.split(" "), after.split(" ")
    parts: list[tuple[str, str]] = []  # (kind: "=", "-" or "+", escaped text)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            same = old[i1:i2]
            parts.append(("=", escaped(" ".join(same) if len(same) <= 6 else " ".join(same[:3] + ["…"] + same[-3:]))))
            continue
        if i2 > i1:
            parts.append(("-", escaped(" ".join(old[i1:i2]))))
        if j2 > j1:
            parts.append(("+", escaped(" ".join(new[j1:j2]))))
    text = " ".join(_marked(kind, body) for kind, body in parts if body or kind != "=")
    if len(text) <= limit:
        return text
    return _shortened_diff(parts, limit)


def _marked(kind: str, body: str) -> str:
    return {"=": "{}", "-": "[-{}-]", "+": "{{+{}+}}"}[kind].format(body)


def _shortened_diff(parts: list[tuple[str, str]], limit: int) -> str:
    """The most edits that fit in `limit`, in order, each cut to its share (at least MIN_EDIT_SHOWN
    characters), unchanged runs between them shown as `…`, and how many edits were left out."""
    edits = [index for index, (kind, _) in enumerate(parts) if kind != "="]
    for shown_edits in range(len(edits), 0, -1):
        note = f" … and {len(edits) - shown_edits} more edits" if shown_edits < len(edits) else ""
        kept = set(edits[:shown_edits])
        overhead = len(note) + 4 * shown_edits + 2 * (2 * shown_edits + 1)  # marks; spaces and "…" between
        share = max(MIN_EDIT_SHOWN, (limit - overhead) // shown_edits)
        pieces = []
        for index, (kind, body) in enumerate(parts):
            if index in kept:
                pieces.append(_marked(kind, body if len(body) <= share else body[: share - 1] + "…"))
            elif kind == "=" and index < edits[shown_edits - 1]:
                pieces.append("…")
        text = " ".join(pieces) + note
        if len(text) <= limit:
            return text
    return f"{len(edits)} edits, too long to show"[:limit]


def compare_contracts(locked: Mapping[str, Any], current: Mapping[str, Any]) -> tuple[Change, ...]:
    """Every change from `locked` to `current` (canonical contracts), in contract order."""
    changes: list[Change] = []
    for key in ("name", "title", "description"):
        before, after = locked.get(key), current.get(key)
        if not _same(before, after):
            changes.append(Change(f"/{key}", _T, _text_change(key, before, after)))
    changes.extend(_compare_schemas(locked.get("input_schema"), current.get("input_schema"), "/input_schema"))
    before_out, after_out = locked.get("output_schema"), current.get("output_schema")
    if before_out is not None and after_out is None:
        changes.append(Change("/output_schema", ChangeKind.OUTPUT_SCHEMA_DROPPED,
                              "the output schema was dropped: what the tool returns is no longer declared or checked"))
    elif before_out is None and after_out is not None:
        changes.append(Change("/output_schema", _N, "an output schema was added"))
    else:
        changes.extend(_compare_schemas(before_out, after_out, "/output_schema"))
    changes.extend(_compare_annotations(locked.get("annotations"), current.get("annotations")))
    return tuple(changes)


def _text_change(what: str, before: Any, after: Any) -> str:
    if isinstance(before, str) and isinstance(after, str):
        return f"{what} changed: {word_diff(before, after)}"
    if before is None:
        return f"{what} added: {_value(after)}"
    if after is None:
        return f"{what} removed (was {_value(before)})"
    shown_before, shown_after = _pair(before, after)
    return f"{what} changed from {shown_before} to {shown_after}"


# -- schemas -------------------------------------------------------------------------------------------


def _token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _compare_schemas(before: Any, after: Any, pointer: str) -> list[Change]:
    changes = list(_schema(before, after, pointer, monotone=True, depth=0))
    if any(change.kind is _N for change in changes) and (_refers_and_inverts(before) or _refers_and_inverts(after)):
        return [Change(change.pointer, _L, change.summary + " (the schema refers to its own parts and has a not, "
                       "if or oneOf, so a narrower part may make the whole accept more)")
                if change.kind is _N else change for change in changes]
    return changes


def _refers_and_inverts(schema: Any) -> bool:
    """Whether a schema both refers to its own parts and has a `not`, `if` or `oneOf` somewhere: then a
    part narrowed where it is defined may be what an inverting keyword refuses elsewhere, so whether a
    change narrows the whole cannot be read from where it is (every key is looked at, data included:
    a false alarm only makes the verdict more careful). Too large to scan: assumed so."""
    refers = inverts = False
    pending, seen = [schema], 0
    while pending:
        node = pending.pop()
        seen += 1
        if seen > MAX_NODES_SCANNED:
            return True
        if isinstance(node, Mapping):
            keys = set(node)
            refers = refers or bool(keys & _REFERRING_KEYWORDS)
            inverts = inverts or bool(keys & _INVERTING_KEYWORDS)
            if refers and inverts:
                return True
            pending.extend(node.values())
        elif isinstance(node, (list, tuple)):
            pending.extend(node)
    return False


def _schema(before: Any, after: Any, pointer: str, *, monotone: bool, depth: int) -> Iterator[Change]:
    """Changes from schema `before` to `after`. Where narrowing a part may widen the whole (`not`,
    `if`, a `oneOf` branch), `monotone` is False and every constraint change counts as loosened."""
    if _same(before, after):
        return
    if depth > MAX_DEPTH:
        yield Change(pointer, _L, "changed below the depth compared")
        return
    if before is False and after is not False:
        yield Change(pointer, _L, f"was false (nothing accepted), now {_value(after)}: it accepts what it refused")
        return
    if before is True:
        before = {}
    if after is True:
        after = {}
    if isinstance(before, bool) or isinstance(after, bool) or not isinstance(before, Mapping) \
            or not isinstance(after, Mapping):
        if after is False and isinstance(before, Mapping):
            kind = _N if monotone else _L
            yield Change(pointer, kind, f"the schema now accepts nothing (was {_value(before)})")
        else:
            yield Change(pointer, _L, f"the schema changed from {_value(before)} to {_value(after)}")
        return
    for key in list(before) + [key for key in after if key not in before]:
        old, new = before.get(key, _ABSENT), after.get(key, _ABSENT)
        if _same(old, new):
            continue
        where = f"{pointer}/{_token(str(key))}"
        for change in _keyword(key, old, new, where, before, after, depth):
            if not monotone and change.kind is _N:
                change = Change(change.pointer, _L, change.summary + " (inside not/if/oneOf, where a narrower part "
                                                                    "can make the whole accept more)")
            yield change


class _Absent:
    def __repr__(self) -> str:
        return "absent"


_ABSENT: Any = _Absent()


def _keyword(key: str, old: Any, new: Any, where: str, before: Mapping[str, Any], after: Mapping[str, Any],
             depth: int) -> Iterator[Change]:
    if key in _TEXT_KEYWORDS or key.startswith("x-") or key not in _KNOWN:
        yield Change(where, _T, _text_change(key, None if old is _ABSENT else old, None if new is _ABSENT else new))
    elif key == "type":
        yield from _types(old, new, where)
    elif key == "enum":
        yield from _enum(old, new, where)
    elif key == "const":
        kind = _N if old is _ABSENT else _L
        yield Change(where, kind, f"const {_was_now(old, new)}")
    elif key == "required":
        yield from _required(old, new, where)
    elif key in _UPPER_BOUNDS or key in _LOWER_BOUNDS:
        yield _bound(key, old, new, where)
    elif key in _ADD_NARROWS:
        yield _add_narrows(key, old, new, where)
    elif key in _REFERENCES:
        yield Change(where, _L, f"{key} {_was_now(old, new)}")
    elif key == "contains" and (old is _ABSENT or new is _ABSENT):
        yield Change(where, _N if old is _ABSENT else _L, f"{key} {_was_now(old, new)}")
    elif key in _ABSENT_IS_TRUE or key == "contains":
        yield from _schema(True if old is _ABSENT else old, True if new is _ABSENT else new, where, monotone=True,
                           depth=depth + 1)
    elif key in _INVERTING:
        yield from _schema(True if old is _ABSENT else old, True if new is _ABSENT else new, where, monotone=False,
                           depth=depth + 1)
    elif key in _SCHEMA_MAPS:
        yield from _schema_map(key, old, new, where, after, depth)
    elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
        yield from _schema_list(key, old, new, where, depth)
    else:  # "dependencies" (draft-07): schemas or lists of names; not worth more precision
        yield Change(where, _L, f"{key} {_was_now(old, new)}")


_KNOWN = frozenset({"type", "enum", "const", "required", *_UPPER_BOUNDS, *_LOWER_BOUNDS, *_ADD_NARROWS, *_REFERENCES,
                    *_ABSENT_IS_TRUE, *_INVERTING, *_SCHEMA_MAPS, "allOf", "anyOf", "oneOf", "prefixItems",
                    "dependencies", "contains"})


def _was_now(old: Any, new: Any) -> str:
    if old is _ABSENT:
        return f"added: {_value(new)}"
    if new is _ABSENT:
        return f"removed (was {_value(old)})"
    shown_old, shown_new = _pair(old, new)
    return f"changed from {shown_old} to {shown_new}"


_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})


def _type_set(value: Any) -> Optional[frozenset[str]]:
    if value is _ABSENT:
        return _ALL_TYPES
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if names is None or not all(isinstance(name, str) for name in names):
        return None
    found = set(names)
    if "number" in found:
        found.add("integer")  # an integer is a number
    return frozenset(found)


def _types(old: Any, new: Any, where: str) -> Iterator[Change]:
    before, after = _type_set(old), _type_set(new)
    if before is not None and after is not None and after <= before:
        yield Change(where, _N, f"type narrowed: {_was_now(old, new)}")
    else:
        yield Change(where, _L, f"type widened: {_was_now(old, new)}")


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    except (ValueError, TypeError, RecursionError):
        return repr(value)


def _enum(old: Any, new: Any, where: str) -> Iterator[Change]:
    if old is _ABSENT:
        yield Change(where, _N, f"enum added: {_value(new)}")
        return
    if new is _ABSENT or not isinstance(old, list) or not isinstance(new, list):
        yield Change(where, _L, f"enum {_was_now(old, new)}")
        return
    before = {_canonical(item) for item in old}
    added = [item for item in new if _canonical(item) not in before]
    after = {_canonical(item) for item in new}
    removed = [item for item in old if _canonical(item) not in after]
    if added:
        yield Change(where, _L, f"enum accepts new values: {_value(added)}")
    if removed:
        yield Change(where, _N, f"enum no longer accepts: {_value(removed)}")


def _required(old: Any, new: Any, where: str) -> Iterator[Change]:
    before = set(old) if isinstance(old, list) and all(isinstance(n, str) for n in old) else set()
    after = set(new) if isinstance(new, list) and all(isinstance(n, str) for n in new) else set()
    if (old is not _ABSENT and not isinstance(old, list)) or (new is not _ABSENT and not isinstance(new, list)):
        yield Change(where, _L, f"required {_was_now(old, new)}")
        return
    if before - after:
        yield Change(where, _L, f"no longer required: {_value(sorted(before - after))}")
    if after - before:
        yield Change(where, _N, f"now required: {_value(sorted(after - before))}")


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _bound(key: str, old: Any, new: Any, where: str) -> Change:
    upper = key in _UPPER_BOUNDS
    if old is _ABSENT:
        return Change(where, _N, f"{key} added: {_value(new)}")
    if new is _ABSENT:
        return Change(where, _L, f"{key} removed (was {_value(old)})")
    before, after = _number(old), _number(new)
    if before is None or after is None:
        return Change(where, _L, f"{key} changed from {_value(old)} to {_value(new)}")
    wider = after > before if upper else after < before
    verb = ("raised" if after > before else "lowered")
    return Change(where, _L if wider else _N, f"{key} {verb} from {_value(old)} to {_value(new)}")


def _add_narrows(key: str, old: Any, new: Any, where: str) -> Change:
    if key == "uniqueItems":
        return Change(where, _N if new is True and old is not True else _L, f"{key} {_was_now(old, new)}")
    if old is _ABSENT:
        return Change(where, _N, f"{key} added: {_value(new)}")
    if key == "multipleOf" and new is not _ABSENT:
        before, after = _number(old), _number(new)
        if before and after and (after / before).is_integer():
            return Change(where, _N, f"{key} changed from {_value(old)} to {_value(new)} (a multiple of it)")
    return Change(where, _L, f"{key} {_was_now(old, new)}")


def _closed(schema: Mapping[str, Any]) -> bool:
    return (schema.get("additionalProperties") is False or schema.get("unevaluatedProperties") is False) \
        and not schema.get("patternProperties")


def _schema_map(key: str, old: Any, new: Any, where: str, after: Mapping[str, Any], depth: int) -> Iterator[Change]:
    before = old if isinstance(old, Mapping) else {}
    now = new if isinstance(new, Mapping) else {}
    if (old is not _ABSENT and not isinstance(old, Mapping)) or (new is not _ABSENT and not isinstance(new, Mapping)):
        yield Change(where, _L, f"{key} {_was_now(old, new)}")
        return
    for name in list(before) + [name for name in now if name not in before]:
        member = f"{where}/{_token(str(name))}"
        if name in before and name in now:
            yield from _schema(before[name], now[name], member, monotone=True, depth=depth + 1)
        elif name in now:
            if key == "properties":
                yield Change(member, _L, f"property {escaped(repr(name))} added: a new field the model is invited to "
                                         f"fill, never reviewed")
            elif key == "dependentSchemas":
                yield Change(member, _N, f"{key} member {escaped(repr(name))} added")
            else:
                yield Change(member, _L, f"{key} member {escaped(repr(name))} added")
        else:
            if key == "properties" and _closed(after):
                yield Change(member, _N, f"property {escaped(repr(name))} removed (the object is closed, so it is "
                                         f"no longer accepted)")
            elif key == "properties":
                yield Change(member, _L, f"property {escaped(repr(name))} removed: the object is open, so any value "
                                         f"is now accepted there")
            else:
                yield Change(member, _L, f"{key} member {escaped(repr(name))} removed")


def _schema_list(key: str, old: Any, new: Any, where: str, depth: int) -> Iterator[Change]:
    if (old is not _ABSENT and not isinstance(old, list)) or (new is not _ABSENT and not isinstance(new, list)):
        yield Change(where, _L, f"{key} {_was_now(old, new)}")
        return
    before = old if isinstance(old, list) else []
    now = new if isinstance(new, list) else []
    monotone = key != "oneOf"
    for index in range(min(len(before), len(now))):
        yield from _schema(before[index], now[index], f"{where}/{index}", monotone=monotone, depth=depth + 1)
    if len(now) > len(before):
        narrows = key in ("allOf", "prefixItems")
        yield Change(where, _N if narrows else _L, f"{key} gained {len(now) - len(before)} branch(es)")
    elif len(before) > len(now):
        narrows = key == "anyOf"
        yield Change(where, _N if narrows else _L, f"{key} lost {len(before) - len(now)} branch(es)")


# -- annotations ---------------------------------------------------------------------------------------


_SAFE_VALUE = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def _compare_annotations(before: Any, after: Any) -> Iterator[Change]:
    old = before if isinstance(before, Mapping) else {}
    new = after if isinstance(after, Mapping) else {}
    for hint, default in ANNOTATION_DEFAULTS.items():
        was = old.get(hint) if isinstance(old.get(hint), bool) else default
        now = new.get(hint) if isinstance(new.get(hint), bool) else default
        where = f"/annotations/{hint}"
        if was != now:
            weakened = was == _SAFE_VALUE[hint]
            kind = ChangeKind.ANNOTATIONS_WEAKENED if weakened else ChangeKind.ANNOTATIONS_CHANGED
            claim = "claims less safety" if weakened else "claims more safety (a hint, never trusted)"
            yield Change(where, kind, f"{hint} {str(was).lower()} -> {str(now).lower()}: the tool now {claim}")
        elif not _same(old.get(hint, _ABSENT), new.get(hint, _ABSENT)):
            yield Change(where, ChangeKind.ANNOTATIONS_CHANGED, f"{hint} {_was_now(old.get(hint, _ABSENT), new.get(hint, _ABSENT))}")
    for key in list(old) + [key for key in new if key not in old]:
        if key in ANNOTATION_DEFAULTS or _same(old.get(key, _ABSENT), new.get(key, _ABSENT)):
            continue
        kind = _T if key == "title" else ChangeKind.ANNOTATIONS_CHANGED
        yield Change(f"/annotations/{_token(str(key))}", kind, _text_change(f"annotation {escaped(key)}",
                     old.get(key), new.get(key)))
