"""The closed-form engine of the sync protocol: when things happen in one round, and the loop over
rounds. (The other protocols run on the event engine, wirelessfl.sim.events.engine; what both run on, the
parts, the stop and evaluation rules and the random streams, is wirelessfl.sim.round.parts.)

Per round: channel draw -> availability -> the algorithm's plan (a client round, or a server round
in which the server trains alone) -> the scheduler's probe (reports it wants before deciding;
training runs deliver them) -> the scheduler's decision -> m draws (distinct set), or the set the
scheduler chose itself (Decision.selected) -> downlink broadcast -> uploads that must precede the
computation (Decision.traffic.pre_upload_bits, e.g. the probe's reports; through the same uplink) -> every
selected device computes in parallel from the same moment, and the access scheme queues their
uploads (TDMA: one transmitter, first come first served in order of computation completion; FDMA:
each on its own sub-band as soon as its computation ends) -> aggregation once every upload is in,
or at the round deadline with the uploads that arrived by then. Each phase is one timeout on the
clock: the uplink queue is computed in closed form by the access scheme (no process per device,
which cost more than the decision itself). Learning happens at aggregation and takes no simulated
time of its own: its duration is what the computation model stands for. No algorithm maths and no
paper-specific code lives here: the parts come in through their protocols.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...access.base import ListensWhileContending
from ...capabilities import provides
from ...des.clock import Clock
from ...scheduling.base import Decision
from ..round.checks import PartChecks
from ..round.closing import client_round_record, deliver_model
from ..round.handovers import take_handovers
from ..round.parts import (STREAMS, EvalRule, Learner, Parts, StopRule, evaluate, final_evaluation_due,
                           load_parts_state, parts_state, raise_non_finite_clock)
from ..round.pipeline import learn_round, open_round, piggyback_s, server_round_record
from .uplink import contended, drain, energies, round_airtimes, schedule_uploads, upload_counts


@dataclass(frozen=True)
class RoundScope:
    """Whose round the engine runs: its parts, its learner (None: timing only), who may be drawn
    (``available()``; None: everyone) and its rows' own columns (``labels``). The run's own is the
    whole run's; an engine built on this one (wirelessfl.sim.sync.tiers) hands in its own, so this engine
    knows nothing of what it stands for."""

    parts: Parts
    learner: Learner | None
    available: Callable[[], np.ndarray | None]
    labels: dict


@dataclass
class _Uploads:
    """What a sync round's timing found, for its record: the model's way down (``delivery``, None on
    a fixed downlink), the reports before the computations, the computations and uploads of the
    selected devices as the batteries allowed them, and the time the round spent idle."""

    delivery: Any
    downlink_s: float
    receiving_s: Any
    starts: Any
    pre_s: float
    pre_energy: float
    deadline_at: float | None
    comp: np.ndarray
    comp_energy: np.ndarray
    ready: np.ndarray
    uplink: Any
    airtime: np.ndarray
    attempts: np.ndarray | None
    arrived: np.ndarray
    tx_start: np.ndarray
    emptied: np.ndarray | None
    listening_j: Any
    harq: np.ndarray | None
    backhaul_s: float
    idle_s: float


class Engine:
    """Runs rounds on a SimPy clock and reports each round and evaluation to callbacks.

    parts: what is simulated (:class:`Parts`). streams: a Generator per name in STREAMS.
    learner: the training side (None: timing only). on_round, on_eval: the recorder's callbacks;
    after_round: called with the engine after every round's records (the runner checkpoints there).
    """

    def __init__(self, parts: Parts, *, streams: dict[str, np.random.Generator], stop: StopRule,
                 evaluate: EvalRule, learner: Learner | None = None,
                 on_round: Callable[[RoundRecord], None] = lambda r: None,
                 on_eval: Callable[[dict], None] = lambda e: None,
                 after_round: Callable[["Engine"], None] | None = None):
        missing = [name for name in STREAMS if name not in streams]
        if missing:
            raise ValueError(f"the engine needs the random streams {missing}")
        self.parts, self.streams, self.learner = parts, streams, learner
        self.stop, self.eval_rule = stop, evaluate
        self.on_round, self.on_eval, self.after_round = on_round, on_eval, after_round
        self.rounds_done = 0
        self._start_s = 0.0
        self._evaluated_at: int | None = None  # the rounds done at the last evaluation
        # uploads in packets that may fail (a fixed rate alone, with fading within an upload, is the fading's)
        self._packets = parts.access.link.packets_on and parts.fading is None
        self.checks = PartChecks(parts)  # the user's scheduler and channel: their outputs are checked
        parts.cells.use_streams(streams, parts.fading)  # interferers' gains to other sites: their own stream
        self.on_handovers: Callable[[list], None] = lambda rows: None  # the recorder's (handovers.csv)
        self.env: Clock | None = None

    def run(self) -> None:
        """Run until the stop rule fires (from where ``load_state`` left it, if it was called)."""
        self.env = Clock(initial_time=self._start_s)
        if self.rounds_done == 0 and self.eval_rule.at_start:
            self._evaluate()
        self.env.run(until=self.env.process(self._loop()))

    @property
    def now(self) -> float:
        """The simulated clock (where the loop starts or stands)."""
        return float(self.env.now) if self.env is not None else self._start_s

    def state_dict(self) -> dict:
        """Everything the loop needs to continue exactly where it is (between rounds): its counters,
        every random stream, and the memory of the channel and the availability model."""
        return {"rounds_done": self.rounds_done, "now_s": self.now, "evaluated_at": self._evaluated_at,
                "eval_next_s": self.eval_rule.next_s, "target_reached": self.stop.reached,
                "streams": {name: g.bit_generator.state for name, g in self.streams.items()},
                **parts_state(self.parts)}

    @staticmethod
    def rows_in_state(state: dict) -> int:
        """The rows of rounds.csv a state_dict stands for: one per round."""
        return int(state["rounds_done"])

    def uplink_busy_s(self, now: float) -> float:
        """0: a sync round's uplink time is recorded with its row."""
        return 0.0

    def load_state(self, state: dict) -> None:
        """Continue from a state_dict (call before run)."""
        self.rounds_done = int(state["rounds_done"])
        self._evaluated_at = state.get("evaluated_at")
        self._start_s = float(state["now_s"])
        self.eval_rule.next_s = float(state["eval_next_s"])
        self.stop.reached = bool(state["target_reached"])
        for name, g in self.streams.items():
            if name in state["streams"]:  # a stream added since the checkpoint was written starts fresh
                g.bit_generator.state = state["streams"][name]
        load_parts_state(self.parts, state)

    # --- processes -----------------------------------------------------------------------------

    def _loop(self):
        """Steps until the stop rule fires, each followed by its evaluation if due and the runner's
        ``after_round``; then the final model's evaluation, whichever rule stopped the run."""
        while not self.stop.done(self.rounds_done, self.env.now):
            due = yield from self._step()
            if due:
                self._evaluate()
            if self.after_round is not None:
                self.after_round(self)
        if final_evaluation_due(self.learner, self._evaluated_at, self.rounds_done):
            self._evaluate()

    def _step(self):
        """One step of the loop (a SimPy generator): a round of the whole run. Returns whether an
        evaluation is due after it (an engine built on this one steps otherwise: wirelessfl.sim.sync.tiers)."""
        yield from self._round(self.rounds_done, RoundScope(self.parts, self.learner, self._step_availability, {}))
        self.rounds_done += 1
        if not math.isfinite(self.env.now):
            raise_non_finite_clock(self.env.now, f"round {self.rounds_done - 1}")
        return self.learner is not None and self.eval_rule.due(self.rounds_done, self.env.now)

    def _round(self, r: int, scope: RoundScope):
        """Round ``r`` of ``scope`` (a :class:`RoundScope`, or anything with its members)."""
        p = scope.parts
        opening = open_round(p, self.streams, self.checks, scope.learner, r, self.env.now, scope.available)
        moved = take_handovers(p.channel)
        if moved:  # moving devices handed over as the round began: its uploads go to their new cells
            self.on_handovers(moved)
        if opening.plan is not None:
            yield from self._server_round(opening)
            return
        uploads = yield from self._timed_uploads(p, opening)
        self._close(p, scope, opening, uploads)

    def _timed_uploads(self, p, opening):
        """From the round's start to its end (a SimPy generator): the model's way down, the reports
        a scheduler asks for first, the computations, the uploads as the access scheme queues them
        against the batteries, and the backhaul. Returns what the round's record needs."""
        selected, power, gains, t_start = opening.selected, opening.power, opening.gains, opening.t_start
        air = round_airtimes(p, self.streams, self._packets, selected, opening.bits, gains[selected], power)
        comp, comp_energy, airtime = opening.comp, opening.energy_full, air.airtime_s
        delivery, downlink_s = deliver_model(p, gains[selected], self.streams)
        receiving_s, received = (p.downlink_s, None) if delivery is None else (delivery.seconds, delivery.received)
        if delivery is not None:  # one that missed the model waits for the next round: no computing, no sending
            comp, comp_energy, airtime = (np.where(received, a, 0.0) for a in (comp, comp_energy, airtime))
        starts, t_compute, pre_s, pre_energy = yield from self._to_computation(p, opening.decision, gains, t_start,
                                                                                delivery, downlink_s)
        deadline_at = None
        if p.round_deadline_s is not None:
            deadline_at = t_compute + max(t_start + p.round_deadline_s - t_compute, 0.0)
        listens = p.battery.present and provides(p.access, ListensWhileContending)  # paid after its schedule
        # tasks cut where a battery runs out: they send less, or nothing (no batteries: none cut, emptied None)
        comp, comp_energy, cut, emptied = p.battery.closed_round(selected, receiving_s, comp, comp_energy,
                                                                 np.zeros_like(airtime) if listens else airtime, power)
        # emptied while computing: it never contends (an infinite upload is none to the scheme)
        air.airtime_s = np.where(emptied, np.inf, airtime) if listens else cut
        ready = starts + comp  # every selected device computes from its start on
        uplink, airtime, attempts, arrived, tx_start = schedule_uploads(p, selected, ready, air, deadline_at,
                                                                        opening.bits, gains, power, received)
        listening_j = 0.0
        if listens:
            emptied, arrived, listening_j = contended(p, selected, uplink, tx_start, airtime, power, receiving_s,
                                                      comp_energy, emptied, arrived)
        end_s, backhaul_s = self._end_s(p, t_start, uplink, delivery, downlink_s, selected, arrived, tx_start, airtime)
        if end_s > self.env.now:
            yield self.env.at(end_s)
        idle_s = yield from self._idle(t_start)
        return _Uploads(delivery, downlink_s, receiving_s, starts, pre_s, pre_energy, deadline_at, comp, comp_energy,
                        ready, uplink, airtime, attempts, arrived, tx_start, emptied, listening_j, air.harq,
                        backhaul_s, idle_s)

    def _close(self, p, scope: RoundScope, opening, u: "_Uploads") -> None:
        """The round's end: what it cost, the batteries' drain, the learning on the uploads that
        arrived, and its record."""
        selected, power, t_end = opening.selected, opening.power, self.env.now
        energy, comp_energy = energies(u.uplink, u.deadline_at, u.airtime, u.tx_start, t_end, power, u.comp,
                                       u.comp_energy, u.starts)
        emptied_s, arrived = None, u.arrived
        if u.emptied is not None:
            spent_j = comp_energy + energy + p.battery.rx_power_w * u.receiving_s + u.listening_j
            emptied_s, arrived = drain(self.parts.battery, selected, u.emptied, u.ready, u.tx_start, u.airtime, t_end,
                                       spent_j, arrived)
        metrics = learn_round(p, scope.learner, opening.decision, selected, arrived, opening.gains[selected], power,
                              opening.index)
        labels = dict(scope.labels)
        if p.backhaul.timed:
            labels["backhaul_s"] = u.backhaul_s
        self.on_round(client_round_record(
            opening, t_end, downlink_s=u.downlink_s, comp_s=u.comp, airtime_s=u.airtime, reports_s=u.pre_s,
            reports_j=u.pre_energy, piggy_s=piggyback_s(p.access, opening), upload_order=selected[u.uplink.order],
            energy_j=energy, compute_energy_j=comp_energy, arrived=arrived, metrics=metrics, idle_s=u.idle_s,
            ready_s=u.ready, tx_start=u.tx_start, tx_end=u.uplink.tx_end, attempts=u.attempts,
            power=None if power is opening.decision_power else power, emptied_s=emptied_s,
            upload_counts=upload_counts(p, selected, u.harq), downlink=u.delivery, labels=labels, bits=opening.bits))

    def _to_computation(self, p, decision: Decision, gains: np.ndarray, t_start: float, delivery, downlink_s: float):
        """From the round's start to its computations (a SimPy generator): the downlink, and the
        reports a scheduler asks for first (after the whole broadcast). Returns (when each selected
        device starts computing, or one time for all; the computations' first start; the reports'
        uplink time; their transmit energy)."""
        if decision.traffic.pre_upload_bits is not None:
            if downlink_s > 0:
                yield self.env.timeout(downlink_s)
            pre_s, pre_energy = yield from self._pre_uploads(decision, gains)
            return self.env.now, self.env.now, pre_s, pre_energy
        if delivery is not None:  # each device computes from when its model arrived
            return t_start + delivery.seconds, t_start, 0.0, 0.0
        if p.downlink_s > 0:
            yield self.env.timeout(p.downlink_s)
        return self.env.now, self.env.now, 0.0, 0.0

    def _end_s(self, p, t_start: float, uplink, delivery, downlink_s: float, selected: np.ndarray,
               arrived: np.ndarray, tx_start: np.ndarray, airtime: np.ndarray) -> tuple[float, float]:
        """When the round ends: its last upload (or the deadline), its timed downlink's last receiver,
        and, with one server in the cloud behind a backhaul, the sites' forwarding of the updates that
        arrived and the model's way back. Returns (the end, the backhaul's share after the uploads)."""
        uploads_end_s = uplink.end_s if delivery is None else max(uplink.end_s, t_start + downlink_s)
        ends = tx_start + airtime if uplink.tx_end is None else uplink.tx_end
        # (no backhaul to wait for: max(x, -inf) + 0.0 is x exactly)
        end_s = max(uploads_end_s, p.backhaul.forward_end_s(p.cells, selected, arrived, ends, p.upload_bits))
        end_s += p.backhaul.transfer_s(p.downlink_bits)
        return end_s, end_s - max(uplink.end_s, t_start)

    def _step_availability(self) -> np.ndarray | None:
        """Who is available this round: the availability model's next step (None: everyone)."""
        p = self.parts
        return p.availability.step(self.streams["availability"]) if p.availability is not None else None

    def _idle(self, t_start: float):
        """Let a round in which nothing took time last idle_round_s; returns the time added."""
        if self.env.now > t_start:
            return 0.0
        yield self.env.timeout(self.parts.idle_round_s)
        return self.parts.idle_round_s

    def _pre_uploads(self, decision: Decision, gains: np.ndarray):
        """Uploads before the round's computation (after the broadcast that triggers them), e.g.
        bootstrap gradients or Power-of-Choice losses: under TDMA one device after another through
        the uplink resource in device order; under FDMA all at once on the band split among them.
        Returns (the uplink time they took, their transmit energy)."""
        pre_bits = np.asarray(decision.traffic.pre_upload_bits, dtype=float)
        senders = np.flatnonzero(pre_bits > 0)
        if senders.size == 0:
            return 0.0, 0.0
        power = decision.power[senders]
        p = self.parts
        start = self.env.now
        if p.cells.present:  # each cell's reports on its own band, the cells at once
            airtime = p.cells.airtime_s(senders, pre_bits[senders], gains[senders], power)
            took = max(float(p.access.report_waits(airtime[idx]).sum()) for _, idx in p.cells.members(senders))
            yield self.env.timeout(took)
            return self.env.now - start, float(np.sum(power * airtime))
        airtime = p.access.airtime_s(pre_bits[senders], gains[senders], power)
        for wait in p.access.report_waits(airtime).tolist():  # the band is free: nobody computes yet
            yield self.env.timeout(wait)
        return self.env.now - start, float(np.sum(power * airtime))

    def _server_round(self, opening):
        """A round in which the server trains alone: no airtime, no device energy, and the
        scheduler is not consulted (it may count the round as an idle slot)."""
        plan = opening.plan
        if plan.duration_s > 0:
            yield self.env.timeout(plan.duration_s)
        idle_s = yield from self._idle(opening.t_start)
        self.on_round(server_round_record(self.parts, self.learner, opening, plan.drain, plan.duration_s,
                                          self.env.now, idle_s))

    def _evaluate(self) -> None:
        self._evaluated_at = self.rounds_done
        evaluate(self.learner, self.stop, self.on_eval, self.rounds_done, float(self.env.now))

