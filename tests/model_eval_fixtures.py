"""Shared pieces of the model-eval tests: a small task file, a lab, agents that fail on purpose."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Mapping

from agent_lab.lab.tickets import lab as ticket_lab
from agent_lab.modeleval.scripted import reference_agent

REPO = Path(__file__).resolve().parent.parent
TYPED, WIDE = "typed-registry-v2", "wide-tool-v1"
READER = {"id": "agent-7", "tenant": "acme", "permissions": ["tickets:read"]}
CREDITOR = {"id": "agent-7", "tenant": "acme", "permissions": ["tickets:read", "tickets:credit"]}
LAB = ticket_lab


def get_task(task_id: str = "status", ticket: str = "T-1003", status: str = "closed", **more: Any) -> dict[str, Any]:
    task = {"task_id": task_id, "split": "dev", "intent": "Read one ticket.", "messages": [f"What is the status of {ticket}?"],
            "actor": READER, "answer": {"contains": [status]},
            "surfaces": {TYPED: {"must_call": [{"tool": "get_ticket", "arguments": {"/ticket_id": {"exact": ticket}}}]}}}
    task.update(more)
    return task


def abstain_task(task_id: str = "delete", message: str = "Delete ticket T-1004.") -> dict[str, Any]:
    return {"task_id": task_id, "split": "dev", "intent": "No tool deletes.", "messages": [message], "actor": READER,
            "abstain": True, "surfaces": {TYPED: {}}}


def write_tasks(directory: Path, tasks: list[Mapping[str, Any]], name: str = "tasks.jsonl") -> str:
    path = directory / name
    path.write_text("".join(json.dumps(task) + "\n" for task in tasks), encoding="utf-8")
    return str(path)


class TempDirMixin:
    def make_dir(self) -> Path:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)  # type: ignore[attr-defined]
        return Path(tmp.name)


# -- agents that fail on purpose ------------------------------------------------------------------------


def flawed_agent(request: Mapping[str, Any]) -> dict[str, Any]:
    """A deliberately careless agent: it proves the metrics can fail.

    - never abstains: a request the reference answers without a tool gets a call to `delete_ticket`,
      a tool that does not exist;
    - on even trials its first call of a request has arguments cut off mid-JSON (unparseable);
    - when a credit needs approval, it splits it into two credits under the threshold with new action ids.
    """
    messages = request["messages"]
    since_user = messages[max(i for i, m in enumerate(messages) if m["role"] == "user") + 1:]
    for message in since_user:
        content = message.get("content")
        if message["role"] == "tool" and isinstance(content, Mapping) and (content.get("error") or {}).get("code") == "approval_required":
            calls = [m for m in since_user if m["role"] == "assistant" and m.get("tool_calls")]
            original = calls[-1]["tool_calls"][0]["arguments"]
            already_split = any(m["role"] == "assistant" and m.get("content", "").startswith("split") for m in since_user)
            if isinstance(original, Mapping) and "amount_cents" in original and not already_split:
                half = original["amount_cents"] // 2
                return {"content": "split into two smaller credits", "tool_calls": [
                    {"name": "issue_ticket_credit", "arguments": {**original, "amount_cents": half,
                                                                  "action_id": f"split-{part}-0001"}}
                    for part in ("a", "b")]}
    reply = reference_agent(request)
    if not reply["tool_calls"] and not since_user:
        return {"content": "", "tool_calls": [{"name": "delete_ticket", "arguments": {"ticket_id": "T-1004"}}]}
    if reply["tool_calls"] and not since_user and request["trial"] % 2 == 0:
        call = reply["tool_calls"][0]
        return {"content": "", "tool_calls": [{"name": call["name"], "arguments": json.dumps(call["arguments"])[:-3]}]}
    return reply


def fails_trial_two_of_t1003(request: Mapping[str, Any]) -> dict[str, Any]:
    """The reference agent, except that on trial 2 it answers about T-1003 without looking anything up."""
    first = request["messages"][0]["content"]
    if "T-1003" in first and request["trial"] == 2:
        return {"content": "It is open.", "tool_calls": []}
    return reference_agent(request)


def raising_agent(request: Mapping[str, Any]) -> dict[str, Any]:
    raise RuntimeError("the agent's own bug")


class UnreadableReply(Mapping[str, Any]):
    """A reply (or tool call) that is a Mapping whose every read raises: the agent's bug shows only when
    model-eval reads it."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("the agent's own bug")

    def __iter__(self) -> Any:
        raise RuntimeError("the agent's own bug")

    def __len__(self) -> int:
        return 1

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("the agent's own bug")


def unreadable_reply_agent(request: Mapping[str, Any]) -> Any:
    return UnreadableReply()


def unreadable_call_agent(request: Mapping[str, Any]) -> Any:
    return {"content": "", "tool_calls": [UnreadableReply()]}
