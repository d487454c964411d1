"""The devices the event engine has dispatched and whose fate is not yet known: in flight
(computing or uploading), held (arrived, not yet applied or dropped), the ones not trained yet, who
is busy, and the numbering of dispatches, reports and the uplink's queue. A checkpoint saves every
such update with its phase, times, draws and delta (SimPy's generators cannot be saved); a resume
rebuilds them (the engine then recreates their processes)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...des import ARRIVED, FORWARDING
from .flight import Update

__all__ = ["Flights", "REPEAT", "REPORTS"]

REPEAT = 2 ** 32
"""A device started again from the same version trains with the key version + k x REPEAT."""
REPORTS = 2 ** 60
"""Reports (uploads before a round's computation) are numbered from here: dispatch numbers count
model updates only, as under sync."""


class Flights:
    """The updates under way, by dispatch number (in dispatch order)."""

    def __init__(self, num_devices: int):
        self.flying: dict[int, Update] = {}  # computing or uploading
        self.held: dict[int, Update] = {}    # arrived, not yet applied or dropped
        self.untrained: list[Update] = []    # started from the current version, not trained yet
        self.busy = np.zeros(num_devices, dtype=bool)
        # per device: its updates among the held (changed in place only: DispatchState shares it)
        self.waiting = np.zeros(num_devices, dtype=np.int64)
        self.next_seq = 0  # the next dispatch number
        self.reports = 0  # reports sent so far
        self.queue_seq = 0  # places in the uplink's queue (kept so a resume rebuilds the queue in order)
        self.repeats: dict[int, int] = {}  # devices started more than once from the current version
        # dispatch number = first + step x count: edge servers' engines share one clock, so each numbers
        # its dispatches apart from the others' (wirelessfl.sim.events.tiers)
        self.first, self.step = 0, 1

    def hold(self, u: Update) -> None:
        """``u`` arrived: held until it is applied or dropped (``release``)."""
        self.held[u.seq] = u
        self.waiting[u.device] += 1

    def release(self, u: Update) -> None:
        """``u``'s fate is known: no longer held (nothing if it never was)."""
        if self.held.pop(u.seq, None) is not None:
            self.waiting[u.device] -= 1

    def next_number(self, report: bool) -> int:
        """The number of the next dispatch (or report)."""
        if report:
            self.reports += 1
            return REPORTS + self.first + self.step * (self.reports - 1)
        self.next_seq += 1
        return self.first + self.step * (self.next_seq - 1)

    def work_key(self, device: int, version: int) -> int:
        """The key of the minibatch and work draws of ``device`` started now from ``version`` (a
        device started again from the same version gets a key of its own)."""
        k = self.repeats.get(device, 0)
        self.repeats[device] = k + 1
        return version + k * REPEAT

    def next_queue_place(self) -> int:
        """A place in the uplink's queue."""
        self.queue_seq += 1
        return self.queue_seq

    def state_dict(self, also=()) -> dict:
        """Every update under way (and those of ``also``, e.g. the round's finished ones) with its
        delta and the start models they share, and the counters."""
        updates = {**self.flying, **self.held, **{u.seq: u for u in also}}
        starts: dict[int, Any] = {}
        saved = []
        for u in updates.values():
            row = {name: getattr(u, name) for name in Update.SAVED}
            row["delta"] = u.delta
            if u.start is not None:
                starts.setdefault(id(u.start), (len(starts), u.start))
                row["start"] = starts[id(u.start)][0]
            saved.append(row)
        return {"updates": saved, "starts": [t for _, t in starts.values()],
                "untrained": [u.seq for u in self.untrained], "busy": self.busy.copy(), "next_seq": self.next_seq,
                "reports": self.reports, "queue_seq": self.queue_seq,
                "repeats": [[k, v] for k, v in self.repeats.items()]}

    def load_state(self, state: dict) -> None:
        """The counters and who is busy (the updates come back with ``restore``)."""
        self.busy = np.asarray(state["busy"], dtype=bool).copy()
        self.next_seq, self.queue_seq = int(state["next_seq"]), int(state["queue_seq"])
        self.reports = int(state["reports"])
        self.repeats = {int(k): int(v) for k, v in state["repeats"]}

    def restore(self, state: dict) -> dict[int, Update]:
        """The updates of ``state_dict``, in flight or held again; returns them by dispatch number."""
        starts = state["starts"]
        by_seq: dict[int, Update] = {}
        for row in state["updates"]:
            u = Update()
            for name in Update.SAVED:
                if name in row:  # a checkpoint from before a field existed leaves its default
                    setattr(u, name, row[name])
            if "at_cloud_s" not in row and u.phase >= FORWARDING:  # a checkpoint from before FORWARDING:
                u.phase += 1                                          # ARRIVED and FINISHED were one lower
            u.delta = row.get("delta")
            if "start" in row:
                u.start = starts[row["start"]]
            by_seq[u.seq] = u
        self.flying = {seq: u for seq, u in by_seq.items() if u.phase < ARRIVED}
        self.held = {seq: u for seq, u in by_seq.items() if u.phase == ARRIVED}
        self.waiting[:] = 0
        np.add.at(self.waiting, np.array([u.device for u in self.held.values()], dtype=np.int64), 1)
        self.untrained = [by_seq[seq] for seq in state["untrained"]]
        return by_seq
