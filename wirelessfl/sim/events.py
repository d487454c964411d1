"""The event engine: devices and the server as SimPy processes, for the event-driven round protocols.

A process exists per device *in flight* (memory grows with concurrency, not with N):

    dispatch -> downlink (link.downlink_s + model bits / downlink rate) -> computation (the
    computation model's time) -> uplink (wirelessfl.sim.uplink: TDMA's one transmitter, or FDMA's
    band shared among the devices on the air) -> the update goes into the server's Store.

The server process takes updates from the Store and hands each to the protocol
(wirelessfl.sim.protocols), which applies it, keeps it, or drops it, and starts other devices
(``dispatch``: the scheduler's dispatch rule; ``begin_round``: its per-round decision). The gain of
an upload is drawn when it starts (one draw per upload, from the "channel" stream); under a
round-based protocol it is the round's gain, drawn when the round began, as under sync.

Availability acts in continuous time: the availability chain (or trace row) steps every
``devices.availability_period_s`` seconds, and a device that is off after a step while it computes
or uploads is lost (outcome "offline"); the slot it held is handed back to the protocol.

Learning with stale models: the server's model and the algorithm's state change only at an
aggregation, so a device's update is computed from the version it started from by training it any
time before the next aggregation. The engine trains every device started since the last
aggregation in one batched call (``Learner.local_updates``) just before the next one, and keeps its
delta (one vector of the model's size per device in flight: at most concurrency x d floats, plus,
for fedasync, the start models still referenced). Each update's minibatches come from the stream
keyed by (version, device), as under sync (a device started twice from one version gets a second key).

Checkpoints are taken between events (after SimPy's own events of that instant): every update in
flight with its phase, times and draws, the uplink's queue, the protocol's and scheduler's state,
the armed timers and every random stream are saved explicitly, and a resume rebuilds the processes
so that every pending event lands at the same time and in the same order (wirelessfl.sim.clock).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable

import numpy as np
import simpy

from ..scheduling.base import Decision, DispatchState, ReportRequest, RoundState, draw_devices
from .clock import CHECKPOINT, RANK_AVAILABILITY, RANK_DEVICE, RANK_STOP, RANK_TIMER, Clock, priority
from .engine import STREAMS, EvalRule, Parts, RoundRecord, StopRule
from .uplink import ON_AIR, QUEUED, make_uplink

__all__ = ["EventEngine", "EventStall", "Round", "Update"]

WAITING, DOWNLINK, COMPUTE, ARRIVED, FINISHED = 0, 1, 2, 5, 6
"""Phases of an update (QUEUED = 3 and ON_AIR = 4 are the uplink's); WAITING: its round's uploads
before the computation (the scheduler's probe reports) are still under way."""
_REPEAT = 2 ** 32
"""A device started again from the same version trains with the key version + k x _REPEAT."""
_REPORTS = 2 ** 60
"""Reports (uploads before a round's computation) are numbered from here: dispatch numbers count
model updates only, as under sync."""


class EventStall(RuntimeError):
    """The protocol left nothing to happen: no device in flight and no timer armed."""


class Update:
    """One dispatched device, from its dispatch to its update's fate (an updates.csv row).

    seq: dispatch number; version: the server version it started from; key: the key of its
    minibatch and work draws; round: its round (round-based protocols; else its version);
    share: its weight as a carried update (1 / distinct devices of its round); q: its inclusion
    probability (NaN when dispatched, not drawn). Times in simulated seconds (NaN: not yet).
    """

    __slots__ = ("seq", "device", "version", "key", "round", "share", "q", "dispatch_s", "compute_start_s",
                 "compute_s", "compute_end_s", "power", "bits", "gain", "airtime_s", "tx_start_s", "tx_end_s",
                 "phase", "queue_seq", "bits_left", "compute_energy_full_j", "energy_j", "compute_energy_j",
                 "outcome", "version_applied", "lost_s", "report", "delta", "start", "process", "done")
    SAVED = __slots__[:-4]  # the rest is rebuilt (delta and start are saved as tensors separately)

    def __init__(self, seq=-1, device=-1, version=0, key=0, round=0, share=math.nan, q=math.nan,
                 dispatch_s=math.nan, compute_start_s=math.nan, compute_s=math.nan, compute_end_s=math.nan,
                 power=math.nan, bits=math.nan, gain=math.nan, airtime_s=math.nan, tx_start_s=math.nan,
                 tx_end_s=math.nan, phase=DOWNLINK, queue_seq=-1, bits_left=math.nan,
                 compute_energy_full_j=math.nan, energy_j=math.nan, compute_energy_j=math.nan, outcome="",
                 version_applied=-1, lost_s=math.nan, report=False):
        # one assignment each: an update is made for every dispatch
        self.seq, self.device, self.version, self.key, self.round = seq, device, version, key, round
        self.share, self.q, self.dispatch_s, self.compute_start_s = share, q, dispatch_s, compute_start_s
        self.compute_s, self.compute_end_s, self.power, self.bits = compute_s, compute_end_s, power, bits
        self.gain, self.airtime_s, self.tx_start_s, self.tx_end_s = gain, airtime_s, tx_start_s, tx_end_s
        self.phase, self.queue_seq, self.bits_left = phase, queue_seq, bits_left
        self.compute_energy_full_j, self.energy_j, self.compute_energy_j = \
            compute_energy_full_j, energy_j, compute_energy_j
        self.outcome, self.version_applied, self.lost_s = outcome, version_applied, lost_s
        self.report = report  # an upload before the round's computation (a probe's report), not a model
        self.delta = self.start = self.process = self.done = None

    @property
    def in_flight(self) -> bool:
        """Still computing or uploading (not arrived, not lost)."""
        return self.phase < ARRIVED

    def __repr__(self) -> str:
        return f"Update(seq={self.seq}, device={self.device}, version={self.version}, phase={self.phase})"


@dataclass
class Round:
    """A round of a round-based protocol: its decision and the updates it dispatched."""

    index: int
    t_start: float
    compute_start_s: float
    decision: Decision | None
    selected: np.ndarray
    gains: np.ndarray
    available: np.ndarray | None
    comp: np.ndarray
    updates: list
    server_s: float = 0.0  # a server round's duration (no device takes part)
    reports_left: int = 0  # uploads before the computation still under way
    reports_s: float = 0.0  # how long they took (sync's pre-upload phase)
    reports_energy: list = field(default_factory=list)  # transmit energy of each report
    piggy_s: float = 0.0   # airtime of the bits riding on the model uploads
    computing: Any = None  # the event the round's devices wait on while the reports go up (not saved)


class EventEngine:
    """Runs an event-driven protocol on a SimPy clock; reports each aggregation, evaluation and
    update to callbacks (the same ones as the sync Engine, plus ``on_update``).

    The protocol acts through the public methods below: ``dispatch``, ``apply``, ``discard``,
    ``cancel``, ``timer``, ``cancel_timer``, ``begin_round``, ``end_round``; it reads ``version``,
    ``now`` and ``num_devices``.
    """

    def __init__(self, parts: Parts, protocol, *, streams: dict[str, np.random.Generator], stop: StopRule,
                 evaluate: EvalRule, learner=None, availability_period_s: float = 1.0,
                 on_round: Callable[[RoundRecord], None] = lambda r: None,
                 on_eval: Callable[[dict], None] = lambda e: None,
                 on_update: Callable[[Update], None] = lambda u: None,
                 after_round: Callable[["EventEngine"], None] | None = None):
        missing = [name for name in STREAMS if name not in streams]
        if missing:
            raise ValueError(f"the engine needs the random streams {missing}")
        self.parts, self.protocol, self.streams, self.learner = parts, protocol, streams, learner
        self.stop, self.eval_rule = stop, evaluate
        self.on_round, self.on_eval, self.on_update, self.after_round = on_round, on_eval, on_update, after_round
        self.availability_period_s = float(availability_period_s)
        n = self.num_devices = parts.num_devices
        self.version = 0
        self.flying: dict[int, Update] = {}  # in flight, by dispatch number (in dispatch order)
        self.held: dict[int, Update] = {}    # arrived, not yet applied or dropped
        self.untrained: list[Update] = []    # started from the current version, not trained yet
        self.busy = np.zeros(n, dtype=bool)
        self.last_applied = np.zeros(n, dtype=np.int64)
        self.available: np.ndarray | None = None
        self.wanted = 0  # slots the protocol asked for and no device could fill yet
        self.next_seq = 0
        self._reports = 0
        self.queue_seq = 0  # places in the uplink's queue (kept so a resume rebuilds the queue in order)
        self._repeats: dict[int, int] = {}
        self.last_aggregation_s = 0.0
        self.dispatch_info: dict = {}
        self.round_: Round | None = None
        self.timers: dict[str, tuple[float, int]] = {}
        self._timer_events: dict[str, simpy.Event] = {}
        self.next_tick_s: float | None = None
        self._start_s = 0.0
        self._restored: dict | None = None
        self._settle_pending = False
        self._evals_at: list[int] = []  # the versions of the last two evaluations
        self.stopping = False
        gain = parts.channel.mean_gain()
        self.mean_gains = np.ones(n) if gain is None else np.asarray(gain, dtype=float)
        self.keep_start = bool(getattr(protocol, "keeps_start_model", False))
        link = parts.access.link
        self._airtime_factor = math.log(2.0) / link.bandwidth_hz  # airtime = bits ln2 / (B ln(1 + g P / N0))
        self._noise_power = link.noise_power
        self._energy = getattr(parts.compute, "has_energy", True)  # without an energy model: no call per dispatch
        self._one_device = np.zeros(1, dtype=np.int64)
        self._dispatch_state = DispatchState(
            time_s=0.0, version=0, slots=0, busy=self.busy, num_busy=0, available=None,
            last_applied=self.last_applied,
            mean_gains=self.mean_gains, model_bits=parts.upload_bits, bandwidth_hz=link.bandwidth_hz,
            noise_power=link.noise_power, per_aggregation=protocol.per_aggregation, interval_s=math.nan,
            rng=streams["selection"])
        self.env: Clock | None = None

    # --- the run -----------------------------------------------------------------------------

    @property
    def rounds_done(self) -> int:
        """Aggregations so far (the server version)."""
        return self.version

    @property
    def now(self) -> float:
        """The simulated clock."""
        return float(self.env.now) if self.env is not None else self._start_s

    def run(self) -> None:
        """Run until the stop rule fires (from where ``load_state`` left it, if it was called)."""
        env = self.env = Clock(initial_time=self._start_s)
        self.store = simpy.Store(env)
        self.uplink = make_uplink(self)
        self._done = env.event()
        if self._restored is not None:
            self._restore(self._restored)
        else:
            if self.parts.availability is not None:
                self.available = self.parts.availability.step(self.streams["availability"])
                self.next_tick_s = self.availability_period_s
            if self.eval_rule.at_start:
                self._evaluate()
            self.protocol.start(self)
        if self.next_tick_s is not None:
            self._arm_tick()
        if self.stop.time_budget_s is not None and not self.stopping:
            env.at(max(self.stop.time_budget_s, env.now), priority(RANK_STOP)).callbacks.append(self._finish_run)
        env.process(self._serve())
        if self.stopping:
            return
        try:
            env.run(until=self._done)
        except RuntimeError as exc:
            if "until" not in str(exc) and "No scheduled events" not in str(exc):
                raise
            raise EventStall(f"protocol.name: nothing left to happen at t = {env.now:.6g} s: no device in flight "
                             f"and no timer armed after {self.version} aggregations (no device could be "
                             "started?)") from None
        self._wrap_up()

    def _finish_run(self, _=None) -> None:
        if not self.stopping:
            self.stopping = True
            self._done.succeed()

    def _wrap_up(self) -> None:
        """The run ended: updates still under way are recorded as in flight; the final model is
        evaluated if it changed since the last evaluation."""
        now = self.env.now
        for u in sorted([*self.flying.values(), *self.held.values()], key=lambda u: u.seq):
            if not u.report:
                self._settle(u, "in_flight", now)
        self.flying.clear()
        self.held.clear()
        if self.learner is not None and (not self._evals_at or self._evals_at[-1] != self.version):
            self._evaluate()

    # --- processes ---------------------------------------------------------------------------

    def _serve(self):
        while True:
            u = yield self.store.get()
            if not self.stopping:
                self.protocol.on_arrival(self, u)

    def _fly(self, u: Update):
        env = self.env
        prio = priority(RANK_DEVICE, u.seq)
        try:
            if u.phase == WAITING:  # until the round's reports are up; then its computation is timed
                yield self.round_.computing
            if u.phase == DOWNLINK:
                if u.compute_start_s > env.now:
                    yield env.at(u.compute_start_s, prio)
                u.phase = COMPUTE
            if u.phase == COMPUTE:
                yield env.at(u.compute_end_s, prio)
            yield from self.uplink.transmit(u)
        except simpy.Interrupt as stop:
            self._lost(u, stop.cause)  # nothing more if whoever interrupted settled it already
            return
        if u.report:
            self._report_done(u)
            return
        u.phase = ARRIVED
        del self.flying[u.seq]
        self.busy[u.device] = False
        self.held[u.seq] = u
        yield self.store.put(u)

    # --- starting devices ----------------------------------------------------------------------

    def dispatch(self, k: int = 1) -> int:
        """Start up to ``k`` more devices chosen by the scheduler's dispatch rule; slots no idle,
        available device can fill now are filled when one can (after an availability step, or
        when a device frees). Returns how many started now."""
        self.wanted += int(k)
        return self._fill()

    def _fill(self) -> int:
        if self.stopping or self.wanted <= 0:
            return 0
        scheduler = self.parts.scheduler
        state = self._dispatch_state  # one object, brought up to date (arrays are the engine's own)
        state.time_s, state.version, state.slots, state.available = self.env.now, self.version, self.wanted, \
            self.available
        state.busy, state.num_busy, state.last_applied = self.busy, len(self.flying), self.last_applied
        state.interval_s = self.last_aggregation_s / self.version if self.version else math.nan
        choice = scheduler.dispatch(state)
        devices = choice.devices
        if not (isinstance(devices, np.ndarray) and devices.dtype == np.int64 and devices.ndim == 1):
            devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        chosen = devices.tolist()
        if not chosen:
            return 0
        busy, available = self.busy, self.available
        if len(chosen) > self.wanted or len(set(chosen)) != len(chosen) or any(busy[d] for d in chosen) or (
                available is not None and not all(available[d] for d in chosen)):
            raise ValueError(f"scheduler.name: {type(scheduler).__name__}.dispatch returned {chosen}: "
                             f"at most {self.wanted} distinct idle, available devices")
        self.dispatch_info = choice.info
        power = choice.power.tolist() if isinstance(choice.power, np.ndarray) else list(choice.power)
        key = self.version
        compute = self.parts.compute
        comp = np.asarray(compute.compute_times(devices, self.streams["compute"], round_idx=key), dtype=float)
        energy = (np.asarray(compute.energy_j(devices, round_idx=key), dtype=float).tolist() if self._energy
                  else [0.0] * len(chosen))
        for device, p, c, e in zip(chosen, power, comp.tolist(), energy):
            self._launch(device, p, c, e, key=self._key(device), bits=self.parts.upload_bits)
        self.wanted -= len(chosen)
        return len(chosen)

    def _key(self, device: int) -> int:
        k = self._repeats.get(device, 0)
        self._repeats[device] = k + 1
        return self.version + k * _REPEAT

    def _launch(self, device: int, power: float, compute_s: float, energy_j: float, *, key: int, bits: float,
                round_=None, gain: float = math.nan, airtime_s: float = math.nan, q: float = math.nan,
                share: float = math.nan, compute_start_s: float | None = None, waiting: bool = False,
                report: bool = False) -> Update:
        now = self.env.now
        start = now + self.parts.downlink_s if compute_start_s is None else compute_start_s
        seq = _REPORTS + self._reports if report else self.next_seq
        u = Update(seq, device, self.version, key, self.version if round_ is None else round_, share, q,
                   now, start, compute_s, start + compute_s, power, bits, gain, airtime_s,
                   compute_energy_full_j=energy_j, report=report)
        if waiting:  # its computation starts when the round's reports are up
            u.phase, u.compute_start_s, u.compute_end_s = WAITING, math.nan, math.nan
        if report:
            self._reports += 1
        else:
            self.next_seq += 1
        self.flying[u.seq] = u
        if not report:
            self.busy[device] = True
            if self.learner is not None:
                self.untrained.append(u)
        u.process = self.env.process(self._fly(u))
        return u

    def start_transmission(self, u: Update) -> None:
        """``u`` goes on the air now: its gain (drawn now, unless its round drew it) and, under TDMA,
        its airtime bits / (B log2(1 + g P / N0))."""
        u.tx_start_s = self.env.now
        if u.gain != u.gain:
            one = self._one_device  # a reused one-element array: an upload starts for every update
            one[0] = u.device
            u.gain = float(self.parts.channel.draw_devices(self.streams["channel"], one)[0])
        if not self.uplink.concurrent and u.airtime_s != u.airtime_s:  # TDMA: the whole band
            rate = math.log1p(u.gain * u.power / self._noise_power)
            u.airtime_s = u.bits * self._airtime_factor / rate if rate > 0 else math.inf

    # --- losing devices ------------------------------------------------------------------------

    def _lost(self, u: Update, outcome: str) -> None:
        if u.phase == FINISHED:
            return
        if u.report:  # a report lost: the round goes on without it
            self._report_done(u, lost=True)
            return
        self._stop(u)
        self._settle(u, outcome, self.env.now)
        if outcome == "offline" and not self.stopping:
            self.protocol.on_lost(self, u)

    def _stop(self, u: Update, outcome: str | None = None) -> None:
        """``u`` stops where it is (its process is interrupted with ``outcome``, if given)."""
        if outcome is not None:
            u.process.interrupt(outcome)
        del self.flying[u.seq]
        if not u.report:
            self.busy[u.device] = False
        u.phase = FINISHED

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

    def cancel(self, updates, outcome: str) -> None:
        """Stop updates in flight; recorded with ``outcome``."""
        for u in updates:
            if u.in_flight:
                self._stop(u, outcome)
                self._settle(u, outcome, self.env.now)

    def _tick(self, _=None) -> None:
        """An availability step: devices in flight that went offline are lost; waiting slots retried."""
        if self.stopping:
            return
        self.available = self.parts.availability.step(self.streams["availability"])
        gone = [u for u in self.flying.values() if not self.available[u.device]]
        for u in gone:
            if u.in_flight:
                u.process.interrupt("offline")
                self._lost(u, "offline")
        self.next_tick_s += self.availability_period_s
        self._arm_tick()
        self._fill()

    def _arm_tick(self) -> None:
        self.env.at(self.next_tick_s, priority(RANK_AVAILABILITY)).callbacks.append(self._tick)

    # --- timers ------------------------------------------------------------------------------

    def timer(self, name: str, at: float) -> None:
        """Call the protocol's ``on_timer(server, name)`` at simulated time ``at`` (replaces a timer
        of that name). Names starting with "_" are the engine's own."""
        self.cancel_timer(name)
        self.timers[name] = (float(at), len(self.timers))
        self._arm_timer(name)

    def _arm_timer(self, name: str) -> None:
        at, order = self.timers[name]
        event = self.env.at(max(at, self.env.now), priority(RANK_TIMER, order))
        self._timer_events[name] = event
        event.callbacks.append(lambda ev, name=name: self._fire(name, ev))

    def _fire(self, name: str, event) -> None:
        if self._timer_events.get(name) is not event or self.stopping:
            return  # cancelled or replaced
        del self._timer_events[name]
        del self.timers[name]
        if name.startswith("_"):
            getattr(self, name)()
        else:
            self.protocol.on_timer(self, name)

    def cancel_timer(self, name: str) -> None:
        """Disarm the timer ``name`` (nothing if none)."""
        self.timers.pop(name, None)
        self._timer_events.pop(name, None)

    # --- aggregation ---------------------------------------------------------------------------

    def _train_pending(self, exclude=()) -> None:
        """Compute the updates of the devices started since the last aggregation (they share the
        current model): one batched call per work key."""
        if self.learner is None or not self.untrained:
            return
        skip = {u.seq for u in exclude}
        pending = [u for u in self.untrained if u.phase != FINISHED and u.seq not in skip]
        self.untrained = []
        groups: dict[int, list[Update]] = {}
        for u in pending:
            groups.setdefault(u.key, []).append(u)
        for key, group in groups.items():
            deltas = self.learner.local_updates(np.array([u.device for u in group], dtype=np.int64), key)
            for u, delta in zip(group, deltas):
                u.delta = delta.clone()
                if self.keep_start:
                    u.start = self.learner.params

    def apply(self, updates: list, weights, *, mix: bool = False) -> None:
        """One aggregation: the algorithm applies ``updates`` with the protocol's ``weights`` (one
        per update); ``mix``: each moves the model toward the device's model y (its start + delta),
        x <- x + w (y - x), rather than by w delta. The server version then increases by one."""
        self._train_pending()
        v = self.version
        staleness = np.array([v - u.version for u in updates], dtype=np.int64)
        metrics = {}
        if self.learner is not None and updates:
            metrics = self.learner.apply_updates(np.array([u.device for u in updates], dtype=np.int64),
                                                 [u.delta for u in updates], np.asarray(weights, dtype=float),
                                                 staleness, [u.start for u in updates] if mix else None)
        now = self.env.now
        for u in updates:
            u.version_applied = v
            self.last_applied[u.device] = v + 1
            self._settle(u, "applied", now)
        self._record_aggregation(updates, staleness, metrics)
        self._aggregated()

    def discard(self, update: Update, outcome: str) -> None:
        """Drop an update that arrived (e.g. too stale); recorded with ``outcome``."""
        self._settle(update, outcome, self.env.now)

    def _settle(self, u: Update, outcome: str, t: float) -> None:
        """``u``'s fate is known at time ``t``: its energies, its row, and no more references to it."""
        u.outcome = outcome
        self.held.pop(u.seq, None)
        if u.phase >= ARRIVED or outcome == "applied":
            u.phase = FINISHED
        if outcome not in ("applied", "stale") and u.tx_end_s != u.tx_end_s:
            u.lost_s = t
        if u.tx_end_s == u.tx_end_s:  # the whole upload: P x airtime
            u.energy_j = u.power * u.airtime_s
        else:  # on the air until now, or never
            u.energy_j = u.power * (t - u.tx_start_s) if u.tx_start_s == u.tx_start_s else 0.0
        if t >= u.compute_end_s or not u.compute_s > 0:
            u.compute_energy_j = u.compute_energy_full_j
        else:
            u.compute_energy_j = u.compute_energy_full_j * min(max((t - u.compute_start_s) / u.compute_s, 0.0), 1.0)
        self.on_update(u)
        u.delta = u.start = None

    def _record_aggregation(self, updates: list, staleness: np.ndarray, metrics: dict) -> None:
        sel = np.array([u.device for u in updates], dtype=np.int64)
        airtime = np.array([u.airtime_s for u in updates])
        empty = np.empty(0)
        self.on_round(RoundRecord(
            round=self.version, t_start=self.last_aggregation_s, t_end=self.env.now,
            downlink_s=self.parts.downlink_s, comp_s=max((u.compute_s for u in updates), default=0.0),
            comm_s=float(airtime.sum()), selected=sel, upload_order=sel, airtime_s=airtime,
            energy_j=np.array([u.energy_j for u in updates]), gains=empty,
            decision=Decision(omega=empty, q=empty, power=empty, queue=empty, m=0, info=self.dispatch_info),
            compute_energy_j=np.array([u.compute_energy_j for u in updates]), arrived=np.ones(sel.size, dtype=bool),
            available=self.available, metrics=metrics, power=np.array([u.power for u in updates]),
            q=np.full(sel.size, math.nan), staleness=staleness, per_update=True))

    def _aggregated(self) -> None:
        """The version is done: count it, evaluate if due, stop or checkpoint."""
        self.version += 1
        self._repeats = {}
        self.last_aggregation_s = self.env.now
        if self.learner is not None and self.eval_rule.due(self.version, self.env.now):
            self._evaluate()
        if self.stop.done(self.version, self.env.now):
            self._finish_run()
        elif self.after_round is not None and not self._settle_pending:
            # between events: SimPy's own events of this instant first, then the checkpoint
            self._settle_pending = True
            self.env.at(self.env.now, CHECKPOINT).callbacks.append(self._between_events)

    def _between_events(self, _) -> None:
        self._settle_pending = False
        if not self.stopping:
            self.after_round(self)

    def _evaluate(self) -> None:
        if self.learner is None:
            return
        metrics = self.learner.evaluate()
        if self.stop.target_accuracy is not None and metrics["accuracy"] >= self.stop.target_accuracy:
            self.stop.reached = True
        self._evals_at = [*self._evals_at[-1:], self.version]
        self.on_eval({"round": self.version, "time_s": float(self.env.now), **metrics})

    # --- rounds (round-based protocols) --------------------------------------------------------

    def begin_round(self) -> None:
        """Start round r = version as sync does: draw the round's gains, ask the algorithm for a
        server round, else the scheduler's decision (probe and reports first), draw its devices and
        dispatch them, each at the round's gain; then ``protocol.on_round``. Devices in flight
        cannot be drawn again (they are unavailable to the decision)."""
        if self.stopping:
            return
        p, r, t = self.parts, self.version, self.env.now
        gains = p.channel.draw(self.streams["channel"])
        available = self.available
        if self.busy.any():
            available = ~self.busy if available is None else available & ~self.busy
        state = RoundState(round=r, gains=gains, model_bits=p.upload_bits, bandwidth_hz=p.access.link.bandwidth_hz,
                           noise_power=p.access.link.noise_power, available=available,
                           rng=self.streams["selection"], time_s=t)
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
        if decision.selected is not None:
            selected = np.unique(np.asarray(decision.selected, dtype=np.int64))
        else:
            selected = draw_devices(decision.omega, decision.m, self.streams["selection"], decision.replace)
        power = decision.power[selected]
        bits = np.full(selected.size, float(p.upload_bits))
        concurrent = p.access.concurrent
        piggy_s = 0.0
        if decision.piggyback_bits is not None:  # e.g. a refreshed gradient riding on the model upload
            extra = np.asarray(decision.piggyback_bits, dtype=float)[selected]
            bits = bits + extra
            if not concurrent:
                piggy_s = float(np.where(extra > 0, p.access.airtime_s(extra, gains[selected], power), 0.0).sum())
        airtime = (p.access.airtime_s(bits if decision.piggyback_bits is not None else p.upload_bits,
                                      gains[selected], power)
                   if not concurrent else np.full(selected.size, math.nan))
        comp = np.asarray(p.compute.compute_times(selected, self.streams["compute"], round_idx=r), dtype=float)
        energy = np.asarray(p.compute.energy_j(selected, round_idx=r), dtype=float)
        start = t + p.downlink_s
        round_ = self.round_ = Round(r, t, start, decision, selected, gains, available, comp, [], piggy_s=piggy_s)
        # the probe's reports go up first (after the broadcast), through the same uplink, as under sync
        pre = np.zeros(0) if decision.pre_upload_bits is None else np.asarray(decision.pre_upload_bits, dtype=float)
        senders = np.flatnonzero(pre > 0)
        if senders.size:
            round_.reports_left = int(senders.size)
            round_.computing = self.env.event()
            pre_air = (p.access.airtime_s(pre[senders], gains[senders], decision.power[senders]) if not concurrent
                       else np.full(senders.size, math.nan))
            for i, device in enumerate(senders.tolist()):
                self._launch(device, float(decision.power[device]), 0.0, 0.0, key=-1, bits=float(pre[device]),
                             round_=r, gain=float(gains[device]), airtime_s=float(pre_air[i]), compute_start_s=start,
                             report=True)
        share = 1.0 / max(selected.size, 1)
        for i, device in enumerate(selected.tolist()):
            round_.updates.append(self._launch(
                device, float(power[i]), float(comp[i]), float(energy[i]), key=self._key(device), bits=float(bits[i]),
                round_=r,
                gain=float(gains[device]), airtime_s=float(airtime[i]), q=float(decision.q[device]), share=share,
                compute_start_s=start, waiting=bool(senders.size)))
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
                           rng=self.streams["selection"], time_s=round_.t_start)
        queue = self.parts.scheduler.skip_round(state, self._drain)
        decision = Decision(omega=np.zeros(n), q=np.zeros(n), power=np.zeros(n),
                            queue=np.zeros(n) if queue is None else np.asarray(queue, dtype=float), m=0,
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
        metrics = {}
        if self.learner is not None:
            report = round_.decision.report_with_upload
            if report is not None:
                on_upload = np.intersect1d(np.asarray(report.devices, dtype=np.int64), selected[arrived])
                p.scheduler.receive(self.learner.reports(
                    ReportRequest(on_upload, report.gradients, report.max_samples), r))
            metrics = self.learner.train_round(selected[arrived], round_.decision, r)
        carried = list(carried)
        staleness = np.zeros(len(on_time) + len(carried), dtype=np.int64)
        if carried:
            staleness[len(on_time):] = [self.version - u.version for u in carried]
            if self.learner is not None:
                more = self.learner.apply_updates(np.array([u.device for u in carried], dtype=np.int64),
                                                  [u.delta for u in carried], np.asarray(carried_weights, dtype=float),
                                                  staleness[len(on_time):], None)
                metrics.update({f"carried_{k}": v for k, v in more.items()})
        fresh = {u.seq for u in on_time} | {u.seq for u in carried}
        for u in round_.updates + carried:  # rows in the order sync writes them: the round's devices
            if u.seq in dropped:
                self._settle(u, "late_dropped", now)
            elif u.seq in fresh:
                u.version_applied = r
                self.last_applied[u.device] = r + 1
                self._settle(u, "applied", now)
        by_device = {u.device: u for u in round_.updates}
        ups = [by_device[n] for n in selected.tolist()]
        tx_start = np.array([u.tx_start_s for u in ups])
        airtime = np.array([u.airtime_s for u in ups])
        power = np.array([u.power for u in ups])
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

    # --- checkpoints ---------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Everything the engine needs to continue exactly where it is (taken between events)."""
        updates = {**self.flying, **self.held}
        if self.round_ is not None:  # the round's finished updates too: its record needs them
            updates.update({u.seq: u for u in self.round_.updates})
        starts: dict[int, Any] = {}
        saved = []
        for u in updates.values():
            row = {name: getattr(u, name) for name in Update.SAVED}
            row["delta"] = u.delta
            if u.start is not None:
                starts.setdefault(id(u.start), (len(starts), u.start))
                row["start"] = starts[id(u.start)][0]
            saved.append(row)
        availability = self.parts.availability
        return {
            "rounds_done": self.version, "now_s": self.now, "eval_next_s": self.eval_rule._next_s,
            "target_reached": self.stop.reached, "evals_at": list(self._evals_at),
            "streams": {name: g.bit_generator.state for name, g in self.streams.items()},
            "channel": self.parts.channel.state_dict(),
            "availability": availability.state_dict() if availability is not None else None,
            "available": None if self.available is None else self.available.copy(),
            "next_tick_s": self.next_tick_s, "updates": saved, "starts": [t for _, t in starts.values()],
            "untrained": [u.seq for u in self.untrained], "busy": self.busy.copy(),
            "last_applied": self.last_applied.copy(), "wanted": self.wanted, "next_seq": self.next_seq,
            "reports": self._reports,
            "queue_seq": self.queue_seq, "repeats": [[k, v] for k, v in self._repeats.items()],
            "last_aggregation_s": self.last_aggregation_s, "dispatch_info": _numbers_only(self.dispatch_info),
            "timers": [[name, at, order] for name, (at, order) in self.timers.items()],
            "round": _round_state(self.round_), "drain": getattr(self, "_drain", False),
            "uplink": self.uplink.state_dict(),
            "protocol": _encode(self.protocol.state_dict()),
        }

    def load_state(self, state: dict) -> None:
        """Continue from a state_dict (call before run)."""
        self.version = int(state["rounds_done"])
        self._start_s = float(state["now_s"])
        self.eval_rule._next_s = float(state["eval_next_s"])
        self.stop.reached = bool(state["target_reached"])
        self._evals_at = list(state["evals_at"])
        for name, g in self.streams.items():
            if name in state["streams"]:
                g.bit_generator.state = state["streams"][name]
        self.parts.channel.load_state(state["channel"])
        if self.parts.availability is not None and state.get("availability") is not None:
            self.parts.availability.load_state(state["availability"])
        self.available = None if state["available"] is None else np.asarray(state["available"], dtype=bool)
        self.next_tick_s = None if state["next_tick_s"] is None else float(state["next_tick_s"])
        self.busy = np.asarray(state["busy"], dtype=bool).copy()
        self.last_applied = np.asarray(state["last_applied"], dtype=np.int64).copy()
        self.wanted, self.next_seq, self.queue_seq = int(state["wanted"]), int(state["next_seq"]), \
            int(state["queue_seq"])
        self._reports = int(state["reports"])
        self._repeats = {int(k): int(v) for k, v in state["repeats"]}
        self.last_aggregation_s = float(state["last_aggregation_s"])
        self.dispatch_info = dict(state["dispatch_info"])
        self._drain = bool(state["drain"])
        self._restored = state

    def _restore(self, state: dict) -> None:
        """Rebuild updates, processes, the uplink's queue, the round and the timers (run() calls it)."""
        starts = state["starts"]
        by_seq: dict[int, Update] = {}
        for row in state["updates"]:
            u = Update(**{name: row[name] for name in Update.SAVED})
            u.delta = row.get("delta")
            if "start" in row:
                u.start = starts[row["start"]]
            by_seq[u.seq] = u
        self.flying = {seq: u for seq, u in by_seq.items() if u.phase < ARRIVED}
        self.held = {seq: u for seq, u in by_seq.items() if u.phase == ARRIVED}
        self.untrained = [by_seq[seq] for seq in state["untrained"]]
        self.round_ = _round_from(state["round"], by_seq)
        if self.round_ is not None and self.round_.reports_left:
            self.round_.computing = self.env.event()  # its devices wait for the reports again
        self.protocol.load_state(_decode(state["protocol"], by_seq, self.round_))
        # processes in the order they hold or asked for the uplink, then the rest: the same queue
        on_air = [u for u in self.flying.values() if u.phase == ON_AIR]
        queued = sorted((u for u in self.flying.values() if u.phase == QUEUED), key=lambda u: u.queue_seq)
        rest = [u for u in self.flying.values() if u.phase < QUEUED]
        for u in on_air + queued + rest:
            u.process = self.env.process(self._fly(u))
        self.uplink.load_state(state["uplink"])
        for name, at, order in state["timers"]:
            self.timers[name] = (float(at), int(order))
            self._arm_timer(name)
        self._restored = None


def _numbers_only(info: dict) -> dict:
    return {k: v for k, v in info.items() if isinstance(v, (int, float, str, bool))}


def _round_state(round_: Round | None) -> dict | None:
    if round_ is None:
        return None
    d = round_.decision
    decision = None if d is None else {f.name: getattr(d, f.name) for f in fields(d)}
    if decision is not None and decision["report_with_upload"] is not None:
        rq = decision["report_with_upload"]
        decision["report_with_upload"] = {"devices": rq.devices, "gradients": rq.gradients,
                                          "max_samples": rq.max_samples}
    if decision is not None:
        decision["info"] = _numbers_only(decision["info"])
    return {"index": round_.index, "t_start": round_.t_start, "compute_start_s": round_.compute_start_s,
            "decision": decision, "selected": round_.selected, "gains": round_.gains,
            "available": round_.available, "comp": round_.comp, "updates": [u.seq for u in round_.updates],
            "server_s": round_.server_s, "reports_left": round_.reports_left, "reports_s": round_.reports_s,
            "reports_energy": list(round_.reports_energy), "piggy_s": round_.piggy_s}


def _round_from(state: dict | None, by_seq: dict) -> Round | None:
    if state is None:
        return None
    decision = state["decision"]
    if decision is not None:
        decision = dict(decision)
        if decision["report_with_upload"] is not None:
            decision["report_with_upload"] = ReportRequest(**decision["report_with_upload"])
        decision = Decision(**decision)
    updates = [by_seq[seq] for seq in state["updates"]]
    return Round(state["index"], state["t_start"], state["compute_start_s"], decision,
                 np.asarray(state["selected"], dtype=np.int64), np.asarray(state["gains"]), state["available"],
                 np.asarray(state["comp"], dtype=float), updates, state["server_s"], int(state["reports_left"]),
                 float(state["reports_s"]), list(state["reports_energy"]), float(state["piggy_s"]))


_UPDATE, _ROUND = "__update__", "__round__"


def _encode(value):
    """A protocol's state with updates and the round as markers (the engine saves those itself)."""
    if isinstance(value, Update):
        return {_UPDATE: value.seq}
    if isinstance(value, Round):
        return {_ROUND: value.index}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value, by_seq: dict, round_: Round | None):
    if isinstance(value, dict):
        if set(value) == {_UPDATE}:
            return by_seq[value[_UPDATE]]
        if set(value) == {_ROUND}:
            return round_
        return {k: _decode(v, by_seq, round_) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, by_seq, round_) for v in value]
    return value
