"""A lab whose cases finish in the opposite order to the one they start in, for `tool-eval --jobs`.

Each case names its place in the world block (`{"order": i}`). With `finish_in_reverse`, the lab's
`settle` hook (called once as a replay of these cases finishes: they have no settle step) waits until
every later case has finished: run all at once, the last case finishes first and the first case last,
forced by the lab, not by sleeps. (Not `effects`: the engine reads it at every step boundary.) The
finishing order is recorded (`Finishing.order`), so a test can see that it really was reversed.

`make_lab(fail_at=...)` gives a lab whose world factory raises for those cases; with
`fail_late_first`, the later failing case fails before the earlier one has started to, so a test can
check that the error reported is the first in case order, not the first in time.
"""

from __future__ import annotations

import threading
from typing import Any, Collection

from agent_lab import Actor, Registry, ToolSpec
from agent_lab.lab import Lab, Surface

WAIT_LIMIT_S = 10.0  # only reached if the engine ran the cases one at a time while the lab reverses them
ACTOR = {"id": "order-agent", "tenant": "acme", "permissions": ["order:read"]}


class Finishing:
    """Which cases have finished, in the order they did; the turn each case waits for."""

    def __init__(self, cases: int, *, reverse: bool) -> None:
        self.cases = cases
        self.reverse = reverse
        self.order: list[int] = []
        self.failed: set[int] = set()
        self.changed = threading.Condition()

    def finish(self, place: int) -> None:
        with self.changed:
            if self.reverse:
                self.changed.wait_for(lambda: all(later in self.order for later in range(place + 1, self.cases)),
                                      WAIT_LIMIT_S)
            self.order.append(place)
            self.changed.notify_all()

    def fail(self, place: int, wait_for: int | None) -> None:
        with self.changed:
            if wait_for is not None:
                self.changed.wait_for(lambda: wait_for in self.failed, WAIT_LIMIT_S)
            self.failed.add(place)
            self.changed.notify_all()


class World:
    def __init__(self, finishing: Finishing, place: int) -> None:
        self.finishing = finishing
        self.place = place


def build(world: World, **options: Any) -> Registry:
    registry = Registry(**options)
    registry.register(
        ToolSpec(name="where_am_i", description="Say which case this is.",
                 input_schema={"type": "object", "additionalProperties": False},
                 output_schema={"type": "object", "properties": {"place": {"type": "integer"}},
                                "required": ["place"], "additionalProperties": False},
                 required_permission="order:read"),
        lambda arguments: {"place": world.place},
    )
    return registry


def make_lab(cases: int, *, reverse: bool = False, fail_at: Collection[int] = (),
             fail_late_first: bool = False) -> tuple[Lab, Finishing]:
    finishing = Finishing(cases, reverse=reverse)
    failing = sorted(fail_at)

    def world(place: int = 0) -> World:
        if place in failing:
            later = [other for other in failing if other > place]
            finishing.fail(place, later[0] if fail_late_first and later else None)
            raise RuntimeError(f"world {place} is broken")
        return World(finishing, place)

    def settle(world: World) -> None:
        world.finishing.finish(world.place)

    lab = Lab(name="order", world=world, surfaces=[Surface("order-v1", build)], effects=lambda world: [],
              settle=settle,
              world_options={"type": "object", "properties": {"place": {"type": "integer", "minimum": 0}},
                             "additionalProperties": False},
              actor=Actor(id="order-agent", tenant="acme", permissions={"order:read"}))
    return lab, finishing


def case_lines(cases: int) -> list[dict[str, Any]]:
    return [{"case_id": f"case-{place}", "intent": f"Case {place} says where it is.", "actor": ACTOR,
             "world": {"place": place}, "calls": [{"tool": "where_am_i", "arguments": {}}],
             "expected": {"outcome": "succeeded", "side_effects": 0,
                          "checks": [{"path": "/output/place", "equals": place}]}}
            for place in range(cases)]


def _broken_builder(world: World, **options: Any) -> Registry:
    raise RuntimeError("this surface cannot be built")


# For the command line: the third and fifth cases' worlds cannot be made (the fifth fails first).
broken_worlds, _ = make_lab(6, fail_at=(2, 4), fail_late_first=False)
# A surface whose builder raises: the inspection's error, before any case's.
broken_builder = Lab(name="order", world=lambda place=0: World(Finishing(1, reverse=False), place),
                     surfaces=[Surface("order-v1", _broken_builder)], effects=lambda world: [],
                     world_options={"type": "object"})
