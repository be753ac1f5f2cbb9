"""The ticket lab with one more tool on its candidate: a lab whose candidate catalog differs from the
shipped one (test_tool_eval_shards merges a shard of it with shards of the ticket lab, and is refused).
A module of its own, so a crash case's child process can import the lab by its file."""

from __future__ import annotations

import dataclasses
from typing import Any

from agent_lab import ToolSpec
from agent_lab.lab.definition import Surface
from agent_lab.lab.tickets import lab as ticket_lab
from agent_lab.lab.tickets.candidate import CANDIDATE_NAME, build_candidate_registry


def build_with_one_more_tool(world: Any, **options: Any) -> Any:
    registry = build_candidate_registry(world, **options)
    registry.register(ToolSpec(name="ping", description="Answer pong; changes nothing.",
                               input_schema={"type": "object", "additionalProperties": False},
                               output_schema={"type": "object"}), lambda arguments: {})
    return registry


lab = dataclasses.replace(ticket_lab, surfaces=[
    surface if surface.baseline else Surface(CANDIDATE_NAME, build_with_one_more_tool)
    for surface in ticket_lab.surfaces])
