"""The three HTTP wire formats: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages.

Each format is one `Dialect`: how the transcript becomes a request body (tools from
`agent_lab.adapters.HostBridge`, results rendered by its `render_result`), and how a response body becomes
a `ModelTurn` (calls parsed by the bridge, so a name is mapped back and malformed arguments become an
`InvalidJSONArguments` the registry rejects). A body that does not have the format's shape is an
infrastructure failure: nothing the model said can be read from it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ...adapters import HostBridge
from ...calls import InvalidJSONArguments, ToolCall
from ..transcript import ModelTurn, ProposedCall, ToolAnswer, Transcript, Usage, UserMessage
from .http import InfrastructureFailure

__all__ = ["DIALECTS", "AnthropicMessages", "Dialect", "OpenAIChat", "OpenAIResponses"]

DEFAULT_MAX_TOKENS = 1024
ANTHROPIC_VERSION = "2023-06-01"
SCRIPTED_HEADER = "x-agent-lab-scripted"


class Dialect:
    """One provider's wire format."""

    api = ""
    bridge_format = ""
    path = ""
    default_base_url = ""
    default_key_env = ""

    def body(self, model: str, system: str, transcript: Transcript, bridge: HostBridge) -> dict[str, Any]:
        raise NotImplementedError

    def auth_headers(self, key: Optional[str]) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def public_headers(self) -> dict[str, str]:
        return {}

    def turn(self, body: Any, bridge: HostBridge) -> ModelTurn:
        raise NotImplementedError


def _shape_error(what: str) -> InfrastructureFailure:
    return InfrastructureFailure(f"the endpoint's answer is not a {what} response")


def _int_or_none(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _truncated(call: ToolCall, why: str) -> ToolCall:
    """The call of a response cut off by the token limit: whatever arrived is not a complete call."""
    if isinstance(call.arguments, InvalidJSONArguments):
        return call
    return ToolCall(call.name, InvalidJSONArguments(why), call.call_id)


def _with_call_id(call: ToolCall, fallback: str) -> ToolCall:
    return call if call.call_id else ToolCall(call.name, call.arguments, fallback)


class OpenAIChat(Dialect):
    """`POST {base}/chat/completions` with `tools=[{"type": "function", "function": ...}]`."""

    api = "openai-chat"
    bridge_format = "openai-chat"
    path = "/chat/completions"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = "OPENAI_API_KEY"

    def body(self, model: str, system: str, transcript: Transcript, bridge: HostBridge) -> dict[str, Any]:
        messages: list[Any] = [{"role": "system", "content": system}]
        for entry in transcript:
            if isinstance(entry, UserMessage):
                messages.append({"role": "user", "content": entry.text})
            elif isinstance(entry, ModelTurn):
                messages.append(entry.raw)
            elif isinstance(entry, ToolAnswer):
                messages.append(bridge.render_result(entry.result, call_id=entry.call_id))
        return {"model": model, "messages": messages, "tools": bridge.tools(), "temperature": 0}

    def turn(self, body: Any, bridge: HostBridge) -> ModelTurn:
        try:
            choice = body["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise _shape_error("Chat Completions") from None
        if not isinstance(message, Mapping):
            raise _shape_error("Chat Completions")
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise _shape_error("Chat Completions")
        cut = choice.get("finish_reason") == "length"
        calls = []
        for index, item in enumerate(raw_calls):
            call = _with_call_id(bridge.parse_call(item), f"call_{index}")
            if cut and index == len(raw_calls) - 1:
                call = _truncated(call, "the answer was cut off at the token limit before this call was complete")
            function = item.get("function") if isinstance(item, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            calls.append(ProposedCall(call, name if isinstance(name, str) else ""))
        echo: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else None}
        if raw_calls:
            echo["tool_calls"] = raw_calls
        usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
        return ModelTurn(text=text, calls=tuple(calls), raw=echo,
                         usage=Usage(_int_or_none(usage.get("prompt_tokens")), _int_or_none(usage.get("completion_tokens"))))


class OpenAIResponses(Dialect):
    """`POST {base}/responses` with function tools; the output items are sent back as input items."""

    api = "openai-responses"
    bridge_format = "openai"
    path = "/responses"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = "OPENAI_API_KEY"

    def body(self, model: str, system: str, transcript: Transcript, bridge: HostBridge) -> dict[str, Any]:
        items: list[Any] = []
        for entry in transcript:
            if isinstance(entry, UserMessage):
                items.append({"role": "user", "content": entry.text})
            elif isinstance(entry, ModelTurn):
                items.extend(entry.raw)
            elif isinstance(entry, ToolAnswer):
                items.append(bridge.render_result(entry.result, call_id=entry.call_id))
        return {"model": model, "instructions": system, "input": items, "tools": bridge.tools(),
                "temperature": 0, "store": False}

    def turn(self, body: Any, bridge: HostBridge) -> ModelTurn:
        output = body.get("output") if isinstance(body, Mapping) else None
        if not isinstance(output, list):
            raise _shape_error("Responses API")
        cut = body.get("status") == "incomplete"
        texts: list[str] = []
        calls: list[ProposedCall] = []
        echo: list[Any] = []
        for index, item in enumerate(output):
            if not isinstance(item, Mapping):
                raise _shape_error("Responses API")
            kind = item.get("type")
            if kind == "message":
                content = item.get("content")
                for part in content if isinstance(content, list) else ():  # `true` or 5 there is no text
                    if isinstance(part, Mapping) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                        texts.append(part["text"])
                echo.append(dict(item))
            elif kind == "function_call":
                call = _with_call_id(bridge.parse_call(item), f"call_{index}")
                name = item.get("name")
                calls.append(ProposedCall(call, name if isinstance(name, str) else ""))
                echo.append(dict(item))
        if cut and calls:
            last = calls[-1]
            calls[-1] = ProposedCall(_truncated(last.call, "the answer was cut off before this call was complete"),
                                     last.host_name)
        usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
        return ModelTurn(text="".join(texts), calls=tuple(calls), raw=echo,
                         usage=Usage(_int_or_none(usage.get("input_tokens")), _int_or_none(usage.get("output_tokens"))))


class AnthropicMessages(Dialect):
    """`POST {base}/messages`; tool results go back together in the next user message."""

    api = "anthropic-messages"
    bridge_format = "anthropic"
    path = "/messages"
    default_base_url = "https://api.anthropic.com/v1"
    default_key_env = "ANTHROPIC_API_KEY"

    def auth_headers(self, key: Optional[str]) -> dict[str, str]:
        return {"x-api-key": key} if key else {}

    def public_headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    def body(self, model: str, system: str, transcript: Transcript, bridge: HostBridge) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        for entry in transcript:
            if isinstance(entry, UserMessage):
                messages.append({"role": "user", "content": entry.text})
            elif isinstance(entry, ModelTurn):
                messages.append({"role": "assistant", "content": entry.raw})
            elif isinstance(entry, ToolAnswer):
                block = bridge.render_result(entry.result, call_id=entry.call_id)
                last = messages[-1] if messages else None
                if last is not None and last["role"] == "user" and isinstance(last["content"], list):
                    last["content"].append(block)
                else:
                    messages.append({"role": "user", "content": [block]})
        return {"model": model, "system": system, "messages": messages, "tools": bridge.tools(),
                "max_tokens": DEFAULT_MAX_TOKENS, "temperature": 0}

    def turn(self, body: Any, bridge: HostBridge) -> ModelTurn:
        content = body.get("content") if isinstance(body, Mapping) else None
        if not isinstance(content, list):
            raise _shape_error("Messages API")
        texts: list[str] = []
        calls: list[ProposedCall] = []
        for index, block in enumerate(content):
            if not isinstance(block, Mapping):
                raise _shape_error("Messages API")
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                call = _with_call_id(bridge.parse_call(block), f"toolu_{index}")
                if not isinstance(block.get("input"), Mapping):
                    call = ToolCall(call.name, InvalidJSONArguments("the tool_use input is not a JSON object"),
                                    call.call_id)
                name = block.get("name")
                calls.append(ProposedCall(call, name if isinstance(name, str) else ""))
        if body.get("stop_reason") == "max_tokens" and calls and content and content[-1].get("type") == "tool_use":
            last = calls[-1]
            calls[-1] = ProposedCall(_truncated(last.call, "the answer was cut off at max_tokens before this call "
                                                           "was complete"), last.host_name)
        usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
        return ModelTurn(text="".join(texts), calls=tuple(calls), raw=[dict(block) for block in content],
                         usage=Usage(_int_or_none(usage.get("input_tokens")), _int_or_none(usage.get("output_tokens"))))


DIALECTS: Mapping[str, Dialect] = {
    "openai": OpenAIChat(),
    "openai-responses": OpenAIResponses(),
    "anthropic": AnthropicMessages(),
}
