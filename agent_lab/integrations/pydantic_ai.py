"""A Registry's tools as a pydantic-ai toolset (package `pydantic-ai-slim` or `pydantic-ai`).

    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
    from agent_lab.integrations.pydantic_ai import toolset

    agent = Agent(model, output_type=[str, DeferredToolRequests])
    tools = toolset(registry, actor=session.actor)
    result = await agent.run("Close account ACC-9", toolsets=[tools])
    if isinstance(result.output, DeferredToolRequests):          # calls a person must approve first
        answers = DeferredToolResults(approvals={c.tool_call_id: True for c in result.output.approvals},
                                      metadata={c.tool_call_id: {"approver": "alice"} for c in result.output.approvals})
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answers,
                                 toolsets=[tools])

Every call is `await registry.ainvoke(...)` with the session's actor; the tool returns
`ToolResult.to_model()` (an output, or an error with its code and next action) for the model to read.
The registry decides which calls need a person: when it answers `approval_required`, the tool raises
pydantic-ai's `ApprovalRequired` (with the registry's approval request as metadata), so the run ends with
`DeferredToolRequests`. Approved in `DeferredToolResults`, the call runs again with an `Approval` of
exactly the arguments it runs with (the original ones, or a person's `ToolApproved(override_args=...)`),
naming the approver given in that call's metadata (`{"approver": ...}`) or `approver`.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..policy import Actor
from ._session import HostTool, SessionTools, import_framework, model_value

__all__ = ["DEFAULT_APPROVER", "toolset"]

DEFAULT_APPROVER = "person approving a pydantic-ai deferred tool call"
"""Who `Approval.approver` names when neither the application nor the call's metadata says."""

_ADAPTER = "agent_lab.integrations.pydantic_ai"


def toolset(registry: Any, *, actor: Actor, approver: str = DEFAULT_APPROVER) -> Any:
    """The tools `actor` may call, as a `pydantic_ai.FunctionToolset` whose every call goes through
    `registry.ainvoke`. Build it per session (pass it to `agent.run(..., toolsets=[...])`): `actor` is the
    session's, never one from a call's arguments. Raises FrameworkMissing without pydantic-ai."""
    pydantic_ai = import_framework("pydantic_ai", package="pydantic-ai-slim", adapter=_ADAPTER)
    session = SessionTools(registry, actor=actor, approver=approver)
    tools = [_tool(pydantic_ai, session, tool) for tool in session.tools()]
    return pydantic_ai.FunctionToolset(tools)


def _tool(pydantic_ai: Any, session: SessionTools, tool: HostTool) -> Any:
    host_name = tool.name
    approval_required = pydantic_ai.ApprovalRequired

    # The run context comes first and only by position, so an argument of any name (even "ctx") stays
    # an argument; pydantic-ai passes the model's arguments as keywords, unvalidated (the registry judges).
    async def run(run_context: Any, /, **arguments: Any) -> dict[str, Any]:
        call = session.call(host_name, arguments, getattr(run_context, "tool_call_id", None))
        approved = getattr(run_context, "tool_call_approved", False) is True
        result = await session.ainvoke(call, approved=approved,
                                       approver=_approver(getattr(run_context, "tool_call_metadata", None)))
        if not approved and result.error is not None and result.error.code == "approval_required":
            raise approval_required(metadata=model_value(result.to_model()["error"]["details"]))
        return model_value(result.to_model())

    return pydantic_ai.Tool.from_schema(run, name=host_name, description=tool.description,
                                        json_schema=dict(tool.parameters), takes_ctx=True)


def _approver(metadata: Any) -> Optional[str]:
    """The approver the application named for this call in `DeferredToolResults.metadata`, if any."""
    if isinstance(metadata, Mapping):
        name = metadata.get("approver")
        if isinstance(name, str) and name:
            return str.__str__(name)
    return None
