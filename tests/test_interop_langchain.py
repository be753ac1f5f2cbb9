"""LangChain and LangGraph run a Registry's tools (agent_lab.integrations.langchain), for real.

A scripted tool-calling chat model (a `BaseChatModel` whose turns read the tool messages so far) stands
in for the LLM; everything else is the installed framework: StructuredTool, LangGraph's StateGraph,
ToolNode, node retry policies, `interrupt` and `Command(resume=...)` with a checkpointer.
"""

from __future__ import annotations

import asyncio
import unittest
from typing import Any, Callable

from agent_world import AGENT, SECRET_TOKEN, print_versions, shop_registry, tool_view

try:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool, tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from langgraph.types import Command, RetryPolicy
except ImportError:  # locally the test skips; in CI (.ci/run) the packages are installed and no skip passes
    BaseChatModel = None  # type: ignore[assignment,misc]

from agent_lab.integrations.langchain import structured_tools


def setUpModule() -> None:
    if BaseChatModel is not None:
        print_versions("langchain-core", "langgraph")


Turn = Callable[[list[dict[str, Any]]], Any]

if BaseChatModel is not None:
    class ScriptedChatModel(BaseChatModel):
        """Answers the n-th request with turn n, which reads the tool messages so far (parsed) and returns
        an AIMessage: tool calls, or text. `seen` keeps every message list the model was sent."""

        turns: list[Any]
        seen: list[Any] = []

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            self.seen.append(list(messages))
            returns = [tool_view(m.content) for m in messages if isinstance(m, ToolMessage)]
            return ChatResult(generations=[ChatGeneration(message=self.turns.pop(0)(returns))])


def calls(*items: tuple[str, dict[str, Any], str]) -> Any:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in items])


def say(text: str) -> Any:
    return AIMessage(content=text)


REFUND = {"order_id": "A-1002", "cents": 1250, "refund_id": "rf-0001"}
CLOSE = {"account_id": "ACC-9", "action_id": "close-0001"}


@unittest.skipIf(BaseChatModel is None, "langchain-core and langgraph are not installed (pip install langchain-core langgraph)")
class LangGraphTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry, self.world, self.audit = shop_registry()
        self.addCleanup(self.registry.close)
        self.tools = structured_tools(self.registry, actor=AGENT)
        self.config = {"configurable": {"thread_id": "conversation-1"}}

    def graph(self, model: Any, tools: list[Any], **tool_node: Any) -> Any:
        """The usual agent loop: model -> tools (if it asked for any) -> model, with a checkpointer."""
        retry = tool_node.pop("retry_policy", None)
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
        builder.add_node("tools", ToolNode(tools, **tool_node), retry_policy=retry)
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        return builder.compile(checkpointer=InMemorySaver())

    def test_the_tools_are_structured_tools_for_what_the_actor_may_call(self) -> None:
        self.assertTrue(all(isinstance(t, StructuredTool) for t in self.tools))
        self.assertEqual([t.name for t in self.tools], ["refund", "get_customer", "close_account"])
        self.assertEqual(self.tools[0].args_schema["required"], ["order_id", "cents", "refund_id"])

    def test_a_tools_node_retried_by_langgraph_refunds_once(self) -> None:
        """The model asks for a refund and a notification in one turn; the notification fails once, so
        LangGraph's retry policy runs the whole tools node again, the refund included."""
        notified = []

        @tool
        def notify_customer(order_id: str) -> str:
            """Tell the customer about their order."""
            self.world.refunded.wait(5)  # the refund in the same node has run before this first attempt fails
            notified.append(order_id)
            if len(notified) == 1:
                raise ConnectionError("mail server unavailable")
            return "sent"

        views: list[dict[str, Any]] = []
        model = ScriptedChatModel(turns=[
            lambda r: calls(("refund", REFUND, "call_1"), ("notify_customer", {"order_id": "A-1002"}, "call_2")),
            lambda r: (views.extend(r), say("Refunded and notified."))[1],
        ])
        tools = self.tools + [notify_customer]
        graph = self.graph(model, tools, handle_tool_errors=False,
                           retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False,
                                                    retry_on=ConnectionError))

        state = graph.invoke({"messages": [("user", "Refund 12.50 on A-1002 and tell them")]}, self.config)

        self.assertEqual(state["messages"][-1].content, "Refunded and notified.")
        self.assertEqual(len(notified), 2)  # the node ran twice
        self.assertEqual(len(self.world.refunds), 1)  # the refund took effect once
        refund_view = views[0]
        self.assertEqual((refund_view["ok"], refund_view.get("replayed")), (True, True))
        self.assertEqual([r["replayed"] for r in self.audit.records if r["tool"] == "refund"], [False, True])

    def test_a_refused_call_reaches_the_model_as_an_error_it_can_act_on(self) -> None:
        errors: list[dict[str, Any]] = []

        def fix(returns: list[dict[str, Any]]) -> Any:
            error = returns[-1]["error"]
            errors.append(error)
            if error["next_action"] != "fix_arguments":
                return say("giving up")
            return calls(("refund", dict(REFUND, cents=1250), "call_2"))

        model = ScriptedChatModel(turns=[
            lambda r: calls(("refund", dict(REFUND, cents="12.50"), "call_1")),
            fix,
            lambda r: say("done" if r[-1]["ok"] else "failed"),
        ])
        state = self.graph(model, self.tools).invoke({"messages": [("user", "Refund 12.50")]}, self.config)

        self.assertEqual(errors[0]["code"], "invalid_arguments")
        self.assertEqual(errors[0]["details"]["violations"][0]["instance_path"], "/cents")
        self.assertEqual(state["messages"][-1].content, "done")
        self.assertEqual(self.world.refunds, [REFUND])

    def test_a_secret_in_an_output_never_reaches_the_model(self) -> None:
        model = ScriptedChatModel(turns=[
            lambda r: calls(("get_customer", {"customer_id": "C-1"}, "call_1")),
            lambda r: say(f"Found {r[-1]['output']['name']}, token {r[-1]['output']['api_token']}"),
        ])
        state = self.graph(model, self.tools).invoke({"messages": [("user", "Who is C-1?")]}, self.config)

        self.assertEqual(state["messages"][-1].content, "Found Ada Lovelace, token [redacted]")
        self.assertNotIn(SECRET_TOKEN, repr(model.seen))
        self.assertNotIn(SECRET_TOKEN, repr(state))

    def test_an_approval_goes_through_a_langgraph_interrupt_and_then_runs_once_bound_to_its_arguments(self) -> None:
        model = ScriptedChatModel(turns=[
            lambda r: calls(("close_account", CLOSE, "call_1")),
            lambda r: say("Closed." if r[-1]["ok"] else "failed"),
        ])
        graph = self.graph(model, self.tools)

        paused = graph.invoke({"messages": [("user", "Close ACC-9")]}, self.config)
        (pending,) = paused["__interrupt__"]
        self.assertEqual(pending.value["kind"], "agent_lab.approval")
        self.assertEqual(pending.value["fingerprint"], self.registry.fingerprint("close_account", CLOSE))
        self.assertIn("ACC-9", pending.value["summary"])
        self.assertEqual(self.world.closed, [])

        answer = {"approved": True, "fingerprint": pending.value["fingerprint"], "approver": "alice"}
        state = graph.invoke(Command(resume=answer), self.config)

        self.assertEqual(state["messages"][-1].content, "Closed.")
        self.assertEqual(self.world.closed, [CLOSE])
        ran = [r for r in self.audit.records if r["tool"] == "close_account" and r["outcome"] == "succeeded"]
        self.assertEqual(len(ran), 1)
        self.assertIsNotNone(ran[0]["approval_id"])
        self.assertEqual(ran[0]["fingerprint"], self.registry.fingerprint("close_account", CLOSE))

    def test_a_declined_interrupt_never_runs_and_the_model_reads_the_refusal(self) -> None:
        model = ScriptedChatModel(turns=[
            lambda r: calls(("close_account", CLOSE, "call_1")),
            lambda r: say(r[-1]["error"]["code"]),
        ])
        graph = self.graph(model, self.tools)
        graph.invoke({"messages": [("user", "Close ACC-9")]}, self.config)

        state = graph.invoke(Command(resume={"approved": False}), self.config)

        self.assertEqual(state["messages"][-1].content, "approval_required")
        self.assertEqual(self.world.closed, [])

    def test_the_async_path_awaits_ainvoke_with_the_same_contract(self) -> None:
        model = ScriptedChatModel(turns=[
            lambda r: calls(("refund", REFUND, "call_1")),
            lambda r: calls(("refund", REFUND, "call_2")),
            lambda r: say("replayed" if r[-1].get("replayed") else "ran twice"),
        ])
        graph = self.graph(model, self.tools)

        state = asyncio.run(graph.ainvoke({"messages": [("user", "Refund")]}, self.config))

        self.assertEqual(state["messages"][-1].content, "replayed")
        self.assertEqual(len(self.world.refunds), 1)

    def test_outside_a_graph_an_approval_required_call_answers_the_refusal(self) -> None:
        close = self.tools[2]
        view = tool_view(close.invoke(CLOSE))

        self.assertEqual((view["ok"], view["error"]["code"]), (False, "approval_required"))
        self.assertEqual(self.world.closed, [])


if __name__ == "__main__":
    unittest.main()
