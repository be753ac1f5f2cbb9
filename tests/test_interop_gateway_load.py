"""Bounded load through the contract gateway on loopback (issue 23, item 5).

Several gateway processes (`serve-mcp --upstream`, one SQLite receipt store shared by all) each in front
of its own copy of a slow upstream built with the official SDK's server (tests/mcp_gateway_upstream.py,
`slow_write` sleeps 0.2 s and appends one line per run to a count file all copies share). Many client
threads send keyed writes at once, each key from several threads through different gateways, retrying
while the registry answers `idempotency_in_progress`. The contract: every key runs on the upstream
exactly once, every client gets the same answer for its key, and the gateways' memory stays bounded.
The figures (wall time, calls, RSS before and after) are printed, never asserted on time.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from collections import Counter
from pathlib import Path
from typing import Any

try:
    import mcp  # noqa: F401 - the upstream is an official-SDK server

    MCP_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    MCP_MISSING = f"the MCP Python SDK is not importable ({exc}); pip install mcp"

REPO_ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = REPO_ROOT / "tests" / "mcp_gateway_upstream.py"
POLICY = REPO_ROOT / "tests" / "fixtures" / "gateway" / "counting-policy.json"
GATEWAYS = 4
CLIENT_THREADS = 40
KEYS = 12
CALLS_PER_THREAD = 6
MAX_RSS_GROWTH_KB = 64 * 1024  # far above what the calls need; a leak per call would pass it
ANSWER_TIMEOUT_S = 120.0


class RawGateway:
    """One gateway process and a line client over its stdio that many threads share (answers are
    matched to requests by id, as JSON-RPC does)."""

    def __init__(self, scratch: Path, count_file: Path) -> None:
        upstream = " ".join(shlex.quote(word) for word in (sys.executable, str(UPSTREAM), str(count_file)))
        self.process = subprocess.Popen(
            [sys.executable, "run_lab.py", "serve-mcp", "--upstream", upstream, "--policy", str(POLICY),
             "--receipts", f"sqlite:{scratch / 'receipts.db'}", "--permission", "notes:write"],
            cwd=str(REPO_ROOT), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lock = threading.Lock()
        self.waiting: dict[int, Any] = {}
        self.ids = iter(range(1, 10**9))
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            slot = self.waiting.get(message.get("id"))
            if slot is not None:
                slot[1] = message
                slot[0].set()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            request_id = next(self.ids)
            slot = [threading.Event(), None]
            self.waiting[request_id] = slot
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if not slot[0].wait(ANSWER_TIMEOUT_S):
            raise AssertionError(f"no answer to {method} in {ANSWER_TIMEOUT_S} s")
        with self.lock:
            del self.waiting[request_id]
        return slot[1]  # type: ignore[return-value]

    def rss_kb(self) -> int:
        with open(f"/proc/{self.process.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(10)
        assert self.process.stdout is not None
        self.process.stdout.close()


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
@unittest.skipUnless(os.path.exists("/proc/self/status"), "RSS is read from /proc")
class GatewayLoadTest(unittest.TestCase):
    def test_many_clients_many_gateways_one_upstream_run_per_key_and_bounded_memory(self) -> None:
        scratch_dir = tempfile.TemporaryDirectory(prefix="agent-lab-gw-load-")
        self.addCleanup(scratch_dir.cleanup)
        scratch = Path(scratch_dir.name)
        count_file = scratch / "calls.log"
        gateways = [RawGateway(scratch, count_file) for _ in range(GATEWAYS)]
        for gateway in gateways:
            self.addCleanup(gateway.close)
        for gateway in gateways:  # warm each up (imports, the upstream's first call path) before measuring
            warm = gateway.request("tools/list", {})
            self.assertIn("slow_write", {tool["name"] for tool in warm["result"]["tools"]})
        rss_before = [gateway.rss_kb() for gateway in gateways]
        answers: dict[str, set[str]] = {}
        answers_lock = threading.Lock()
        in_progress = Counter[str]()
        failures: list[str] = []

        def client(number: int) -> None:
            gateway = gateways[number % GATEWAYS]
            for call in range(CALLS_PER_THREAD):
                key = f"key-{(number + call) % KEYS}"
                arguments = {"item": key, "request_id": key}
                while True:
                    try:
                        reply = gateway.request("tools/call", {"name": "slow_write", "arguments": arguments})
                    except AssertionError as error:
                        failures.append(str(error))
                        return
                    result = reply.get("result") or {}
                    if result.get("isError"):
                        error = json.loads(result["content"][0]["text"])["error"]
                        if error["code"] == "idempotency_in_progress":
                            with answers_lock:
                                in_progress[key] += 1
                            time.sleep(0.05)
                            continue
                        failures.append(error["code"])
                        return
                    if "error" in reply:
                        failures.append(str(reply["error"]))
                        return
                    with answers_lock:
                        answers.setdefault(key, set()).add(json.dumps(result["structuredContent"], sort_keys=True))
                    break

        started = time.perf_counter()
        threads = [threading.Thread(target=client, args=(number,)) for number in range(CLIENT_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(ANSWER_TIMEOUT_S * 2)
        elapsed = time.perf_counter() - started
        rss_after = [gateway.rss_kb() for gateway in gateways]

        self.assertEqual(failures, [])
        runs = Counter(line.split()[1] for line in count_file.read_text(encoding="utf-8").splitlines()
                       if line.startswith("slow_write "))
        self.assertEqual(runs, Counter({f"key-{key}": 1 for key in range(KEYS)}))  # exactly one run per key
        self.assertEqual({key: len(seen) for key, seen in answers.items()}, {f"key-{key}": 1 for key in range(KEYS)})
        for before, after in zip(rss_before, rss_after):
            self.assertLess(after - before, MAX_RSS_GROWTH_KB)
        print(f"\ngateway load: {GATEWAYS} gateways, {CLIENT_THREADS} client threads, "
              f"{CLIENT_THREADS * CALLS_PER_THREAD} keyed calls over {KEYS} keys in {elapsed:.2f} s; "
              f"upstream runs {sum(runs.values())}; in-progress answers retried {sum(in_progress.values())}; "
              f"gateway RSS before {rss_before} KB, after {rss_after} KB", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
