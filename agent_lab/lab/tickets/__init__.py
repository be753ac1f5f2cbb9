"""The ticket lab: our demo and reference lab, `agent_lab.lab.tickets:lab`.

A ticket system (`TicketBackend`: 25 tickets of two tenants, a secret customer email on each) seen
through two surfaces: `wide-tool-v1`, one free-form `ticket_operation` tool (the baseline many agents
start with), and `typed-registry-v2`, seven small typed tools with runtime contracts (the candidate).
Its cases ship with the package (`tool-cases.jsonl`, identical to the repository's
`datasets/tool-cases.jsonl`), so `agent-lab tool-eval` runs it from any directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...policy import Actor
from ..definition import Lab, Surface
from .baseline import BASELINE_NAME, build_baseline_registry
from .candidate import CANDIDATE_NAME, build_candidate_registry
from .world import TicketBackend

__all__ = ["CASES", "WORLD_OPTIONS", "lab"]

CASES = Path(__file__).with_name("tool-cases.jsonl")
MAX_DELAY_MS = 2_000

# A case's `world` block: the first `slow_lookups` lookups (`slow_writes` writes; default all) are held
# for the delay, or until the next settle step, whichever comes first.
WORLD_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "lookup_delay_ms": {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_MS},
        "slow_lookups": {"type": "integer", "minimum": 0},
        "write_delay_ms": {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_MS},
        "slow_writes": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}

lab = Lab(
    name="tickets",
    world=TicketBackend,
    surfaces=[
        Surface(BASELINE_NAME, build_baseline_registry, baseline=True),
        Surface(CANDIDATE_NAME, build_candidate_registry),
    ],
    effects=TicketBackend.effect_records,
    secrets=TicketBackend.secret_values,
    world_options=WORLD_OPTIONS,
    settle=TicketBackend.settle,
    writes_started=lambda backend: backend.writes_started,
    # serve-mcp's identity: reads and writes for tenant acme, no credits; it holds no approvals, so
    # reads run and every write answers approval_required.
    actor=Actor(id="mcp-client", tenant="acme", permissions={"tickets:read", "tickets:write"}),
    cases=(str(CASES),),
)
