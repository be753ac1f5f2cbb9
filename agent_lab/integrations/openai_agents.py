"""A Registry's tools as OpenAI Agents SDK `FunctionTool`s (package `openai-agents`, module `agents`).

    from agents import Agent, Runner
    from agent_lab.integrations.openai_agents import function_tools

    agent = Agent(name="support", tools=function_tools(registry, actor=session.actor))
    result = await Runner.run(agent, "Refund order A-1002")
    while result.interruptions:                   # calls a person must approve first
        state = result.to_state()
        for item in result.interruptions:
            state.approve(item)                   # or state.reject(item)
        result = await Runner.run(agent, state)   # each approved call runs once, bound to its arguments

Every call is `await registry.ainvoke(...)` with the session's actor, and the model reads
`ToolResult.to_model()` as JSON text: an output, or an error with its code and next action. A tool
whose calls need approval (`ToolSpec.approval`) gets `needs_approval`, so the run stops with an
interruption before the registry would refuse it; once a person approves the item in the run state, the
resumed call carries an `Approval` of exactly its arguments. (The registry still decides: a call the
forecast missed is refused with `approval_required`, which the model reads like any refusal.) The SDK's
`state.approve(item, always_approve=True)` approves the tool's later calls in that run too: each still
gets an `Approval` of its own arguments, but no person saw them, so use it only where that is meant.
"""

from __future__ import annotations

from typing import Any

from ..policy import Actor
from ._session import HostTool, SessionTools, import_framework, model_text

__all__ = ["DEFAULT_APPROVER", "function_tools"]

DEFAULT_APPROVER = "person approving in the OpenAI Agents SDK run"
"""Who `Approval.approver` names when the application does not say (the SDK's approval records no name)."""

_ADAPTER = "agent_lab.integrations.openai_agents"


def function_tools(registry: Any, *, actor: Actor, approver: str = DEFAULT_APPROVER, strict: bool = False) -> list[Any]:
    """The tools `actor` may call, as `agents.FunctionTool`s whose every call goes through `registry.ainvoke`.

    Build them per session: `actor` is the session's, never one from a call's arguments. `strict`: send the
    input schemas in OpenAI's strict mode (see `agent_lab.adapters.to_strict_schema`); a schema that has no
    strict form raises StrictSchemaError here. Raises FrameworkMissing without the `openai-agents` package.
    """
    agents = import_framework("agents", package="openai-agents", adapter=_ADAPTER)
    session = SessionTools(registry, actor=actor, approver=approver, strict=strict)
    return [_function_tool(agents, session, tool, strict) for tool in session.tools()]


def _function_tool(agents: Any, session: SessionTools, tool: HostTool, strict: bool) -> Any:
    host_name = tool.name

    async def on_invoke_tool(ctx: Any, arguments: str) -> str:
        call_id = getattr(ctx, "tool_call_id", None)
        call = session.call(host_name, arguments, call_id)
        approved = _approved(ctx, host_name, call_id)
        return model_text(await session.ainvoke(call, approved=approved))

    async def needs_approval(run_context: Any, arguments: Any, call_id: str) -> bool:
        return session.needs_approval(session.call(host_name, arguments, call_id))

    return agents.FunctionTool(
        name=host_name,
        description=tool.description,
        params_json_schema=dict(tool.parameters),
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=strict,
        needs_approval=needs_approval if tool.spec.approval.value != "never" else False,
    )


def _approved(ctx: Any, host_name: str, call_id: Any) -> bool:
    """True only when the run's context records a person's approval of this very call (by its call id):
    the SDK runs an approval-gated call only after `RunState.approve`, and asks again for a new call id."""
    if not isinstance(call_id, str) or not call_id:
        return False
    try:
        return ctx.is_tool_approved(host_name, call_id) is True
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - no readable approval: the registry answers approval_required
        return False
