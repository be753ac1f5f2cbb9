"""Outcomes, error values and the one catalogue of error codes.

Every refusal or failure that `Registry.invoke` reports is a `ToolError` value whose code comes from
`CATALOGUE`. The catalogue is the single place that says, for each code, which category it belongs to,
whether retrying the same call could help, what the model should do next and what the outcome is. Code
elsewhere classifies errors by their code, never by message text.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

__all__ = [
    "CATALOGUE",
    "Category",
    "CatalogueEntry",
    "NextAction",
    "Outcome",
    "ToolError",
    "ToolFailure",
    "catalogue_entry",
]


class Outcome(str, enum.Enum):
    """What a caller may assume about side effects after a call."""

    SUCCEEDED = "succeeded"  # ran and finished; its output is trustworthy
    REJECTED = "rejected"  # refused before the handler ran: certainly no effect
    FAILED = "failed"  # ran and is known to have had no effect
    UNKNOWN = "unknown"  # may have taken effect: look it up, never blindly retry a write
    ACCEPTED = "accepted"  # checked and accepted as a task: it runs in the background; poll its task for the result

    def __str__(self) -> str:
        return self.value


class Category(str, enum.Enum):
    """Coarse family of an error, for dashboards and for the model's first guess of what went wrong."""

    ROUTING = "routing"
    VALIDATION = "validation"
    POLICY = "policy"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    DEPENDENCY = "dependency"
    INTERNAL = "internal"

    def __str__(self) -> str:
        return self.value


class NextAction(str, enum.Enum):
    """The one thing the model should do next; phrased so a model can act on it without guessing."""

    FIX_TOOL_NAME = "fix_tool_name"  # pick a tool from the catalogue (close names are in details)
    FIX_ARGUMENTS = "fix_arguments"  # correct the arguments named in details and call again
    REQUEST_APPROVAL = "request_approval"  # ask a person to approve exactly this call
    RETRY = "retry"  # the same call may succeed now
    RETRY_LATER = "retry_later"  # the same call may succeed after a pause
    LOOKUP_STATUS = "lookup_status"  # check whether the effect happened before doing anything else
    NARROW_REQUEST = "narrow_request"  # ask for less (filters, a smaller page)
    USE_NEW_KEY = "use_new_key"  # a different action needs a new idempotency key
    STOP = "stop"  # nothing the model can change will help; report to the user

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class CatalogueEntry:
    """How one error code is classified by default."""

    category: Category
    retryable: bool
    next_action: NextAction
    outcome: Outcome
    summary: str  # one safe sentence used when no more specific message is given


_C, _N, _O = Category, NextAction, Outcome

CATALOGUE: Mapping[str, CatalogueEntry] = MappingProxyType(
    {
        # Refused before the handler ran: outcome rejected.
        "tool_not_found": CatalogueEntry(
            _C.ROUTING, False, _N.FIX_TOOL_NAME, _O.REJECTED, "No tool with that name exists."
        ),
        "invalid_arguments": CatalogueEntry(
            _C.VALIDATION, False, _N.FIX_ARGUMENTS, _O.REJECTED, "The arguments do not match the tool's input schema."
        ),
        "input_too_large": CatalogueEntry(
            _C.VALIDATION, False, _N.NARROW_REQUEST, _O.REJECTED,
            "The arguments are larger than this tool accepts; send less.",
        ),
        "permission_denied": CatalogueEntry(
            _C.POLICY, False, _N.STOP, _O.REJECTED, "The caller is not allowed to use this tool on this resource."
        ),
        "approval_required": CatalogueEntry(
            _C.POLICY, False, _N.REQUEST_APPROVAL, _O.REJECTED, "This call needs a person's approval before it runs."
        ),
        "approval_mismatch": CatalogueEntry(
            _C.POLICY, False, _N.REQUEST_APPROVAL, _O.REJECTED, "The approval given was for a different call."
        ),
        "approval_expired": CatalogueEntry(
            _C.POLICY, False, _N.REQUEST_APPROVAL, _O.REJECTED, "The approval for this call has expired."
        ),
        "approval_declined": CatalogueEntry(
            _C.POLICY, False, _N.STOP, _O.REJECTED,
            "The user was asked to confirm this exact call and declined; it did not run. Do not retry it.",
        ),
        "approval_used": CatalogueEntry(
            _C.POLICY, False, _N.REQUEST_APPROVAL, _O.REJECTED,
            "The approval for this call was already used; it lets the tool run once. Ask for a new approval.",
        ),
        "deadline_exceeded": CatalogueEntry(
            _C.DEPENDENCY, False, _N.STOP, _O.REJECTED, "The time budget for this call ran out before it could start."
        ),
        "idempotency_conflict": CatalogueEntry(
            _C.CONFLICT, False, _N.USE_NEW_KEY, _O.REJECTED,
            "This idempotency key was already used for a call with different arguments.",
        ),
        "idempotency_in_progress": CatalogueEntry(
            _C.CONFLICT, True, _N.RETRY_LATER, _O.REJECTED, "A call with this idempotency key is still running."
        ),
        "receipt_store_unavailable": CatalogueEntry(
            _C.DEPENDENCY, True, _N.RETRY_LATER, _O.REJECTED,
            "The idempotency receipt store did not answer in time; the tool did not run.",
        ),
        "outcome_unknown": CatalogueEntry(
            _C.CONFLICT, False, _N.LOOKUP_STATUS, _O.UNKNOWN,
            "An earlier call with this idempotency key may have taken effect, but its result was never "
            "recorded; look up whether it happened before doing anything else.",
        ),
        "tool_contract_changed": CatalogueEntry(
            _C.POLICY, False, _N.STOP, _O.REJECTED,
            "This tool's definition changed since it was reviewed (or was never reviewed), so it will not run "
            "until someone reviews it and locks it again.",
        ),
        "internal_error": CatalogueEntry(
            _C.INTERNAL, False, _N.STOP, _O.REJECTED,
            "The tool runtime failed while checking this call; the tool did not run.",
        ),
        # The handler ran (or may have run).
        "tool_timeout": CatalogueEntry(
            _C.DEPENDENCY, True, _N.RETRY, _O.FAILED, "The tool did not finish within its time limit."
        ),
        "handler_exception": CatalogueEntry(
            _C.INTERNAL, False, _N.STOP, _O.FAILED, "The tool failed unexpectedly."
        ),
        "invalid_tool_output": CatalogueEntry(
            _C.INTERNAL, False, _N.STOP, _O.FAILED, "The tool returned output that breaks its output schema."
        ),
        "output_too_large": CatalogueEntry(
            _C.VALIDATION, False, _N.NARROW_REQUEST, _O.FAILED, "The tool's output is larger than its budget."
        ),
        # Business failures a handler raises with ToolFailure: it ran and knows it had no effect.
        "not_found": CatalogueEntry(
            _C.NOT_FOUND, False, _N.FIX_ARGUMENTS, _O.FAILED, "The requested resource does not exist."
        ),
        "invalid_cursor": CatalogueEntry(
            _C.VALIDATION, False, _N.FIX_ARGUMENTS, _O.FAILED,
            "The page cursor is not one this tool issued for this query.",
        ),
        "conflict": CatalogueEntry(
            _C.CONFLICT, False, _N.STOP, _O.FAILED, "The request conflicts with the resource's current state."
        ),
        "unavailable": CatalogueEntry(
            _C.DEPENDENCY, True, _N.RETRY_LATER, _O.FAILED, "A service the tool depends on is unavailable."
        ),
        # Tasks (agent_lab.tasks): a call accepted as a task that did not run to its end.
        "task_cancelled": CatalogueEntry(
            _C.POLICY, False, _N.STOP, _O.REJECTED,
            "The task was cancelled before its call started; the tool did not run.",
        ),
        "too_many_tasks": CatalogueEntry(
            _C.DEPENDENCY, True, _N.RETRY_LATER, _O.REJECTED,
            "Too many tasks are running here; the call was not accepted and did not run. Retry later.",
        ),
        "task_interrupted": CatalogueEntry(
            _C.DEPENDENCY, False, _N.LOOKUP_STATUS, _O.UNKNOWN,
            "The host running this task stopped before the call ended; it may have taken effect: look up "
            "whether it happened before doing anything else.",
        ),
        # Tools imported from an MCP server (agent_lab.mcp_client): the server's own answers.
        "upstream_error": CatalogueEntry(
            _C.DEPENDENCY, False, _N.STOP, _O.FAILED, "The tool's server reported that the call failed."
        ),
    }
)
del _C, _N, _O


_ERROR_FIELDS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    code: {"code": code, "category": entry.category, "message": entry.summary, "retryable": entry.retryable,
           "next_action": entry.next_action}
    for code, entry in CATALOGUE.items()
})
"""Each catalogue code's `ToolError` fields but `details`, as `ToolError.from_code` sets them by default."""


def catalogue_entry(code: str) -> CatalogueEntry | None:
    """The catalogue's classification of `code`, or None for a code a handler defined itself."""
    return CATALOGUE.get(code)


@dataclass(frozen=True)
class ToolError:
    """An error the model can act on: a code from the catalogue plus one safe sentence.

    `message` is model-visible; it is built from the code and safe fields, never from `str(exc)`.
    """

    code: str
    category: Category
    message: str
    retryable: bool
    next_action: NextAction
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_code(
        cls,
        code: str,
        message: str | None = None,
        retryable: bool | None = None,
        next_action: NextAction | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> ToolError:
        """Build an error for a catalogue code, with the catalogue's defaults for anything not given.

        Every refusal makes one: the same object as ``cls(...)``, built without the frozen dataclass's
        one ``object.__setattr__`` per field (there is no check to skip; ``details`` is copied). Every
        parameter may be passed by position: the registry does, as keywords cost each refusal more."""
        error = object.__new__(cls)
        fields = error.__dict__
        fields.update(_ERROR_FIELDS[code])  # the catalogue's fields in one call (KeyError: not in it)
        if message:
            fields["message"] = message
        if retryable is not None:
            fields["retryable"] = retryable
        if next_action is not None:
            fields["next_action"] = next_action
        fields["details"] = dict(details) if details else {}
        return error

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (the shape the model and the reports see)."""
        return {
            "code": self.code,
            "category": self.category.value,
            "message": self.message,
            "retryable": self.retryable,
            "next_action": self.next_action.value,
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolError:
        """Inverse of `to_dict`, used to rebuild a stored receipt."""
        return cls(
            code=str(data["code"]),
            category=Category(data["category"]),
            message=str(data["message"]),
            retryable=bool(data["retryable"]),
            next_action=NextAction(data["next_action"]),
            details=dict(data.get("details") or {}),
        )


class ToolFailure(Exception):
    """Raised by a handler to report a business failure that had no effect (e.g. a missing ticket).

    A catalogue code needs only a message; a domain code of the handler's own (``ticket_not_found``)
    must say its category, and may say whether a retry could help and what to do next.
    The message is shown to the model as given, so it must be safe to show.
    """

    def __init__(
        self,
        code: str,
        message: str | None = None,
        *,
        category: Category | str | None = None,
        retryable: bool | None = None,
        next_action: NextAction | str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        entry = CATALOGUE.get(code)
        if entry is None and category is None:
            raise ValueError(
                f"ToolFailure code {code!r} is not in the catalogue; pass category= (one of "
                f"{', '.join(c.value for c in Category)})"
            )
        resolved_category = Category(category) if category is not None else entry.category  # type: ignore[union-attr]
        default_next = entry.next_action if entry is not None else NextAction.STOP
        self.error = ToolError(
            code=code,
            category=resolved_category,
            message=message or (entry.summary if entry is not None else f"The tool reported {code}."),
            retryable=bool(retryable) if retryable is not None else (entry.retryable if entry else False),
            next_action=NextAction(next_action) if next_action is not None else default_next,
            details=dict(details or {}),
        )
        super().__init__(self.error.message)

    @property
    def code(self) -> str:
        return self.error.code
