"""The SimPy event loop: when things happen in one round, and the loop over rounds.

Per round: channel draw -> availability -> scheduler decision -> m draws (distinct set), or the set
the scheduler chose itself (Decision.selected) -> downlink broadcast -> uploads that must precede the
computation (Decision.pre_upload_bits: e.g. bootstrap gradients, loss scalars; through the same
uplink) -> each selected device computes in parallel (its own process) -> uploads (TDMA: through a
one-transmitter resource, first come first served in order of computation completion; FDMA: each on
its own sub-band as soon as its computation ends) -> aggregation once every upload is in, or at the
round deadline with the uploads that arrived by then. Learning happens at aggregation and takes no
simulated time of its own: its duration is what the computation model stands for. No algorithm
maths lives here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np
import simpy

from ..scheduling.base import Decision, RoundState, draw_devices


class Learner(Protocol):
    """What the engine needs from the training side (None in timing-only runs)."""

    def train_round(self, selected: np.ndarray, decision: Decision, round_idx: int) -> None: ...

    def evaluate(self) -> dict: ...


@dataclass
class RoundRecord:
    """Timing facts of one round; the engine fills it, the recorder stores it."""

    round: int
    t_start: float
    t_end: float
    downlink_s: float
    comp_s: float          # longest computation among the selected devices
    comm_s: float          # sum of the selected devices' airtimes, plus the pre-round uploads' time
    selected: np.ndarray   # distinct devices, ascending
    upload_order: np.ndarray  # devices in the order their uploads started
    airtime_s: np.ndarray  # per selected device (same order as ``selected``)
    energy_j: np.ndarray   # transmit energy per selected device: P x time actually on the air
    gains: np.ndarray
    decision: Decision
    compute_energy_j: np.ndarray | None = None  # per selected device, for the computation done
    arrived: np.ndarray | None = None    # per selected device: upload complete by the deadline
    available: np.ndarray | None = None  # per device (N,): could be scheduled (None: all)
    server_s: float = 0.0  # server computation time (SAFARI server round; no device takes part)
    extra_airtime_s: float = 0.0  # uplink time of traffic other than the models (pre-uploads, piggy-backs)
    extra_energy_j: float = 0.0   # transmit energy of the pre-round uploads (all devices that sent)


@dataclass
class StopRule:
    """When the loop ends: a round count, a simulated-time budget, or a reached target."""

    rounds: int | None = None
    time_budget_s: float | None = None
    target_accuracy: float | None = None
    stop_at_target: bool = False
    reached: bool = field(default=False, init=False)

    def done(self, rounds_done: int, now_s: float) -> bool:
        if self.rounds is not None and rounds_done >= self.rounds:
            return True
        if self.time_budget_s is not None and now_s >= self.time_budget_s:
            return True
        return self.stop_at_target and self.reached


@dataclass
class EvalRule:
    """Evaluate every k rounds or at the first round boundary after every dt simulated seconds."""

    every_rounds: int | None = None
    every_s: float | None = None
    _next_s: float = field(default=0.0, init=False)

    def __post_init__(self):
        self._next_s = self.every_s or 0.0  # the run always evaluates at time 0

    def due(self, rounds_done: int, now_s: float) -> bool:
        if self.every_s is not None:
            if now_s >= self._next_s:
                # skip grid points a long round jumped over: the model did not change in between
                self._next_s = (float(np.floor(now_s / self.every_s)) + 1) * self.every_s
                return True
            return False
        return rounds_done % (self.every_rounds or 10) == 0


class _Uploads:
    """What happened to each selected device's upload in one round (filled by the device processes)."""

    def __init__(self, k: int):
        self.order: list[int] = []
        self.tx_start = np.full(k, np.nan)
        self.arrived = np.zeros(k, dtype=bool)


class Engine:
    """Runs rounds on a SimPy clock and reports each round and evaluation to callbacks.

    ``access`` (wireless.TDMA or FDMA; default TDMA over ``link``) gives the airtimes and says whether
    devices share one transmitter; ``availability`` (default: all devices always available) gives
    each round's mask from the "availability" stream; ``round_deadline_s`` drops uploads not finished
    that long after the round started.
    """

    def __init__(self, *, channel, link, compute, scheduler, model_bits: float, num_devices: int,
                 streams: dict[str, np.random.Generator], downlink_s: float = 0.0,
                 learner: Learner | None = None, stop: StopRule, evaluate: EvalRule,
                 on_round: Callable[[RoundRecord], None] = lambda r: None,
                 on_eval: Callable[[dict], None] = lambda e: None,
                 checkpoint_every: int | None = None,
                 on_checkpoint: Callable[["Engine"], None] = lambda e: None,
                 access=None, availability=None, round_deadline_s: float | None = None,
                 client_round_prob: float | None = None, server_round_s: float = 0.0,
                 server_round_is_slot: bool = False):
        self.channel, self.link, self.compute, self.scheduler = channel, link, compute, scheduler
        if access is None:
            from ..wireless import TDMA

            access = TDMA(link)
        self.access, self.availability, self.round_deadline_s = access, availability, round_deadline_s
        self.model_bits = float(model_bits)
        self.num_devices = num_devices
        self.streams = streams
        self.downlink_s = downlink_s
        self.learner = learner
        self.stop, self.eval_rule = stop, evaluate
        self.on_round, self.on_eval = on_round, on_eval
        self.checkpoint_every, self.on_checkpoint = checkpoint_every, on_checkpoint
        # SAFARI (spec 003): a round is a client round with probability client_round_prob (coin from
        # the "round_type" stream), else a server round of server_round_s on the server alone
        self.client_round_prob, self.server_round_s = client_round_prob, float(server_round_s)
        self.server_round_is_slot = server_round_is_slot  # server round drains the scheduler's queues
        if client_round_prob is not None and "round_type" not in streams:
            raise ValueError("client_round_prob needs a 'round_type' random stream")
        self.rounds_done = 0
        self._start_s = 0.0

    def run(self) -> None:
        """Run until the stop rule fires (from where ``load_state`` left it, if it was called)."""
        self.env = simpy.Environment(initial_time=self._start_s)
        # TDMA: one transmitter at a time; FDMA: every device has its own sub-band, no queue
        self.uplink = None if self.access.concurrent else simpy.Resource(self.env, capacity=1)
        if self.rounds_done == 0:
            self._evaluate()
        # until the loop ends: a deadline timer left over from the last round must not move the clock
        self.env.run(until=self.env.process(self._loop()))

    def state_dict(self) -> dict:
        """Everything the loop needs to continue exactly where it is (between rounds).

        Models with memory (a Gauss-Markov channel, the availability chain) add their state; it
        is kept in plain lists so the checkpoint loads in torch's weights-only mode.
        """
        from ..wireless import channel_state

        return {"rounds_done": self.rounds_done, "now_s": float(self.env.now),
                "eval_next_s": self.eval_rule._next_s, "target_reached": self.stop.reached,
                "streams": {name: g.bit_generator.state for name, g in self.streams.items()},
                "channel": channel_state(self.channel),
                "availability": self.availability.state_dict() if self.availability is not None else None}

    def load_state(self, state: dict) -> None:
        """Continue from a state_dict (call before run)."""
        from ..wireless import load_channel_state

        self.rounds_done = int(state["rounds_done"])
        self._start_s = float(state["now_s"])
        self.eval_rule._next_s = float(state["eval_next_s"])
        self.stop.reached = bool(state["target_reached"])
        for name, g in self.streams.items():
            if name in state["streams"]:  # a stream added since the checkpoint was written starts fresh
                g.bit_generator.state = state["streams"][name]
        load_channel_state(self.channel, state.get("channel"))
        if self.availability is not None and state.get("availability") is not None:
            self.availability.load_state(state["availability"])

    # --- processes -----------------------------------------------------------------------------

    def _loop(self):
        while not self.stop.done(self.rounds_done, self.env.now):
            yield from self._round(self.rounds_done)
            self.rounds_done += 1
            if self.learner is not None and self.eval_rule.due(self.rounds_done, self.env.now):
                self._evaluate()
            if self.checkpoint_every and self.rounds_done % self.checkpoint_every == 0:
                self.on_checkpoint(self)

    def _round(self, r: int):
        t_start = self.env.now
        gains = self.channel.draw(self.streams["channel"])
        available = (self.availability.step(self.streams["availability"])
                     if self.availability is not None else None)
        state = RoundState(round=r, gains=gains, model_bits=self.model_bits,
                           bandwidth_hz=self.link.bandwidth_hz, noise_power=self.link.noise_power,
                           available=available, rng=self.streams["selection"])
        if self.client_round_prob is not None and not self.streams["round_type"].random() < self.client_round_prob:
            yield from self._server_round(r, t_start, gains, available)
            return
        decision = self.scheduler.decide(state)
        if decision.selected is not None:  # the scheduler chose the devices itself
            selected = np.unique(np.asarray(decision.selected, dtype=np.int64))
        else:
            selected = draw_devices(decision.omega, decision.m, self.streams["selection"], decision.replace)
        power = decision.power[selected]
        bits = self.model_bits
        piggy_s = np.zeros(len(selected))
        if decision.piggyback_bits is not None:  # e.g. a refreshed gradient riding on the model upload
            extra = np.asarray(decision.piggyback_bits, dtype=float)[selected]
            bits = self.model_bits + extra
            piggy_s = np.where(extra > 0, self.access.airtime_s(extra, gains[selected], power), 0.0)
        airtime = self.access.airtime_s(bits, gains[selected], power)
        comp = self.compute.compute_times(selected, self.streams["compute"], round_idx=r)
        log = _Uploads(len(selected))

        if self.downlink_s > 0:
            yield self.env.timeout(self.downlink_s)
        pre_s, pre_energy = 0.0, 0.0
        if decision.pre_upload_bits is not None:
            pre_s, pre_energy = yield from self._pre_uploads(decision, gains)
        t_compute = self.env.now
        procs = [self.env.process(self._device(i, int(n), c, a, log))
                 for i, (n, c, a) in enumerate(zip(selected, comp, airtime))]
        everything = self.env.all_of(procs)
        if self.round_deadline_s is None:
            yield everything
        else:
            yield everything | self.env.timeout(max(t_start + self.round_deadline_s - self.env.now, 0.0))
            if not everything.triggered:
                # let uploads that end exactly at the deadline finish: they were scheduled before this
                yield self.env.timeout(0)
                for proc in procs:
                    if proc.is_alive:
                        proc.interrupt("deadline")
        t_end = self.env.now

        arrived = log.arrived.copy()
        # energy for what was actually done: a dropped upload spent power only while on the air,
        # an interrupted computation the fraction it completed
        on_air = np.where(arrived, airtime, np.where(np.isnan(log.tx_start), 0.0, t_end - log.tx_start))
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # over: comp subnormal
            done = np.where(comp > 0, np.clip((t_end - t_compute) / comp, 0.0, 1.0), 1.0)
        energy_of = getattr(self.compute, "energy_j", None)
        comp_energy = energy_of(selected, round_idx=r) * done if energy_of is not None else np.zeros(len(selected))
        if self.learner is not None:
            self.learner.train_round(selected[arrived], decision, r)
        self.on_round(RoundRecord(
            round=r, t_start=t_start, t_end=t_end, downlink_s=self.downlink_s,
            comp_s=float(comp.max(initial=0.0)), comm_s=float(airtime.sum()) + pre_s, selected=selected,
            upload_order=np.asarray(log.order), airtime_s=airtime,
            energy_j=np.where(on_air > 0, power * on_air, 0.0),
            gains=gains, decision=decision, compute_energy_j=comp_energy, arrived=arrived,
            available=available, extra_airtime_s=pre_s + float(piggy_s.sum()), extra_energy_j=pre_energy))

    def _pre_uploads(self, decision: Decision, gains: np.ndarray):
        """Uploads before the round's computation (after the broadcast that triggers them), e.g.
        bootstrap gradients or Power-of-Choice losses: under TDMA one device after another through
        the uplink resource in device order; under FDMA all at once on the band split among them.
        Returns (the uplink time they took, their transmit energy)."""
        pre_bits = np.asarray(decision.pre_upload_bits, dtype=float)
        senders = np.flatnonzero(pre_bits > 0)
        if senders.size == 0:
            return 0.0, 0.0
        power = decision.power[senders]
        airtime = self.access.airtime_s(pre_bits[senders], gains[senders], power)
        start = self.env.now
        if self.uplink is None:
            yield self.env.timeout(float(airtime.max()))
        else:
            for a in airtime:
                with self.uplink.request() as slot:
                    yield slot
                    yield self.env.timeout(float(a))
        return self.env.now - start, float(np.sum(power * airtime))

    def _server_round(self, r: int, t_start: float, gains: np.ndarray, available):
        """A server round: the server trains on its own data; no airtime, no device energy, and
        the scheduler is not consulted (its queues stay as they are)."""
        if self.server_round_s > 0:
            yield self.env.timeout(self.server_round_s)
        if self.learner is not None:
            self.learner.server_round(r)
        n = self.num_devices
        queue = np.asarray(getattr(self.scheduler, "queue", np.zeros(n)), dtype=float).copy()
        decision = Decision(omega=np.zeros(n), q=np.zeros(n), power=np.zeros(n), queue=queue,
                            m=int(getattr(self.scheduler, "m", 0)), info={"method": "server_round"})
        if self.server_round_is_slot and hasattr(self.scheduler, "idle_round"):
            self.scheduler.idle_round()  # a slot with zero consumption (spec 003 sec. 7 option)
        none = np.empty(0, dtype=np.int64)
        self.on_round(RoundRecord(
            round=r, t_start=t_start, t_end=self.env.now, downlink_s=0.0, comp_s=0.0, comm_s=0.0,
            selected=none, upload_order=none, airtime_s=np.empty(0), energy_j=np.empty(0), gains=gains,
            decision=decision, compute_energy_j=np.empty(0), arrived=np.empty(0, dtype=bool),
            available=available, server_s=self.server_round_s))

    def _device(self, i: int, device: int, compute_s: float, airtime_s: float, log: _Uploads):
        try:
            yield self.env.timeout(compute_s)
            if self.uplink is None:  # own sub-band: transmit at once
                log.order.append(device)
                log.tx_start[i] = self.env.now
                yield self.env.timeout(airtime_s)
                log.arrived[i] = True
                return
            with self.uplink.request() as slot:
                yield slot
                log.order.append(device)
                log.tx_start[i] = self.env.now
                yield self.env.timeout(airtime_s)
                log.arrived[i] = True
        except simpy.Interrupt:
            pass  # the deadline passed: the upload is dropped (leaving the with-block frees the slot)

    def _evaluate(self) -> None:
        if self.learner is None:
            return
        metrics = self.learner.evaluate()
        if self.stop.target_accuracy is not None and metrics["accuracy"] >= self.stop.target_accuracy:
            self.stop.reached = True
        self.on_eval({"round": self.rounds_done, "time_s": float(self.env.now), **metrics})
