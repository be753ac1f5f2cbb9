"""MCP tasks on `serve-mcp`'s own server, message by message (no SDK): what a client sees on each revision.

2025-11-25: the tasks capability (only when a tool may run as a task), `execution.taskSupport`, a
`tools/call` with `task` answered with CreateTaskResult, tasks/get, tasks/result (which waits), tasks/list
and tasks/cancel, and the errors the revision names. 2026-07-28 with the tasks extension: `resultType:
"task"`, tasks/get with the result inline, tasks/cancel acknowledged. A hidden tool called with a task
param is answered exactly like an unknown one.
"""

from __future__ import annotations

import threading
import time
import unittest
from typing import Any

from agent_lab import ToolSpec
from agent_lab.registry import Registry

from test_mcp_server import ACTOR, MODERN_META, Pipe  # the tests' own pipe to a server thread (its actor may write notes)

WAIT_S = 10.0
EXPORT_SCHEMA = {"type": "object", "properties": {"rows": {"type": "integer"}, "request_id": {"type": "string"}},
                 "required": ["rows", "request_id"]}
TASK_META = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {
    "extensions": {"io.modelcontextprotocol/tasks": {}}}}


def build(gate: threading.Event, runs: list) -> Registry:
    registry = Registry()

    def export(arguments: dict) -> dict:
        runs.append(arguments)
        gate.wait(WAIT_S)
        return {"exported": arguments["rows"]}

    def spec(name: str, support: str, permission: str = "notes.write") -> ToolSpec:
        return ToolSpec(name=name, description="Exports a report.", input_schema=EXPORT_SCHEMA, effect="write",
                        idempotency_key="request_id", required_permission=permission, task_support=support,
                        output_schema={"type": "object", "properties": {"exported": {"type": "integer"}}})

    registry.register(spec("export", "optional"), export)
    registry.register(spec("export_always_task", "required"), export)
    registry.register(spec("export_now", "forbidden"), export)
    registry.register(spec("secret_export", "optional", permission="secrets"), export)
    return registry


class TaskServerCase(unittest.TestCase):
    def setUp(self) -> None:
        self.gate = threading.Event()
        self.runs: list = []
        self.registry = build(self.gate, self.runs)
        self.addCleanup(self.registry.close)
        self.pipe = Pipe(self.registry)
        self.addCleanup(self.pipe.close)
        self.addCleanup(self.gate.set)

    def call(self, name: str, key: str = "r-1", **extra: Any) -> dict:
        return self.pipe.request("tools/call", {"name": name, "arguments": {"rows": 3, "request_id": key}, **extra})

    def poll(self, task_id: str, meta: Any = None) -> dict:
        params: dict[str, Any] = {"taskId": task_id}
        if meta is not None:
            params["_meta"] = meta
        give_up = time.monotonic() + WAIT_S
        while True:
            answer = self.pipe.request("tasks/get", params)["result"]
            if answer["status"] != "working" or time.monotonic() > give_up:
                return answer
            time.sleep(0.02)


class HandshakeEraTest(TaskServerCase):
    def setUp(self) -> None:
        super().setUp()
        self.initialized = self.pipe.initialize("2025-11-25")["result"]

    def test_the_capability_and_each_tools_task_support_are_declared(self) -> None:
        self.assertEqual(self.initialized["capabilities"]["tasks"],
                         {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
        tools = {tool["name"]: tool for tool in self.pipe.request("tools/list")["result"]["tools"]}
        self.assertEqual(tools["export"]["execution"], {"taskSupport": "optional"})
        self.assertEqual(tools["export_always_task"]["execution"], {"taskSupport": "required"})
        self.assertNotIn("execution", tools["export_now"])
        self.assertNotIn("secret_export", tools)

    def test_a_task_call_is_created_polled_and_its_result_waited_for(self) -> None:
        created = self.call("export", task={"ttl": 60000})["result"]
        task = created["task"]
        self.assertEqual(task["status"], "working")
        self.assertTrue(task["taskId"].startswith("task-"))
        self.assertEqual(set(task), {"taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttl",
                                     "pollInterval"})
        self.assertEqual(self.pipe.request("tasks/get", {"taskId": task["taskId"]})["result"]["status"], "working")
        self.pipe.send({"jsonrpc": "2.0", "id": "wait", "method": "tasks/result", "params": {"taskId": task["taskId"]}})
        self.assertTrue(self.pipe.nothing_more(0.2))  # it waits for the task, and the reader stays free
        self.gate.set()
        answer = self.pipe.receive()
        self.assertEqual(answer["id"], "wait")
        self.assertEqual(answer["result"]["structuredContent"], {"exported": 3})
        self.assertEqual(answer["result"]["_meta"], {"io.modelcontextprotocol/related-task": {"taskId": task["taskId"]}})
        self.assertEqual(self.poll(task["taskId"])["status"], "completed")
        listed = self.pipe.request("tasks/list")["result"]["tasks"]
        self.assertEqual([each["taskId"] for each in listed], [task["taskId"]])

    def test_the_errors_the_revision_names(self) -> None:
        forbidden = self.call("export_now", task={})
        self.assertEqual(forbidden["error"]["code"], -32601)
        required = self.call("export_always_task")
        self.assertEqual(required["error"]["code"], -32601)
        unknown = self.pipe.request("tasks/get", {"taskId": "task-" + "0" * 32})
        self.assertEqual(unknown["error"]["code"], -32602)
        not_a_string = self.pipe.request("tasks/get", {"taskId": 7})
        self.assertEqual(not_a_string["error"]["code"], -32602)
        self.assertEqual(self.runs, [])

    def test_a_hidden_tool_with_a_task_param_is_answered_like_an_unknown_one(self) -> None:
        hidden = self.call("secret_export", task={})["error"]
        unknown = self.call("no_such_tool", task={})["error"]
        self.assertEqual((hidden["code"], hidden["message"]), (unknown["code"], unknown["message"]))
        self.assertEqual(hidden["data"]["code"], unknown["data"]["code"])

    def test_a_cancel_after_the_start_keeps_the_task_working_and_says_why_then_a_cancel_of_the_ended_is_refused(self) -> None:
        task_id = self.call("export", task={})["result"]["task"]["taskId"]
        give_up = time.monotonic() + WAIT_S
        while not self.runs and time.monotonic() < give_up:
            time.sleep(0.01)
        answer = self.pipe.request("tasks/cancel", {"taskId": task_id})["result"]
        self.assertEqual(answer["status"], "working")
        self.assertIn("had started", answer["statusMessage"])
        self.gate.set()
        self.assertEqual(self.poll(task_id)["status"], "completed")
        refused = self.pipe.request("tasks/cancel", {"taskId": task_id})
        self.assertEqual(refused["error"]["code"], -32602)
        self.assertEqual(refused["error"]["data"], {"status": "completed"})

    def test_the_end_of_input_lets_a_running_task_record_its_result(self) -> None:
        task_id = self.call("export", key="drain", task={})["result"]["task"]["taskId"]
        threading.Timer(0.2, self.gate.set).start()
        self.assertEqual(self.pipe.close(), 0)  # the server stops only once the task has ended
        done = self.registry.task(task_id, actor=ACTOR)
        self.assertEqual(done.status.value, "completed")
        self.assertEqual(done.result.output, {"exported": 3})

    def test_a_retried_key_answers_the_same_task(self) -> None:
        first = self.call("export", key="same", task={})["result"]["task"]["taskId"]
        second = self.call("export", key="same", task={})["result"]["task"]["taskId"]
        self.assertEqual(first, second)
        self.gate.set()
        self.poll(first)
        self.assertEqual(len(self.runs), 1)


class ModernEraTest(TaskServerCase):
    def modern(self, method: str, params: dict, meta: Any = None) -> dict:
        return self.pipe.request(method, {**params, "_meta": TASK_META if meta is None else meta})

    def test_the_extension_is_declared_and_a_call_answers_a_task_then_its_result_inline(self) -> None:
        discovered = self.modern("server/discover", {})["result"]
        self.assertIn("io.modelcontextprotocol/tasks", discovered["capabilities"]["extensions"])
        created = self.modern("tools/call", {"name": "export", "arguments": {"rows": 4, "request_id": "m-1"}})["result"]
        self.assertEqual(created["resultType"], "task")
        self.assertEqual(created["status"], "working")
        self.gate.set()
        done = self.poll(created["taskId"], meta=TASK_META)
        self.assertEqual(done["status"], "completed")
        self.assertEqual(done["result"]["structuredContent"], {"exported": 4})
        self.assertEqual(done["resultType"], "complete")

    def test_a_client_without_the_extension_gets_the_result_and_a_required_tool_refuses_it(self) -> None:
        self.gate.set()
        plain = self.modern("tools/call", {"name": "export", "arguments": {"rows": 1, "request_id": "m-2"}},
                            meta=MODERN_META)["result"]
        self.assertEqual(plain["resultType"], "complete")
        self.assertEqual(plain["structuredContent"], {"exported": 1})
        refused = self.modern("tools/call", {"name": "export_always_task",
                                             "arguments": {"rows": 1, "request_id": "m-3"}}, meta=MODERN_META)
        self.assertEqual(refused["error"]["code"], -32602)

    def test_a_cancel_is_acknowledged_whatever_the_id(self) -> None:
        self.assertEqual(self.modern("tasks/cancel", {"taskId": "task-" + "1" * 32})["result"]["resultType"],
                         "complete")


class NoTaskToolsTest(unittest.TestCase):
    def test_a_server_without_task_tools_declares_no_tasks(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(ToolSpec(name="ping_tool", description="Answers.", input_schema={"type": "object"}),
                          lambda arguments: {})
        pipe = Pipe(registry)
        self.addCleanup(pipe.close)
        self.assertEqual(pipe.initialize("2025-11-25")["result"]["capabilities"], {"tools": {"listChanged": False}})
        self.assertEqual(pipe.request("tasks/list")["result"], {"tasks": []})


if __name__ == "__main__":
    unittest.main()
