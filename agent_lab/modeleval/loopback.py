"""A stand-in model server on 127.0.0.1 that speaks the three wire formats: for tests, and for recording
demo cassettes where no real model is reachable. It is never a model.

Each request is answered by the next canned `Reply` queued for its path, if any (a malformed tool call,
a 429, a truncated body, a hang past the client's timeout...), otherwise by an in-process agent: the
request is read back into the plain message form of `PythonModel`, the agent answers, and the answer is
written in the same wire format. Answers from the agent carry the header `X-Agent-Lab-Scripted: NAME`,
which cassettes keep and reports show, so a recording made here can never pass for a model's.

    with LoopbackModelServer(agent=reference_agent) as server:
        model = open_model(f"openai:stand-in@{server.base_url}")

`python -m agent_lab.modeleval.loopback [--port N]` serves the scripted reference agent until stopped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping, Optional, Sequence

__all__ = ["LoopbackModelServer", "Reply", "main"]

PATHS = {"/chat/completions": "openai", "/responses": "openai-responses", "/messages": "anthropic"}


@dataclass(frozen=True)
class Reply:
    """A canned answer: `body` as JSON (a dict) or raw bytes; `truncate` promises more bytes than it sends
    and closes; `hang_s` waits that long (or until the server stops) before answering."""

    status: int = 200
    body: Any = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    truncate: bool = False
    hang_s: float = 0.0


@dataclass(frozen=True)
class Received:
    path: str
    headers: Mapping[str, str]
    body: Any


class LoopbackModelServer:
    """A threaded HTTP server on 127.0.0.1 (a free port unless one is given)."""

    def __init__(self, agent: Optional[Callable[[Mapping[str, Any]], Any]] = None, *, name: str = "reference",
                 port: int = 0) -> None:
        self.agent = agent
        self.name = name
        self.received: list[Received] = []
        self._queues: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="loopback-model", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def queue(self, path: str, *replies: Reply) -> None:
        """Answer the next requests to `path` with `replies`, in order, before the agent answers again."""
        with self._lock:
            self._queues.setdefault(path, []).extend(replies)

    def start(self) -> LoopbackModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> LoopbackModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------------

    def _next_reply(self, path: str) -> Optional[Reply]:
        with self._lock:
            queue = self._queues.get(path)
            return queue.pop(0) if queue else None

    def _answer(self, path: str, body: Any) -> Reply:
        canned = self._next_reply(path)
        if canned is not None:
            return canned
        wire = PATHS.get(path)
        if wire is None:
            return Reply(404, {"error": {"type": "not_found", "message": "no such endpoint"}})
        if self.agent is None or not isinstance(body, Mapping):
            return Reply(500, {"error": {"type": "server_error", "message": "no agent behind this server"}})
        try:
            request = _READERS[wire](body)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
            return Reply(400, {"error": {"type": "invalid_request_error", "message": "cannot read the request"}})
        reply = self.agent(request)
        seed = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:12]
        answer = _WRITERS[wire](reply, str(body.get("model", "")), seed, _estimate_tokens(body))
        return Reply(200, answer, {"X-Agent-Lab-Scripted": self.name})

    def _handler_class(self) -> type:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                return  # quiet: tests and CI logs stay readable

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                try:
                    self._serve()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (a timeout test): nothing to answer

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    body = None
                with server._lock:
                    server.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                reply = server._answer(self.path, body)
                if reply.hang_s:
                    server._stopping.wait(reply.hang_s)
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode("utf-8")
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.truncate:
                    self.send_header("content-length", str(len(data) + 100))
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _estimate_tokens(body: Any) -> int:
    return math.ceil(len(json.dumps(body, sort_keys=True)) / 4)


def _arguments(text: Any) -> Any:
    if isinstance(text, str):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def _content(text: Any) -> Any:
    """A tool result's text as the view it carries (JSON), or the text itself."""
    return _arguments(text) if isinstance(text, str) else text


# -- reading the three formats into the plain message form ---------------------------------------------


def _read_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    system = ""
    for message in body["messages"]:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "user":
            messages.append({"role": "user", "content": message["content"]})
        elif role == "assistant":
            messages.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": [
                {"id": call["id"], "name": call["function"]["name"], "arguments": _arguments(call["function"]["arguments"])}
                for call in message.get("tool_calls") or []]})
        elif role == "tool":
            messages.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": _content(message["content"])})
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
              "input_schema": t["function"].get("parameters", {})} for t in body.get("tools") or []]
    return {"tools": tools, "system": system, "messages": messages}


def _read_responses(body: Mapping[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for item in body["input"]:
        kind = item.get("type")
        if kind == "function_call":
            if not messages or messages[-1]["role"] != "assistant":
                messages.append({"role": "assistant", "content": "", "tool_calls": []})
            messages[-1]["tool_calls"].append({"id": item["call_id"], "name": item["name"],
                                               "arguments": _arguments(item["arguments"])})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": _content(item["output"])})
        elif item.get("role") == "assistant":
            text = "".join(part.get("text", "") for part in item.get("content") or [] if isinstance(part, Mapping))
            messages.append({"role": "assistant", "content": text, "tool_calls": []})
        elif item.get("role") == "user":
            messages.append({"role": "user", "content": item["content"]})
    tools = [{"name": t["name"], "description": t.get("description", ""), "input_schema": t.get("parameters", {})}
             for t in body.get("tools") or []]
    return {"tools": tools, "system": body.get("instructions", ""), "messages": messages}


def _read_anthropic(body: Mapping[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for message in body["messages"]:
        content = message["content"]
        if message["role"] == "assistant":
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            messages.append({"role": "assistant",
                             "content": "".join(b.get("text", "") for b in blocks if b.get("type") == "text"),
                             "tool_calls": [{"id": b["id"], "name": b["name"], "arguments": b.get("input")}
                                            for b in blocks if b.get("type") == "tool_use"]})
        elif isinstance(content, str):
            messages.append({"role": "user", "content": content})
        else:
            for block in content:
                if block.get("type") == "tool_result":
                    messages.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": _content(block["content"])})
                elif block.get("type") == "text":
                    messages.append({"role": "user", "content": block["text"]})
    tools = [{"name": t["name"], "description": t.get("description", ""), "input_schema": t.get("input_schema", {})}
             for t in body.get("tools") or []]
    return {"tools": tools, "system": body.get("system", ""), "messages": messages}


_READERS: Mapping[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "openai": _read_chat, "openai-responses": _read_responses, "anthropic": _read_anthropic}


# -- writing the agent's reply in each format ----------------------------------------------------------


def _calls(reply: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(str(call.get("name", "")), call.get("arguments", {})) for call in reply.get("tool_calls") or []]


def _text_arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, separators=(",", ":"))


def _write_chat(reply: Mapping[str, Any], model: str, seed: str, prompt_tokens: int) -> dict[str, Any]:
    calls = _calls(reply)
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or None}
    if calls:
        message["tool_calls"] = [{"id": f"call_{seed}_{i}", "type": "function",
                                  "function": {"name": name, "arguments": _text_arguments(arguments)}}
                                 for i, (name, arguments) in enumerate(calls)]
    return {"id": f"chatcmpl-{seed}", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": _estimate_tokens(message),
                      "total_tokens": prompt_tokens + _estimate_tokens(message)}}


def _write_responses(reply: Mapping[str, Any], model: str, seed: str, prompt_tokens: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.get("content"):
        output.append({"type": "message", "id": f"msg_{seed}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": reply["content"], "annotations": []}]})
    for i, (name, arguments) in enumerate(_calls(reply)):
        output.append({"type": "function_call", "id": f"fc_{seed}_{i}", "call_id": f"call_{seed}_{i}", "name": name,
                       "arguments": _text_arguments(arguments), "status": "completed"})
    return {"id": f"resp_{seed}", "object": "response", "status": "completed", "model": model, "output": output,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": _estimate_tokens(output)}}


def _write_anthropic(reply: Mapping[str, Any], model: str, seed: str, prompt_tokens: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.get("content"):
        content.append({"type": "text", "text": reply["content"]})
    calls = _calls(reply)
    for i, (name, arguments) in enumerate(calls):
        content.append({"type": "tool_use", "id": f"toolu_{seed}_{i}", "name": name,
                        "input": _arguments(arguments) if isinstance(arguments, str) else arguments})
    return {"id": f"msg_{seed}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": _estimate_tokens(content)}}


_WRITERS: Mapping[str, Callable[[Mapping[str, Any], str, str, int], dict[str, Any]]] = {
    "openai": _write_chat, "openai-responses": _write_responses, "anthropic": _write_anthropic}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_lab.modeleval.loopback",
                                     description="Serve the scripted reference agent in the three wire formats on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one, printed on start)")
    args = parser.parse_args(argv)
    from .scripted import REFERENCE_AGENT_NAME, reference_agent

    server = LoopbackModelServer(reference_agent, name=REFERENCE_AGENT_NAME, port=args.port).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
