"""What a careful spec avoids, checked by the runtime itself: the checks behind `ToolSpec.warnings`.

Three checks, each a generator of (message, JSON Pointer into the tool's definition, "" for the tool
itself): a write without an idempotency key, a destructive tool that never asks for approval, an input
pattern a backtracking engine can make slow. The linter's rules AL401, AL402 and AL310 are these very
checks (their findings carry the same messages), so the linter depends on the runtime, never the other
way round. A check reads only the spec's fields (it is given a ToolSpec, or a server's definition with
the same ones); this module imports nothing of agent_lab.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

__all__ = ["SPEC_CHECKS", "backtracking_input_patterns", "destructive_without_approval", "spec_warnings",
           "write_without_key"]

Found = Iterator[tuple[str, str]]


def write_without_key(spec: Any) -> Found:
    """AL401: a write or destructive tool without an idempotency key repeats its effect when retried."""
    effect = str(spec.effect.value)
    if effect != "read" and spec.idempotency_key is None:
        yield f"{effect} tool without idempotency_key: a retried call may repeat its effect", ""


def destructive_without_approval(spec: Any) -> Found:
    """AL402: an effect that cannot be undone should have a person's approval of the exact call."""
    if spec.effect.value == "destructive" and spec.approval.value == "never":
        yield "destructive tool that never asks for approval", ""


def backtracking_input_patterns(spec: Any) -> Found:
    """AL310: an input pattern the linear-time matcher runs safely, but a backtracking engine (a host's or
    a client's validator of the exported schema) does not. The verdicts are the ones the validator made
    when it compiled the schema (`Validator.patterns`)."""
    validator = spec.input_validator
    for finding in validator.patterns if validator is not None else ():
        if finding.safety.safe and finding.safety.backtracking:
            yield (f"input_schema pattern at {finding.pointer} has nested quantifiers or an ambiguous repetition: "
                   f"agent-lab matches it in linear time, but a backtracking engine (a host's or client's "
                   f"validator of the exported schema) can take {finding.safety.backtracking} time on it; "
                   f"rewrite it so each repetition is unambiguous", f"/input_schema{finding.pointer}")


SPEC_CHECKS: tuple[Callable[[Any], Found], ...] = (write_without_key, destructive_without_approval,
                                                    backtracking_input_patterns)
"""The checks behind `ToolSpec.warnings`, in the order of lint's rules AL401, AL402, AL310."""


def spec_warnings(spec: Any) -> tuple[str, ...]:
    """`ToolSpec.warnings`: the messages of every check, in order."""
    return tuple(message for check in SPEC_CHECKS for message, _ in check(spec))
