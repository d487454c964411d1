"""The 802.11 DCF on the event engine (``link.access = "wifi"`` under fedbuff, fedasync and
semi_sync): the devices in flight with an upload contend by the scheme's DCF
(:class:`~wirelessfl.access.wifi_dcf.Dcf`), one SimPy event per contention round (at the boundary
where the next transmission begins) and one at the ACK that ends each upload."""
from __future__ import annotations

import simpy

from ..des import ON_AIR, RANK_DEVICE, priority
from ..outcomes import Outcome

__all__ = ["WifiUplink"]


class WifiUplink:
    """The DCF among the uploads in flight. A device joins it when its computation is done (its MCS
    fixed then, from the gain drawn as it goes on the air), and leaves it with the ACK of its last
    frame, or when it is stopped (a deadline, going offline). Each transmission adds to the update's
    ``attempts`` and ``airtime_s`` (its own time on the air: DATA, or RTS, collided ones included)
    and sets ``attempt_start_s``/``attempt_end_s`` to it (for :meth:`on_air_until`); the scheme's
    ``upload_counters[seq]`` keeps its collisions, frames, retries and drops. The DCF's state (the
    slot grid, each station's counter and stage) and the ACKs awaited are saved by ``state_dict``;
    the backoff draws' stream by the scheme's."""

    def __init__(self, host, scheme):
        self.host, self.scheme = host, scheme
        self.dcf = scheme.new_dcf()
        self.updates: dict[int, object] = {}  # seq -> update, of the stations and of the ACKs awaited
        self.acks: dict[int, float] = {}  # seq -> when the ACK of its last frame ends
        self._armed: tuple[float, int] | None = None  # (time, tie-break) of the live contention event
        self._token = 0  # the live event's number: an event armed before a change is stale

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): contend until its last frame is acknowledged.
        Returns True, or "silent" for a device that cannot send (no power, or an SNR below MCS 0's)."""
        host, scheme = self.host, self.scheme
        if u.done is None:
            u.done = host.env.event()
        if u.phase != ON_AIR:
            u.phase = ON_AIR
            host.start_transmission(u)
            u.attempts, u.airtime_s = 0, 0.0
            mcs = scheme.station_mcs(u.gain, u.power)
            if mcs is None:
                return Outcome.SILENT
            if not u.bits > 0:
                u.tx_end_s = host.env.now
                return True
            station = self.dcf.join(u.seq, host.env.now, u.bits, mcs.index)
            scheme.record(station)
            self.updates[u.seq] = u
            self._arm()
        try:
            return (yield u.done)
        except simpy.Interrupt:
            self.dcf.leave(u.seq)
            self.acks.pop(u.seq, None)
            self.updates.pop(u.seq, None)
            self._arm()
            raise

    def on_air_until(self, u, t: float) -> float:
        """The time on the air of an upload stopped at ``t``: its transmissions, the one under way
        counted up to t."""
        after = u.attempt_end_s - max(t, u.attempt_start_s) if u.attempt_end_s == u.attempt_end_s else 0.0
        return u.airtime_s - max(after, 0.0)

    def _arm(self) -> None:
        """Arm the next contention round's event (nothing if the live one is it)."""
        start = self.dcf.next_start_s()
        if start is None:
            self._armed = None
            return
        armed = (start, min(self.dcf.stations))  # tie-break: the smallest dispatch number contending
        if armed == self._armed:
            return
        self._armed, self._token = armed, self._token + 1
        token = self._token
        event = self.host.env.at(start, priority(RANK_DEVICE, armed[1]))
        event.callbacks.append(lambda _: self._resolve(token))

    def _resolve(self, token: int) -> None:
        """One contention round, now: the transmissions, their time on the air, and the ACK that ends
        an upload (an event of its own)."""
        if token != self._token or self._armed is None:
            return  # stale: the contention changed after this event was armed
        self._armed = None
        r = self.dcf.step()
        for s, air in zip(r.stations, r.on_air_s):
            u = self.updates[s.key]
            u.attempts += 1
            u.airtime_s += air
            u.attempt_start_s, u.attempt_end_s = r.start_s, r.start_s + air
            self.scheme.record(s)
            self.host.transmitted(u, air)  # its battery pays the frame
        self.scheme.tally(r)
        if r.finished:
            seq = r.stations[0].key
            self.acks[seq] = r.ack_end_s
            self._await_ack(seq)
        self._arm()

    def _await_ack(self, seq: int) -> None:
        end = self.acks[seq]
        event = self.host.env.at(end, priority(RANK_DEVICE, seq))
        event.callbacks.append(lambda _: self._acknowledged(seq, end))

    def _acknowledged(self, seq: int, end: float) -> None:
        if self.acks.get(seq) != end:
            return  # the upload was stopped before its ACK
        del self.acks[seq]
        u = self.updates.pop(seq)
        u.tx_end_s = end
        u.done.succeed(True)

    def state_dict(self) -> dict:
        """The DCF's stations and slot grid, and the ACKs awaited."""
        return {"dcf": self.dcf.state_dict(), "acks": [[seq, t] for seq, t in self.acks.items()]}

    def load_state(self, state: dict) -> None:
        """Restore the contention (after the engine restored the updates) and re-arm its events."""
        host = self.host
        self.dcf.load_state(state["dcf"])
        self.acks = {int(seq): float(t) for seq, t in state["acks"]}
        self.updates = {seq: host.update(seq) for seq in [*self.dcf.stations, *self.acks]}
        for u in self.updates.values():
            u.done = host.env.event()
        for seq in self.acks:
            self._await_ack(seq)
        self._armed = None
        self._arm()

