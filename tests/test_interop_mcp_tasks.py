"""The official MCP Python SDK client, through the contract gateway over stdio, with a long call run as a task.

The upstream (tests/mcp_tasks_upstream.py, built with the SDK's server) knows nothing of tasks and logs
every call that reaches it; the gateway's policy gives its `long_export` `task_support = "optional"`,
so the gateway holds the upstream call and keeps the task in its SQLite receipt store.

The SDK (2.x) carries the 2025-11-25 task types (`CallToolRequestParams.task`, `CreateTaskResult`,
`GetTaskRequest`, ...) but no client helper that sends them, so the tests send them with the session's
own `send_request` and the SDK's own types, and the answers are validated by the SDK's result models.
One exception: `send_request` checks every tools/call answer as a CallToolResult, so the task-augmented
tools/call goes through the session's dispatcher (`send_raw_request`, the same connection) and its
answer is validated with the SDK's CreateTaskResult. On 2026-07-28 the SDK's own extension API
(`ClientExtension` with a `ResultClaim` for `resultType: "task"`) is used as a client of the tasks
extension would use it: `call_tool` returns the tool's result after polling the task.
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

try:
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client

    MCP_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    MCP_MISSING = f"the MCP Python SDK is not importable ({exc}); pip install mcp"

REPO_ROOT = Path(__file__).resolve().parent.parent
POLICY = REPO_ROOT / "tests" / "fixtures" / "gateway" / "tasks-policy.json"
UPSTREAM = REPO_ROOT / "tests" / "mcp_tasks_upstream.py"
SESSION_TIMEOUT_S = 90.0
WAIT_S = 60.0  # a hang guard, never a timing assertion


def protocol_error_type() -> Any:
    from mcp.shared import exceptions

    return getattr(exceptions, "MCPError", None) or getattr(exceptions, "McpError")


class GatewayTaskCase(unittest.TestCase):
    """A scratch folder (the upstream's log, the gateway's SQLite receipts) and a gateway per session."""

    def setUp(self) -> None:
        scratch = tempfile.TemporaryDirectory(prefix="agent-lab-tasks-")
        self.addCleanup(scratch.cleanup)
        self.scratch = Path(scratch.name)
        self.log = self.scratch / "calls.log"

    def gateway(self, pause_s: float = 1.0, *who: str) -> Any:
        upstream = " ".join(shlex.quote(word) for word in (sys.executable, str(UPSTREAM), str(self.log), str(pause_s)))
        args = ["run_lab.py", "serve-mcp", "--upstream", upstream, "--policy", str(POLICY),
                "--receipts", f"sqlite:{self.scratch / 'receipts.db'}", "--permission", "reports:write", *who]
        return StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO_ROOT))

    def upstream_lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def session(self, scenario: Any, pause_s: float = 1.0, who: tuple[str, ...] = ()) -> Any:
        async def main() -> Any:
            async with stdio_client(self.gateway(pause_s, *who)) as (read_stream, write_stream):
                async with ClientSession(read_stream, write_stream) as session:
                    initialized = await session.initialize()
                    return await scenario(session, initialized)

        return asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S))

    @staticmethod
    async def start_task(session: Any, rows: int, key: str) -> Any:
        """tools/call with the `task` param. The SDK's `send_request` checks every tools/call answer as a
        CallToolResult (its 2.x client has no task support), so this one request goes through the
        session's dispatcher, and its answer is validated with the SDK's own CreateTaskResult."""
        params = types.CallToolRequestParams(name="long_export", arguments={"rows": rows, "request_id": key},
                                             task=types.TaskMetadata(ttl=60_000))
        request = types.CallToolRequest(params=params).model_dump(by_alias=True, mode="json", exclude_none=True)
        raw = await session._dispatcher.send_raw_request("tools/call", request["params"], {})  # noqa: SLF001
        return types.CreateTaskResult.model_validate(raw, by_name=False)

    @staticmethod
    async def get_task(session: Any, task_id: str) -> Any:
        return await session.send_request(types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)),
                                          types.GetTaskResult)



@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class GatewayTaskTest(GatewayTaskCase):
    def test_a_long_call_is_accepted_as_a_task_and_polled_to_completion_across_a_gateway_restart(self) -> None:
        async def before_restart(session: Any, initialized: Any) -> Any:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            created = await self.start_task(session, 5, "export-1")
            working = await self.get_task(session, created.task.task_id)
            give_up = time.monotonic() + WAIT_S
            while "finished 5" not in self.upstream_lines() and time.monotonic() < give_up:
                await asyncio.sleep(0.05)  # the upstream call ends while this gateway still runs
            return initialized, tools["long_export"], created, working

        initialized, tool, created, working = self.session(before_restart)
        self.assertIsNotNone(initialized.capabilities.tasks)
        self.assertEqual(tool.execution.task_support, "optional")
        self.assertEqual(created.task.status, "working")
        self.assertEqual(working.status, "working")
        task_id = created.task.task_id

        async def after_restart(session: Any, initialized: Any) -> Any:
            give_up = time.monotonic() + WAIT_S
            polled = await self.get_task(session, task_id)
            while polled.status == "working" and time.monotonic() < give_up:
                await asyncio.sleep(0.1)
                polled = await self.get_task(session, task_id)
            result = await session.send_request(
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
                types.CallToolResult)
            retried = await self.start_task(session, 5, "export-1")
            return polled, result, retried

        polled, result, retried = self.session(after_restart)
        self.assertEqual(polled.status, "completed")
        self.assertFalse(result.is_error)
        self.assertEqual(result.structured_content, {"exported": 5})
        self.assertEqual(retried.task.task_id, task_id)  # the same key: the same task, no second run
        self.assertEqual(self.upstream_lines(), ["started 5", "finished 5"])

    def test_an_unknown_task_id_and_the_cancel_of_a_finished_task_are_refused_and_the_list_shows_it(self) -> None:
        async def scenario(session: Any, initialized: Any) -> Any:
            refusals = []
            for request in (types.GetTaskRequest(params=types.GetTaskRequestParams(task_id="task-" + "0" * 32)),):
                try:
                    await session.send_request(request, types.GetTaskResult)
                except protocol_error_type() as error:
                    refusals.append(error.error.code)
            created = await self.start_task(session, 1, "export-2")
            task_id = created.task.task_id
            give_up = time.monotonic() + WAIT_S
            polled = await self.get_task(session, task_id)
            while polled.status == "working" and time.monotonic() < give_up:
                await asyncio.sleep(0.1)
                polled = await self.get_task(session, task_id)
            try:
                await session.send_request(
                    types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
                    types.CancelTaskResult)
            except protocol_error_type() as error:
                refusals.append(error.error.code)
            listed = await session.send_request(types.ListTasksRequest(), types.ListTasksResult)
            return refusals, polled, listed

        refusals, polled, listed = self.session(scenario, pause_s=0.1)
        self.assertEqual(refusals, [-32602, -32602])  # an unknown task; a cancel after the effect committed
        self.assertEqual(polled.status, "completed")  # the cancel did not turn it into "cancelled"
        self.assertEqual([task.task_id for task in listed.tasks], [polled.task_id])

    def test_a_gateway_of_another_tenant_or_actor_on_the_same_store_cannot_read_or_cancel_the_task(self) -> None:
        async def start(session: Any, initialized: Any) -> Any:
            task_id = (await self.start_task(session, 2, "export-3")).task.task_id
            give_up = time.monotonic() + WAIT_S
            while "finished 2" not in self.upstream_lines() and time.monotonic() < give_up:
                await asyncio.sleep(0.05)  # then this gateway stops gracefully, its task recorded
            return task_id

        task_id = self.session(start, pause_s=0.5)

        async def stranger(session: Any, initialized: Any) -> Any:
            codes = []
            for request, result_type in (
                    (types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult),
                    (types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
                     types.CancelTaskResult)):
                try:
                    await session.send_request(request, result_type)
                except protocol_error_type() as error:
                    codes.append(error.error.code)
            return codes

        for who in (("--tenant", "globex"), ("--actor-id", "someone-else")):
            self.assertEqual(self.session(stranger, who=who), [-32602, -32602])  # exactly like an unknown id

        async def owner(session: Any, initialized: Any) -> Any:
            give_up = time.monotonic() + WAIT_S
            polled = await self.get_task(session, task_id)
            while polled.status == "working" and time.monotonic() < give_up:
                await asyncio.sleep(0.1)
                polled = await self.get_task(session, task_id)
            return polled

        self.assertEqual(self.session(owner).status, "completed")  # the strangers' cancels changed nothing
        self.assertEqual(self.upstream_lines(), ["started 2", "finished 2"])


if __name__ == "__main__":
    unittest.main()


def tasks_extension() -> Any:
    """A client extension for `io.modelcontextprotocol/tasks` written against the SDK's own extension API
    (`ClientExtension`, `ResultClaim`): it claims `resultType: "task"` on tools/call and resolves it by
    polling tasks/get until the task is terminal, then hands back the inlined CallToolResult."""
    from typing import Literal

    from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
    from mcp_types import Result
    from pydantic import ConfigDict, Field, TypeAdapter

    class TaskHandle(Result):
        model_config = ConfigDict(extra="allow")
        result_type: Literal["task"] = Field(alias="resultType")
        task_id: str = Field(alias="taskId")
        status: str

    polled: list[str] = []

    async def resolve(handle: TaskHandle, context: ClaimContext) -> Any:
        polled.append(handle.status)
        give_up = time.monotonic() + WAIT_S
        while True:
            request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=handle.task_id))
            task = await context.session.send_request(request, TypeAdapter(dict[str, Any]))
            polled.append(task["status"])
            if task["status"] != "working" or time.monotonic() > give_up:
                return types.CallToolResult.model_validate(task["result"], by_name=False)
            await asyncio.sleep(task.get("pollIntervalMs", 500) / 1000.0)

    class Tasks(ClientExtension):
        identifier = "io.modelcontextprotocol/tasks"

        def claims(self) -> Any:
            return (ResultClaim(result_type="task", model=TaskHandle, resolve=resolve),)

    return Tasks(), polled


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class StatelessGatewayTaskTest(GatewayTaskCase):
    def test_a_2026_07_28_client_with_the_tasks_extension_gets_the_result_through_the_task(self) -> None:
        import mcp

        extension, polled = tasks_extension()

        async def main() -> Any:
            async with mcp.Client(self.gateway(0.5), extensions=[extension]) as client:
                assert client.session.protocol_version == "2026-07-28"
                return await client.call_tool("long_export", {"rows": 8, "request_id": "modern-1"})

        result = asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S))
        self.assertFalse(result.is_error)
        self.assertEqual(result.structured_content, {"exported": 8})
        self.assertEqual((polled[0], polled[-1]), ("working", "completed"))  # a task handle, polled to its end
        self.assertEqual(self.upstream_lines(), ["started 8", "finished 8"])
