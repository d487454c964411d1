"""Rounds on the event engine, for round-based protocols (semi_sync): the round's decision, draws and
dispatch as under sync, the reports a scheduler asks for before the computation, server rounds, and
the aggregation of a round with its record. Mixed into :class:`wirelessfl.sim.events.EventEngine`."""
from __future__ import annotations

import math

import numpy as np

from ..scheduling.base import Decision, ReportRequest, RoundState, draw_devices
from .engine import RoundRecord, tell_uplink
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
        p.channel.set_time(t)
        gains = self.checks.gains(p.channel.draw(self.streams["channel"]), f"round {r}")
        available = self.available
        if self.busy.any():
            available = ~self.busy if available is None else available & ~self.busy
        state = RoundState(round=r, gains=gains, model_bits=p.upload_bits, bandwidth_hz=p.access.link.bandwidth_hz,
                           noise_power=p.access.link.noise_power, available=available,
                           rng=self.streams["selection"], time_s=t, access=p.access)
        plan = p.algorithm.plan_round(r, self.streams["round_type"])
        if plan is not None:
            end = t + plan.duration_s if plan.duration_s > 0 else t + p.idle_round_s
            self.round_ = Round(r, t, t, None, np.empty(0, dtype=np.int64), gains, available, np.empty(0), [],
                                server_s=plan.duration_s)
            self._drain = plan.drain
            self.timer("_server_round_end", end)
            return
        request = p.scheduler.probe(state)
        if request is not None and self.learner is not None:
            p.scheduler.receive(self.learner.reports(request, r))
        decision = p.scheduler.decide(state)
        self.checks.decision(decision, available, f"round {r}")
        if decision.selected is not None:
            selected = np.unique(np.asarray(decision.selected, dtype=np.int64))
        else:
            selected = draw_devices(decision.omega, decision.m, self.streams["selection"], decision.replace)
        power = p.access.transmit_power(gains[selected], decision.power[selected])
        bits = np.full(selected.size, float(p.upload_bits))
        concurrent = p.access.concurrent
        piggy_s = 0.0
        if decision.traffic.piggyback_bits is not None:  # e.g. a refreshed gradient riding on the model upload
            extra = np.asarray(decision.traffic.piggyback_bits, dtype=float)[selected]
            bits = bits + extra
            if not concurrent:
                piggy_s = float(np.where(extra > 0, p.access.airtime_s(extra, gains[selected], power), 0.0).sum())
        if concurrent:
            airtime = np.full(selected.size, math.nan)
        elif p.fading is not None and not self.packets_on:  # as sync draws it: the round's uploads at once
            airtime = p.access.on_air_s(p.fading.upload_times(bits, gains[selected], power, selected,
                                                              self.streams["fading"]))
        else:
            airtime = p.access.airtime_s(bits if decision.traffic.piggyback_bits is not None else p.upload_bits,
                                         gains[selected], power)
        comp = np.asarray(p.compute.compute_times(selected, self.streams["compute"], round_idx=r), dtype=float)
        energy = np.asarray(p.compute.energy_j(selected, round_idx=r), dtype=float)
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
        metrics = self.learner.server_round(round_.index) if self.learner is not None else {}
        n = self.num_devices
        state = RoundState(round=round_.index, gains=round_.gains, model_bits=self.parts.upload_bits,
                           bandwidth_hz=self.parts.access.link.bandwidth_hz,
                           noise_power=self.parts.access.link.noise_power, available=round_.available,
                           rng=self.streams["selection"], time_s=round_.t_start,
                           access=self.parts.access)
        queue = self.parts.scheduler.skip_round(state, self._drain)
        decision = Decision(omega=np.zeros(n), q=np.zeros(n), power=np.zeros(n),
                            queue=None if queue is None else np.asarray(queue, dtype=float), m=0,
                            info={"method": "server_round"})
        none = np.empty(0, dtype=np.int64)
        duration = round_.server_s
        self.on_round(RoundRecord(
            round=round_.index, t_start=round_.t_start, t_end=self.env.now, downlink_s=0.0, comp_s=0.0, comm_s=0.0,
            selected=none, upload_order=none, airtime_s=np.empty(0), energy_j=np.empty(0), gains=round_.gains,
            decision=decision, compute_energy_j=np.empty(0), arrived=np.empty(0, dtype=bool),
            available=round_.available, server_round=True, server_s=duration, metrics=metrics,
            idle_s=0.0 if duration > 0 else self.parts.idle_round_s, per_update=True))
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
        metrics = {}
        if self.learner is not None:
            report = round_.decision.traffic.report_with_upload
            if report is not None:
                on_upload = np.intersect1d(np.asarray(report.devices, dtype=np.int64), selected[arrived])
                p.scheduler.receive(self.learner.reports(
                    ReportRequest(on_upload, report.gradients, report.max_samples), r))
            tell_uplink(self.learner, p.access.uplink_facts(selected, np.array([u.gain for u in ups]), power, arrived))
            metrics = self.learner.train_round(selected[arrived], round_.decision, r)
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
        full = np.array([u.compute_energy_full_j for u in ups])
        comp = round_.comp
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            comp_energy = full * np.where(comp > 0, np.clip((now - round_.compute_start_s) / comp, 0.0, 1.0), 1.0)
        started = ~np.isnan(tx_start)
        order = np.flatnonzero(started)[np.argsort(tx_start[started], kind="stable")]
        idle = not selected.size and p.downlink_s == 0 and round_.reports_s == 0
        self.on_round(RoundRecord(
            round=r, t_start=round_.t_start, t_end=now, downlink_s=p.downlink_s,
            comp_s=float(comp.max(initial=0.0)), comm_s=float(np.nansum(airtime)) + round_.reports_s,
            selected=selected, extra_airtime_s=round_.reports_s + round_.piggy_s,
            extra_energy_j=float(np.sum(round_.reports_energy)) if round_.reports_energy else 0.0,
            upload_order=selected[order], airtime_s=airtime, energy_j=np.where(on_air > 0, power * on_air, 0.0),
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
