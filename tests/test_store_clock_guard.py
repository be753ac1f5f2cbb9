"""The clock guard every receipt store reads the time through (`agent_lab.stores._clock.StepGuard`).

The stores' conformance tests show what a step does to receipts; these show the guard's own promise for
state a store keeps in its file and a process that opens it later: the drift allowed is counted from
recent readings, so neither a guard in use for a month nor one restored from its saved state takes a
forward step as drift.
"""

from __future__ import annotations

import unittest

from agent_lab.stores._clock import REBASE_S, SLEW, STEP_S, StepGuard

from test_store_steps_across_ttls import Clocks

DAY = 86_400.0
HOLD_S = 600.0


class DriftAllowanceTest(unittest.TestCase):
    def setUp(self) -> None:
        self.clocks = Clocks()
        self.guard = StepGuard(self.clocks.wall, self.clocks.monotonic, HOLD_S)
        self.guard.times()  # the first reading anchors it

    def step_after_a_month(self, step_s: float) -> float:
        """The check time before a forward step of `step_s` taken a month after the first reading."""
        self.clocks.wait(30 * DAY)
        before, _ = self.guard.times()
        self.clocks.wall_at += step_s
        self.clocks.monotonic_at += 1.0
        return before

    def test_a_forward_step_a_month_after_the_first_reading_is_held_not_taken_as_drift(self) -> None:
        step_s = 40 * 60.0  # under SLEW of a month (43 minutes): taken as drift when counted from the start
        self.assertLess(step_s, SLEW * 30 * DAY)
        before = self.step_after_a_month(step_s)
        check, stamp = self.guard.times()
        self.assertAlmostEqual(check, before + 1.0, delta=STEP_S)  # expiry is judged by the time that passed
        self.assertEqual(stamp, self.clocks.wall_at)  # what is written counts from the later clock

    def test_a_guard_restored_from_its_saved_state_holds_the_step_too(self) -> None:
        # A process that opens the store's file after the step takes up the state saved before it.
        before = self.step_after_a_month(40 * 60.0)
        self.assertTrue(self.guard.changed)  # the move of the band's base is for the file to keep
        restored = StepGuard(self.clocks.wall, self.clocks.monotonic, HOLD_S)
        self.assertTrue(restored.restore(self.guard.saved()))
        check, _ = restored.times()
        self.assertAlmostEqual(check, before + 1.0, delta=STEP_S)

    def test_drift_within_the_band_is_still_followed(self) -> None:
        # NTP's slew: a wall clock gaining SLEW/2 on the monotonic one, read every REBASE_S, is never a step.
        for _ in range(1000):
            self.clocks.wait(REBASE_S)
            self.clocks.wall_at += SLEW / 2 * REBASE_S
            check, stamp = self.guard.times()
            self.assertEqual((check, stamp), (self.clocks.wall_at, self.clocks.wall_at))

    def test_a_month_of_creeping_by_just_under_a_step_adds_up_to_no_more_than_the_band(self) -> None:
        # Each reading a little under STEP_S ahead of the last: the anchor follows the first, never the sum.
        start_offset = self.clocks.wall_at - self.clocks.monotonic_at
        for _ in range(100):
            self.clocks.wait(REBASE_S)
            self.clocks.wall_at += STEP_S * 0.9
            self.guard.times()
        self.assertIsNotNone(self.guard.offset)
        self.assertLessEqual(self.guard.offset - start_offset, STEP_S + SLEW * 100 * REBASE_S)


if __name__ == "__main__":
    unittest.main()
