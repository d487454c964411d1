"""Rounds on the event engine, for round-based protocols (semi_sync): the round's decision, draws and
dispatch as under sync, the reports a scheduler asks for before the computation, server rounds, and
the aggregation of a round with its record. Mixed into :class:`wirelessfl.sim.events.EventEngine`."""
from __future__ import annotations

import math

import numpy as np

from .pipeline import (RoundOpening, RoundRecord, compute_energy, learn_round, open_round, piggyback_s, round_state,
                       server_round_record, tell_uplink, transmit_energy)
from .flight import COMPUTE, FINISHED, WAITING, Round, Update, arrived_facts

__all__ = ["RoundMachinery"]


class RoundMachinery:
    """The engine's methods for round-based protocols (``begin_round``, ``end_round``)."""

    def begin_round(self) -> None:
        """Start round r = version as sync does: draw the round's gains, ask the algorithm for a
        server round, else the scheduler's decision (probe and reports first), draw its devices and
        dispatch them, each at the round's gain; then ``protocol.on_round``. Devices in flight
        cannot be drawn again (they are unavailable to the decision)."""
        if self.stopping:
            return
        p, r, t = self.parts, self.version, self.env.now
        available = self.available
        if self.busy.any():
            available = ~self.busy if available is None else available & ~self.busy
        opening = open_round(p, self.streams, self.checks, self.learner, r, t, available)
        gains, plan = opening.gains, opening.plan
        if plan is not None:
            end = t + plan.duration_s if plan.duration_s > 0 else t + p.idle_round_s
            self.round_ = Round(r, t, t, None, np.empty(0, dtype=np.int64), gains, available, np.empty(0), [],
                                server_s=plan.duration_s)
            self._drain = plan.drain
            self.timer("_server_round_end", end)
            return
        decision, selected, power, comp, energy = (opening.decision, opening.selected, opening.power, opening.comp,
                                                   opening.energy_full)
        bits = np.broadcast_to(np.asarray(opening.bits, dtype=float), selected.shape)
        concurrent = p.access.concurrent
        piggy_s = 0.0 if concurrent else piggyback_s(p.access, opening)
        if concurrent:  # the band decides as the uploads go
            airtime = np.full(selected.size, math.nan)
        elif p.fading is not None and not self.packets_on:  # as sync draws it: the round's uploads at once
            airtime = p.access.on_air_s(p.fading.upload_times(bits, gains[selected], power, selected,
                                                              self.streams["fading"]))
        else:
            airtime = p.access.airtime_s(opening.bits, gains[selected], power)
        start = t + p.downlink_s
        round_ = self.round_ = Round(r, t, start, decision, selected, gains, available, comp, [], piggy_s=piggy_s)
        # the probe's reports go up first (after the broadcast), through the same uplink, as under sync
        pre = np.zeros(0) if decision.traffic.pre_upload_bits is None else np.asarray(decision.traffic.pre_upload_bits, dtype=float)
        senders = np.flatnonzero(pre > 0)
        if senders.size:
            round_.reports_left = int(senders.size)
            round_.computing = self.env.event()
            pre_air = (p.access.airtime_s(pre[senders], gains[senders], decision.power[senders]) if not concurrent
                       else np.full(senders.size, math.nan))
            for i, device in enumerate(senders.tolist()):
                self._launch(device, float(decision.power[device]), 0.0, 0.0, key=-1, bits=float(pre[device]),
                             round_=r, gain=float(gains[device]), airtime_s=float(pre_air[i]), compute_start_s=start,
                             report=True, round_gain=True)
        share = 1.0 / max(selected.size, 1)
        for i, device in enumerate(selected.tolist()):
            round_.updates.append(self._launch(
                device, float(power[i]), float(comp[i]), float(energy[i]), key=self._key(device), bits=float(bits[i]),
                round_=r,
                gain=float(gains[device]), airtime_s=float(airtime[i]), q=float(decision.q[device]), share=share,
                compute_start_s=start, waiting=bool(senders.size), round_gain=True))
        if senders.size:
            return  # the computations and protocol.on_round wait for the reports
        if not selected.size:  # a round without devices still takes its time (downlink, or a frame)
            self.timer("_empty_round_end", start if p.downlink_s > 0 else t + p.idle_round_s)
            return
        self.protocol.on_round(self, round_)

    def _empty_round_end(self) -> None:
        self.protocol.on_round(self, self.round_)

    def _server_round_end(self) -> None:
        """A round in which the server trained alone (SAFARI): no airtime, no device energy."""
        round_ = self.round_
        opening = RoundOpening(round_.index, round_.t_start, round_.gains, round_.available,
                               round_state(self.parts, self.streams, round_.index, round_.t_start, round_.gains,
                                           round_.available))
        duration = round_.server_s
        self.on_round(server_round_record(self.parts, self.learner, opening, self._drain, duration, self.env.now,
                                          0.0 if duration > 0 else self.parts.idle_round_s, per_update=True))
        self.round_ = None
        self._aggregated()
        self.begin_round()

    def end_round(self, round_: Round, on_time: list, carried: list = (), carried_weights=(), *,
                  drop_late: bool = False) -> None:
        """Aggregate a round: the algorithm's round on the devices whose uploads are in
        (``on_time``), then the ``carried`` updates of earlier rounds with their weights. Devices of
        this round still in flight are stopped (``drop_late``: outcome "late_dropped", as a sync
        round's deadline drops them) or keep going (their updates are computed now, from this
        round's model). One row of rounds.csv, with the round's decision."""
        p, r, now = self.parts, round_.index, self.env.now
        dropped = {u.seq for u in round_.updates if u.in_flight} if drop_late else set()
        for u in round_.updates:
            if u.seq in dropped:
                self._stop(u, "late_dropped")
        self._train_pending(exclude=on_time)  # late devices of this round: from this round's model
        selected = round_.selected
        arrived = np.isin(selected, [u.device for u in on_time])
        ups = [{u.device: u for u in round_.updates}[n] for n in selected.tolist()]  # in selected order
        power = np.array([u.power for u in ups])
        metrics = learn_round(p, self.learner, round_.decision, selected, arrived, np.array([u.gain for u in ups]),
                              power, r)
        carried = list(carried)
        staleness = np.zeros(len(on_time) + len(carried), dtype=np.int64)
        if carried:
            staleness[len(on_time):] = [self.version - u.version for u in carried]
            if self.learner is not None:
                devices = np.array([u.device for u in carried], dtype=np.int64)
                tell_uplink(self.learner, arrived_facts(carried, p.access))
                more = self.learner.apply_updates(devices, [u.delta for u in carried],
                                                  np.asarray(carried_weights, dtype=float), staleness[len(on_time):])
                metrics.update({f"carried_{k}": v for k, v in more.items()})
        fresh = {u.seq for u in on_time} | {u.seq for u in carried}
        for u in round_.updates + carried:  # rows in the order sync writes them: the round's devices
            if u.seq in dropped:
                self._settle(u, "late_dropped", now)
            elif u.seq in fresh:
                u.version_applied = r
                self.last_applied[u.device] = r + 1
                self._settle(u, "applied", now)
        tx_start = np.array([u.tx_start_s for u in ups])
        airtime = np.array([u.airtime_s for u in ups])
        on_air = np.where(arrived, airtime, np.where(np.isnan(tx_start), 0.0, now - tx_start))
        comp_energy = compute_energy(np.array([u.compute_energy_full_j for u in ups]), round_.comp,
                                     now - round_.compute_start_s)
        started = ~np.isnan(tx_start)
        order = np.flatnonzero(started)[np.argsort(tx_start[started], kind="stable")]
        idle = not selected.size and p.downlink_s == 0 and round_.reports_s == 0
        self.on_round(RoundRecord(
            round=r, t_start=round_.t_start, t_end=now, downlink_s=p.downlink_s,
            comp_s=float(round_.comp.max(initial=0.0)), comm_s=float(np.nansum(airtime)) + round_.reports_s,
            selected=selected, extra_airtime_s=round_.reports_s + round_.piggy_s,
            extra_energy_j=float(np.sum(round_.reports_energy)) if round_.reports_energy else 0.0,
            upload_order=selected[order], airtime_s=airtime, energy_j=transmit_energy(power, on_air),
            gains=round_.gains, decision=round_.decision, compute_energy_j=comp_energy, arrived=arrived,
            available=round_.available, metrics=metrics, idle_s=p.idle_round_s if idle else 0.0,
            staleness=staleness, per_update=True))
        self.round_ = None
        self._aggregated()

    def _report_done(self, u: Update, lost: bool = False) -> None:
        """One of the round's reports is up (or lost): when the last is, the computations begin."""
        del self.flying[u.seq]
        u.phase = FINISHED
        round_ = self.round_
        if u.tx_start_s == u.tx_start_s:  # P x time on the air, summed as sync sums them
            on_air = u.airtime_s if u.tx_end_s == u.tx_end_s else self.env.now - u.tx_start_s
            round_.reports_energy.append(u.power * on_air)
        round_.reports_left -= 1
        if round_.reports_left == 0:
            self._start_computing(round_)

    def _start_computing(self, round_: Round) -> None:
        """The round's devices compute from now on (their reports are up)."""
        now = self.env.now
        round_.reports_s = now - round_.compute_start_s
        round_.compute_start_s = now
        for u in round_.updates:
            if u.phase == WAITING:
                u.compute_start_s, u.compute_end_s, u.phase = now, now + u.compute_s, COMPUTE
        if round_.computing is not None:
            round_.computing.succeed()
            round_.computing = None
        if not round_.updates:
            self.timer("_empty_round_end", now if now > round_.t_start else now + self.parts.idle_round_s)
        else:
            self.protocol.on_round(self, round_)
