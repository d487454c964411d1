"""Handovers under the event engine: a moving device whose strongest site changed by more than the
hysteresis hands over (wirelessfl.wireless.PathLossChannel.reassociate); its handover is recorded
(handovers.csv) and its upload, waiting for or on its old cell's uplink, is restarted in the new
cell, lost, or finishes where it is (network.handover_upload)."""
from __future__ import annotations

import math
from ...des import ON_AIR, QUEUED
from ...outcomes import Outcome

__all__ = ["Handovers", "take_handovers"]


def take_handovers(channel) -> list:
    """The handovers (time, device, from, to) the channel's last move made, taken from it (none for a
    channel without cells)."""
    moved = getattr(channel, "handovers", None)
    if not moved:
        return []
    channel.handovers = []
    return moved


class Handovers:
    """The event engine's handovers: ``check`` after the channel moved, ``restart`` an upload."""

    def __init__(self, engine):
        self.engine = engine  # its on_handovers (the recorder's) and handover_upload (the runner sets them)

    def check(self) -> None:
        """Record the handovers the channel's last move made: an upload of a device that handed over,
        waiting for or on its old cell's uplink, is restarted in the new cell ("restart"), lost
        ("lose"), or finishes where it is ("complete"; so does the upload whose own start moved the
        channel)."""
        e = self.engine
        moved = take_handovers(e.parts.channel)
        if not moved:
            return
        e.on_handovers(moved)
        if e.handover_upload == "complete":
            return
        devices = {row[1] for row in moved}
        active = e.env.active_process
        for u in list(e.flights.flying.values()):
            if u.device in devices and not u.report and u.phase in (QUEUED, ON_AIR) and u.process is not active:
                u.process.interrupt("restart" if e.handover_upload == "restart" else Outcome.HANDOVER)

    def restart(self, u) -> None:
        """``u`` starts its upload again from the queue of its device's new cell; the time it was on
        the air counts (its energy, the busy clock)."""
        now = self.engine.env.now
        if u.tx_start_s == u.tx_start_s:
            u.air_before_s += now - u.tx_start_s
            self.engine.busy.stop(now)
        u.phase, u.queue_seq, u.attempts, u.packet, u.tries, u.done = QUEUED, -1, 0, 0, 0, None
        u.tx_start_s = u.airtime_s = u.bits_left = u.attempt_start_s = u.attempt_end_s = math.nan
        if not u.round_gain:
            u.gain = math.nan
