"""How long the uplink carried at least one model upload: a count of the uploads on the air, and
the time it was above zero. The event engine starts it when an upload goes on the air and stops it
when the upload leaves (its transmission ended, was lost, or was cut); its state is three numbers,
whatever the run's length."""
from __future__ import annotations

__all__ = ["BusyClock"]


class BusyClock:
    """The union of the uploads' times on the air, kept as they happen."""

    def __init__(self):
        self.on_air = 0  # uploads on the air now
        self.since = 0.0  # when the uplink last became busy
        self.total = 0.0  # busy time before ``since``

    def start(self, now: float) -> None:
        """An upload went on the air."""
        if self.on_air == 0:
            self.since = now
        self.on_air += 1

    def stop(self, now: float) -> None:
        """An upload left the air."""
        self.on_air -= 1
        if self.on_air == 0:
            self.total += now - self.since

    def busy_s(self, now: float) -> float:
        """Busy time up to ``now`` (uploads still on the air count to now)."""
        return self.total + (now - self.since if self.on_air else 0.0)

    def state_dict(self) -> dict:
        return {"uplink_busy": {"on_air": self.on_air, "since": self.since, "total": self.total}}

    def load_state(self, state: dict) -> None:
        busy = state.get("uplink_busy", {"on_air": 0, "since": 0.0, "total": 0.0})  # a checkpoint from before it
        self.on_air, self.since, self.total = int(busy["on_air"]), float(busy["since"]), float(busy["total"])
