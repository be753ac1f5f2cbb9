"""What the three framework adapters share: one session's tools and the way each call reaches `invoke`.

`SessionTools` is bound to one registry and one actor, the one the application's session established.
It lists the tools that actor may call under names every model host accepts, turns a framework's call
(name, arguments, call id) into a `ToolCall`, and runs it through `Registry.invoke` or `ainvoke`. When
the framework says a person approved the call, it asks the registry for an `Approval` of exactly that
call (`Registry.approval_for`): the approval binds to the arguments about to run, so no other call can
use it, and the registry still checks permission first (an approval never grants one).
"""

from __future__ import annotations

import copy
import importlib
import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..adapters import HostBridge, _model_text
from ..calls import ToolCall, ToolResult
from ..fingerprint import has_lone_surrogate
from ..policy import Actor, Approval
from ..spec import ApprovalPolicy, ToolSpec

__all__ = ["FrameworkMissing", "HostTool", "SessionTools", "import_framework"]

logger = logging.getLogger("agent_lab.integrations")

_PROCESS_EXITS = (KeyboardInterrupt, SystemExit)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_REGISTRY_METHODS = ("invoke", "ainvoke", "spec", "names", "approval_for")


class FrameworkMissing(ImportError):
    """An integration was used without its framework installed; the message names the pip package."""


def import_framework(module: str, *, package: str, adapter: str) -> Any:
    """`importlib.import_module(module)`, or FrameworkMissing saying which package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise FrameworkMissing(
            f"{adapter} needs the {package} package, which is not installed here: pip install {package} "
            f"(import {module} failed: {error})"
        ) from None


@dataclass(frozen=True)
class HostTool:
    """One tool as the framework shows it to the model: a host-safe name, the description and the
    input schema (JSON Schema 2020-12, OpenAI strict form when the session is strict)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    spec: ToolSpec


class SessionTools:
    """A registry's tools as one actor may call them in one session.

    `actor` comes from the application's trusted session (it is never read from a call's arguments);
    build one `SessionTools` (one set of framework tools) per session. `approver` names who approves
    calls in the framework's human-in-the-loop step, for the `Approval` (and so the audit record);
    a framework that says who answered (pydantic-ai's metadata, a LangGraph resume value) may name
    someone else per call. `strict`: the input schemas in OpenAI's strict form (optional properties
    nullable); a null sent for one is turned back into "left out" before the registry validates.
    """

    def __init__(self, registry: Any, *, actor: Actor, approver: str, strict: bool = False) -> None:
        if not all(callable(getattr(registry, name, None)) for name in _REGISTRY_METHODS):
            raise TypeError("the first argument must be an agent_lab Registry")
        if not isinstance(actor, Actor):
            raise TypeError("actor must be the agent_lab Actor of the application's session "
                            f"(not {type(actor).__name__})")
        self.approver = _approver_name(approver)
        self.registry = registry
        self.actor = actor
        self._bridge = HostBridge(registry, "openai", strict=bool(strict), actor=actor)
        self._tools = [
            HostTool(name=entry["name"], description=entry.get("description") or "", parameters=entry["parameters"],
                     spec=registry.spec(self._bridge.names.from_host(entry["name"])))
            for entry in self._bridge.tools()
        ]

    def tools(self) -> list[HostTool]:
        """The tools the actor may call, in registration order (the others answer like missing tools)."""
        return list(self._tools)

    def call(self, host_name: str, arguments: Any, call_id: Optional[str] = None) -> ToolCall:
        """The framework's call as a `ToolCall` with the registry's tool name. `arguments` is JSON text
        or an already parsed object; anything unreadable becomes arguments the registry refuses."""
        return self._bridge.parse_call({"name": host_name, "arguments": arguments, "call_id": call_id})

    def approval(self, call: ToolCall, approver: Optional[str] = None) -> Optional[Approval]:
        """A person's approval of exactly `call` (its tool, arguments and the actor's tenant), or None
        when the call cannot carry one (arguments that are not canonical JSON: the registry refuses them)."""
        try:
            return self.registry.approval_for(call, actor=self.actor, approver=approver or self.approver)
        except _PROCESS_EXITS:
            raise
        except Exception as error:  # noqa: BLE001 - no approval: the registry answers approval_required again
            logger.info("no approval could be bound to a call of %r: %s", call.name, type(error).__name__)
            return None

    def invoke(self, call: ToolCall, *, approved: bool = False, approver: Optional[str] = None) -> ToolResult:
        """`Registry.invoke` with the session's actor; with `approved`, an approval bound to this call."""
        approval = self.approval(call, approver) if approved else None
        return self.registry.invoke(call, actor=self.actor, approval=approval)

    async def ainvoke(self, call: ToolCall, *, approved: bool = False, approver: Optional[str] = None) -> ToolResult:
        """`Registry.ainvoke` with the session's actor; with `approved`, an approval bound to this call."""
        approval = self.approval(call, approver) if approved else None
        return await self.registry.ainvoke(call, actor=self.actor, approval=approval)

    def needs_approval(self, call: ToolCall) -> bool:
        """Whether the registry's approval step will ask for a person's approval of `call`, for frameworks
        that must decide before they run a tool (the Agents SDK's `needs_approval`).

        Only a forecast: the registry decides again when the call runs, and refuses an unapproved call
        that needs one (`approval_required`), whatever this said. So anything the registry would refuse
        before the approval step (an unknown tool, invalid arguments, a condition that raises) needs no
        person here: the model gets the refusal instead of a person being asked about a broken call.
        """
        try:
            spec = self.registry.spec(call.name)
            if spec.approval is ApprovalPolicy.NEVER or not isinstance(call.arguments, dict):
                return False
            validator = spec.input_validator
            if validator is not None and not validator.is_valid(call.arguments):
                return False
            return spec.needs_approval(copy.deepcopy(call.arguments)) is True  # a copy: the condition may mutate
        except _PROCESS_EXITS:
            raise
        except BaseException:  # noqa: BLE001 - the registry will answer this call itself
            return False


def model_text(result: ToolResult) -> str:
    """What the model reads: compact JSON of `result.to_model()` (outputs and errors, redacted)."""
    return _model_text(result)


def model_value(value: Any) -> Any:
    """`value` (a JSON value of `to_model()`) for a framework that takes it as data and encodes it itself
    (pydantic-ai): unchanged, unless a string in it holds a lone surrogate (a tool can read one from a
    file name, a model can write one in its arguments), which no UTF-8 encoder takes, so the framework
    would fail the whole run; then a copy in which each is written as its escape text ("\\udcff")."""
    text = json.dumps(value, ensure_ascii=False, default=lambda _: "[not JSON]")
    if not has_lone_surrogate(text):
        return value
    # Raw surrogates only occur inside strings (all JSON syntax is ASCII): an escaped backslash there
    # reads back as the six characters of the escape.
    return json.loads(_LONE_SURROGATE.sub(lambda match: "\\\\u%04x" % ord(match.group()), text))


def _approver_name(approver: Any) -> str:
    if not isinstance(approver, str) or not approver:
        raise TypeError("approver must be a non-empty string naming who approves calls")
    return str.__str__(approver)
