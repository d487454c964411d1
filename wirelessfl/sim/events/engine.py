"""The event engine: devices and the server as SimPy processes, for the event-driven round protocols.

A process exists per device *in flight* (memory grows with concurrency, not with N):

    dispatch -> downlink (fixed, or timed per dispatch: wirelessfl.access.downlink) -> computation (the
    computation model's time) -> uplink (the access scheme's event uplink: TDMA's one transmitter,
    FDMA's band shared among the devices on the air, ALOHA's slots, ...) -> the update reaches the
    server (its ``inbox``).

The server hands each update that reaches it to the protocol
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
so that every pending event lands at the same time and in the same order (wirelessfl.des.clock).

Modules: this one (the run, and the facade that every protocol, uplink and collaborator calls, most
of its methods a line or two that hand the call on), tasks.py (each device's task as a process, and
a task ended early), dispatcher.py (starting devices), rounds.py (the round machinery of
round-based protocols), server.py (the version, aggregations, each update's fate), flights.py (the
updates under way), flight.py (an update's and a round's data), aggregations.py (around an
aggregation, as the event tiers), availability.py (availability steps, and the devices they take
offline), timers.py (named timers), busy.py (the uplink's busy time), drain.py (batteries in
continuous time), last_models.py (stale starts after a missed model), stalls.py (runs that would
never end), state.py (checkpoints), wirelessfl.sim.round.handovers (moving devices among cells);
the uplinks are the access schemes' own (wirelessfl.access, each scheme's ``event_uplink``; one per
cell with several, wirelessfl.network), the clock is wirelessfl.des.clock (absolute times and event
order).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ...des import RANK_STOP, Clock, Inbox, priority
from ...network.backhaul import SiteLinks
from ...outcomes import Outcome
from ..protocols.base import mixes_device_models, updates_per_aggregation
from ..records.round_record import RoundRecord
from ..round.checks import PartChecks
from ..round.handovers import Handovers
from ..round.parts import STREAMS, EvalRule, Parts, StopRule, raise_non_finite_clock
from .aggregations import after_aggregation, evaluate_version, final_evaluation
from .availability import AvailabilitySteps, availability_step
from .busy import BusyClock
from .dispatcher import Dispatcher
from .drain import TIMER as BATTERY_TIMER, BatteryDrain
from .flight import Round, Update
from .flights import Flights
from .rounds import RoundDriver
from .server import Server
from .stalls import LossStreak
from .state import engine_state, load_engine_state, restore
from .tasks import Tasks
from .timers import Timers

__all__ = ["EventEngine", "EventStall", "Round", "Update"]


class EventStall(RuntimeError):
    """The protocol left nothing to happen: no device in flight and no timer armed."""


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
        n = self.num_devices = parts.num_devices
        self.server = Server(self, n)  # the model's version, and what applies and settles updates
        self.flights = Flights(n)  # the updates under way
        self.availability = AvailabilitySteps(parts.availability, streams["availability"], availability_period_s,
                                              lambda: availability_step(self))
        self.rounds = RoundDriver(self)  # the round under way, for round-based protocols
        self.timers = Timers(self._timer_due)
        self.busy = BusyClock()  # how long the uplink carried a model upload
        self._own_timers = {"_server_round_end": self.rounds.server_round_end,
                            "_empty_round_end": self.rounds.empty_round_end}
        self.drain = BatteryDrain(self, parts.battery, parts.access) if parts.battery.present else None
        self.losses = LossStreak(self)  # tasks lost in a row (batteries, missed models): the stall guard's
        self.tasks = Tasks(self)  # each device's task, its process from its launch to the server
        self.on_handovers: Callable[[list], None] = lambda rows: None  # the recorder's (handovers.csv)
        self.handover_upload = "restart"  # network.handover_upload (the runner sets it)
        self.handovers = Handovers(self)  # moving devices among cells
        self.start_s = 0.0  # where the clock starts (a resume: where it stood)
        self.restored: dict | None = None  # a checkpoint's state, rebuilt as the run starts
        self._settle_pending = False
        self.evals_at: list[int] = []  # the versions of the last two evaluations
        self.stopping = False
        self.keep_start = mixes_device_models(protocol)
        # uploads in packets that may fail (wirelessfl.access.Link; with fading within an upload, the fading's)
        self.packets_on = parts.access.link.packets_on and parts.fading is None
        self.checks = PartChecks(parts)  # the user's scheduler and channel: their outputs are checked
        parts.cells.use_streams(streams, parts.fading)  # interferers' gains to other sites: their own stream
        self.dispatcher = Dispatcher(self)  # the slots the protocol wants filled, and who fills them
        # one server in the cloud behind a timed backhaul: each site's links to it
        self.site_links = (SiteLinks(parts.backhaul, parts.cells.count)
                           if parts.backhaul.timed else None)
        self.env: Clock | None = None

    # --- the run -----------------------------------------------------------------------------

    @property
    def rounds_done(self) -> int:
        """Aggregations so far (the server version)."""
        return self.version

    @property
    def now(self) -> float:
        """The simulated clock."""
        return float(self.env.now) if self.env is not None else self.start_s

    def run(self) -> None:
        """Run until the stop rule fires (from where ``load_state`` left it, if it was called)."""
        env = Clock(initial_time=self.start_s)
        self.start(env)
        if self.stopping:
            return
        if not env.run_until(self._done):
            raise EventStall(f"protocol.name: nothing left to happen at t = {env.now:.6g} s: no device in flight "
                             f"and no timer armed after {self.version} aggregations (no device could be "
                             "started?)")
        self.wrap_up()

    def start(self, env: Clock) -> None:
        """Set the run up on ``env`` (a clock of its own, or one that edge servers share:
        wirelessfl.sim.events.tiers): the uplink, the timers, the protocol's start or a checkpoint's
        processes, the server; ``stopping`` when there is nothing to run."""
        self.env = env
        self.inbox = Inbox(env, self._take_arrival)  # the server's: updates that reach it go to the protocol
        self.uplink = self.event_uplink()
        self.server.use_uplink(self.uplink)
        self._done = env.event()
        self.timers.start(env)
        if self.restored is not None:
            restore(self, self.restored)
        else:
            self.availability.begin()
            if self.eval_rule.at_start:
                self._evaluate()
            if self.stop.done(0, env.now):  # e.g. the target reached by the initial model, as under sync
                self.stopping = True
                return
            self.protocol.start(self)
        self.availability.start(env)
        if self.stop.time_budget_s is not None and not self.stopping:
            env.at(max(self.stop.time_budget_s, env.now), priority(RANK_STOP)).callbacks.append(self.finish_run)

    def event_uplink(self):
        """The run's uplink: the access scheme's event uplink (with several cells, each cell's)."""
        return self.parts.cells.event_uplink(self)

    def finish_run(self, _=None) -> None:
        if not self.stopping:
            self.stopping = True
            self._done.succeed()

    def wrap_up(self) -> None:
        """The run ended: updates still under way are recorded as in flight; the final model is
        evaluated if it changed since the last evaluation."""
        now = self.env.now
        for u in sorted([*self.flights.flying.values(), *self.flights.held.values()], key=lambda u: u.seq):
            if not u.report:
                self.server.settle(u, Outcome.IN_FLIGHT, now)
        self.flights.flying.clear()
        self.flights.held.clear()
        final_evaluation(self)

    def _take_arrival(self, u: Update) -> None:
        if not self.stopping:
            self.protocol.on_arrival(self, u)

    # --- starting devices ----------------------------------------------------------------------

    def dispatch(self, k: int = 1) -> int:
        """Start up to ``k`` more devices chosen by the scheduler's dispatch rule; slots no idle,
        available device can fill now are filled when one can (after an availability step, or
        when a device frees). Returns how many started now (see Dispatcher)."""
        return self.dispatcher.want(k)

    # --- what an event uplink may use (wirelessfl.access.UplinkHost) ------------------------------

    def start_transmission(self, u: Update) -> None:
        """``u`` goes on the air now: its gain (drawn now, unless its round drew it) and its time on
        the air as the access scheme says (NaN under FDMA: the shared band decides as it goes)."""
        u.tx_start_s = now = self.env.now
        if not u.report:
            self.busy.start(now)
        if self.drain is not None:
            self.drain.sending(u)
        if u.gain != u.gain:
            u.gain = self.draw_gain(u.device)
        if u.airtime_s != u.airtime_s:
            fading, access = self.parts.fading, self.parts.access
            u.airtime_s = (access.upload_s(u.bits, u.gain, u.power) if fading is None else
                           access.on_air_s(fading.upload_s(u.bits, u.gain, u.power, u.device, self.streams["fading"])))

    def transmitted(self, u: Update, seconds: float) -> None:
        """``u`` sends for ``seconds`` from now (a contention scheme's frame): its battery pays it."""
        if self.drain is not None:
            self.drain.transmitted(u, seconds)

    @property
    def per_aggregation(self) -> float:
        """How many updates the protocol aggregates at once."""
        return updates_per_aggregation(self.protocol)

    @property
    def link_rng(self) -> np.random.Generator:
        """The "link" random stream (packet errors), or "harq" where an MCS rate (link.rate) draws its
        transport blocks' errors."""
        return self.streams["harq" if self.parts.access.link.mcs_rate else "link"]

    def next_queue_place(self) -> int:
        """A place in the uplink's queue (a resume rebuilds the processes in this order)."""
        return self.flights.next_queue_place()

    def update(self, seq: int) -> Update:
        """The update in flight with dispatch number ``seq``."""
        return self.flights.flying[seq]

    def in_flight(self):
        """The updates still computing or uploading, in dispatch order."""
        return self.flights.flying.values()

    def draw_gain(self, device: int) -> float:
        """A fresh gain of ``device`` at this moment (see Tasks.draw_gain)."""
        return self.tasks.draw_gain(device)

    # --- the devices ---------------------------------------------------------------------------

    def site(self, device: int) -> int:
        """The site serving ``device`` now."""
        return int(self.parts.cells.serving[device])

    def cancel(self, updates, outcome: str) -> None:
        """Stop updates in flight; recorded with ``outcome`` (see Tasks.cancel)."""
        self.tasks.cancel(updates, outcome)

    @property
    def available(self) -> np.ndarray | None:
        """Who can be reached now (None: everyone)."""
        return self.availability.available

    def stall(self, message: str) -> None:
        """Stop the run as stalled, with ``message`` (one line)."""
        raise EventStall(message)

    # --- timers ------------------------------------------------------------------------------

    def timer(self, name: str, at: float) -> None:
        """Call the protocol's ``on_timer(server, name)`` at simulated time ``at`` (replaces a timer
        of that name). Names starting with "_" are the engine's own."""
        self.timers.set(name, at)

    def cancel_timer(self, name: str) -> None:
        """Disarm the timer ``name`` (nothing if none)."""
        self.timers.cancel(name)

    def _timer_due(self, name: str) -> None:
        if self.stopping:
            return
        own = self._own_timers.get(name)
        if own is not None:
            own()
        elif name.startswith(BATTERY_TIMER):
            self.drain.ran_out(int(name[len(BATTERY_TIMER):]))
        else:
            self.protocol.on_timer(self, name)

    # --- rounds (round-based protocols) --------------------------------------------------------

    def begin_round(self) -> None:
        """Start the next round as sync does (see RoundDriver.begin); ``protocol.on_round`` follows."""
        self.rounds.begin()

    def end_round(self, round_: Round, on_time: list, carried: list = (), carried_weights=(), *,
                  drop_late: bool = False) -> None:
        """Aggregate a round (see RoundDriver.end)."""
        self.rounds.end(round_, on_time, carried, carried_weights, drop_late=drop_late)

    # --- aggregation ---------------------------------------------------------------------------

    def apply(self, updates: list, weights, *, mix: bool = False) -> None:
        """One aggregation: the algorithm applies ``updates`` with the protocol's ``weights`` (one
        per update); ``mix``: each moves the model toward the device's model y (its start + delta),
        x <- x + w (y - x), rather than by w delta. The server version then increases by one."""
        self.server.apply(updates, weights, mix=mix)

    def discard(self, update: Update, outcome: str) -> None:
        """Drop an update that arrived (e.g. too stale); recorded with ``outcome``. A drop counts
        toward the stall guard like a lost task: a run whose every update is dropped never aggregates."""
        self.server.settle(update, outcome, self.env.now)
        self.losses.lost("protocol.max_staleness", f"dropped as {outcome}", "every update arrives staler than the "
                         "protocol takes (a device that missed the model trains from its older one under "
                         "link.downlink_miss = 'stale'); raise protocol.max_staleness, or set run.time_budget_s")

    @property
    def version(self) -> int:
        """The server's model version (aggregations so far)."""
        return self.server.version

    @property
    def trains(self) -> bool:
        """Whether aggregations train a model. False in a timing-only run: the weights given to
        ``apply`` are not used, so a protocol may pass None rather than compute them."""
        return self.learner is not None

    def aggregated(self) -> None:
        """The version is done: count it, evaluate if due, stop or checkpoint."""
        now, server = self.env.now, self.server
        server.advance(now)
        if not math.isfinite(now):
            raise_non_finite_clock(now, f"aggregation {server.version}")
        self.flights.repeats = {}
        if self.learner is not None and self.eval_rule.due(server.version, now):
            self._evaluate()
        after_aggregation(self, now)

    def _evaluate(self) -> None:
        evaluate_version(self)

    # --- checkpoints ---------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Everything the engine needs to continue exactly where it is (taken between events)."""
        return engine_state(self)

    def load_state(self, state: dict) -> None:
        """Continue from a state_dict (call before run)."""
        load_engine_state(self, state)

    @staticmethod
    def rows_in_state(state: dict) -> int:
        """The rows of rounds.csv a state_dict stands for: one per aggregation (or round)."""
        return int(state["rounds_done"])

    def uplink_busy_s(self, now: float) -> float:
        """How long the uplink carried a model upload by ``now`` (kept as uploads go on and off the air)."""
        return self.busy.busy_s(now)
