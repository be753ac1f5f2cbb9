"""A Registry's tools as LangChain `StructuredTool`s (package `langchain-core`; approvals need `langgraph`).

    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command
    from agent_lab.integrations.langchain import structured_tools

    tools = structured_tools(registry, actor=session.actor)
    graph = build_graph(model.bind_tools(tools), ToolNode(tools))      # with a checkpointer
    state = graph.invoke({"messages": [("user", "Close account ACC-9")]}, config)
    for pending in state.get("__interrupt__", ()):                    # calls a person must approve first
        print(pending.value["summary"])                                # what exactly would run
        answer = {"approved": True, "fingerprint": pending.value["fingerprint"], "approver": "alice"}
        state = graph.invoke(Command(resume=answer), config)

Every call is `registry.invoke(...)` (`ainvoke` when the tool is awaited) with the session's actor, and the
tool's content is `ToolResult.to_model()` as JSON text: an output, or an error with its code and next
action. When the registry answers `approval_required` inside a LangGraph run, the tool calls LangGraph's
`interrupt` with the registry's approval request (tool, fingerprint, a redacted summary); the graph pauses,
and on `Command(resume={"approved": True, "fingerprint": ..., "approver": ...})`, a yes naming the request's
fingerprint, the call runs with an `Approval` of exactly its arguments. Any other answer (a bare `True`, a
yes naming another call's fingerprint), or no LangGraph run to pause (a tool called on its own,
`interrupt_for_approval=False`), leaves the model the `approval_required` refusal to act on.

Why the fingerprint: LangGraph hands resume values to a node's `interrupt` calls by their order, and a
ToolNode runs a message's tool calls on parallel threads, whose order changes from run to run. A bare yes
a person gave after reading one call's summary could be taken by another call of the same message (its
thread reaching `interrupt` first when the node runs again), and that call would run unseen.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from ..calls import ToolResult
from ..policy import Actor
from ._session import HostTool, SessionTools, import_framework, model_text

__all__ = ["DEFAULT_APPROVER", "RESERVED_ARGUMENT_NAMES", "structured_tools"]

DEFAULT_APPROVER = "person answering a LangGraph interrupt"
"""Who `Approval.approver` names when the resume value does not say."""

RESERVED_ARGUMENT_NAMES = frozenset({"config", "run_manager", "self"})
"""Argument names LangChain's StructuredTool keeps for itself (it drops the model's `config` and
`run_manager` before the function sees them, and fails on `self`): a tool with one is refused here."""

_ADAPTER = "agent_lab.integrations.langchain"
logger = logging.getLogger("agent_lab.integrations")


def structured_tools(registry: Any, *, actor: Actor, approver: str = DEFAULT_APPROVER,
                     interrupt_for_approval: bool = True) -> list[Any]:
    """The tools `actor` may call, as `langchain_core.tools.StructuredTool`s whose every call goes through
    the registry. Build them per session: `actor` is the session's, never one from a call's arguments.
    Raises FrameworkMissing without `langchain-core`, and ValueError for a tool with an argument named in
    RESERVED_ARGUMENT_NAMES."""
    tools_module = import_framework("langchain_core.tools", package="langchain-core", adapter=_ADAPTER)
    session = SessionTools(registry, actor=actor, approver=approver)
    ask = _ask_person if interrupt_for_approval else _ask_nobody
    return [_structured_tool(tools_module, session, tool, ask) for tool in session.tools()]


def _structured_tool(tools_module: Any, session: SessionTools, tool: HostTool, ask: Any) -> Any:
    host_name = tool.name
    properties = tool.parameters.get("properties")
    clash = sorted(RESERVED_ARGUMENT_NAMES & set(properties if isinstance(properties, Mapping) else ()))
    if clash:
        raise ValueError(f"tool {tool.spec.name!r} has an argument named {clash[0]!r}, which LangChain's "
                         f"StructuredTool keeps for itself; rename the argument to offer the tool to LangChain")

    def run(**arguments: Any) -> str:
        call = session.call(host_name, arguments)
        result = session.invoke(call)
        answer = _approval_answer(result, ask)
        if answer is not None:
            result = session.invoke(call, approved=True, approver=answer or None)
        return model_text(result)

    async def arun(**arguments: Any) -> str:
        call = session.call(host_name, arguments)
        result = await session.ainvoke(call)
        answer = _approval_answer(result, ask)
        if answer is not None:
            result = await session.ainvoke(call, approved=True, approver=answer or None)
        return model_text(result)

    return tools_module.StructuredTool.from_function(
        func=run, coroutine=arun, name=host_name, description=tool.description or host_name,
        args_schema=dict(tool.parameters), infer_schema=False,
    )


def _approval_answer(result: ToolResult, ask: Any) -> Optional[str]:
    """None unless `result` asks for a person's approval and a person gave it, for this very call: then
    the approver's name ("" for the adapter's default)."""
    if result.error is None or result.error.code != "approval_required":
        return None
    request = result.to_model()["error"]["details"]
    return _approved_by(ask(request), request.get("fingerprint"))


def _ask_person(request: Mapping[str, Any]) -> Any:
    """LangGraph's `interrupt` with the approval request: the first time it pauses the graph (it raises
    LangGraph's own GraphInterrupt, which must propagate); on resume it returns the person's answer. No
    LangGraph, or no graph run to pause: None (the model gets the refusal)."""
    try:
        from langgraph.types import interrupt
    except ImportError:
        return None
    try:
        return interrupt({"kind": "agent_lab.approval", **request})
    except (RuntimeError, KeyError):  # outside a LangGraph run: no runnable context, or one without a graph's
        logger.info("approval_required for %r outside a LangGraph run: the model gets the refusal", request.get("tool"))
        return None


def _ask_nobody(request: Mapping[str, Any]) -> Any:
    return None


def _approved_by(answer: Any, fingerprint: Any) -> Optional[str]:
    """The approver's name for a yes to the call whose approval request has `fingerprint` (a mapping with
    `"approved": True`, that `"fingerprint"`, and maybe "approver"), "" for such a yes without a name, None
    for anything else: a no, an answer we cannot read, or a yes that does not name this call (a bare
    `True` included: LangGraph may have handed it to this call although the person read another's)."""
    if answer is True or (isinstance(answer, Mapping) and answer.get("approved") is True):
        named = answer.get("fingerprint") if isinstance(answer, Mapping) else None
        if not isinstance(fingerprint, str) or named != fingerprint:
            logger.info("a yes that does not name this call's fingerprint was not taken as its approval (LangGraph "
                        "matches answers to interrupts by order; answer with the request's fingerprint)")
            return None
        name = answer.get("approver") if isinstance(answer, Mapping) else None
        return str.__str__(name) if isinstance(name, str) and name else ""
    return None
