"""The official MCP Python SDK client, through the contract gateway over Streamable HTTP, with a long call
run as a task that outlives the gateway process that accepted it.

As in tests/test_interop_mcp_tasks.py (the same slow counting upstream, tests/mcp_tasks_upstream.py, and
the same policy giving `long_export` `task_support = "optional"`), but each gateway is a real
`serve-mcp --http 127.0.0.1:0` process: the task is accepted by one, that process is stopped (SIGTERM),
and a new one on the same SQLite receipts, at its own URL and with a new session, answers for it.
Another actor's or tenant's gateway on the same store reads the task as unknown; over one gateway,
`tasks/result` waits for a running task and a cancel that comes after the call started is not reported
as "cancelled".

The handshake era (2025-11-25) sends the task requests the way the stdio test does (the SDK's types, and
its session's dispatcher for the task-augmented tools/call). On 2026-07-28 the tasks extension is the
stdio test's `ClientExtension`; the first call asks the SDK for the claimed shape itself
(`allow_claimed=True`), so the test holds the task handle while the gateway is replaced.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any

from tests.mcp_http_support import RunningServer, http_server

try:
    import mcp
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    from pydantic import TypeAdapter

    from tests import test_interop_mcp_tasks as over_stdio

    MCP_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    MCP_MISSING = f"the MCP Python SDK is not importable ({exc}); pip install mcp"

REPO_ROOT = Path(__file__).resolve().parent.parent
POLICY = REPO_ROOT / "tests" / "fixtures" / "gateway" / "tasks-policy.json"
UPSTREAM = REPO_ROOT / "tests" / "mcp_tasks_upstream.py"
SESSION_TIMEOUT_S = 90.0
WAIT_S = 60.0  # a hang guard, never a timing assertion
UNKNOWN = -32602  # the JSON-RPC code of an unknown task id (another actor's or tenant's alike)


class HttpTaskCase(unittest.TestCase):
    """A scratch folder (the upstream's log, the SQLite receipts shared by every gateway of a test)."""

    def setUp(self) -> None:
        scratch = tempfile.TemporaryDirectory(prefix="agent-lab-tasks-http-")
        self.addCleanup(scratch.cleanup)
        self.scratch = Path(scratch.name)
        self.log = self.scratch / "calls.log"

    def gateway(self, pause_s: float = 1.0, *who: str) -> Any:
        """A `serve-mcp --http` gateway process on the shared store; SIGTERM and wait when the block ends."""
        upstream = " ".join(shlex.quote(word) for word in (sys.executable, str(UPSTREAM), str(self.log), str(pause_s)))
        return http_server(["--upstream", upstream, "--policy", str(POLICY),
                            "--receipts", f"sqlite:{self.scratch / 'receipts.db'}",
                            "--permission", "reports:write", *who])

    def upstream_lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    async def upstream_reached(self, line: str) -> None:
        give_up = time.monotonic() + WAIT_S
        while line not in self.upstream_lines() and time.monotonic() < give_up:
            await asyncio.sleep(0.05)

    def stopped(self, server: RunningServer) -> None:
        """The gateway process ended on its own after the SIGTERM (exit code 0), not killed."""
        self.assertEqual(server.process.returncode, 0, "".join(server.log))

    @staticmethod
    def handshake(server: RunningServer, scenario: Any) -> Any:
        async def main() -> Any:
            async with streamable_http_client(server.url) as (read_stream, write_stream):
                async with ClientSession(read_stream, write_stream) as session:
                    initialized = await session.initialize()
                    return await scenario(session, initialized)

        return asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S))


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class HandshakeEraTaskOverHttpTest(HttpTaskCase):
    @staticmethod
    async def poll(session: Any, task_id: str) -> Any:
        give_up = time.monotonic() + WAIT_S
        polled = await over_stdio.GatewayTaskCase.get_task(session, task_id)
        while polled.status == "working" and time.monotonic() < give_up:
            await asyncio.sleep(0.1)
            polled = await over_stdio.GatewayTaskCase.get_task(session, task_id)
        return polled

    def test_a_long_call_is_accepted_as_a_task_and_polled_to_completion_on_a_restarted_gateway(self) -> None:
        async def before_restart(session: Any, initialized: Any) -> Any:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            created = await over_stdio.GatewayTaskCase.start_task(session, 5, "export-http-1")
            working = await over_stdio.GatewayTaskCase.get_task(session, created.task.task_id)
            await self.upstream_reached("started 5")  # then SIGTERM while the upstream still runs the call
            return initialized, tools["long_export"], created, working

        with self.gateway(1.0) as first:
            initialized, tool, created, working = self.handshake(first, before_restart)
        self.stopped(first)  # a graceful stop waits for the running task and records its result
        self.assertIsNotNone(initialized.capabilities.tasks)
        self.assertEqual(tool.execution.task_support, "optional")
        self.assertEqual(created.task.status, "working")
        self.assertEqual(working.status, "working")
        task_id = created.task.task_id

        async def after_restart(session: Any, initialized: Any) -> Any:
            polled = await self.poll(session, task_id)
            result = await session.send_request(
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
                types.CallToolResult)
            retried = await over_stdio.GatewayTaskCase.start_task(session, 5, "export-http-1")
            return polled, result, retried

        with self.gateway(1.0) as second:
            polled, result, retried = self.handshake(second, after_restart)
        self.assertEqual(polled.status, "completed")
        self.assertFalse(result.is_error)
        self.assertEqual(result.structured_content, {"exported": 5})
        self.assertEqual(retried.task.task_id, task_id)  # the same key: the same task, no second run
        self.assertEqual(self.upstream_lines(), ["started 5", "finished 5"])

    def test_tasks_result_waits_for_a_running_task_and_a_late_cancel_leaves_its_effect_standing(self) -> None:
        async def scenario(session: Any, initialized: Any) -> Any:
            task_id = (await over_stdio.GatewayTaskCase.start_task(session, 4, "export-http-3")).task.task_id
            await self.upstream_reached("started 4")
            cancelled = await session.send_request(
                types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)), types.CancelTaskResult)
            result = await session.send_request(  # answered on its own POST once the task ends
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
                types.CallToolResult)
            return cancelled, result, await over_stdio.GatewayTaskCase.get_task(session, task_id)

        with self.gateway(1.0) as server:
            cancelled, result, ended = self.handshake(server, scenario)
        self.assertEqual(cancelled.status, "working")  # the call had started: not reported "cancelled"
        self.assertIn("effect stands", cancelled.status_message)
        self.assertEqual(result.structured_content, {"exported": 4})
        self.assertEqual(ended.status, "completed")
        self.assertEqual(self.upstream_lines(), ["started 4", "finished 4"])

    def test_another_tenants_or_actors_gateway_on_the_same_store_reads_the_task_as_unknown(self) -> None:
        async def start(session: Any, initialized: Any) -> str:
            task_id = (await over_stdio.GatewayTaskCase.start_task(session, 2, "export-http-2")).task.task_id
            await self.upstream_reached("finished 2")
            return str(task_id)

        with self.gateway(0.3) as owners:
            task_id = self.handshake(owners, start)

        async def stranger(session: Any, initialized: Any) -> list[int]:
            codes = []
            for request, result_type in (
                    (types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult),
                    (types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
                     types.CallToolResult),
                    (types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
                     types.CancelTaskResult),
                    (types.GetTaskRequest(params=types.GetTaskRequestParams(task_id="task-" + "0" * 32)),
                     types.GetTaskResult)):
                try:
                    await session.send_request(request, result_type)
                except over_stdio.protocol_error_type() as error:
                    codes.append(error.error.code)
            listed = await session.send_request(types.ListTasksRequest(), types.ListTasksResult)
            return codes + [len(listed.tasks)]

        for who in (("--tenant", "globex"), ("--actor-id", "someone-else")):
            with self.gateway(0.3, *who) as strangers:
                self.assertEqual(self.handshake(strangers, stranger), [UNKNOWN] * 4 + [0])  # like an unknown id

        async def owner(session: Any, initialized: Any) -> Any:
            return await self.poll(session, task_id)

        with self.gateway(0.3) as owners_again:
            self.assertEqual(self.handshake(owners_again, owner).status, "completed")  # the cancels changed nothing
        self.assertEqual(self.upstream_lines(), ["started 2", "finished 2"])


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class StatelessTaskOverHttpTest(HttpTaskCase):
    def modern(self, server: RunningServer, scenario: Any) -> Any:
        extension, polled = over_stdio.tasks_extension()

        async def main() -> Any:
            async with mcp.Client(server.url, extensions=[extension]) as client:
                assert client.session.protocol_version == "2026-07-28"
                return await scenario(client)

        return asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S)), polled

    @staticmethod
    async def get_task(client: Any, task_id: str) -> dict[str, Any]:
        request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
        answer: dict[str, Any] = await client.session.send_request(request, TypeAdapter(dict[str, Any]))
        return answer

    def test_a_2026_07_28_task_handle_is_polled_to_its_inline_result_on_a_restarted_gateway(self) -> None:
        async def accept(client: Any) -> Any:
            handle = await client.session.call_tool("long_export", {"rows": 6, "request_id": "modern-http-1"},
                                                    allow_claimed=True)  # the task handle itself, not resolved
            await self.upstream_reached("started 6")
            return handle

        with self.gateway(1.0) as first:
            handle, _ = self.modern(first, accept)
        self.stopped(first)
        self.assertEqual((handle.result_type, handle.status), ("task", "working"))

        async def poll(client: Any) -> dict[str, Any]:
            give_up = time.monotonic() + WAIT_S
            task = await self.get_task(client, handle.task_id)
            while task["status"] == "working" and time.monotonic() < give_up:
                await asyncio.sleep(0.1)
                task = await self.get_task(client, handle.task_id)
            return task

        with self.gateway(1.0) as second:
            task, _ = self.modern(second, poll)
        self.assertEqual(task["status"], "completed")
        result = types.CallToolResult.model_validate(task["result"], by_name=False)
        self.assertFalse(result.is_error)
        self.assertEqual(result.structured_content, {"exported": 6})
        self.assertEqual(self.upstream_lines(), ["started 6", "finished 6"])

    def test_the_sdk_clients_tasks_extension_gets_the_result_through_the_task_and_a_retry_runs_nothing(self) -> None:
        async def call(client: Any) -> Any:
            return await client.call_tool("long_export", {"rows": 3, "request_id": "modern-http-2"})

        with self.gateway(0.5) as server:
            (result, polled) = self.modern(server, call)
            (again, polled_again) = self.modern(server, call)
        for answer in (result, again):
            self.assertFalse(answer.is_error)
            self.assertEqual(answer.structured_content, {"exported": 3})
        self.assertEqual((polled[0], polled[-1]), ("working", "completed"))  # a task handle, polled to its end
        self.assertEqual(polled_again[-1], "completed")
        self.assertEqual(self.upstream_lines(), ["started 3", "finished 3"])


if __name__ == "__main__":
    unittest.main()
