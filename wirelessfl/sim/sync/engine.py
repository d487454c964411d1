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
from typing import Callable

import numpy as np

from ...access import ResolvesSlots
from ...access.base import TimesEachDevice
from ...capabilities import provides
from ...des.clock import Clock
from ...scheduling.base import Decision
from ..round.checks import PartChecks
from ..round.handovers import take_handovers
from ..round.parts import (STREAMS, EvalRule, Learner, Parts, StopRule, evaluate, load_parts_state, parts_state,
                    raise_non_finite_clock)
from ..records.round_record import RoundRecord
from ..round.pipeline import compute_energy, learn_round, open_round, piggyback_s, server_round_record, transmit_energy


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
        if parts.cells is not None:  # interferers' gains to other sites are drawn from their own stream
            parts.cells.use_streams(streams, parts.fading)
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
        if self.learner is not None and self._evaluated_at != self.rounds_done:
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
        p, learner = scope.parts, scope.learner
        t_start = self.env.now
        opening = open_round(p, self.streams, self.checks, learner, r, t_start, scope.available)
        moved = take_handovers(p.channel)
        if moved:  # moving devices handed over as the round began: its uploads go to their new cells
            self.on_handovers(moved)
        available = opening.available
        if opening.plan is not None:
            yield from self._server_round(opening)
            return
        decision, selected, power, bits, comp = (opening.decision, opening.selected, opening.power, opening.bits,
                                                 opening.comp)
        gains = opening.gains
        piggy_s = piggyback_s(p.access, opening)
        airtime, attempts, delivered = self._airtimes(p, selected, bits, gains[selected], power)
        comp_energy, received = opening.energy_full, None
        receiving_s = downlink_s = p.downlink_s
        delivery = p.downlink.deliver(p.downlink_bits, gains[selected], self.streams["downlink"]) if p.downlink.timed \
            else None
        if delivery is not None:  # each device's model arrives (or does not) when its channel allows
            receiving_s, received = delivery.seconds, delivery.received
            downlink_s = float(receiving_s.max(initial=p.downlink_s))
            # a device that missed the model waits for the next round: it neither computes nor sends
            comp, comp_energy, airtime = (np.where(received, a, 0.0) for a in (comp, comp_energy, airtime))
        starts, t_compute, pre_s, pre_energy = yield from self._to_computation(p, decision, gains, t_start, delivery,
                                                                                downlink_s)
        deadline_at = None
        if p.round_deadline_s is not None:
            deadline_at = t_compute + max(t_start + p.round_deadline_s - t_compute, 0.0)
        listens = p.battery.present and p.access.listens  # a contention scheme: paid after its schedule
        # tasks cut where a battery runs out: they send less, or nothing (no batteries: none cut, emptied None)
        comp, comp_energy, cut, emptied = p.battery.closed_round(selected, receiving_s, comp, comp_energy,
                                                                 np.zeros_like(airtime) if listens else airtime, power)
        # emptied while computing: it never contends (an infinite upload is none to the scheme)
        airtime = np.where(emptied, np.inf, airtime) if listens else cut
        ready = starts + comp  # every selected device computes from its start on
        uplink, airtime, attempts, arrived, tx_start = self._uplink(p, selected, ready, airtime, attempts, deadline_at,
                                                                    bits, gains, power, delivered, received)
        listening_j = 0.0
        if listens:
            emptied, arrived, listening_j = self._contended(p, selected, uplink, tx_start, airtime, power, receiving_s,
                                                            comp_energy, emptied, arrived)
        end_s, backhaul_s = self._end_s(p, t_start, uplink, delivery, downlink_s, selected, arrived, tx_start, airtime)
        if end_s > self.env.now:
            yield self.env.at(end_s)
        idle_s = yield from self._idle(t_start)
        t_end = self.env.now
        energy, comp_energy = _energies(uplink, deadline_at, airtime, tx_start, t_end, power, comp, comp_energy, starts)
        emptied_s = None
        if emptied is not None:
            emptied_s, arrived = self._drain(selected, emptied, ready, tx_start, airtime, t_end,
                                             comp_energy + energy + p.battery.rx_power_w * receiving_s + listening_j,
                                             arrived)
        metrics = learn_round(p, learner, decision, selected, arrived, gains[selected], power, r)
        labels = dict(scope.labels)
        if p.backhaul.timed:
            labels["backhaul_s"] = backhaul_s
        self.on_round(RoundRecord(
            round=r, t_start=t_start, t_end=t_end, downlink_s=downlink_s,
            comp_s=float(comp.max(initial=0.0)), comm_s=float(airtime.sum()) + pre_s, selected=selected,
            upload_order=selected[uplink.order], airtime_s=airtime,
            energy_j=energy,
            gains=gains, decision=decision, compute_energy_j=comp_energy, arrived=arrived,
            available=available, extra_airtime_s=pre_s + piggy_s, extra_energy_j=pre_energy,
            metrics=metrics, idle_s=idle_s, ready_s=ready, tx_start=tx_start, tx_end=uplink.tx_end,
            attempts=attempts, power=None if power is opening.decision_power else power, emptied_s=emptied_s,
            upload_counts=self._upload_counts(p, selected),
            downlink=delivery, labels=labels, bits=opening.bits))

    @staticmethod
    def _uplink(p, selected, ready, airtime, attempts, deadline_at, bits, gains, power, delivered, received):
        """The access scheme queues the round's uploads (each cell's, with several): the schedule,
        and each upload's time on the air, transmissions, arrival and start (NaN: it sent nothing)."""
        if provides(p.access, TimesEachDevice):  # an uplink timed per device (satellite passes)
            uplink = p.access.schedule_devices(selected, ready, bits, deadline_at)
        elif p.cells is None and provides(p.access, ResolvesSlots):  # random access: who contends, how strongly
            uplink = p.access.schedule(ready, airtime, deadline_at, received_w=gains[selected] * power,
                                       devices=selected)
        else:
            uplink = (p.access.schedule(ready, airtime, deadline_at) if p.cells is None
                      else p.cells.schedule(selected, ready, airtime, deadline_at, bits=bits, gains=gains[selected],
                                            power=power))
        if uplink.on_air_s is not None:  # contention decided each device's time on the air (random access)
            airtime, attempts = uplink.on_air_s, uplink.attempts
        arrived = uplink.arrived if delivered is None else uplink.arrived & delivered  # lost uploads do not count
        tx_start = uplink.tx_start
        if received is not None and not received.all():  # who missed the model sent nothing
            arrived, tx_start = arrived & received, np.where(received, tx_start, np.nan)
        return uplink, airtime, attempts, arrived, tx_start

    def _airtimes(self, p, selected: np.ndarray, bits, gains: np.ndarray, power: np.ndarray):
        """The round's uploads' times on the air, their transmissions and whether they got through
        (None, None where nothing can fail): in packets at the round's gain, with fading within an
        upload, each device in its own cell, or by the access scheme."""
        self._round_harq = None
        if self._packets:  # packets retried at the round's gain; some uploads may be lost
            airtime, attempts, delivered, harq = self._send(selected, bits, gains, power)
            self._round_harq = harq if p.access.link.mcs_rate else None
            return airtime, attempts, delivered
        if p.fading is not None:  # the channel changes every coherence time of a long upload
            return p.access.on_air_s(p.fading.upload_times(bits, gains, power, selected, self.streams["fading"])), \
                None, None
        if p.cells is not None:
            return p.cells.airtime_s(selected, bits, gains, power), None, None
        return p.access.airtime_s(bits, gains, power), None, None

    def _upload_counts(self, p, selected: np.ndarray) -> np.ndarray | None:
        """The round's uploads' counts of the uplink's own (an MCS rate's MCS and transmissions, then the
        scheme's ``round_counts``), one row per selected device; None where it has none."""
        parts = []
        if p.access.link.mcs_rate:
            parts.append(self._round_harq if self._round_harq is not None
                         else np.tile([-1, 0], (len(selected), 1)))
        if p.access.upload_columns:
            counts = p.access.round_counts()  # integer counts, or floats (a pass's geometry)
            parts.append(np.asarray(counts, dtype=float if np.asarray(counts).dtype.kind == "f" else np.int64
                                    ).reshape(len(selected), len(p.access.upload_columns)))
        return np.hstack(parts) if parts else None

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

    @staticmethod
    def _contended(p, selected, uplink, tx_start, airtime, power, receiving_s, comp_j, emptied, arrived):
        """A contention scheme's round against the batteries (``AccessScheme.listens``): a device listens
        at the receiving power from its first contention to its last ACK, and sends its frames at its
        power; one whose charge after the model and its computation does not cover that ran out in its
        upload, which is then lost (found at the end of the round: the round's DCF is not run again).
        Returns (emptied, arrived, each device's listening energy)."""
        battery = p.battery
        with np.errstate(invalid="ignore"):
            ends = tx_start + airtime if uplink.tx_end is None else uplink.tx_end
            listening = np.nan_to_num(np.maximum(ends - tx_start - airtime, 0.0))
            left = battery.charge[selected] - battery.rx_power_w * receiving_s - comp_j
            out = ~emptied & (tx_start == tx_start) & (power * airtime + battery.rx_power_w * listening > left)
        return emptied | out, arrived & ~out, battery.rx_power_w * listening

    def _drain(self, selected, emptied, ready, tx_start, airtime, t_end, spent_j, arrived):
        """A round's energy (``spent_j``, the model's reception included) leaves the batteries: (when
        each selected device ran out, NaN where it did not, or the deadline came first; who arrived,
        less those)."""
        battery = self.parts.battery
        with np.errstate(invalid="ignore"):
            when = np.where(airtime > 0, tx_start + airtime, ready)  # on the air, or before sending
            emptied = emptied & (when <= t_end)
        battery.spend(selected, spent_j, emptied)
        return np.where(emptied, when, np.nan), arrived & ~emptied

    def _step_availability(self) -> np.ndarray | None:
        """Who is available this round: the availability model's next step (None: everyone)."""
        p = self.parts
        return p.availability.step(self.streams["availability"]) if p.availability is not None else None

    def _send(self, selected: np.ndarray, bits, gains: np.ndarray,
              power: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each selected device's upload in packets at the round's gain, from the "link" stream: (time
        on the air, transmissions, whether it got through); with several cells, each cell's devices on
        its own scheme, cell after cell."""
        cells = self.parts.cells
        if cells is None:
            return self._send_in(self.parts.access, bits, gains, power)
        airtime, attempts, delivered = (np.empty(len(selected)), np.empty(len(selected), dtype=np.int64),
                                        np.empty(len(selected), dtype=bool))
        harq = np.empty((len(selected), 2), dtype=np.int64)
        for c, idx in cells.members(selected):
            b = bits if np.ndim(bits) == 0 else np.asarray(bits)[idx]
            airtime[idx], attempts[idx], delivered[idx], harq[idx] = self._send_in(cells.accesses[c], b, gains[idx],
                                                                                   power[idx])
        return airtime, attempts, delivered, harq

    def _send_in(self, access, bits, gains: np.ndarray, power: np.ndarray):
        """The uploads of devices sharing ``access``, by the scheme (``AccessScheme.send_packets``),
        with their errors from the "harq" stream under an MCS rate, else the "link" stream."""
        rng = self.streams["harq" if access.link.mcs_rate else "link"]
        return access.send_packets(bits, gains, power, rng)

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
        if p.cells is not None:  # each cell's reports on its own band, the cells at once
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


def _energies(uplink, deadline_at, airtime, tx_start, t_end, power, comp, comp_energy, starts):
    """(transmit, computation) energy of each selected device of a round that ended at ``t_end``:
    for what was done where a deadline cut uploads or computations short."""
    if deadline_at is None or uplink.on_air_s is not None:  # everything was done, or said as it went
        on_air = airtime
    else:  # a dropped upload spent power only while on the air
        on_air = np.where(uplink.arrived, airtime, np.where(np.isnan(tx_start), 0.0, t_end - tx_start))
    if deadline_at is not None:  # an interrupted computation spent the fraction it completed
        comp_energy = compute_energy(comp_energy, comp, t_end - starts)
    return transmit_energy(power, on_air), comp_energy
