"""The round pipeline both engines call: what a round decides (:func:`open_round`), what its
learning does once its uploads are in (:func:`learn_round`), what it cost (:func:`transmit_energy`,
:func:`compute_energy`) and the record of a round in which the server trained alone
(:func:`server_round_record`). The sync engine (wirelessfl.sim.sync.engine) and the round machinery of
the event engine (wirelessfl.sim.events.rounds) keep only how time passes: the closed form of the access
scheme, or its event uplink. That sync and semi_sync agree is so by construction.

Knows nothing of SimPy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...access import transmit_power, uplink_facts
from ...capabilities import provides
from ...devices import energy_of
from ...learning.algorithms import ServerRounds
from ...plugins import PartError
from ...scheduling.base import Decision, ReportRequest, RoundState, draw_devices
from ..records.round_record import RoundRecord

__all__ = ["RoundOpening", "compute_energy", "learn_round", "open_round", "piggyback_s", "round_state",
           "server_round_record", "tell_uplink", "transmit_energy"]


@dataclass
class RoundOpening:
    """What a round decided when it opened.

    index, t_start, gains (N,), available (N, or None: all), state (the RoundState the parts saw);
    plan: the algorithm's ServerRound when the server trains alone this round (nothing below is
    set then). decision; selected (distinct devices, ascending); decision_power and power (each
    selected device's power as the scheduler gave it and as it transmits: the access scheme may
    invert the channel); bits: one upload's bits, or per selected device with ``extra`` bits riding
    on it (Decision.traffic.piggyback_bits; None: none); comp: computation times; energy_full:
    computation energy of the whole computation (both at Decision.frequency where the scheduler chose one)."""

    index: int
    t_start: float
    gains: np.ndarray
    available: np.ndarray | None
    state: RoundState
    plan: Any = None
    decision: Decision | None = None
    selected: np.ndarray | None = None
    decision_power: np.ndarray | None = None
    power: np.ndarray | None = None
    bits: Any = None
    extra: np.ndarray | None = None
    comp: np.ndarray | None = None
    energy_full: np.ndarray | None = None


def open_round(parts, streams: dict, checks, learner, index: int, t_start: float,
               availability: Callable[[], np.ndarray | None]) -> RoundOpening:
    """Open round ``index`` at ``t_start``: the channel's gains, who is available
    (``availability()``, asked after the gains are drawn: a trace that runs out says so in that
    order), the algorithm's plan (a server round or a client round; asked only of an algorithm with
    ServerRounds), the scheduler's probe and decision (reports first, training runs only), the
    devices drawn from it, their powers and bits, and their computation times and energy."""
    p = parts
    p.channel.set_time(t_start)
    gains = checks.gains(p.channel.draw(streams["channel"]), f"round {index}")
    available = availability()
    opening = RoundOpening(index, t_start, gains, available, round_state(parts, streams, index, t_start, gains, available))
    state = opening.state
    if provides(p.algorithm, ServerRounds):  # else every round is a client round ("round_type" is its stream)
        opening.plan = p.algorithm.plan_round(index, streams["round_type"])
    if opening.plan is not None:
        return opening
    request = p.scheduler.probe(state)
    if request is not None and learner is not None:
        p.scheduler.receive(learner.reports(request, index))
    decision = opening.decision = p.scheduler.decide(state)
    checks.decision(decision, available, f"round {index}")
    if decision.selected is not None:  # the scheduler chose the devices itself
        selected = np.unique(np.asarray(decision.selected, dtype=np.int64))
    else:
        selected = draw_devices(decision.omega, decision.m, streams["selection"], decision.replace)
    opening.selected = selected
    opening.decision_power = decision.power[selected]
    opening.power = transmit_power(p.access, gains[selected], opening.decision_power)
    opening.bits = p.upload_bits
    if decision.traffic.piggyback_bits is not None:  # e.g. a refreshed gradient riding on the model upload
        opening.extra = np.asarray(decision.traffic.piggyback_bits, dtype=float)[selected]
        opening.bits = p.upload_bits + opening.extra
    if decision.frequency is not None:  # the scheduler chose each device's CPU frequency (ChoosesFrequency)
        if not getattr(p.compute, "frequency_scaled", False):
            raise PartError(f"round {index}: the scheduler returned Decision.frequency, and the computation model "
                            "cannot run at a chosen frequency (wirelessfl.devices.FrequencyScaled, e.g. "
                            "devices.compute = 'cpu')")
        f = np.asarray(decision.frequency, dtype=float)[selected]
        comp, energy = p.compute.at_frequency(selected, f, round_idx=index)
        opening.comp, opening.energy_full = np.asarray(comp, dtype=float), np.asarray(energy, dtype=float)
        return opening
    opening.comp = np.asarray(p.compute.compute_times(selected, streams["compute"], round_idx=index), dtype=float)
    opening.energy_full = np.asarray(energy_of(p.compute, selected, index, opening.comp), dtype=float)
    return opening


def round_state(parts, streams: dict, index: int, t_start: float, gains: np.ndarray,
                available: np.ndarray | None) -> RoundState:
    """What the scheduler sees of round ``index``."""
    link = parts.access.link
    return RoundState(round=index, gains=gains, model_bits=parts.upload_bits, bandwidth_hz=link.bandwidth_hz,
                      noise_power=link.noise_power, available=available, rng=streams["selection"], time_s=t_start,
                      access=parts.access)


def piggyback_s(access, opening: RoundOpening) -> float:
    """The airtime of the bits riding on the round's uploads, each at its device's own rate."""
    if opening.extra is None:
        return 0.0
    extra = opening.extra
    return float(np.where(extra > 0, access.airtime_s(extra, opening.gains[opening.selected], opening.power),
                          0.0).sum())


def tell_uplink(learner, facts) -> None:
    """Hand the uplink's facts (wirelessfl.access.UplinkFacts) to a learner that wants them
    (``uplink`` is optional, so learners written before it keep working)."""
    hook = getattr(learner, "uplink", None)
    if hook is not None:
        hook(facts)


def learn_round(parts, learner, decision: Decision, selected: np.ndarray, arrived: np.ndarray,
                gains: np.ndarray, power: np.ndarray, index: int) -> dict:
    """The round's learning once its uploads are in (training runs; {} otherwise): the reports that
    rode on the uploads that arrived (Decision.traffic.report_with_upload), the uplink's facts,
    then the algorithm's round on the devices whose uploads arrived. ``gains`` and ``power``: of
    the selected devices."""
    if learner is None:
        return {}
    report = decision.traffic.report_with_upload
    if report is not None:  # reports on the uploads that arrived, at the round's model
        on_upload = np.intersect1d(np.asarray(report.devices, dtype=np.int64), selected[arrived])
        parts.scheduler.receive(learner.reports(ReportRequest(on_upload, report.gradients, report.max_samples), index))
    tell_uplink(learner, uplink_facts(parts.access, selected, gains, power, arrived))
    return learner.train_round(selected[arrived], decision, index)


def transmit_energy(power: np.ndarray, on_air_s: np.ndarray) -> np.ndarray:
    """Each device's transmit energy: P x its time on the air (0 where it never sent)."""
    return np.where(on_air_s > 0, power * on_air_s, 0.0)


def compute_energy(full_j: np.ndarray, comp_s: np.ndarray, elapsed_s: float) -> np.ndarray:
    """Computation energy of computations stopped ``elapsed_s`` after they began: the fraction done
    of each one's whole energy (all of it for a computation that takes no time)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # over: comp subnormal
        return full_j * np.where(comp_s > 0, np.clip(elapsed_s / comp_s, 0.0, 1.0), 1.0)


def server_round_record(parts, learner, opening: RoundOpening, drain: bool, duration_s: float, t_end: float,
                        idle_s: float, per_update: bool = False):
    """A round in which the server trained alone (SAFARI): the algorithm's server round, the
    scheduler told of the skipped round (``drain``: it counts as a slot of zero consumption), and
    the record: no airtime, no device energy."""
    metrics = learner.server_round(opening.index) if learner is not None else {}
    n = parts.num_devices
    queue = parts.scheduler.skip_round(opening.state, drain)
    decision = Decision(omega=np.zeros(n), q=np.zeros(n), power=np.zeros(n),
                        queue=None if queue is None else np.asarray(queue, dtype=float), m=0,
                        info={"method": "server_round"})
    none = np.empty(0, dtype=np.int64)
    return RoundRecord(
        round=opening.index, t_start=opening.t_start, t_end=t_end, downlink_s=0.0, comp_s=0.0, comm_s=0.0,
        selected=none, upload_order=none, airtime_s=np.empty(0), energy_j=np.empty(0), gains=opening.gains,
        decision=decision, compute_energy_j=np.empty(0), arrived=np.empty(0, dtype=bool),
        available=opening.available, server_round=True, server_s=duration_s, metrics=metrics, idle_s=idle_s,
        per_update=per_update)
