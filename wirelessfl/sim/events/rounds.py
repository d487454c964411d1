"""Rounds on the event engine, for round-based protocols (semi_sync): the round's decision, draws and
dispatch as under sync (the round pipeline, wirelessfl.sim.round.pipeline), the reports a scheduler asks
for before the computation, server rounds, and the aggregation of a round with its record.
:class:`RoundDriver` is the engine's collaborator that owns the round under way."""
from __future__ import annotations

from dataclasses import fields

import numpy as np

from ...decisions import Decision, ReportRequest, Traffic
from ...outcomes import Outcome
from ..round.closing import client_round_record, deliver_model, on_air_s
from ..round.pipeline import (RoundOpening, compute_energy, learn_round, open_round, piggyback_s, round_state,
                              server_round_record, tell_uplink, transmit_energy)
from .flight import COMPUTE, DOWNLINK, FINISHED, WAITING, Round, Update, arrived_facts

__all__ = ["RoundDriver"]


class RoundDriver:
    """The rounds of a round-based protocol on the event engine: the round under way (``current``)
    and whether the current server round counts as a slot of zero consumption (``drain``). The
    engine's ``begin_round`` and ``end_round`` are its ``begin`` and ``end``."""

    def __init__(self, engine):
        self.engine = engine
        self.current: Round | None = None
        self.drain = False

    def begin(self) -> None:
        """Start round r = version as sync does: draw the round's gains, ask the algorithm for a
        server round, else the scheduler's decision (probe and reports first), draw its devices and
        dispatch them, each at the round's gain; then ``protocol.on_round``. Devices in flight
        cannot be drawn again (they are unavailable to the decision)."""
        e = self.engine
        if e.stopping:
            return
        p, r, t = e.parts, e.version, e.env.now
        # the round's own copy: a battery that runs out during the round changes who is available
        # from then on (drain.py), not who could be scheduled when it began; a resumed round has its
        # copy from the checkpoint, so the live array would count such a device only in a run not cut
        available = None if e.available is None else e.available.copy()
        if e.flights.busy.any():
            available = ~e.flights.busy if available is None else available & ~e.flights.busy
        opening = open_round(p, e.streams, e.checks, e.learner, r, t, lambda: available)
        e.handovers.check()  # moving devices may have handed over as the round began
        gains, plan = opening.gains, opening.plan
        if plan is not None:  # the server trains alone this round
            self.current = Round(r, t, t, None, np.empty(0, dtype=np.int64), gains, available, np.empty(0), [],
                                 server_s=plan.duration_s)
            self.drain = plan.drain
            e.timer("_server_round_end", t + plan.duration_s if plan.duration_s > 0 else t + p.idle_round_s)
            return
        decision, selected, power, comp, energy = (opening.decision, opening.selected, opening.power, opening.comp,
                                                   opening.energy_full)
        bits = np.broadcast_to(np.asarray(opening.bits, dtype=float), selected.shape)
        airtime = self._airtimes(opening, bits)
        # on a band that decides each upload's time as it goes (NaN), the riding bits are in that time
        piggy_s = 0.0 if np.isnan(airtime).any() else piggyback_s(p.access, opening)
        at_site = self._model_at_sites(selected)  # behind a backhaul the model comes down to the sites first
        delivery, downlink_s = deliver_model(p, gains[selected], e.streams)  # at the round's gains
        start, down = at_site + downlink_s, [None] * selected.size
        if delivery is not None:
            down = list(zip(delivery.seconds.tolist(), delivery.attempts.tolist(), delivery.received.tolist()))
        round_ = self.current = Round(r, t, start, decision, selected, gains, available, comp, [], piggy_s=piggy_s)
        senders = self._send_reports(round_, at_site)  # the probe's reports go up first, as under sync
        share = 1.0 / max(selected.size, 1)
        for i, device in enumerate(selected.tolist()):
            round_.updates.append(e.tasks.launch(
                device, float(power[i]), float(comp[i]), float(energy[i]), key=e.flights.work_key(device, e.version),
                bits=float(bits[i]), round_=r,
                gain=float(gains[device]), airtime_s=float(airtime[i]), q=float(decision.q[device]), share=share,
                compute_start_s=start if down[i] is None else at_site + down[i][0], waiting=bool(senders.size),
                round_gain=True, downlink=down[i], model_at_site_s=at_site if e.site_links is not None else None))
        if senders.size:
            return  # the computations and protocol.on_round wait for the reports
        if not selected.size:  # a round without devices still takes its time (downlink, or a frame)
            e.timer("_empty_round_end", start if p.downlink_s > 0 else t + p.idle_round_s)
            return
        e.protocol.on_round(e, round_)

    def _airtimes(self, opening, bits: np.ndarray) -> np.ndarray:
        """Each selected device's time on the air at the round's gain (NaN on a shared band: the band
        decides as the uploads go; with fading within an upload, the round's uploads drawn at once,
        as sync draws them)."""
        e, p = self.engine, self.engine.parts
        selected, gains, power = opening.selected, opening.gains, opening.power
        upload_times = None
        if p.fading is not None:
            def upload_times():
                return p.fading.upload_times(bits, gains[selected], power, selected, e.streams["fading"])
        return p.access.round_airtime_s(opening.bits, gains[selected], power, upload_times)

    def _send_reports(self, round_: Round, at_site: float) -> np.ndarray:
        """The decision's reports (Decision.traffic.pre_upload_bits), launched now: they go up after
        the broadcast, through the same uplink, and the round's computations wait for them. Returns
        the devices that send one."""
        e, p = self.engine, self.engine.parts
        decision, gains = round_.decision, round_.gains
        bits = decision.traffic.pre_upload_bits
        pre = np.zeros(0) if bits is None else np.asarray(bits, dtype=float)
        senders = np.flatnonzero(pre > 0)
        if not senders.size:
            return senders
        round_.reports_left = int(senders.size)
        round_.computing = e.env.event()
        pre_air = p.access.round_airtime_s(pre[senders], gains[senders], decision.power[senders])
        for i, device in enumerate(senders.tolist()):
            e.tasks.launch(device, float(decision.power[device]), 0.0, 0.0, key=-1, bits=float(pre[device]),
                           round_=round_.index, gain=float(gains[device]), airtime_s=float(pre_air[i]),
                           compute_start_s=round_.compute_start_s, report=True, round_gain=True,
                           model_at_site_s=at_site if e.site_links is not None else None)
        return senders

    def _model_at_sites(self, selected: np.ndarray) -> float:
        """When the round's model is at the sites of its devices (its start, without a backhaul):
        each site receives it once, the round waits for the last."""
        e = self.engine
        t = e.env.now
        if e.site_links is None:
            return t
        sites = {e.site(device) for device in selected.tolist()}
        return max([e.site_links.model_at_site(c, t, e.version, e.parts.downlink_bits) for c in sorted(sites)],
                   default=t)

    def empty_round_end(self) -> None:
        e = self.engine
        e.protocol.on_round(e, self.current)

    def server_round_end(self) -> None:
        """A round in which the server trained alone (SAFARI): no airtime, no device energy."""
        e = self.engine
        round_ = self.current
        opening = RoundOpening(round_.index, round_.t_start, round_.gains, round_.available,
                               round_state(e.parts, e.streams, round_.index, round_.t_start, round_.gains,
                                           round_.available))
        duration = round_.server_s
        e.on_round(server_round_record(e.parts, e.learner, opening, self.drain, duration, e.env.now,
                                       0.0 if duration > 0 else e.parts.idle_round_s, per_update=True))
        self.current = None
        e.aggregated()
        self.begin()

    def end(self, round_: Round, on_time: list, carried: list = (), carried_weights=(), *,
            drop_late: bool = False) -> None:
        """Aggregate a round: the algorithm's round on the devices whose uploads are in
        (``on_time``), then the ``carried`` updates of earlier rounds with their weights. Devices of
        this round still in flight are stopped (``drop_late``: outcome "late_dropped", as a sync
        round's deadline drops them) or keep going (their updates are computed now, from this
        round's model). One row of rounds.csv, with the round's decision."""
        e = self.engine
        p, r, now = e.parts, round_.index, e.env.now
        dropped = {u.seq for u in round_.updates if u.in_flight} if drop_late else set()
        for u in round_.updates:
            if u.seq in dropped:
                e.tasks.stop(u, Outcome.LATE_DROPPED)
        e.server.train_pending(exclude=on_time)  # late devices of this round: from this round's model
        selected = round_.selected
        arrived = np.isin(selected, [u.device for u in on_time])
        ups = [{u.device: u for u in round_.updates}[n] for n in selected.tolist()]  # in selected order
        power = np.array([u.power for u in ups])
        metrics = learn_round(p, e.learner, round_.decision, selected, arrived, np.array([u.gain for u in ups]),
                              power, r)
        carried = list(carried)
        staleness = np.zeros(len(on_time) + len(carried), dtype=np.int64)
        staleness[len(on_time):] = self._apply_carried(carried, carried_weights, metrics)
        fresh = {u.seq for u in on_time} | {u.seq for u in carried}
        for u in round_.updates + carried:  # rows in the order sync writes them: the round's devices
            if u.seq in dropped:
                e.server.settle(u, Outcome.LATE_DROPPED, now)
            elif u.seq in fresh:
                u.version_applied = r
                e.server.last_applied[u.device] = r + 1
                e.server.settle(u, Outcome.APPLIED, now)
        tx_start = np.array([u.tx_start_s for u in ups])
        airtime = np.array([u.airtime_s for u in ups])
        on_air = on_air_s(arrived, airtime, tx_start, now)
        downlink_s, elapsed = p.downlink_s, now - round_.compute_start_s
        if p.downlink.timed:  # each device computed from when its model arrived; who missed it, not at all
            downlink_s = max((u.downlink_s for u in ups), default=p.downlink_s)
            waits = e.tasks.waits_for_model
            elapsed = np.array([now - u.compute_start_s if u.received or not waits else 0.0 for u in ups])
        comp_energy = compute_energy(np.array([u.compute_energy_full_j for u in ups]), round_.comp, elapsed)
        started = ~np.isnan(tx_start)
        order = np.flatnonzero(started)[np.argsort(tx_start[started], kind="stable")]
        idle = not selected.size and p.downlink_s == 0 and round_.reports_s == 0
        e.on_round(client_round_record(
            round_, now, downlink_s=downlink_s, comp_s=round_.comp, airtime_s=airtime, reports_s=round_.reports_s,
            reports_j=float(np.sum(round_.reports_energy)) if round_.reports_energy else 0.0, piggy_s=round_.piggy_s,
            upload_order=selected[order], energy_j=transmit_energy(power, on_air), compute_energy_j=comp_energy,
            arrived=arrived, metrics=metrics, idle_s=p.idle_round_s if idle else 0.0, staleness=staleness,
            per_update=True,
            dropped=~arrived & np.array([not u.in_flight for u in ups], dtype=bool)))  # carried: still in flight
        self.current = None
        e.aggregated()

    def _apply_carried(self, carried: list, weights, metrics: dict) -> list:
        """The algorithm applies updates of earlier rounds with the protocol's ``weights`` (their
        metrics join the round's, prefixed "carried_"); returns their staleness."""
        e = self.engine
        staleness = [e.version - u.version for u in carried]
        if carried and e.learner is not None:
            devices = np.array([u.device for u in carried], dtype=np.int64)
            tell_uplink(e.learner, arrived_facts(carried, e.parts.access))
            more = e.learner.apply_updates(devices, [u.delta for u in carried], np.asarray(weights, dtype=float),
                                           np.array(staleness, dtype=np.int64))
            metrics.update({f"carried_{k}": v for k, v in more.items()})
        return staleness

    def report_done(self, u: Update, lost: bool = False) -> None:
        """One of the round's reports is up (or lost): when the last is, the computations begin."""
        e = self.engine
        del e.flights.flying[u.seq]
        u.phase = FINISHED
        round_ = self.current
        if u.tx_start_s == u.tx_start_s:  # P x time on the air, summed as sync sums them
            on_air = u.airtime_s if u.tx_end_s == u.tx_end_s else e.env.now - u.tx_start_s
            round_.reports_energy.append(u.power * on_air)
        round_.reports_left -= 1
        if round_.reports_left == 0:
            self.start_computing(round_)

    def start_computing(self, round_: Round) -> None:
        """The round's devices compute from now on (their reports are up)."""
        e = self.engine
        now = e.env.now
        round_.reports_s = now - round_.compute_start_s
        round_.compute_start_s = now
        for u in round_.updates:
            if u.phase == WAITING and not u.received and e.tasks.waits_for_model:  # it missed the model: lost now
                u.compute_start_s, u.phase = now, DOWNLINK
            elif u.phase == WAITING:
                u.compute_start_s, u.compute_end_s, u.phase = now, now + u.compute_s, COMPUTE
        if round_.computing is not None:
            round_.computing.succeed()
            round_.computing = None
        if not round_.updates:
            e.timer("_empty_round_end", now if now > round_.t_start else now + e.parts.idle_round_s)
        else:
            e.protocol.on_round(e, round_)

    def state_dict(self) -> dict:
        """The round under way and the server round's drain, for checkpoints."""
        return {"round": round_state_dict(self.current), "drain": self.drain}

    def load_state(self, state: dict, by_seq: dict) -> None:
        """Restore them (after the engine restored the updates, which ``by_seq`` holds)."""
        self.drain = bool(state["drain"])
        self.current = round_from(state["round"], by_seq)
        if self.current is not None and self.current.reports_left:
            self.current.computing = self.engine.env.event()  # its devices wait for the reports again


def round_state_dict(round_: Round | None) -> dict | None:
    """A round under way as plain data (its updates by dispatch number)."""
    if round_ is None:
        return None
    d = round_.decision
    decision = None if d is None else {f.name: getattr(d, f.name) for f in fields(d)}
    if decision is not None:
        traffic = {f.name: getattr(d.traffic, f.name) for f in fields(d.traffic)}
        rq = traffic["report_with_upload"]
        if rq is not None:
            traffic["report_with_upload"] = {"devices": rq.devices, "gradients": rq.gradients,
                                             "max_samples": rq.max_samples}
        decision["traffic"] = traffic
        decision["info"] = numbers_only(decision["info"])
    return {"index": round_.index, "t_start": round_.t_start, "compute_start_s": round_.compute_start_s,
            "decision": decision, "selected": round_.selected, "gains": round_.gains,
            "available": round_.available, "comp": round_.comp, "updates": [u.seq for u in round_.updates],
            "server_s": round_.server_s, "reports_left": round_.reports_left, "reports_s": round_.reports_s,
            "reports_energy": list(round_.reports_energy), "piggy_s": round_.piggy_s}


def round_from(state: dict | None, by_seq: dict) -> Round | None:
    """The round that ``round_state_dict`` saved, with the updates restored (by dispatch number)."""
    if state is None:
        return None
    decision = state["decision"]
    if decision is not None:
        decision = dict(decision)
        traffic = dict(decision["traffic"])
        if traffic["report_with_upload"] is not None:
            traffic["report_with_upload"] = ReportRequest(**traffic["report_with_upload"])
        decision = Decision(**{**decision, "traffic": Traffic(**traffic)})
    updates = [by_seq[seq] for seq in state["updates"]]
    return Round(state["index"], state["t_start"], state["compute_start_s"], decision,
                 np.asarray(state["selected"], dtype=np.int64), np.asarray(state["gains"]), state["available"],
                 np.asarray(state["comp"], dtype=float), updates, state["server_s"], int(state["reports_left"]),
                 float(state["reports_s"]), list(state["reports_energy"]), float(state["piggy_s"]))


def numbers_only(info: dict) -> dict:
    """The entries of a Decision's (or a dispatch's) info that a checkpoint keeps: plain values."""
    return {k: v for k, v in info.items() if isinstance(v, (int, float, str, bool))}
