"""The steps of `Registry.invoke`, one module per step family, in DESIGN.md's fixed order:

    route -> schema -> permission -> approval -> deadline -> idempotency -> execute -> output -> record

* `admit`: route (which tool), schema (these arguments), permission (this actor, the resource guard);
* `approval`: an approval bound to this exact call, and spending a single-use one;
* `deadline`: the call's one deadline, and the check that nothing starts after it;
* `idempotency`: claiming the call's key, replaying its receipt, settling it at the end;
* `run`: the handler under the deadline (inline, on the worker pool, on an event loop);
* `conclude`: the output check, the receipt and the audit record; a bug in a step, contained;
* `state`, `services`, `details`: one call's state, what the steps share, what a refusal says.

Each step is a small function of the call's state that returns None (go on) or a `ToolResult` that
stops the call (a refusal, or a replayed receipt).
"""

from __future__ import annotations

__all__ = ["STEPS"]

STEPS = ("route", "schema", "permission", "approval", "deadline", "idempotency", "execute", "output", "record")
"""The step names, in order, as they appear in audit records (`step`: the last step reached)."""
