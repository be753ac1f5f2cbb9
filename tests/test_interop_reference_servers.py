"""Live: the reference MCP servers, installed from PyPI and npm, and the hostile test server, read through
the official MCP Python SDK client (tests/mcp_reference_servers.py), then linted and locked.

Each reference server lints with no error-level finding as it runs now; when it is the version the
committed capture came from, its contracts hash exactly as the capture's do (the fixtures are what the
server sends). The hostile server (tests/fixtures/mcp_hostile/server.py) is caught, and its rug pull,
locked before and listed after, fails `lint --lock`. Skipped, with the reason, when the SDK or a server
is absent (set MCP_SERVERS_PATH); .ci/run installs them, and there none may skip.
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

from agent_lab.contract import definitions_from_mcp
from agent_lab.lint import lint_catalog, lint_surfaces
from agent_lab.lockfile import Lockfile
from mcp_reference_servers import SERVERS, capture, capture_command, load_fixture, missing_reason

HOSTILE_SERVER = str(Path(__file__).resolve().parent / "fixtures" / "mcp_hostile" / "server.py")


def sdk_missing() -> str | None:
    try:
        import mcp  # noqa: F401
    except ImportError as error:
        return f"the MCP Python SDK is not importable ({error}); pip install mcp"
    return None


class ReferenceServersLiveTest(unittest.TestCase):
    def test_each_server_lints_clean_and_matches_its_capture_when_the_version_is_the_same(self) -> None:
        for server in SERVERS:
            with self.subTest(server=server.name):
                reason = missing_reason(server)
                if reason is not None:
                    self.skipTest(reason)
                live = capture(server)
                report = lint_surfaces([(server.name, definitions_from_mcp(live["tools"]))])
                self.assertTrue(live["tools"])
                self.assertEqual([f"{f.rule} {f.tool}{f.pointer}" for f in report.errors], [])
                fixture = load_fixture(server)
                if live["server"] == fixture["server"]:
                    lock = Lockfile.from_surfaces([(server.name, fixture["tools"])])
                    drifted = [tool["name"] for tool in live["tools"] if not lock.verdict(tool).matches]
                    self.assertEqual(drifted, [])


@unittest.skipIf(sdk_missing() is not None, sdk_missing() or "")
class HostileServerLiveTest(unittest.TestCase):
    def listing(self, variant: str) -> list:
        return capture_command(sys.executable, [HOSTILE_SERVER, variant])["tools"]  # type: ignore[no-any-return]

    def test_the_hostile_listing_is_caught_and_the_clean_one_is_not(self) -> None:
        hostile = {f.rule for f in lint_catalog(definitions_from_mcp(self.listing("hostile")))}
        self.assertTrue({"AL104", "AL205", "AL206", "AL207", "AL303", "AL304", "AL308"} <= hostile)
        clean = lint_catalog(definitions_from_mcp(self.listing("clean")))
        self.assertEqual([f.rule for f in clean if f.severity.value == "error"], [])

    def test_a_rug_pull_between_lock_and_lint_is_caught(self) -> None:
        lock = Lockfile.from_surfaces([("hostile-fixture", self.listing("reviewed"))])
        report = lint_surfaces([("hostile-fixture", definitions_from_mcp(self.listing("pulled")))], lock=lock)
        self.assertTrue({"AL601", "AL602", "AL604", "AL606"} <= {f.rule for f in report.errors})


if __name__ == "__main__":
    unittest.main()
