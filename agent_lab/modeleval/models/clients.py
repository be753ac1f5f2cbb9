"""Model clients: an HTTP endpoint in one of the three wire formats, or an in-process Python callable.

`--model` specs:

    openai:MODEL[@BASE_URL][#KEY_ENV]             OpenAI-compatible Chat Completions
    openai-responses:MODEL[@BASE_URL][#KEY_ENV]   OpenAI Responses
    anthropic:MODEL[@BASE_URL][#KEY_ENV]          Anthropic Messages
    python:MODULE:ATTR                            a callable in this process (a scripted agent, a test)

The key is read from the environment variable KEY_ENV (default OPENAI_API_KEY / ANTHROPIC_API_KEY). A
missing or empty key is a ModelSpecError before any request when the spec names the variable (#KEY_ENV)
or talks to the provider's own API (no @BASE_URL); a local server (@BASE_URL) with the default variable
unset is sent no key, as such servers need none. White space around it is dropped (a key read from a file
ends in a line break); a key that still holds a control character or anything but printable ASCII is
refused with a message that names the variable and shows no part of the key (http.client's own error
quoted the whole header). Only the variable's name ever appears in a report; the key's value is sent in
a header and nowhere else.
"""

from __future__ import annotations

import importlib
import json
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from ...adapters import HostBridge, parse_openai_chat_call
from ...calls import ToolCall
from ...execution import type_name
from ...interrupts import raise_stop_request
from ...policy import Actor
from ...registry import Registry
from ..transcript import ModelTurn, ProposedCall, ToolAnswer, Transcript, TurnContext, Usage, UserMessage
from .base import ModelClient, ModelInfo
from .http import HttpRequest, InfrastructureFailure, Transport, UrllibTransport
from .providers import DIALECTS, SCRIPTED_HEADER, Dialect

__all__ = ["HttpModel", "ModelSpecError", "PythonModel", "open_model", "parse_model_spec"]


class ModelSpecError(ValueError):
    """A `--model` spec that cannot be used (bad syntax, unknown provider, a key variable that is unset)."""


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    model: str
    base_url: str = ""
    key_env: Optional[str] = None
    key_env_given: bool = False

    def display(self) -> str:
        """The spec as reports show it: no credentials inside the URL, no query string."""
        if self.provider == "python":
            return f"python:{self.model}"
        parts = urllib.parse.urlsplit(self.base_url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        url = urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
        text = f"{self.provider}:{self.model}@{url}"
        return f"{text}#{self.key_env}" if self.key_env_given else text


def parse_model_spec(text: str) -> ModelSpec:
    """Read a `--model` spec (see the module docstring); raises ModelSpecError."""
    provider, colon, rest = text.partition(":")
    if not colon or not rest:
        raise ModelSpecError(f"model spec {text!r}: expected PROVIDER:MODEL (providers: "
                             f"{', '.join([*DIALECTS, 'python'])})")
    if provider == "python":
        if rest.count(":") < 1 or not all(rest.rsplit(":", 1)):
            raise ModelSpecError(f"model spec {text!r}: expected python:MODULE:ATTR")
        return ModelSpec("python", rest)
    dialect = DIALECTS.get(provider)
    if dialect is None:
        raise ModelSpecError(f"model spec {text!r}: unknown provider {provider!r} (choose one of: "
                             f"{', '.join([*DIALECTS, 'python'])})")
    rest, hash_sign, key_env = rest.partition("#")
    model, at, base_url = rest.partition("@")
    if not model:
        raise ModelSpecError(f"model spec {text!r}: the model name is empty")
    base_url = base_url if at else dialect.default_base_url
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelSpecError(f"model spec {text!r}: the base URL must be http:// or https:// with a host")
    if hash_sign and not key_env.replace("_", "").isalnum():
        raise ModelSpecError(f"model spec {text!r}: '#' must be followed by an environment variable name")
    return ModelSpec(provider, model, base_url, key_env or dialect.default_key_env, bool(hash_sign))


def open_model(text: str, *, transport: Optional[Transport] = None, need_key: bool = True) -> ModelClient:
    """A client for a `--model` spec. `transport` replaces the network (a cassette); `need_key=False`
    when no request will reach the network (replay), so no key is read at all."""
    spec = parse_model_spec(text)
    if spec.provider == "python":
        return PythonModel.load(spec.model)
    dialect = DIALECTS[spec.provider]
    key: Optional[str] = None
    if need_key and spec.key_env:
        key = _checked_key(spec, os.environ.get(spec.key_env))
        if key is None and spec.base_url == dialect.default_base_url:
            raise ModelSpecError(f"model spec {spec.display()!r}: the environment variable {spec.key_env} is not set "
                                 f"(or empty), and {urllib.parse.urlsplit(spec.base_url).hostname} needs a key: "
                                 "no request was sent")
    return HttpModel(spec, dialect, transport if transport is not None else UrllibTransport(), key)


def _checked_key(spec: ModelSpec, value: Optional[str]) -> Optional[str]:
    """The key without surrounding white space; ModelSpecError for one a header cannot carry as it is.
    No message shows any part of the key: not its characters, its length or where it goes wrong."""
    where = f"model spec {spec.display()!r}: the environment variable {spec.key_env}"
    key = value.strip() if value is not None else ""
    if not key:
        if spec.key_env_given:
            raise ModelSpecError(f"{where} is {'not set' if value is None else 'empty'}")
        return None
    if not all(" " <= character <= "~" for character in key):
        raise ModelSpecError(f"{where} holds a key with a control character or a character outside printable "
                             "ASCII inside it (the key is not shown)")
    return key


class HttpModel:
    """A model behind an HTTP endpoint in one of the three wire formats."""

    def __init__(self, spec: ModelSpec, dialect: Dialect, transport: Transport, key: Optional[str]) -> None:
        self.spec = spec
        self.dialect = dialect
        self.transport = transport
        self._key = key
        self.info = ModelInfo(spec=spec.display(), kind="http", api=dialect.api, model=spec.model)

    @property
    def credentials(self) -> tuple[str, ...]:
        """Values every report and line of the run masks as secrets: the key, should an endpoint echo it."""
        return (self._key,) if self._key else ()

    def session(self, registry: Registry, actor: Actor) -> _HttpSession:
        return _HttpSession(self, HostBridge(registry, self.dialect.bridge_format, actor=actor))


class _HttpSession:
    def __init__(self, model: HttpModel, bridge: HostBridge) -> None:
        self.model = model
        self.bridge = bridge

    def turn(self, system: str, transcript: Transcript, context: TurnContext) -> ModelTurn:
        dialect, spec = self.model.dialect, self.model.spec
        request = HttpRequest(
            base_url=spec.base_url,
            path=dialect.path,
            body=dialect.body(spec.model, system, transcript, self.bridge),
            headers=dialect.public_headers(),
            secret_headers=dialect.auth_headers(self.model._key),
            credentials=self.model.credentials,
        )
        response = self.model.transport.send(request, context)
        if not 200 <= response.status < 300:
            raise InfrastructureFailure(f"the endpoint answered HTTP {response.status}")
        turn = dialect.turn(response.body, self.bridge)
        served_by = response.headers.get(SCRIPTED_HEADER)
        return ModelTurn(text=turn.text, calls=turn.calls, raw=turn.raw, usage=turn.usage,
                         latency_ms=response.latency_ms, served_by=f"scripted:{served_by}" if served_by else None,
                         reported_model=_reported_model(response.body))


MAX_MODEL_ID_CHARS = 200


def _reported_model(body: Any) -> Optional[str]:
    """The model id the provider says answered (all three formats call it "model"), if it names one.
    A provider may answer for an alias with a dated version: that is what a verdict should show."""
    found = body.get("model") if isinstance(body, Mapping) else None
    if not isinstance(found, str) or not found.strip():
        return None
    found = " ".join(found.split())
    return found if len(found) <= MAX_MODEL_ID_CHARS else found[: MAX_MODEL_ID_CHARS - 1] + "…"


# -- in-process agents ------------------------------------------------------------------------------

AgentCallable = Callable[[Mapping[str, Any]], Any]


class PythonModel:
    """A callable in this process that answers like a model: `agent(request) -> reply`.

    request: `{"tools": [model-facing tool schemas], "system": str, "messages": [...], "trial": n}` with
    messages `{"role": "user", "content": str}`, `{"role": "assistant", "content": str, "tool_calls":
    [{"id", "name", "arguments"}]}` and `{"role": "tool", "tool_call_id": str, "content": view}` (the
    registry's `to_model()` view). reply: `{"content": str, "tool_calls": [{"name": str, "arguments":
    object or JSON text, "id": optional str}]}`. Arguments given as text are parsed like a provider's,
    so an agent can propose malformed JSON. An agent that is marked `scripted = True` (an attribute) is
    named as scripted in every report; any other callable is named as an in-process agent.
    """

    def __init__(self, name: str, agent: AgentCallable) -> None:
        self.agent = agent
        scripted = getattr(agent, "scripted", False) is True
        note = getattr(agent, "note", "") if isinstance(getattr(agent, "note", ""), str) else ""
        self.info = ModelInfo(spec=f"python:{name}", kind="python", api="python", model=name,
                              scripted=scripted, note=note)

    @classmethod
    def load(cls, target: str) -> PythonModel:
        module_name, _, attribute = target.rpartition(":")
        try:
            module = importlib.import_module(module_name)
        except BaseException as error:  # noqa: BLE001 - any import failure (sys.exit too) is a bad spec, in one line
            raise_stop_request(error)
            raise ModelSpecError(f"model spec 'python:{target}': cannot import {module_name} "
                                 f"({type(error).__name__})") from None
        agent = getattr(module, attribute, None)
        if not callable(agent):
            raise ModelSpecError(f"model spec 'python:{target}': {module_name} has no callable {attribute!r}")
        return cls(target, agent)

    def session(self, registry: Registry, actor: Actor) -> _PythonSession:
        return _PythonSession(self, registry.catalog(actor))


class _PythonSession:
    def __init__(self, model: PythonModel, tools: list[dict[str, Any]]) -> None:
        self.model = model
        self.tools = tools

    def turn(self, system: str, transcript: Transcript, context: TurnContext) -> ModelTurn:
        request = {"tools": json.loads(json.dumps(self.tools)), "system": system,
                   "messages": agent_messages(transcript), "trial": context.trial}
        try:
            reply = self.model.agent(request)
        except BaseException as error:  # noqa: BLE001 - the agent's own bug (sys.exit too): not a proposal of the model
            raise_stop_request(error)  # only the caller's own Ctrl-C stops the run
            raise InfrastructureFailure(f"the in-process agent raised {type_name(error)}") from None
        try:  # reading the reply runs the agent's code too: a Mapping's get, a list's __iter__
            return _python_turn(reply, context.step)
        except InfrastructureFailure:
            raise
        except BaseException as error:  # noqa: BLE001 - as above: the agent's own bug, one line, never a traceback
            raise_stop_request(error)
            raise InfrastructureFailure(f"the in-process agent's reply could not be read ({type_name(error)})") from None


def agent_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """The transcript in the plain message form in-process agents (and the loopback server) read."""
    messages: list[dict[str, Any]] = []
    for entry in transcript:
        if isinstance(entry, UserMessage):
            messages.append({"role": "user", "content": entry.text})
        elif isinstance(entry, ModelTurn):
            messages.append({"role": "assistant", "content": entry.text, "tool_calls": [
                {"id": proposed.call.call_id, "name": proposed.host_name, "arguments": _shown_arguments(proposed)}
                for proposed in entry.calls]})
        elif isinstance(entry, ToolAnswer):
            messages.append({"role": "tool", "tool_call_id": entry.call_id, "content": entry.result.to_model()})
    return messages


def _shown_arguments(proposed: ProposedCall) -> Any:
    return None if proposed.unparseable else proposed.call.arguments


def _python_turn(reply: Any, step: int) -> ModelTurn:
    if not isinstance(reply, Mapping):
        raise InfrastructureFailure(f"the in-process agent returned {type(reply).__name__}, not a reply object")
    content = reply.get("content")
    raw_calls = reply.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise InfrastructureFailure("the in-process agent's tool_calls is not a list")
    calls = []
    for index, item in enumerate(raw_calls):
        item = item if isinstance(item, Mapping) else {}
        name = item.get("name")
        call_id = item.get("id") if isinstance(item.get("id"), str) and item.get("id") else f"call_{step}_{index}"
        # The adapters' own parser: text arguments are read exactly as a provider's would be.
        parsed = parse_openai_chat_call({"id": call_id, "function": {"name": name, "arguments": item.get("arguments")}})
        calls.append(ProposedCall(ToolCall(parsed.name, parsed.arguments, call_id), name if isinstance(name, str) else ""))
    return ModelTurn(text=content if isinstance(content, str) else "", calls=tuple(calls), usage=Usage())
