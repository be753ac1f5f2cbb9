"""What a refusal says about the value it refused: violations with JSON Pointers, and sizes.

Shared by the schema step (arguments) and the output step (what a handler returned), which report
alike: at most `MAX_REPORTED_VIOLATIONS` violations, a count that is exact up to that many, and
nothing below a redacted field (`redaction.redact_violations`).
"""

from __future__ import annotations

from typing import Any, Optional

from ..jsonforms import why_no_json_form
from ..jsonvalue import compact_json_writer, find_non_json
from ..schema.model import Violation

__all__ = [
    "EXACT_SIZE_FACTOR",
    "MAX_OUTPUT_DEPTH",
    "MAX_REPORTED_VIOLATIONS",
    "json_size",
    "non_json_output_violation",
    "non_json_violation",
    "sentence",
    "violation_details",
    "violation_dict",
    "violation_dicts",
    "violation_report",
]

MAX_REPORTED_VIOLATIONS = 20
"""At most this many schema violations are listed in an error's details. Validation stops at one more,
so `violation_count` is exact up to this many; past it `violations_truncated` is true (at least)."""

EXACT_SIZE_FACTOR = 4
"""Arguments or an output up to this many times the tool's byte budget (by the copying walk's lower
bound) are measured exactly when refused (`input_bytes`, `output_bytes`: a model can narrow its request
by the ratio); past it the walk stops reading and the refusal says `..._bytes_at_least`, so what a
refusal costs stays proportional to the budget, never to the value."""

MAX_OUTPUT_DEPTH = 64
"""Handler output nested deeper than this is refused as invalid_tool_output (same limit as inputs)."""

_write_compact = compact_json_writer(sort_keys=False)


def json_size(value: Any) -> Optional[int]:
    """Bytes of the compact UTF-8 JSON text of a (checked) JSON value; None if it cannot be written
    (e.g. an integer too long for Python to print, or a cycle)."""
    try:
        text = _write_compact(value)
    except (ValueError, TypeError, RecursionError):
        return None
    return len(text.encode("utf-8", "surrogatepass"))


def violation_dict(violation: Any) -> dict[str, str]:
    """A violation as the model sees it: its four fields, in this order.

    A `Violation`'s own attributes are exactly these four, set in this order (a frozen dataclass; the
    validator sets them in field order too), so its `__dict__`, copied in one C call, is that dict;
    anything else that has the four attributes is read field by field."""
    if type(violation) is Violation:
        return violation.__dict__.copy()
    return {
        "instance_path": violation.instance_path,
        "keyword_path": violation.keyword_path,
        "keyword": violation.keyword,
        "message": violation.message,
    }


def violation_dicts(violations: list) -> list[dict[str, str]]:
    """`violation_dict` of each (a refusal's whole list, in one loop)."""
    return [violation.__dict__.copy() if type(violation) is Violation else violation_dict(violation)
            for violation in violations]


def sentence(text: str) -> str:
    """`text` as one sentence: capital first letter, full stop at the end."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def non_json_violation(pointer: str, reason: str) -> dict[str, str]:
    return {"instance_path": pointer, "keyword_path": "", "keyword": "json", "message": sentence(reason)}


def non_json_output_violation(output: Any) -> dict[str, str]:
    """Where and why an output is not JSON (walked again only now, to say where)."""
    problem = find_non_json(output, max_depth=MAX_OUTPUT_DEPTH, explain=why_no_json_form)
    if problem is None:  # e.g. an integer too long to print
        return non_json_violation("", "the output cannot be written as JSON text")
    return non_json_violation(*problem)


def violation_report(violations: list, redact: frozenset, *, prefix: str = "") -> tuple[Optional[str], dict[str, Any]]:
    """The message and details of a refusal for schema violations, as they may leave the process: a
    violation below a redacted field names only that field (see `redact_violations`), in the details
    and in the message, which is built from them."""
    if redact:
        from ..redaction import redact_violations

        violations = redact_violations(violations, redact)
    return _first_violation_message(violations, prefix), violation_details(violations)


def violation_details(violations: list) -> dict[str, Any]:
    """Validation stops one violation past what is reported: `violation_count` is exact unless
    `violations_truncated` is true, and then it is a lower bound ("at least").

    The details take `violations` itself when it is short enough (every caller hands over a list
    made for this refusal), and the first `MAX_REPORTED_VIOLATIONS` of it otherwise."""
    count = len(violations)
    if count > MAX_REPORTED_VIOLATIONS:
        return {"violations": violations[:MAX_REPORTED_VIOLATIONS], "violation_count": count,
                "violations_truncated": True}
    return {"violations": violations, "violation_count": count, "violations_truncated": False}


def _first_violation_message(violations: Optional[list], prefix: str = "") -> Optional[str]:
    if not violations:
        return None
    first = prefix + violations[0]["message"] if prefix else violations[0]["message"]
    count = len(violations)
    if count == 1:
        return first
    more = count - 1
    if count > MAX_REPORTED_VIOLATIONS:
        first = f"{first.rstrip('.')} (and at least {more} more violations)."
    elif more:
        first = f"{first.rstrip('.')} (and {more} more {'violation' if more == 1 else 'violations'})."
    return first
