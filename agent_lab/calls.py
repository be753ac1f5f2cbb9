"""A proposed tool call and the result the registry returns for it.

`ToolCall` is what the model proposes; it is untrusted data, so `arguments` may be anything at all
(the schema step decides). `ToolResult` is what `Registry.invoke` always returns: nothing escapes as an
exception. `to_model()` is the only view meant for the model; `to_record()` is the stored receipt form.
"""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

from .errors import Outcome, ToolError

__all__ = ["CallIds", "InvalidJSONArguments", "ToolCall", "ToolResult"]


@dataclass(frozen=True)
class InvalidJSONArguments:
    """Arguments a host sent as text that is not a JSON object we can read.

    Host adapters put it in `ToolCall.arguments`; the registry's schema step answers it with
    ``invalid_arguments`` and this reason. `reason` is one safe sentence: it names the problem and the position,
    never the text itself (which may hold secrets).
    """

    reason: str
    position: int | None = None

    def __repr__(self) -> str:
        return f"InvalidJSONArguments({self.reason!r})"


MAX_REPR_KEYS = 16
"""`repr(ToolCall)` names at most this many argument keys (then how many more there are)."""
MAX_REPR_TEXT = 64
"""A name, key or call id longer than this is cut in `repr(ToolCall)`."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model proposed it. Nothing in it is trusted.

    Its repr never shows an argument value: nothing here says which values the tool redacts (a
    password, a card's CVV), so none is shown, only the keys: `ToolCall(name='pay', arguments={'cvv':
    ..., 'order_id': ...}, call_id='c1')`. Arguments that are not a plain dict show their type only
    (reading a Mapping subclass would run its code)."""

    name: str
    arguments: Any
    call_id: str | None = None

    def __repr__(self) -> str:
        return (f"ToolCall(name={_short_repr(self.name)}, arguments={_arguments_shape(self.arguments)}, "
                f"call_id={_short_repr(self.call_id)})")


def _short_repr(value: Any) -> str:
    """A string (cut to `MAX_REPR_TEXT`) or None as repr shows it; anything else as its type name."""
    if value is None:
        return "None"
    if type(value) is not str:
        return f"<{type(value).__name__}>"
    return repr(value) if len(value) <= MAX_REPR_TEXT else repr(value[:MAX_REPR_TEXT]) + "…"


def _arguments_shape(arguments: Any) -> str:
    """`{'key': ..., ...}` for a plain dict, the reason for unreadable JSON text, else `<type>`."""
    if isinstance(arguments, InvalidJSONArguments):
        return repr(arguments)
    if type(arguments) is not dict:
        return f"<{type(arguments).__name__}>"
    keys = list(dict.keys(arguments))
    shown = [f"{_short_repr(key)}: ..." for key in keys[:MAX_REPR_KEYS]]
    if len(keys) > MAX_REPR_KEYS:
        shown.append(f"... {len(keys) - MAX_REPR_KEYS} more")
    return "{" + ", ".join(shown) + "}"


_new_object = object.__new__
_SUCCEEDED = Outcome.SUCCEEDED
_OUTCOMES = {outcome.value: outcome for outcome in Outcome}


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """The answer to one `invoke`: either an output or an error, always with an outcome."""

    ok: bool
    outcome: Outcome
    tool: str
    output: Any = None
    error: ToolError | None = None
    replayed: bool = False
    call_id: str | None = None
    fingerprint: str | None = None
    duration_ms: float = 0.0
    # Field names whose values never leave the process; masked in every outward view.
    redact: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    @classmethod
    def _fast(
        cls,
        ok: bool,
        outcome: Outcome,
        tool: str,
        output: Any,
        error: ToolError | None,
        call_id: str | None,
        fingerprint: str | None,
        redact: frozenset[str],
    ) -> ToolResult:
        """`ToolResult(...)` for the registry, which makes one on every call: the same object, built
        without the frozen dataclass's one `object.__setattr__` per field (several times faster).
        The caller passes exactly these values; the other fields get their defaults.

        A field left at its default is not stored on the instance: a dataclass keeps each default on
        the class, where reading the field finds it (equality, hashing, `dataclasses.replace` and
        `asdict`, pickling and copying all read fields by name), so a success pays for five fields."""
        result = _new_object(cls)
        fields = result.__dict__  # item by item: cheaper than update() with keywords
        fields["ok"] = ok
        fields["outcome"] = outcome
        fields["tool"] = tool
        fields["output"] = output
        fields["call_id"] = call_id
        if error is not None:
            fields["error"] = error
        if fingerprint is not None:
            fields["fingerprint"] = fingerprint
        if redact:
            fields["redact"] = redact
        return result

    @classmethod
    def _succeeded(cls, tool: str, output: Any, call_id: str, fingerprint: str | None,
                   redact: frozenset[str]) -> ToolResult:
        """`_fast` for the commonest result of all, a checked output: `ok`, outcome succeeded."""
        result = _new_object(cls)
        fields = result.__dict__
        fields["ok"] = True
        fields["outcome"] = _SUCCEEDED
        fields["tool"] = tool
        fields["output"] = output
        fields["call_id"] = call_id
        if fingerprint is not None:
            fields["fingerprint"] = fingerprint
        if redact:
            fields["redact"] = redact
        return result

    @classmethod
    def _replay_of(cls, record: Any, call_id: str, redact: frozenset[str]) -> ToolResult | None:
        """`from_record` of the common receipt, as the registry reads one (`replayed` set): a result
        without an error, in a plain dict as the stores give it back (a fresh one of plain values,
        so its output is the caller's own). None for any other record: `from_record` reads it."""
        if type(record) is not dict:
            return None
        get = record.get
        ok, text, tool = get("ok"), get("outcome"), get("tool")
        outcome = _OUTCOMES.get(text) if type(text) is str else None
        if outcome is None or type(ok) is not bool or type(tool) is not str or get("error"):
            return None
        result = _new_object(cls)
        fields = result.__dict__
        fields["ok"] = ok
        fields["outcome"] = outcome
        fields["tool"] = tool
        fields["output"] = get("output")
        fields["call_id"] = call_id
        fields["replayed"] = True
        fingerprint = get("fingerprint")
        if fingerprint is not None:
            fields["fingerprint"] = fingerprint
        if redact:
            fields["redact"] = redact
        return result

    def to_model(self) -> dict[str, Any]:
        """The JSON the model should see: output or error, outcome, and whether it was a replay."""
        view: dict[str, Any] = {"ok": self.ok, "outcome": self.outcome.value}
        if self.ok:
            view["output"] = self._masked(self.output)
        if self.error is not None:
            view["error"] = self._masked(self.error.to_dict())
        if self.replayed:
            view["replayed"] = True
        return view

    def to_record(self) -> dict[str, Any]:
        """The stored, replayable form of this result (values to redact are already masked)."""
        return {
            "ok": self.ok,
            "outcome": self.outcome._value_,  # `.value` is a Python-level property on every write
            "tool": self.tool,
            "output": self._masked(self.output),
            "error": self._masked(self.error.to_dict()) if self.error is not None else None,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_record(
        cls,
        record: Mapping[str, Any],
        *,
        replayed: bool = True,
        call_id: str | None = None,
        duration_ms: float = 0.0,
        redact: Collection[str] = (),
    ) -> ToolResult:
        """Rebuild a result from a stored receipt (a replay answers with what the first call returned)."""
        error = record.get("error")
        result = cls._fast(bool(record["ok"]), Outcome(record["outcome"]), str(record["tool"]), record.get("output"),
                           ToolError.from_dict(error) if error else None, call_id, record.get("fingerprint"),
                           redact if isinstance(redact, frozenset) else frozenset(redact))
        result.__dict__.update(replayed=replayed, duration_ms=duration_ms)
        return result

    def _masked(self, value: Any) -> Any:
        if not self.redact:
            return value
        from .redaction import redact  # local: redaction is a leaf module with no back-references

        return redact(value, self.redact)

    def __repr__(self) -> str:  # never show unredacted values in logs
        return f"ToolResult(tool={self.tool!r}, call_id={self.call_id!r}, {self.to_model()!r})"


class CallIds:
    """The ids a registry gives calls that arrive without one: `call_<16 hex digits>-<n>`.

    The hex digits are 64 random bits drawn once per registry; `n` counts that registry's calls. So ids
    are unique within a registry by construction, and across registries and processes unless two draw
    the same 64 bits (with a million registries, about one chance in 30 million). An id cannot be
    guessed by anyone who has not seen one of the same registry; whoever has can predict its
    neighbours, as with any sequence number, which is why a call id is a correlation handle and never
    a credential (nothing in agent-lab accepts one as proof of anything). One `secrets.token_hex` per
    call would cost about a twentieth of a whole invoke; this is a counter step and a concatenation.
    `next()` on `itertools.count` is atomic (it runs in C under the interpreter lock), so threads
    sharing a registry never get the same id.
    """

    __slots__ = ("prefix", "numbers")

    def __init__(self) -> None:
        self.prefix = "call_" + secrets.token_hex(8) + "-"
        self.numbers = itertools.count(1)  # invoke reads `prefix + str(next(numbers))` itself: no call a call

    def next(self) -> str:
        return self.prefix + str(next(self.numbers))

    def __repr__(self) -> str:
        return "CallIds(...)"
