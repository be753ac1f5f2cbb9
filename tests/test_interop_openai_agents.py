"""The OpenAI Agents SDK runs a Registry's tools (agent_lab.integrations.openai_agents), for real.

A scripted `Model` stands in for the LLM (the one part that cannot answer on cue); everything else is
the installed SDK: its Runner, FunctionTool, needs_approval and run-state interruptions. Each test is a
short conversation and checks what the world did, what the model read and what the audit recorded.
"""

from __future__ import annotations

import asyncio
import json
import unittest
from typing import Any, Callable

from agent_world import AGENT, SECRET_TOKEN, print_versions, shop_registry, tool_view

try:
    import agents
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
except ImportError:  # locally the test skips; in CI (.ci/run) the package is installed and no skip passes
    agents = None  # type: ignore[assignment]
    Model = object  # type: ignore[assignment,misc]

from agent_lab.integrations.openai_agents import function_tools


def setUpModule() -> None:
    if agents is not None:
        print_versions("openai-agents", "openai")
        agents.set_tracing_disabled(True)  # no trace export: there is no API key, and nothing leaves the machine


Turn = Callable[[list[dict[str, Any]]], list[Any]]


class ScriptedModel(Model):  # type: ignore[misc,valid-type]
    """Answers each model request with the next turn of a script; a turn sees the tool outputs so far
    (parsed), the way a model reads them, and returns output items (tool calls or a final message)."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []  # everything the model was sent, turn by turn

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                           output_schema: Any, handoffs: Any, tracing: Any, **kwargs: Any) -> Any:
        self.inputs.append(input)
        outputs = [tool_view(item["output"]) for item in (input if isinstance(input, list) else [])
                   if isinstance(item, dict) and item.get("type") == "function_call_output"]
        turn = self.turns.pop(0)
        return ModelResponse(output=turn(outputs), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run without streaming")


def call(name: str, arguments: dict[str, Any], call_id: str) -> Any:
    return ResponseFunctionToolCall(type="function_call", name=name, arguments=json.dumps(arguments),
                                    call_id=call_id, id="fc_" + call_id)


def say(text: str) -> Any:
    return ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


REFUND = {"order_id": "A-1002", "cents": 1250, "refund_id": "rf-0001"}


@unittest.skipIf(agents is None, "openai-agents is not installed (pip install openai-agents)")
class OpenAIAgentsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry, self.world, self.audit = shop_registry()
        self.addCleanup(self.registry.close)
        self.tools = function_tools(self.registry, actor=AGENT)

    def run_agent(self, model: ScriptedModel, prompt: Any) -> Any:
        agent = agents.Agent(name="shop-agent", instructions="Help the customer.", model=model, tools=self.tools)
        return asyncio.run(agents.Runner.run(agent, prompt))

    def test_the_agent_gets_the_tools_its_actor_may_call_and_no_others(self) -> None:
        self.assertTrue(all(isinstance(tool, agents.FunctionTool) for tool in self.tools))
        self.assertEqual([tool.name for tool in self.tools], ["refund", "get_customer", "close_account"])

    def test_a_keyed_refund_sent_again_runs_once_and_the_repeat_is_a_replay(self) -> None:
        seen: list[dict[str, Any]] = []

        def again(outputs: list[dict[str, Any]]) -> list[Any]:
            seen.extend(outputs)
            return [call("refund", REFUND, "call_2")]  # the model lost the answer and sends the refund again

        model = ScriptedModel([
            lambda outputs: [call("refund", REFUND, "call_1")],
            again,
            lambda outputs: (seen.extend(outputs[len(seen):]), [say("Refunded once.")])[1],
        ])
        result = self.run_agent(model, "Refund 12.50 on A-1002")

        self.assertEqual(result.final_output, "Refunded once.")
        self.assertEqual(len(self.world.refunds), 1)
        self.assertEqual([view["ok"] for view in seen], [True, True])
        self.assertEqual(seen[0]["output"], seen[1]["output"])
        self.assertTrue(seen[1].get("replayed"))
        self.assertEqual([r["replayed"] for r in self.audit.records], [False, True])

    def test_a_refused_call_reaches_the_model_as_an_error_it_can_act_on(self) -> None:
        errors: list[dict[str, Any]] = []

        def fix(outputs: list[dict[str, Any]]) -> list[Any]:
            error = outputs[-1]["error"]
            errors.append(error)
            if error["next_action"] != "fix_arguments":
                return [say("giving up")]
            fixed = dict(REFUND, cents=int(float("12.50") * 100))  # the pointer said /cents is not an integer
            return [call("refund", fixed, "call_2")]

        model = ScriptedModel([
            lambda outputs: [call("refund", dict(REFUND, cents="12.50"), "call_1")],
            fix,
            lambda outputs: [say("done" if outputs[-1]["ok"] else "failed")],
        ])
        result = self.run_agent(model, "Refund 12.50 on A-1002")

        self.assertEqual(errors[0]["code"], "invalid_arguments")
        self.assertEqual(errors[0]["details"]["violations"][0]["instance_path"], "/cents")
        self.assertEqual(result.final_output, "done")
        self.assertEqual(self.world.refunds, [REFUND])

    def test_a_secret_in_an_output_never_reaches_the_model(self) -> None:
        views: list[dict[str, Any]] = []
        model = ScriptedModel([
            lambda outputs: [call("get_customer", {"customer_id": "C-1"}, "call_1")],
            lambda outputs: (views.extend(outputs), [say("Found Ada.")])[1],
        ])
        result = self.run_agent(model, "Who is C-1?")

        self.assertEqual(views[0]["output"]["name"], "Ada Lovelace")
        self.assertEqual(views[0]["output"]["api_token"], "[redacted]")
        self.assertNotIn(SECRET_TOKEN, repr(model.inputs))
        self.assertNotIn(SECRET_TOKEN, repr(result.to_input_list()))

    def test_an_approval_goes_through_the_run_interruption_and_then_runs_once_bound_to_its_arguments(self) -> None:
        arguments = {"account_id": "ACC-9", "action_id": "close-0001"}
        views: list[dict[str, Any]] = []
        model = ScriptedModel([
            lambda outputs: [call("close_account", arguments, "call_1")],
            lambda outputs: (views.extend(outputs), [say("Closed.")])[1],
        ])
        agent = agents.Agent(name="shop-agent", instructions="Help.", model=model, tools=self.tools)

        async def conversation() -> Any:
            first = await agents.Runner.run(agent, "Close ACC-9")
            self.assertEqual([item.raw_item.arguments for item in first.interruptions], [json.dumps(arguments)])
            self.assertEqual(self.world.closed, [])  # nothing ran before a person said yes
            state = first.to_state()
            for item in first.interruptions:
                state.approve(item)
            return await agents.Runner.run(agent, state)

        result = asyncio.run(conversation())

        self.assertEqual(result.final_output, "Closed.")
        self.assertEqual(self.world.closed, [arguments])
        self.assertEqual(views[0], {"ok": True, "outcome": "succeeded", "output": {"closed": "ACC-9"}})
        ran = [r for r in self.audit.records if r["tool"] == "close_account"]
        self.assertEqual(len(ran), 1)
        self.assertIsNotNone(ran[0]["approval_id"])
        self.assertEqual(ran[0]["fingerprint"], self.registry.fingerprint("close_account", arguments))

    def test_an_approved_run_resumed_twice_from_its_saved_state_closes_the_account_once(self) -> None:
        """A double-submitted approval form: the application resumes the same saved run state twice, so
        the SDK runs the approved call twice; its action_id makes the second a replay."""
        arguments = {"account_id": "ACC-9", "action_id": "close-0001"}
        model = ScriptedModel([
            lambda outputs: [call("close_account", arguments, "call_1")],
            lambda outputs: [say("Closed." if outputs[-1]["ok"] else "failed")],
            lambda outputs: [say("Closed again?" if outputs[-1].get("replayed") else "ran twice")],
        ])
        agent = agents.Agent(name="shop-agent", instructions="Help.", model=model, tools=self.tools)

        async def conversation() -> list[Any]:
            first = await agents.Runner.run(agent, "Close ACC-9")
            state = first.to_state()
            for item in first.interruptions:
                state.approve(item)
            saved = state.to_string()
            finals = []
            for _ in range(2):
                resumed = await agents.RunState.from_string(agent, saved)
                finals.append((await agents.Runner.run(agent, resumed)).final_output)
            return finals

        self.assertEqual(asyncio.run(conversation()), ["Closed.", "Closed again?"])
        self.assertEqual(self.world.closed, [arguments])
        ran = [r for r in self.audit.records if r["tool"] == "close_account"]
        self.assertEqual([(r["outcome"], r["replayed"]) for r in ran], [("succeeded", False), ("succeeded", True)])

    def test_an_approval_covers_one_call_and_the_next_call_is_asked_about_again(self) -> None:
        first_args = {"account_id": "ACC-9", "action_id": "close-0001"}
        second_args = {"account_id": "ACC-10", "action_id": "close-0002"}
        model = ScriptedModel([
            lambda outputs: [call("close_account", first_args, "call_1")],
            lambda outputs: [call("close_account", second_args, "call_2")],  # the model tries another one
        ])
        agent = agents.Agent(name="shop-agent", instructions="Help.", model=model, tools=self.tools)

        async def conversation() -> Any:
            first = await agents.Runner.run(agent, "Close ACC-9")
            state = first.to_state()
            for item in first.interruptions:
                state.approve(item)
            return await agents.Runner.run(agent, state)

        result = asyncio.run(conversation())

        self.assertEqual(self.world.closed, [first_args])
        self.assertEqual([item.raw_item.arguments for item in result.interruptions], [json.dumps(second_args)])

    def test_a_rejected_call_never_runs(self) -> None:
        model = ScriptedModel([
            lambda outputs: [call("close_account", {"account_id": "ACC-9", "action_id": "close-0001"}, "call_1")],
            lambda outputs: [say("Not closed.")],
        ])
        agent = agents.Agent(name="shop-agent", instructions="Help.", model=model, tools=self.tools)

        async def conversation() -> Any:
            first = await agents.Runner.run(agent, "Close ACC-9")
            state = first.to_state()
            for item in first.interruptions:
                state.reject(item)
            return await agents.Runner.run(agent, state)

        result = asyncio.run(conversation())

        self.assertEqual(result.final_output, "Not closed.")
        self.assertNotIn('"ok"', json.dumps(model.inputs[-1], default=str))  # the SDK's rejection, not a result
        self.assertEqual(self.world.closed, [])
        self.assertEqual([r for r in self.audit.records if r["tool"] == "close_account"], [])


if __name__ == "__main__":
    unittest.main()
