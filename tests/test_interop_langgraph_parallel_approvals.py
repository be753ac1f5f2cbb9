"""LangGraph, two approval-gated calls in one message: a person's yes runs the call they read, never the other.

LangGraph hands resume values to a node's `interrupt` calls by their order, and its ToolNode runs a
message's tool calls on parallel threads. On main (6dd0a37) the adapter took any yes as approval of the
call whose thread asked first when the node ran again: the person read "close ACC-9", and ACC-10 was
closed (found by attacking the adapter; reproduced here by making each thread slow in turn). A yes now
names the fingerprint of the request the person read.
"""

from __future__ import annotations

import threading
import time
import unittest
from typing import Any

from agent_world import AGENT, shop_registry

try:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from langgraph.types import Command

    from test_interop_langchain import ScriptedChatModel, calls, say
except ImportError:  # locally the test skips; in CI (.ci/run) the packages are installed and no skip passes
    Command = None  # type: ignore[assignment,misc]

from agent_lab.integrations.langchain import structured_tools

CLOSE_9 = {"account_id": "ACC-9", "action_id": "close-0001"}
CLOSE_10 = {"account_id": "ACC-10", "action_id": "close-0002"}


@unittest.skipIf(Command is None,
                 "langchain-core and langgraph are not installed (pip install langchain-core langgraph)")
class AYesRunsTheCallThePersonReadTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry, self.world, _audit = shop_registry()
        self.addCleanup(self.registry.close)
        self.slow_account = "ACC-10"  # whose call reaches the approval step last (first run: ACC-9 asks first)
        invoke = self.registry.invoke

        def invoke_in_turn(call: Any, **options: Any) -> Any:
            if options.get("approval") is None and call.arguments.get("account_id") == self.slow_account:
                time.sleep(0.3)  # the other thread asks first: the order LangGraph's answers are handed out in
            return invoke(call, **options)

        self.registry.invoke = invoke_in_turn  # type: ignore[method-assign]
        tools = structured_tools(self.registry, actor=AGENT)
        model = ScriptedChatModel(turns=[lambda r: calls(("close_account", CLOSE_9, "call_1"),
                                                         ("close_account", CLOSE_10, "call_2"))]
                                  + [lambda r: say("done")] * 4)
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
        builder.add_node("tools", ToolNode(tools))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        self.graph = builder.compile(checkpointer=InMemorySaver())
        self.config = {"configurable": {"thread_id": f"parallel-{threading.get_ident()}-{id(self)}"}}

    def first_request(self) -> tuple[Any, dict[str, str], dict[str, str]]:
        """The request the person is shown first, the call it is about and the other call."""
        paused = self.graph.invoke({"messages": [("user", "Close ACC-9 and ACC-10")]}, self.config)
        (pending,) = paused["__interrupt__"]
        shown, other = (CLOSE_10, CLOSE_9) if "ACC-10" in pending.value["summary"] else (CLOSE_9, CLOSE_10)
        return pending, shown, other

    def test_a_yes_to_one_call_never_runs_the_other_whichever_thread_asks_first(self) -> None:
        pending, shown, other = self.first_request()
        self.slow_account = shown["account_id"]  # on the run after the answer, the other call's thread asks first
        answer = {"approved": True, "fingerprint": pending.value["fingerprint"], "approver": "alice"}
        for _ in range(3):  # the person answers each request about the call they read, as shown
            state = self.graph.invoke(Command(resume=answer), self.config)
            self.assertNotIn(other, self.world.closed)
            asked = [request.value for request in state.get("__interrupt__", ())]
            if not asked:
                break
            self.assertEqual([request["fingerprint"] for request in asked], [pending.value["fingerprint"]])
        self.assertEqual(self.world.closed, [shown])

    def test_a_bare_yes_approves_nothing(self) -> None:
        self.first_request()
        self.graph.invoke(Command(resume=True), self.config)
        self.graph.invoke(Command(resume={"approved": True, "approver": "alice"}), self.config)
        self.assertEqual(self.world.closed, [])


if __name__ == "__main__":
    unittest.main()
