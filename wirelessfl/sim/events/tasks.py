"""The devices' tasks on the event engine: each dispatched device's process, from its launch to the
server (the model down, the computation, the upload, the backhaul of a server in the cloud), and how
a task ends early (lost where it is, or stopped by the protocol or a round's deadline).

A model that a device missed (a timed downlink, link.downlink_miss = "wait") loses its task; with
"stale", the device trains from the model it last received (``last_models``)."""
from __future__ import annotations

import math

import simpy

from ...des import RANK_DEVICE, priority
from ...outcomes import LOSSES, Outcome
from ...wireless import changes_with_time
from .flight import ARRIVED, COMPUTE, DOWNLINK, FINISHED, FORWARDING, WAITING, Update
from .last_models import LastModels

__all__ = ["Tasks"]


class Tasks:
    """The event engine's collaborator that starts each device's task and runs it as a SimPy process
    (``launch``, ``fly``), and ends one early (``lose``, ``stop``, ``cancel``)."""

    def __init__(self, engine):
        self.engine = engine
        downlink, learner = engine.parts.downlink, engine.learner
        # link.downlink_miss = "stale": the model each device last received, to train from when it misses one
        self.last_models = (LastModels(engine.num_devices, learner.params if learner is not None else None)
                            if downlink.timed and downlink.miss == "stale" else None)
        self.waits_for_model = downlink.timed and downlink.miss == "wait"
        self.timed_channel = changes_with_time(engine.parts.channel)
        self.channel_rng = engine.streams["channel"]

    def launch(self, device: int, power: float, compute_s: float, energy_j: float, *, key: int, bits: float,
               round_=None, gain: float = math.nan, airtime_s: float = math.nan, q: float = math.nan,
               share: float = math.nan, compute_start_s: float | None = None, waiting: bool = False,
               report: bool = False, round_gain: bool = False, downlink: tuple | None = None,
               model_at_site_s: float | None = None) -> Update:
        """Start ``device``'s task now (see Dispatcher and RoundDriver). ``downlink``: what the timed
        downlink did for it, (seconds, transmissions, received) (None: the model arrives after
        parts.downlink_s); ``model_at_site_s``: behind a backhaul, when the model is at its site
        (None: asked of the backhaul now); ``compute_start_s`` then counts from it."""
        e = self.engine
        now, version, flights = e.env.now, e.server.version, e.flights
        receiving_s = e.parts.downlink_s if downlink is None else downlink[0]
        at_site = now  # the model at the device's site (behind a backhaul: when it came down)
        if e.site_links is not None:
            at_site = model_at_site_s if model_at_site_s is not None else \
                e.site_links.model_at_site(e.site(device), now, version, e.parts.downlink_bits)
        start = at_site + receiving_s if compute_start_s is None else compute_start_s
        u = Update(flights.next_number(report), device, version, key, version if round_ is None else round_, share,
                   q, now, start, compute_s, start + compute_s, power, bits, gain, airtime_s,
                   compute_energy_full_j=energy_j, report=report, round_gain=round_gain)
        u.downlink_s = receiving_s
        if e.site_links is not None:
            u.model_at_site_s = at_site
        if downlink is not None:
            u.downlink_attempts, u.received = int(downlink[1]), bool(downlink[2])
            if self.last_models is not None and not report:
                self.last_models.start(u, version, e.learner.params if e.learner else None)
        if waiting:  # its computation starts when the round's reports are up
            u.phase, u.compute_start_s, u.compute_end_s = WAITING, math.nan, math.nan
        flights.flying[u.seq] = u
        if not report:
            flights.busy[device] = True
            if e.learner is not None:
                flights.untrained.append(u)
        self.fly(u)
        return u

    def draw_gain(self, device: int) -> float:
        """A fresh gain of ``device`` (the channel's "channel" stream), as a transmission begins (an
        upload's, a retransmission's, a timed downlink's)."""
        e = self.engine
        channel = e.parts.channel
        if self.timed_channel:  # (one that does not change with time has no handovers to tell either)
            channel.set_time(e.env.now)
            e.handovers.check()
        gain = channel.draw_one(self.channel_rng, device)
        return gain if e.checks.channel is None else e.checks.gain(gain, device, f"t = {e.env.now:.6g} s")

    def fly(self, u: Update) -> None:
        """Start (or, on a resume, restart) the process of ``u`` from the phase it is in."""
        u.process = self.engine.env.process(self._fly(u))

    def _fly(self, u: Update):
        e = self.engine
        if u.phase < FORWARDING and not (yield from self._task(u)):
            return
        if u.phase == FORWARDING:  # at its site, on the backhaul to the server in the cloud
            try:
                yield e.env.at(u.at_cloud_s, priority(RANK_DEVICE, u.seq))
            except simpy.Interrupt as stop:
                self.lose(u, stop.cause)
                return
        u.phase = ARRIVED
        del e.flights.flying[u.seq]
        e.flights.hold(u)
        e.inbox.put(u)

    def _task(self, u: Update):
        """The device's part of ``u``: the model down, the computation, the upload. Returns whether
        its update left the device (to the server, or to its site's backhaul: then FORWARDING)."""
        e = self.engine
        env = e.env
        prio = priority(RANK_DEVICE, u.seq)
        drain = e.drain
        try:
            if u.phase == WAITING:  # until the round's reports are up; then its computation is timed
                yield e.rounds.current.computing
            if u.phase == DOWNLINK:
                if u.compute_start_s > env.now:
                    if drain is not None:
                        if u.model_at_site_s > env.now:  # the model is still on the backhaul: nothing drawn
                            yield env.at(u.model_at_site_s, prio)
                        drain.receiving(u)
                    yield env.at(u.compute_start_s, prio)
                if not u.received and self.waits_for_model:  # it missed the model: it waits for the next
                    u.compute_end_s = math.nan
                    self._off_air(u)
                    self.lose(u, Outcome.DOWNLINK)
                    e.losses.lost("link.downlink", "missed the model", "no device's channel carries it "
                                  "(link.bs_power, link.downlink_rate_bps, link.downlink_errors); set "
                                  "run.time_budget_s, link.downlink_max_attempts or link.downlink_miss = 'stale'",
                                  weight=u.downlink_attempts)
                    return False
                u.phase = COMPUTE
            if u.phase == COMPUTE:
                if drain is not None:
                    drain.computing(u)
                yield env.at(u.compute_end_s, prio)
                if drain is not None:  # waiting for the uplink costs nothing
                    drain.draw(u, 0.0)
            while True:
                try:
                    delivered = yield from e.uplink.transmit(u)
                    break
                except simpy.Interrupt as stop:
                    if stop.cause != "restart":
                        raise
                    e.handovers.restart(u)  # its device handed over: again, in its new cell
        except simpy.Interrupt as stop:
            self._off_air(u)  # if it was cut while on the air
            self.lose(u, stop.cause)  # nothing more if whoever interrupted settled it already
            return False
        self._off_air(u)
        if delivered is False or isinstance(delivered, str):  # a packet failed link.max_attempts times,
            self.lose(u, delivered or Outcome.LOST)                   # or AirComp left it silent
            return False
        if u.report:
            e.rounds.report_done(u)
            return False
        e.flights.busy[u.device] = False
        if e.site_links is not None:  # the server is in the cloud: its site forwards the update
            u.phase = FORWARDING
            u.at_cloud_s = e.site_links.forward(e.site(u.device), env.now, u.bits)
        return True

    def _off_air(self, u: Update) -> None:
        """``u``'s process ends: a model upload that went on the air has left it (the busy clock), and
        its device's battery draws nothing more."""
        e = self.engine
        if u.tx_start_s == u.tx_start_s and not u.report:
            e.busy.stop(e.env.now)
        if e.drain is not None:
            e.drain.done(u)

    # --- ending a task early -------------------------------------------------------------------

    def lose(self, u: Update, outcome: str) -> None:
        """``u`` ends with ``outcome`` where it is (its process already stopped); the protocol hears of a loss."""
        if u.phase == FINISHED:
            return
        e = self.engine
        if u.report:  # a report lost: the round goes on without it
            e.rounds.report_done(u, lost=True)
            return
        self.stop(u)
        e.server.settle(u, outcome, e.env.now)
        if outcome in LOSSES and not e.stopping:
            e.protocol.on_lost(e, u)

    def stop(self, u: Update, outcome: str | None = None) -> None:
        """``u`` stops where it is (its process is interrupted with ``outcome``, if given)."""
        if outcome is not None:
            u.process.interrupt(outcome)
        del self.engine.flights.flying[u.seq]
        if not u.report and u.at_device:  # (a device whose update is on the backhaul may be at work again)
            self.engine.flights.busy[u.device] = False
        u.phase = FINISHED

    def cancel(self, updates, outcome: str) -> None:
        """Stop updates in flight; recorded with ``outcome``."""
        e = self.engine
        for u in updates:
            if u.in_flight:
                self.stop(u, outcome)
                e.server.settle(u, outcome, e.env.now)
