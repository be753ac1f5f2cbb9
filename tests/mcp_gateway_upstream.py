"""An upstream for the gateway's tests, built with the official MCP Python SDK (`mcp`), that counts its
calls: `python mcp_gateway_upstream.py COUNT_FILE`. Every call of a tool appends one line naming the tool
to COUNT_FILE, so a test reads how many calls really reached the upstream.

`record_note` is a write (the gateway's policy adds an idempotency key to it); `confirm_transfer` needs
approval under the policy; `get_profile` answers a field the policy redacts; `get_reading` answers
something that breaks its own outputSchema; `admin_reset` needs a permission the gateway's actor lacks;
`slow_write` sleeps before it answers (the load test).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TypedDict

from mcp.server import MCPServer

COUNT_FILE = sys.argv[1] if len(sys.argv) > 1 else "calls.log"
server = MCPServer("counting-upstream")
_lock = threading.Lock()


def _count(tool: str, detail: str = "") -> None:
    with _lock, open(COUNT_FILE, "a", encoding="utf-8") as calls:
        calls.write(f"{tool} {detail}".rstrip() + "\n")


class Note(TypedDict):
    recorded: str


class Transfer(TypedDict):
    account: str
    moved: int


class Profile(TypedDict):
    user: str
    api_token: str


class Item(TypedDict):
    item: str


class Reading(TypedDict):
    celsius: str  # what it really returns; it advertises a number (see the end of the module)


@server.tool()
def record_note(note: str) -> Note:
    """Record a note; every call records one more."""
    _count("record_note")
    return {"recorded": note}


@server.tool()
def confirm_transfer(account: str, amount: int) -> Transfer:
    """Move money from the account; needs a person's approval."""
    _count("confirm_transfer")
    return {"account": account, "moved": amount}


@server.tool()
def get_profile(user: str) -> Profile:
    """A user's profile, with their API token."""
    _count("get_profile")
    return {"user": user, "api_token": "tok-live-5f3c9a"}


@server.tool()
def get_reading(sensor: str) -> Reading:
    """One sensor reading in degrees Celsius."""
    _count("get_reading")
    return {"celsius": "very hot"}


@server.tool()
def admin_reset(confirm: bool) -> dict:
    """Reset everything."""
    _count("admin_reset")
    return {"reset": confirm}


@server.tool()
def slow_write(item: str) -> Item:
    """A write that takes a while."""
    _count("slow_write", item)
    time.sleep(0.2)
    return {"item": item}


# The lie the gateway must catch: the listing says celsius is a number, the answer carries a string.
server._tool_manager.get_tool("get_reading").fn_metadata.output_schema = {  # noqa: SLF001 - on purpose
    "type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]}

if __name__ == "__main__":
    server.run()
