"""Tasks lost in a row with no aggregation in between (to empty batteries, to missed models): a run
that only counts aggregations (run.rounds, no time budget) whose every task is lost would never
reach its count, so past limits.MAX_LOSSES_IN_A_ROW per device it stops, in one line, as stalled."""
from __future__ import annotations

__all__ = ["LossStreak"]


class LossStreak:
    """The event engine's count of tasks lost since the last aggregation."""

    def __init__(self, engine):
        self.engine = engine
        self.count, self.at = 0, 0  # tasks lost since version ``at``

    def lost(self, field: str, what: str, why: str) -> None:
        """One more task lost (``what``: how, e.g. "ran out of battery"); ``field`` and ``why`` make
        the stall's line: the option to look at, and what to change."""
        from ..config import limits

        e = self.engine
        if self.at != e.version:
            self.count, self.at = 0, e.version
        self.count += 1
        if e.stop.time_budget_s is None and self.count > limits.MAX_LOSSES_IN_A_ROW * e.num_devices:
            e.stall(f"{field}: {self.count:,} tasks in a row {what} before an aggregation (t = {e.now:.6g} s, "
                    f"{e.version} aggregations of run.rounds = {e.stop.rounds}): {why}")

    def state_dict(self) -> dict:
        return {"losses_in_a_row": [self.count, self.at]}

    def load_state(self, state: dict) -> None:
        # a checkpoint from before missed models counted too kept the batteries' count under its own name
        self.count, self.at = (int(v) for v in state.get("losses_in_a_row", state.get("battery_losses", (0, 0))))
