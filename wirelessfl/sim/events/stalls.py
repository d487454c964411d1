"""Event runs that would never end, stopped in one line as stalled (``engine.stall``). A run that only
counts aggregations (run.rounds, no time budget) never reaches its count when every task is lost
(to empty batteries, to missed models: more than limits.MAX_LOSSES_IN_A_ROW per device with no
aggregation in between, :class:`LossStreak`), or when no device can be started
(:func:`check_idle`)."""
from __future__ import annotations

__all__ = ["LossStreak", "check_idle"]


class LossStreak:
    """The event engine's count of tasks lost since the last aggregation."""

    def __init__(self, engine):
        self.engine = engine
        self.count, self.at = 0, 0  # tasks lost since version ``at``

    def lost(self, field: str, what: str, why: str, weight: int = 1) -> None:
        """One more task lost (``what``: how, e.g. "ran out of battery"); ``field`` and ``why`` make
        the stall's line: the option to look at, and what to change. ``weight``: what the loss cost,
        in tasks (a model that missed a device after n transmissions counts n: each took the time of
        a task, so a certain miss with a large link.downlink_max_attempts stops as soon as one without)."""
        from ...config import limits

        e = self.engine
        if self.at != e.version:
            self.count, self.at = 0, e.version
        self.count += weight
        if e.stop.time_budget_s is None and self.count > limits.MAX_LOSSES_IN_A_ROW * e.num_devices:
            counted = "tasks" if weight == 1 else "transmissions of tasks"
            e.stall(f"{field}: {self.count:,} {counted} in a row {what} before an aggregation (t = {e.now:.6g} s, "
                    f"{e.version} aggregations of run.rounds = {e.stop.rounds}): {why}")

    def state_dict(self) -> dict:
        return {"losses_in_a_row": [self.count, self.at]}

    def load_state(self, state: dict) -> None:
        # a checkpoint from before missed models counted too kept the batteries' count under its own name
        self.count, self.at = (int(v) for v in state.get("losses_in_a_row", state.get("battery_losses", (0, 0))))


def check_idle(engine) -> None:
    """After an availability step of a run that only counts aggregations: stalled when every battery
    is below its threshold with nothing to refill it and nobody at work, or when no device has been in
    flight for limits.MAX_IDLE_STEPS steps in a row."""
    from ...config import limits

    e = engine
    idle = e.availability.count_idle(not e.flights.flying)
    battery = e.parts.battery
    if not e.flights.flying and battery.exhausted:  # (NoBattery: never)
        e.stall(f"devices: every battery is below devices.battery_threshold and devices.harvest = 'none' "
                f"refills none (t = {e.env.now:.6g} s, {e.version} aggregations of run.rounds = "
                f"{e.stop.rounds}); set run.time_budget_s, or a harvest")
    if idle >= limits.MAX_IDLE_STEPS:
        e.stall(f"devices: no device was in flight for {idle:,} availability steps in a row (t = "
                f"{e.env.now:.6g} s, {e.version} aggregations of run.rounds = {e.stop.rounds}): "
                "none could be dispatched (devices.p_off_to_on, devices.availability_trace, the "
                "batteries' harvest_*, the scheduler's dispatch rule); set run.time_budget_s, or make "
                "devices available")
