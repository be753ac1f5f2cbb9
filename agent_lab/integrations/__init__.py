"""A Registry's tools as agent frameworks' own tool objects, every call through `Registry.invoke`.

One module per framework, each a thin mapping with no policy of its own:

* `agent_lab.integrations.openai_agents.function_tools` -> OpenAI Agents SDK `FunctionTool`s
  (approvals through `needs_approval` and the run's interruptions);
* `agent_lab.integrations.pydantic_ai.toolset` -> a pydantic-ai `FunctionToolset` (approvals through
  `ApprovalRequired` and deferred tool results);
* `agent_lab.integrations.langchain.structured_tools` -> LangChain `StructuredTool`s (approvals through
  LangGraph's `interrupt`).

Each lists the tools the session's actor may call, hands every call to `invoke` (`ainvoke` where the
framework awaits) with that actor, never one read from the arguments, and gives the model
`ToolResult.to_model()`: outputs and errors alike, redacted. A person's yes in the framework's own
human-in-the-loop step becomes an `Approval` bound to the exact arguments that then run. The framework is
imported inside the functions that need it; without it they raise `FrameworkMissing`, which names the
package to install. Importing these modules needs nothing but the standard library.
"""

from __future__ import annotations

from ._session import FrameworkMissing, SessionTools

__all__ = ["FrameworkMissing", "SessionTools"]
