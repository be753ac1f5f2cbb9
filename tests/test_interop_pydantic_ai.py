"""pydantic-ai runs a Registry's tools (agent_lab.integrations.pydantic_ai), for real.

pydantic-ai's own `FunctionModel` stands in for the LLM: each turn reads the tool returns so far and
answers with tool calls or text. Everything else is the installed framework: Agent, FunctionToolset,
ApprovalRequired and deferred tool results.
"""

from __future__ import annotations

import json
import unittest
from typing import Any, Callable

from agent_world import AGENT, SECRET_TOKEN, print_versions, shop_registry, tool_view

try:
    import pydantic_ai
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
except ImportError:  # locally the test skips; in CI (.ci/run) the package is installed and no skip passes
    pydantic_ai = None  # type: ignore[assignment]

from agent_lab import Registry, ToolFailure, ToolSpec
from agent_lab.integrations.pydantic_ai import toolset


def setUpModule() -> None:
    if pydantic_ai is not None:
        print_versions("pydantic-ai-slim", "pydantic")


Turn = Callable[[list[dict[str, Any]]], list[Any]]


class Script:
    """A FunctionModel function: turn n answers the n-th model request, reading the tool returns so far."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = list(turns)
        self.seen: list[Any] = []  # every message the model was sent

    def __call__(self, messages: list[Any], info: Any) -> Any:
        self.seen = list(messages)
        returns = [tool_view(part.content) for message in messages if isinstance(message, ModelRequest)
                   for part in message.parts if isinstance(part, ToolReturnPart)]
        return ModelResponse(parts=self.turns.pop(0)(returns))


def call(name: str, arguments: dict[str, Any], call_id: str) -> Any:
    return ToolCallPart(tool_name=name, args=arguments, tool_call_id=call_id)


def say(text: str) -> Any:
    return TextPart(content=text)


REFUND = {"order_id": "A-1002", "cents": 1250, "refund_id": "rf-0001"}
CLOSE = {"account_id": "ACC-9", "action_id": "close-0001"}


@unittest.skipIf(pydantic_ai is None, "pydantic-ai is not installed (pip install pydantic-ai-slim)")
class PydanticAITest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry, self.world, self.audit = shop_registry()
        self.addCleanup(self.registry.close)
        self.tools = toolset(self.registry, actor=AGENT)

    def agent(self, script: Script) -> Any:
        return pydantic_ai.Agent(FunctionModel(script), output_type=[str, pydantic_ai.DeferredToolRequests])

    def test_the_toolset_holds_the_tools_its_actor_may_call_and_no_others(self) -> None:
        self.assertIsInstance(self.tools, pydantic_ai.FunctionToolset)
        self.assertEqual(sorted(self.tools.tools), ["close_account", "get_customer", "refund"])

    def test_a_keyed_refund_sent_again_runs_once_and_the_repeat_is_a_replay(self) -> None:
        views: list[dict[str, Any]] = []
        script = Script([
            lambda returns: [call("refund", REFUND, "call_1")],
            lambda returns: [call("refund", REFUND, "call_2")],  # the model lost the answer and sends it again
            lambda returns: (views.extend(returns), [say("Refunded once.")])[1],
        ])
        result = self.agent(script).run_sync("Refund 12.50 on A-1002", toolsets=[self.tools])

        self.assertEqual(result.output, "Refunded once.")
        self.assertEqual(len(self.world.refunds), 1)
        self.assertEqual([view["ok"] for view in views], [True, True])
        self.assertTrue(views[1].get("replayed"))
        self.assertEqual(views[0]["output"], views[1]["output"])

    def test_a_refused_call_reaches_the_model_as_an_error_it_can_act_on(self) -> None:
        errors: list[dict[str, Any]] = []

        def fix(returns: list[dict[str, Any]]) -> list[Any]:
            error = returns[-1]["error"]
            errors.append(error)
            pointer = error["details"]["violations"][0]["instance_path"]
            if error["next_action"] != "fix_arguments" or pointer != "/cents":
                return [say("giving up")]
            return [call("refund", dict(REFUND, cents=1250), "call_2")]

        script = Script([
            lambda returns: [call("refund", dict(REFUND, cents="12.50"), "call_1")],
            fix,
            lambda returns: [say("done" if returns[-1]["ok"] else "failed")],
        ])
        result = self.agent(script).run_sync("Refund 12.50 on A-1002", toolsets=[self.tools])

        self.assertEqual(errors[0]["code"], "invalid_arguments")
        self.assertEqual(result.output, "done")
        self.assertEqual(self.world.refunds, [REFUND])

    def test_a_secret_in_an_output_never_reaches_the_model(self) -> None:
        views: list[dict[str, Any]] = []
        script = Script([
            lambda returns: [call("get_customer", {"customer_id": "C-1"}, "call_1")],
            lambda returns: (views.extend(returns), [say("Found Ada.")])[1],
        ])
        result = self.agent(script).run_sync("Who is C-1?", toolsets=[self.tools])

        self.assertEqual(views[0]["output"], {"customer_id": "C-1", "name": "Ada Lovelace", "api_token": "[redacted]"})
        self.assertNotIn(SECRET_TOKEN, repr(script.seen))
        self.assertNotIn(SECRET_TOKEN, result.all_messages_json().decode())

    def test_an_approval_goes_through_deferred_tools_and_then_runs_once_bound_to_its_arguments(self) -> None:
        script = Script([
            lambda returns: [call("close_account", CLOSE, "call_1")],
            lambda returns: [say("Closed." if returns[-1]["ok"] else "failed")],
        ])
        agent = self.agent(script)
        first = agent.run_sync("Close ACC-9", toolsets=[self.tools])

        self.assertIsInstance(first.output, pydantic_ai.DeferredToolRequests)
        requested = first.output.approvals
        self.assertEqual([(part.tool_name, part.args_as_dict()) for part in requested], [("close_account", CLOSE)])
        self.assertEqual(first.output.metadata["call_1"]["fingerprint"], self.registry.fingerprint("close_account", CLOSE))
        self.assertEqual(self.world.closed, [])  # refused before it ran: nothing happened

        answers = pydantic_ai.DeferredToolResults(approvals={"call_1": True}, metadata={"call_1": {"approver": "alice"}})
        second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=answers, toolsets=[self.tools])

        self.assertEqual(second.output, "Closed.")
        self.assertEqual(self.world.closed, [CLOSE])
        ran = [r for r in self.audit.records if r["tool"] == "close_account" and r["outcome"] == "succeeded"]
        self.assertEqual(len(ran), 1)
        self.assertIsNotNone(ran[0]["approval_id"])
        self.assertEqual(ran[0]["fingerprint"], self.registry.fingerprint("close_account", CLOSE))

    def test_a_person_who_changes_the_arguments_approves_those_and_only_those_run(self) -> None:
        script = Script([
            lambda returns: [call("close_account", CLOSE, "call_1")],
            lambda returns: [say(json.dumps(returns[-1]))],
        ])
        agent = self.agent(script)
        first = agent.run_sync("Close ACC-9", toolsets=[self.tools])
        changed = dict(CLOSE, account_id="ACC-10")
        answers = pydantic_ai.DeferredToolResults(approvals={"call_1": pydantic_ai.ToolApproved(override_args=changed)})
        agent.run_sync(message_history=first.all_messages(), deferred_tool_results=answers, toolsets=[self.tools])

        self.assertEqual(self.world.closed, [changed])
        ran = [r for r in self.audit.records if r["outcome"] == "succeeded"]
        self.assertEqual(ran[0]["fingerprint"], self.registry.fingerprint("close_account", changed))

    def test_an_approved_run_resumed_twice_closes_the_account_once(self) -> None:
        script = Script([
            lambda returns: [call("close_account", CLOSE, "call_1")],
            lambda returns: [say("Closed.")],
            lambda returns: [say("replayed" if returns[-1].get("replayed") else "ran twice")],
        ])
        agent = self.agent(script)
        first = agent.run_sync("Close ACC-9", toolsets=[self.tools])
        answers = pydantic_ai.DeferredToolResults(approvals={"call_1": True})
        outputs = [agent.run_sync(message_history=first.all_messages(), deferred_tool_results=answers,
                                  toolsets=[self.tools]).output for _ in range(2)]

        self.assertEqual(outputs, ["Closed.", "replayed"])
        self.assertEqual(self.world.closed, [CLOSE])

    def test_a_denied_call_never_runs(self) -> None:
        script = Script([
            lambda returns: [call("close_account", CLOSE, "call_1")],
            lambda returns: [say("Not closed.")],
        ])
        agent = self.agent(script)
        first = agent.run_sync("Close ACC-9", toolsets=[self.tools])
        answers = pydantic_ai.DeferredToolResults(approvals={"call_1": False})
        second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=answers, toolsets=[self.tools])

        self.assertEqual(second.output, "Not closed.")
        self.assertEqual(self.world.closed, [])


def note_registry() -> Registry:
    """Tools whose answers hold a lone surrogate: a note read from a file whose name is not UTF-8
    (os.fsdecode), and a write that asks a person about such a note (its own approval_required)."""
    registry = Registry()
    empty = {"type": "object", "properties": {}, "additionalProperties": False}
    registry.register(ToolSpec(name="read_note", description="Read the stored note.", input_schema=empty),
                      lambda arguments: {"note": "stored \udcff bytes", "path\udcff": ["\ud800"]})

    def archive_note(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolFailure("approval_required", "A person must approve archiving this note.",
                          details={"note": "stored \udcff bytes"})

    registry.register(ToolSpec(name="archive_note", description="Archive the stored note.", input_schema=empty),
                      archive_note)
    return registry


@unittest.skipIf(pydantic_ai is None, "pydantic-ai is not installed (pip install pydantic-ai-slim)")
class LoneSurrogateTest(unittest.TestCase):
    """No UTF-8 encoder takes a lone surrogate, and pydantic-ai encodes what a tool returns: handed one,
    it failed the whole run (PydanticSerializationError). The model reads it as its escape text instead."""

    def setUp(self) -> None:
        self.registry = note_registry()
        self.addCleanup(self.registry.close)
        self.tools = toolset(self.registry, actor=AGENT)

    def test_an_output_holding_a_lone_surrogate_reaches_the_model_as_its_escape_and_the_run_goes_on(self) -> None:
        views: list[dict[str, Any]] = []
        script = Script([
            lambda returns: [call("read_note", {}, "call_1")],
            lambda returns: (views.extend(returns), [say("Read it.")])[1],
        ])
        result = pydantic_ai.Agent(FunctionModel(script)).run_sync("Read the note", toolsets=[self.tools])

        self.assertEqual(result.output, "Read it.")
        self.assertEqual(views[0]["output"], {"note": "stored \\udcff bytes", "path\\udcff": ["\\ud800"]})
        self.assertIn(b"stored \\\\udcff bytes", result.all_messages_json())  # the history encodes, to be stored

    def test_details_holding_a_lone_surrogate_still_defer_the_call_for_a_person(self) -> None:
        script = Script([lambda returns: [call("archive_note", {}, "call_1")]])
        agent = pydantic_ai.Agent(FunctionModel(script), output_type=[str, pydantic_ai.DeferredToolRequests])
        first = agent.run_sync("Archive the note", toolsets=[self.tools])

        self.assertIsInstance(first.output, pydantic_ai.DeferredToolRequests)
        self.assertEqual(first.output.metadata["call_1"], {"note": "stored \\udcff bytes"})
        first.all_messages_json()


if __name__ == "__main__":
    unittest.main()
