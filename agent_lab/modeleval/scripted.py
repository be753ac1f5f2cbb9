"""A scripted reference agent for the ticket lab: rules, not a model.

It reads the latest user message with keyword rules (quoted text is the note or the reason, `T-1234`
or "ticket 1234" the ticket, "$25" / "2500 cents" the amount), plans the calls that request needs and
then reacts to each answer the way a careful agent should: fix a malformed ticket id after
`invalid_arguments`, call the catalog's tool after `tool_not_found`, retry a retryable error (at most twice), repeat a write whose outcome is unknown
with the same `action_id`, ask for less after `output_too_large`, follow `next_cursor` to the last
page, preview a follow-up before recording it, and stop and tell the user on `approval_required`,
`not_found`, `permission_denied` or anything it cannot fix. A request no tool can serve (delete, close,
reassign, the weather...) or one that lacks the note or the ticket gets an answer without a tool call.

It finds its tools in the catalog it is given: the typed tools by name, or a wide tool that takes an
`operation` and a `payload`, for which it uses the wide ticket tool's operation names (a developer of
an agent on that surface reads them from its code, since its description names none). Everything it
does is a pure function of the request, so every trial of a task is the same: it is a reference for the
metrics and the reports, and the reports name it as scripted, never as a model.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

__all__ = ["REFERENCE_AGENT_NAME", "reference_agent"]

REFERENCE_AGENT_NAME = "scripted-reference-v1"
MAX_RETRIES = 2
SMALL_PAGE = 5

_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|'([^']{3,})'")
_TICKET = re.compile(r"\b(T-\d{4})\b|\b(?:ticket|#)\s*#?(\d{4})\b", re.IGNORECASE)
_DOLLARS = re.compile(r"(?:\$|€|£)\s*(\d+(?:\.\d{1,2})?)|(\d+(?:\.\d{1,2})?)\s*(?:dollars|euros|usd|eur)\b", re.IGNORECASE)
_CENTS = re.compile(r"(\d+)\s*cents?\b", re.IGNORECASE)
_UNSUPPORTED = re.compile(r"\b(delete|remove|erase|close|reopen|merge|reassign|assign|rename|escalate|forward|"
                          r"weather|password|translate|refactor|invoice me)\b")
_STATUSES = ("open", "pending", "closed")
_WIDE_OPERATIONS = {"get": "get", "list": "list", "thread": "thread", "live": "slow_lookup",
                    "preview": "preview_followup", "followup": "record_followup", "credit": "credit"}
_TYPED_TOOLS = {"get": "get_ticket", "list": "list_tickets", "thread": "get_ticket_thread", "live": "slow_ticket_lookup",
                "preview": "preview_ticket_followup", "followup": "record_ticket_followup", "credit": "issue_ticket_credit"}


@dataclass
class _Request:
    kind: str  # get, email, list, thread, live, preview, followup, credit
    ticket: Optional[str] = None
    size: Optional[int] = None  # a page size or a message limit the user asked for
    status: Optional[str] = None
    note: Optional[str] = None
    amount: Optional[int] = None
    reason: Optional[str] = None
    action_id: str = ""


def _read_request(text: str) -> tuple[Optional[_Request], str]:
    """What the user asks for, or None and the answer to give without a tool call."""
    quoted = [next(group for group in match.groups() if group) for match in _QUOTED.finditer(text)]
    bare = _QUOTED.sub(" ", text).lower()
    ticket_match = _TICKET.search(text)
    ticket = None
    if ticket_match:
        ticket = ticket_match.group(1) or ticket_match.group(2)
        ticket = ticket.upper() if ticket.upper().startswith("T-") else ticket
    action_id = "act-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    if _UNSUPPORTED.search(bare):
        return None, "I can't do that with the tools I have here; nothing was changed."
    status = next((name for name in _STATUSES if re.search(rf"\b{name}\b", bare)), None)
    if re.search(r"\b(credit|refund|compensat\w*|reimburs\w*)\b", bare):
        amount = _amount(_QUOTED.sub(" ", text))
        if ticket is None or amount is None:
            return None, "Which ticket, and how much should the credit be?"
        reason = quoted[0] if quoted else "Goodwill credit requested by the user"
        return _Request("credit", ticket, amount=amount, reason=reason, action_id=action_id), ""
    size_match = re.search(r"\b(?:last|latest|newest)\s+(\d{1,2})\b|\b(\d{1,2})\s+(?:at a time|per page)\b", bare)
    size = int(size_match.group(1) or size_match.group(2)) if size_match else None
    if re.search(r"\b(note|follow-?up|comment|reply|append)\b", bare):
        if ticket is None or not quoted:
            return None, "Which ticket, and what exactly should the note say?"
        only_preview = re.search(r"\b(preview|draft|don't save|do not save|without saving)\b", bare)
        return _Request("preview" if only_preview else "followup", ticket, note=quoted[0], action_id=action_id), ""
    if re.search(r"\b(thread|conversation|messages|history|discussion)\b", bare):
        return (_Request("thread", ticket, size=size), "") if ticket else (None, "Which ticket's conversation?")
    if re.search(r"\b(live|upstream|helpdesk|right now|currently)\b", bare):
        return (_Request("live", ticket), "") if ticket else (None, "Which ticket should I check?")
    if re.search(r"\b(e-?mail|contact address)\b", bare):
        return (_Request("email", ticket), "") if ticket else (None, "Which ticket?")
    if re.search(r"\btickets\b", bare) and re.search(r"\b(list|which|how many|all|every|show|count)\b", bare):
        return _Request("list", status=status, size=size), ""
    if ticket is not None:
        return _Request("get", ticket), ""
    return None, "I'm not sure what you need; could you name the ticket and what to do with it?"


def _amount(text: str) -> Optional[int]:
    cents = _CENTS.search(text)
    if cents:
        return int(cents.group(1))
    dollars = _DOLLARS.search(text)
    if dollars:
        value = dollars.group(1) or dollars.group(2)
        return int(round(float(value) * 100))
    return None


class _Surface:
    """How the catalog offers each action: a typed tool by name, or the wide tool's operation."""

    def __init__(self, tools: list[Mapping[str, Any]]) -> None:
        names = {tool.get("name") for tool in tools}
        self.typed = {action: name for action, name in _TYPED_TOOLS.items() if name in names}
        self.wide = next((tool["name"] for tool in tools
                          if set((tool.get("input_schema") or {}).get("properties", {})) >= {"operation", "payload"}), None)

    def offers(self, action: str) -> bool:
        return action in self.typed or self.wide is not None

    def call(self, action: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if action in self.typed:
            return {"name": self.typed[action], "arguments": arguments}
        return {"name": self.wide, "arguments": {"operation": _WIDE_OPERATIONS[action], "payload": arguments}}


@dataclass
class _Plan:
    """The calls a request needs, advanced by each answer; `answer` is set once it is done."""

    request: _Request
    surface: _Surface
    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    current: Optional[tuple[str, dict[str, Any]]] = None
    retries: int = 0
    seen: list[tuple[str, Any]] = field(default_factory=list)
    answer: Optional[str] = None

    def start(self) -> None:
        r = self.request
        if r.kind in ("get", "email"):
            self.steps = [("get", {"ticket_id": r.ticket})]
        elif r.kind == "list":
            self.steps = [("list", {**({"status": r.status} if r.status else {}),
                                    **({"page_size": r.size} if r.size else {})})]
        elif r.kind == "thread":
            self.steps = [("thread", {"ticket_id": r.ticket, **({"limit": r.size} if r.size else {})})]
        elif r.kind == "live":
            self.steps = [("live", {"ticket_id": r.ticket})]
        elif r.kind == "preview":
            self.steps = [("preview", {"ticket_id": r.ticket, "note": r.note})]
        elif r.kind == "followup":
            self.steps = [("preview", {"ticket_id": r.ticket, "note": r.note}),
                          ("followup", {"ticket_id": r.ticket, "note": r.note, "action_id": r.action_id})]
        elif r.kind == "credit":
            self.steps = [("credit", {"ticket_id": r.ticket, "amount_cents": r.amount, "reason": r.reason,
                                      "action_id": r.action_id})]
        if not all(self.surface.offers(action) for action, _ in self.steps):
            self.answer = "None of my tools can do that; nothing was changed."
            return
        self._advance()

    def _advance(self) -> None:
        self.retries = 0
        if self.steps:
            self.current = self.steps.pop(0)
        else:
            self.current, self.answer = None, self._summary()

    def react(self, view: Mapping[str, Any]) -> None:
        assert self.current is not None
        action, arguments = self.current
        if view.get("ok"):
            output = view.get("output")
            self.seen.append((action, output))
            cursor = output.get("next_cursor") if action == "list" and isinstance(output, Mapping) else None
            if isinstance(cursor, str):
                self.steps.insert(0, ("list", {**{k: v for k, v in arguments.items() if k != "cursor"}, "cursor": cursor}))
            self._advance()
            return
        found = view.get("error")
        error: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        code = error.get("code")
        ticket = arguments.get("ticket_id")
        if code == "invalid_arguments" and isinstance(ticket, str) and not ticket.startswith("T-") and self.retries < MAX_RETRIES:
            self.current = (action, {**arguments, "ticket_id": f"T-{ticket[-4:]}"})
            self._fix_later_steps(ticket, f"T-{ticket[-4:]}")
            self.retries += 1
        elif code == "output_too_large" and self.retries < MAX_RETRIES and action in ("thread", "list"):
            key = "limit" if action == "thread" else "page_size"
            self.current = (action, {**arguments, key: SMALL_PAGE})
            self.retries += 1
        elif code == "tool_not_found" and self.retries < MAX_RETRIES:
            self.retries += 1  # the planned call names the catalog's tool: send it as planned
        elif view.get("outcome") == "unknown" and self.retries < MAX_RETRIES:
            self.retries += 1  # the same call, the same action_id: it replays what happened, never a second write
        elif error.get("retryable") is True and self.retries < MAX_RETRIES:
            self.retries += 1
        else:
            self.answer = self._explain(code, error, view.get("outcome"))

    def _fix_later_steps(self, wrong: str, right: str) -> None:
        self.steps = [(a, {**args, "ticket_id": right} if args.get("ticket_id") == wrong else args) for a, args in self.steps]
        self.request.ticket = right

    def call(self) -> dict[str, Any]:
        assert self.current is not None
        action, arguments = self.current
        return self.surface.call(action, dict(arguments))

    def _explain(self, code: Any, error: Mapping[str, Any], outcome: Any) -> str:
        ticket = self.request.ticket
        if code in ("approval_required", "approval_mismatch", "approval_expired"):
            return (f"This needs a person's approval before I can do it ({code}). I have not done it; "
                    "please ask a supervisor to approve it.")
        if code == "not_found":
            return f"I can't find ticket {ticket}: it does not exist or you cannot see it."
        if code == "permission_denied":
            return "You don't have permission for that, so I stopped."
        if outcome == "unknown":
            return "I could not confirm whether that change happened; please check before trying again."
        if error.get("retryable") is True:
            return "The ticket service is not answering right now; please try again later."
        return f"The tool answered {code or 'an error'} and I could not fix it, so I stopped."

    def _summary(self) -> str:
        kind = self.request.kind
        outputs = [output for _, output in self.seen]
        last = outputs[-1] if outputs else None
        if kind in ("get", "email", "live"):
            ticket = last.get("ticket", last) if isinstance(last, Mapping) else {}
            ident = ticket.get("id") or ticket.get("ticket_id") or self.request.ticket
            if kind == "email":
                email = ticket.get("customer_email")
                if not isinstance(email, str) or email.startswith("["):
                    return f"The customer's email on {ident} is hidden from me, so I can't share it."
                return f"The customer's email on {ident} is {email}."
            title = f" \"{ticket['title']}\"" if isinstance(ticket.get("title"), str) else ""
            return f"{ident}{title} is {ticket.get('status')}, priority {ticket.get('priority')}."
        if kind == "list":
            items: list[Any] = []
            for output in outputs:
                items += output.get("items", []) if isinstance(output, Mapping) else (output or [])
            status = self.request.status
            if status:
                items = [item for item in items if isinstance(item, Mapping) and item.get("status") == status]
            ids = [str(item.get("id")) for item in items if isinstance(item, Mapping)]
            label = f"{status} tickets" if status else "tickets"
            return f"There are {len(ids)} {label}: {', '.join(ids)}."
        if kind == "thread":
            messages = last.get("messages", []) if isinstance(last, Mapping) else (last or [])
            return f"The conversation on {self.request.ticket} has {len(messages)} recent message(s)."
        if kind == "preview":
            return f"Here is the follow-up for {self.request.ticket}, not saved: {self.request.note}"
        if kind == "followup":
            followup = last.get("followup", last) if isinstance(last, Mapping) else {}
            return f"Recorded follow-up {followup.get('id')} on {self.request.ticket}."
        credit = last.get("credit", last) if isinstance(last, Mapping) else {}
        return f"Issued credit {credit.get('id')} of {credit.get('amount_cents')} cents on {self.request.ticket}."


def reference_agent(request: Mapping[str, Any]) -> dict[str, Any]:
    """The scripted reference agent (see the module docstring): request and reply as `PythonModel` defines."""
    messages = list(request.get("messages") or [])
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        return {"content": "How can I help?", "tool_calls": []}
    wanted, answer = _read_request(str(messages[last_user].get("content", "")))
    if wanted is None:
        return {"content": answer, "tool_calls": []}
    plan = _Plan(wanted, _Surface(list(request.get("tools") or [])))
    plan.start()
    for message in messages[last_user + 1:]:
        if plan.answer is not None:
            break
        if message.get("role") == "tool":
            content = message.get("content")
            plan.react(content if isinstance(content, Mapping) else json.loads(content))
    if plan.answer is not None:
        return {"content": plan.answer, "tool_calls": []}
    return {"content": "", "tool_calls": [plan.call()]}


reference_agent.scripted = True  # type: ignore[attr-defined]
reference_agent.note = (  # type: ignore[attr-defined]
    f"{REFERENCE_AGENT_NAME}: a rule-based agent written for the ticket lab, not a model"
)
