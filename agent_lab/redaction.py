"""Masking values that must never leave the process.

`ToolSpec.redact` names argument and output fields whose values are secrets (an API token, a
customer's e-mail). `redact` masks those members wherever they occur in a structure before it is
shown to a model, written to an audit trail or put in a report; `redact_text` masks known secret
values inside free text (summaries, report lines) where no field name is left to match;
`redact_violations` stops schema violations at a secret field, because what lies below it (an object
key, an array index) is part of the secret too and a violation's path and message would name it.
`SecretMask` is the one path by which every report file and every line about a run is masked.

Both are transforms: they return new values and never mutate their input. `redact` walks with an
explicit stack, so a hostile, very deep (or cyclic) structure cannot raise RecursionError; past
`MAX_REDACTION_DEPTH` levels the remainder is replaced by `REDACTED` rather than risk a leak.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

__all__ = [
    "MAX_REDACTION_DEPTH",
    "MIN_SECRET_LENGTH",
    "NO_SECRETS",
    "REDACTED",
    "REDACTED_VIOLATION_KEYWORD",
    "SecretMask",
    "collect_secrets",
    "contains_secret",
    "redact",
    "redact_text",
    "redact_violations",
    "secret_spellings",
]

REDACTED = "[redacted]"

MAX_REDACTION_DEPTH = 128
"""Containers nested deeper than this are replaced whole by `REDACTED`. Twice the validator's and the
fingerprint's depth limit (64), so no value that passed the schema step is ever cut short."""

MIN_SECRET_LENGTH = 4
"""`redact_text` masks a secret at least this long wherever it occurs, and a shorter one (a CVV `737`,
a PIN `42`) only as a whole token: where it is not part of a longer run of digits or of letters. So
`737` is masked in `CVV 737`, `cvv737` and `737-A`, and left alone in `17375`; `pin` in `pin:`, not in
`pins` or `pin_code` (a run of letters continues through "_"). Masking every `42` inside longer numbers
would destroy the text and protect nothing."""


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

    Secrets are matched literally, longest first (so a secret that contains another is masked whole);
    one shorter than `MIN_SECRET_LENGTH` only as a whole token (see that constant). Non-strings, empty
    secrets and short ones of white space only are ignored; a single string for `secrets` is one secret.
    """
    if type(secrets) is frozenset:  # a report masks thousands of lines with one set: sort it once
        usable = _usable_frozen(secrets)
    else:
        usable = _usable((secrets,) if isinstance(secrets, str) else secrets)
    if not usable or not isinstance(text, str):
        return text
    return _secrets_pattern(usable).sub(REDACTED, text)


def contains_secret(text: str, secrets: Collection[str]) -> bool:
    """Whether `redact_text` would mask anything in `text`: a secret anywhere, one shorter than
    `MIN_SECRET_LENGTH` only as a whole token (`737` in `CVV 737`, not in `17375`). The one test of
    "does this show a secret" for graders, so what counts as shown is exactly what a report masks."""
    if type(secrets) is frozenset:
        usable = _usable_frozen(secrets)
    else:
        usable = _usable((secrets,) if isinstance(secrets, str) else secrets)
    if not usable or not isinstance(text, str):
        return False
    return _secrets_pattern(usable).search(text) is not None


def _usable(candidates: Iterable[object]) -> tuple[str, ...]:
    """The secrets `redact_text` masks: strings that are not empty (nor, when short, only white space),
    each once, longest first."""
    return tuple(sorted({secret for secret in candidates
                         if isinstance(secret, str) and (len(secret) >= MIN_SECRET_LENGTH or secret.strip())},
                        key=len, reverse=True))


@functools.lru_cache(maxsize=32)
def _usable_frozen(secrets: frozenset[object]) -> tuple[str, ...]:
    return _usable(secrets)


def secret_spellings(secrets: Collection[str]) -> frozenset[str]:
    """Each secret as text built from it may spell it, for `redact_text` to mask them all.

    A report does not always show a secret as it is: a one-line cell turns its line breaks, tabs and
    runs of spaces into one space; JSON text escapes its quotes, backslashes and control characters
    (with or without non-ASCII escapes); a `repr` escapes them its own way; XML writes `&`, `<`, `>`
    and quotes as entities. Masked as it is only, a PEM key or a token with a quote would be shown in
    full in any of those. Non-strings are ignored, as `redact_text` ignores them.
    """
    return _spellings(frozenset(secret for secret in secrets if isinstance(secret, str)))


@functools.lru_cache(maxsize=32)
def _spellings(secrets: frozenset[str]) -> frozenset[str]:
    forms: set[str] = set()
    for secret in secrets:
        plain = {secret, " ".join(secret.split()), json.dumps(secret, ensure_ascii=False)[1:-1],
                 json.dumps(secret)[1:-1], repr(secret)[1:-1]}
        forms |= plain
        for form in plain:
            text = form.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            attribute = text.replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
            forms |= {text, attribute, text.replace('"', "&quot;").replace("'", "&apos;")}
    return frozenset(forms)


@functools.lru_cache(maxsize=32)
def _secrets_pattern(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern per set of secrets: a report masks hundreds of lines with the same ones."""
    return re.compile("|".join(_secret_pattern(secret) for secret in secrets))


_NOT_AFTER_A_DIGIT, _NOT_BEFORE_A_DIGIT = r"(?<!\d)", r"(?!\d)"
_NOT_AFTER_A_LETTER, _NOT_BEFORE_A_LETTER = r"(?<![^\W\d])", r"(?![^\W\d])"  # a letter or "_" (pin_code)


def _secret_pattern(secret: str) -> str:
    """`secret` as literal text; a short one only where its ends do not continue a run of digits or
    of letters (`737` in `cvv737` and `737-A`, never in `17375`; `pin` never in `pin_code`)."""
    literal = re.escape(secret)
    if len(secret) >= MIN_SECRET_LENGTH:
        return literal
    first, last = secret[0], secret[-1]
    before = _NOT_AFTER_A_DIGIT if first.isdecimal() else _NOT_AFTER_A_LETTER if first.isalpha() else ""
    after = _NOT_BEFORE_A_DIGIT if last.isdecimal() else _NOT_BEFORE_A_LETTER if last.isalpha() else ""
    return before + literal + after


def collect_secrets(value: Any, fields: Collection[str], *, include_keys: bool = False) -> list[str]:
    """The secret values held under members named in `fields`, as text `redact_text` can mask.

    Strings are taken as they are; numbers as their JSON text; anything nested under a secret member
    is collected too, and with `include_keys` the object keys inside a secret member as well (a key
    inside a secret is as secret as its value). Used to mask summaries, report lines and failure
    messages built from arguments or outputs.
    """
    names = _names(fields)
    found: list[str] = []
    for item, secret in _walk(value, names, include_keys):
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


def _walk(value: Any, names: frozenset[str], include_keys: bool = False) -> Iterable[tuple[Any, bool]]:
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
                if secret and include_keys:
                    stack.append((key, True, depth + 1))
                stack.append((member, secret or (isinstance(key, str) and key in names), depth + 1))
        else:
            stack.extend((member, secret, depth + 1) for member in item)


# ---------------------------------------------------------------------------------------------
# Reports and lines: the one masking path
# ---------------------------------------------------------------------------------------------

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null')
_LINE_BREAKS_JSON_KEEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
JSON_REPORT_SUFFIXES = (".json", ".jsonl", ".sarif")


class SecretMask:
    """How every report file and every line about a run is masked: one object per run, built from the
    secret values its worlds held and the field names its tools redact, used by every writer (the
    tool-eval and model-eval reports and their JUnit files, the lines the commands print, the unittest
    helper's failure messages). Writers that each masked their own way drifted apart: one masked JSON
    escapes and kept JSON valid, another did neither.

    - `text`: free text (Markdown, XML, a log line), every secret however text built from it spells it
      (`secret_spellings`: one line, JSON escapes, `repr`, XML entities).
    - `cell`: one table cell or message fragment, masked before it is cut to `limit`, so no part of a
      secret crossing the cut survives.
    - `json_text`: JSON or JSON Lines text that stays JSON: each string (object keys too) is decoded,
      so a secret is found however the file escapes it (`\\u0037` for `7`, a quote, a line break),
      masked and encoded again; a number or literal that shows a secret becomes the string
      `"[redacted]"` (a PIN 4821 in the number 14821: `{"pin":[redacted]}` would not be JSON). A last
      pass masks a secret that spans JSON's own syntax, even so.
    - `file`: a whole report by its name (`JSON_REPORT_SUFFIXES` as JSON text, anything else as text).
    - `value`: a JSON value with the members named in `fields` masked (`redact`), for arguments a
      report shows.
    """

    __slots__ = ("secrets", "fields", "_spellings")

    def __init__(self, secrets: Iterable[object] = (), *, fields: Iterable[object] = ()) -> None:
        self.secrets = frozenset(secret for secret in secrets if isinstance(secret, str))
        self.fields = frozenset(name for name in fields if isinstance(name, str))
        self._spellings = secret_spellings(self.secrets)

    def __repr__(self) -> str:  # never the secrets themselves
        return f"SecretMask(<{len(self.secrets)} secret(s)>, fields={sorted(self.fields)!r})"

    def text(self, text: str) -> str:
        return redact_text(text, self._spellings) if self._spellings else text

    def cell(self, value: Any, limit: int) -> str:
        """`value` (text, or JSON for anything else) on one line, masked before and after white space is
        folded, then cut to `limit` characters (the last one an ellipsis)."""
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
        text = self.text(" ".join(self.text(text).split()))
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def value(self, value: Any) -> Any:
        return redact(value, self.fields)

    def file(self, name: str, text: str) -> str:
        return self.json_text(text) if name.endswith(JSON_REPORT_SUFFIXES) else self.text(text)

    def json_text(self, text: str) -> str:
        if not self._spellings:
            return text
        # Only lines that may show a secret need tokens: one that spells it, or one with an escape that
        # could (JSON text is never cut across lines by these writers). And in a line, only the string
        # tokens with an escape or with a secret in (or across) them: any other string token is the
        # line's own text between two quotes, which would show a secret there too.
        usable = _usable_frozen(self._spellings)
        if not usable:
            return text
        pattern = _secrets_pattern(usable)
        return self.text("\n".join(self._json_line(line, pattern) for line in text.split("\n")))

    def _json_line(self, line: str, pattern: re.Pattern[str]) -> str:
        shown = [found.span() for found in pattern.finditer(line)]  # where the line spells a secret
        if not shown and "\\" not in line:
            return line
        json_token = self._json_token

        def token_near_a_secret(found: re.Match[str]) -> str:
            token = found.group()
            if token[0] == '"' and "\\" not in token:
                start, end = found.span()
                for left, right in shown:
                    if left < end and start < right:
                        break
                else:  # no escape, and no secret in or across it: the line's own text, unchanged
                    return token
            return json_token(found)

        return _JSON_TOKEN.sub(token_near_a_secret, line)

    def _json_token(self, found: re.Match[str]) -> str:
        token = found.group()
        if not token.startswith('"'):
            return token if self.text(token) == token else json.dumps(REDACTED)
        try:
            value = json.loads(token)
        except ValueError:
            return token  # not a string the writers made; the last pass still masks it
        masked = self.text(value)
        if masked == value:
            return token
        encoded = json.dumps(masked, ensure_ascii=False)
        for character, escaped in _LINE_BREAKS_JSON_KEEPS.items():
            encoded = encoded.replace(character, escaped)
        return encoded


NO_SECRETS = SecretMask()
"""The mask of text that can hold no secret of a run (tool definitions, figures): it changes nothing."""


# ---------------------------------------------------------------------------------------------
# Schema violations
# ---------------------------------------------------------------------------------------------

REDACTED_VIOLATION_KEYWORD = "redacted"
"""The `keyword` of a violation that stands for everything found wrong below a secret field."""

# How each JSON Schema 2020-12 applicator moves through the instance, for `_keyword_path_to`: the
# keywords that step into a member or item (with whether a name or index follows them in a keyword
# path), and the in-place ones that stay at the same instance location.
_STEPS_INTO_CHILD_WITH_TOKEN = frozenset(("properties", "patternProperties", "prefixItems"))
_STEPS_INTO_CHILD = frozenset(
    ("additionalProperties", "unevaluatedProperties", "propertyNames", "items", "contains", "unevaluatedItems")
)
_IN_PLACE_WITH_TOKEN = frozenset(("allOf", "anyOf", "oneOf", "dependentSchemas"))
_IN_PLACE = frozenset(("not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef"))


def redact_violations(violations: Iterable[Mapping[str, Any]], fields: Collection[str]) -> list[dict[str, Any]]:
    """Violations as they may leave the process when the members named in `fields` are secret.

    A violation about something *below* a secret member (its `instance_path` passes through the member)
    would name what lies there: `/contacts/<a secret key>`, in the path and in the message built from
    it, and a keyword path that says which rule the hidden value broke. Each such violation is replaced
    by one that names only the member: its instance path stops at the member, its keyword path stops
    where the schema reaches the member (or is empty when that cannot be told), its keyword is
    `REDACTED_VIOLATION_KEYWORD` and its message says that the details are withheld. Several
    violations below one member become one, so their number does not tell how many keys lie below.

    A violation located at the member itself (`/contacts` is not a string) is kept: its path and message
    name the member and the rule, never the value (the validator's promise). Violations about no secret
    are returned unchanged. This is the one place that does this, for input and output violations
    alike, whatever keyword produced them; it never mutates its input.
    """
    names = _names(fields)
    reported: list[dict[str, Any]] = []
    collapsed: set[tuple[str, str]] = set()
    for violation in violations:
        item = dict(violation)
        instance_path = item.get("instance_path")
        tokens = _pointer_tokens(instance_path) if names and isinstance(instance_path, str) else None
        field = _first_secret(tokens, names) if tokens else None
        if tokens is None or field is None or field == len(tokens) - 1:
            reported.append(item)
            continue
        field_path = "".join("/" + _escape(token) for token in tokens[: field + 1])
        keyword_path = _keyword_path_to(item.get("keyword_path"), field + 1)
        if (field_path, keyword_path) in collapsed:
            continue
        collapsed.add((field_path, keyword_path))
        reported.append({
            "instance_path": field_path,
            "keyword_path": keyword_path,
            "keyword": REDACTED_VIOLATION_KEYWORD,
            "message": f"'{field_path[1:]}' does not match its schema; what is wrong inside it is not shown "
                       f"because the field is redacted.",
        })
    return reported


def _pointer_tokens(pointer: str) -> list[str] | None:
    """The reference tokens of a JSON Pointer ("" is the root: no tokens); None if it is not one."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        return None
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _first_secret(tokens: list[str], names: frozenset[str]) -> int | None:
    """The index of the first token that names a secret member (a pointer cannot tell a member from an
    array index, so an index equal to a secret name counts too: masking more is the safe mistake)."""
    for index, token in enumerate(tokens):
        if token in names:
            return index
    return None


def _keyword_path_to(keyword_path: Any, depth: int) -> str:
    """The part of a violation's keyword path that leads the schema to the instance location `depth`
    members or items below the root, or "" when the path cannot be read that far.

    A keyword path names only schema keywords and the schema's own property names, pattern strings and
    indexes; each applicator either steps into a child of the instance (`properties/<name>`, `items`,
    `additionalProperties`, ...) or stays in place (`allOf/<i>`, `$ref`, `then`, ...). Counting the steps
    finds where the schema reaches the member; anything after that would describe what lies below it.
    """
    tokens = _pointer_tokens(keyword_path) if isinstance(keyword_path, str) else None
    if not tokens:
        return ""
    reached = 0
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token in _STEPS_INTO_CHILD_WITH_TOKEN:
            index += 2
            reached += 1
        elif token in _STEPS_INTO_CHILD:
            index += 1
            reached += 1
        elif token in _IN_PLACE_WITH_TOKEN:
            index += 2
            continue
        elif token in _IN_PLACE:
            index += 1
            continue
        else:
            return ""  # an assertion (type, maxLength, ...) before the member was reached: not a path there
        if reached == depth:
            return "" if index > len(tokens) else "".join("/" + _escape(part) for part in tokens[:index])
    return ""
