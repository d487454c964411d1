"""What both engines run on (the closed-form sync Engine, wirelessfl.sim.sync.engine, and the event
engine, wirelessfl.sim.events.engine): the parts of a run and their checkpointed memory, the learner's
protocol, the stop and evaluation rules, the named random streams, and the error of a clock that
left the finite numbers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from ...access import AccessScheme, Downlink
from ...access.downlink import UNTIMED_DOWNLINK, UntimedDownlink, or_untimed
from ...battery import NO_BATTERY, Battery, NoBattery, or_no_battery
from ...devices import ComputeModel, MarkovAvailability, TraceAvailability
from ...fading import BlockFading
from ...network import NO_BACKHAUL, Backhaul, Cells, NoBackhaul
from ...network.backhaul import or_no_backhaul
from ...network.cells import OneCell
from ...participation import ExcludedAvailability
from ...scheduling.base import Decision, ReportRequest, Reports, Scheduler
from ...wireless import Channel

if TYPE_CHECKING:  # the learning layer loads torch: not for timing-only runs
    from ...learning.algorithms import Algorithm

__all__ = ["EvalRule", "Learner", "NonFiniteTime", "Parts", "STREAMS", "StopRule", "evaluate", "load_parts_state",
           "parts_state", "raise_non_finite_clock"]


class Learner(Protocol):
    """What the engines and the runner use of the training side (None in timing-only runs;
    wirelessfl.learning.learner.FederatedLearner is the one the runner builds)."""

    model_bits: int
    """32 x the model's parameters: one upload's bits when link.model_bits is not set."""

    def train_round(self, selected: np.ndarray, decision: Decision, round_idx: int) -> dict:
        """A sync or semi_sync round: the algorithm's round on the devices whose uploads arrived."""

    def server_round(self, round_idx: int) -> dict:
        """A round in which the server trains alone."""

    def reports(self, request: ReportRequest, round_idx: int) -> Reports:
        """What the devices a scheduler asked report (losses, gradients) at the current model."""

    def evaluate(self) -> dict:
        """The model's accuracy and losses now."""

    def local_updates(self, devices: np.ndarray, key: int, start=None) -> list:
        """Event protocols: the deltas of ``devices`` trained from the current model, or from
        ``start`` (an older model they last received: only with link.downlink_miss = "stale", the
        one case the engine passes it), with work key ``key``."""

    def apply_updates(self, devices: np.ndarray, deltas: list, weights: np.ndarray, staleness: np.ndarray,
                      starts: list | None = None) -> dict:
        """Event protocols: one aggregation of updates computed from possibly older models."""

    @property
    def params(self):
        """The current model's parameters (a device keeps it as its start model when mixing). Edge
        servers (wirelessfl.sim.sync.tiers) also set it: each edge's model in turn, then the cloud's."""

    def sample_counts(self) -> np.ndarray:
        """Edge servers only: each device's training samples (the cloud weighs an edge by its sum)."""

    def uplink(self, facts) -> None:
        """Optional: what the uplink did for the next aggregation's updates (UplinkFacts)."""

    def label_coverage(self, devices: np.ndarray) -> float:
        """The share of the training labels held by ``devices`` (the summary's label_coverage)."""

    def state_dict(self) -> dict:
        """The model and the algorithm's state, for checkpoints."""

    def load_state(self, state: dict) -> None:
        """Restore them."""


@dataclass
class Parts:
    """Everything a run simulates, built by the runner from the scenario.

    channel, compute, scheduler, algorithm, access: parts, each fitted to its protocol (see
    wirelessfl.plugins); availability: None (always available) or a model with ``step(rng)`` (the
    devices' Markov chain or trace, with the excluded devices removed); upload_bits: one device's
    upload per round; downlink_s: the broadcast's duration; round_deadline_s: uploads not done this
    long after the round started are dropped; idle_round_s: the length of a round in which nothing
    takes time (nobody scheduled, no downlink); fading: the channel within an upload (None: it does
    not change during one); battery: the devices' batteries (wirelessfl.battery; also the
    availability model, then) or NO_BATTERY; downlink: the downlink (wirelessfl.access.Downlink; timed per
    device under link.downlink 'broadcast' or 'unicast', else every model arrives after downlink_s)
    and downlink_bits the model it sends; cells:
    several cells (wirelessfl.network), each with its own access scheme (``access`` is the first, which
    schedulers price airtime with: the cells' are alike), or the run's one cell (OneCell, made of
    ``access`` when None is given); backhaul: the links between the
    sites and the cloud (wirelessfl.network.Backhaul), NO_BACKHAUL when they take no time.
    """

    channel: Channel
    compute: ComputeModel
    scheduler: Scheduler
    algorithm: Algorithm
    access: AccessScheme
    num_devices: int
    upload_bits: float
    downlink_s: float = 0.0
    availability: ExcludedAvailability | MarkovAvailability | TraceAvailability | None = None
    round_deadline_s: float | None = None
    idle_round_s: float = 0.01
    fading: BlockFading | None = None
    battery: Battery | NoBattery = NO_BATTERY
    downlink: Downlink | UntimedDownlink = UNTIMED_DOWNLINK
    downlink_bits: float = 0.0
    cells: Cells | OneCell | None = None
    backhaul: Backhaul | NoBackhaul = NO_BACKHAUL

    def __post_init__(self):
        # None, as callers wrote "none" before the null objects
        self.backhaul, self.downlink = or_no_backhaul(self.backhaul), or_untimed(self.downlink)
        self.battery = or_no_battery(self.battery)
        if self.cells is None or not self.cells.present:  # (a copy with another access scheme: its own one cell)
            self.cells = OneCell(self.access, self.num_devices)


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
    """Evaluate every k rounds or at the first round boundary after every dt simulated seconds
    (and at time 0 unless ``at_start`` is false)."""

    every_rounds: int | None = None
    every_s: float | None = None
    at_start: bool = True  # also at time 0, before the first round
    next_s: float = field(default=0.0, init=False)  # the next evaluation time (checkpoints keep it)

    def __post_init__(self):
        self.next_s = self.every_s or 0.0  # the run always evaluates at time 0

    def due(self, rounds_done: int, now_s: float) -> bool:
        if self.every_s is not None:
            if now_s >= self.next_s:
                # skip grid points a long round jumped over: the model did not change in between
                self.next_s = (float(np.floor(now_s / self.every_s)) + 1) * self.every_s
                return True
            return False
        return rounds_done % (self.every_rounds or 10) == 0


def parts_state(parts: Parts) -> dict:
    """The memory of the parts that keep one (channel, availability, access scheme), for checkpoints."""
    availability, access_state = parts.availability, getattr(parts.access, "state_dict", None)
    return {"channel": parts.channel.state_dict(),
            "availability": availability.state_dict() if availability is not None else None,
            "access": access_state() if access_state is not None else {},
            **({"cells": parts.cells.state_dict()} if parts.cells.present else {})}


def load_parts_state(parts: Parts, state: dict) -> None:
    """Restore what :func:`parts_state` returned (a checkpoint from before a part kept memory
    leaves that part fresh)."""
    parts.channel.load_state(state["channel"])
    if parts.availability is not None and state.get("availability") is not None:
        parts.availability.load_state(state["availability"])
    if state.get("access") and hasattr(parts.access, "load_state"):
        parts.access.load_state(state["access"])
    if "cells" in state:
        parts.cells.load_state(state["cells"])


STREAMS = ("channel", "selection", "compute", "availability", "round_type", "link", "fading", "downlink",
           "interference", "harq")
"""The engine's named random streams (wirelessfl.rng)."""


class NonFiniteTime(ValueError):
    """The simulated clock left the floating-point numbers (a time or size near 1e308, an upload that
    never ends): the run stops instead of saying "complete" with an infinite clock."""


def raise_non_finite_clock(now: float, when: str) -> None:
    raise NonFiniteTime(f"the simulated clock became {now} at the end of {when}: a time, size or rate in the "
                        "scenario is too large for floating point (near 1e308), or an upload never ends")


def final_evaluation_due(learner, evaluated_at: int | None, version: int) -> bool:
    """Whether a run that ended at ``version`` (rounds done, or aggregations) still owes the final
    model an evaluation: a training run whose last evaluation (``evaluated_at``; None: none yet)
    was of another version. Both engines end on it."""
    return learner is not None and evaluated_at != version


def evaluate(learner, stop: StopRule, on_eval: Callable[[dict], None], rounds_done: int, now_s: float) -> None:
    """Evaluate the model (training runs), note whether the target is reached, report the row."""
    if learner is None:
        return
    metrics = learner.evaluate()
    if stop.target_accuracy is not None and metrics["accuracy"] >= stop.target_accuracy:
        stop.reached = True
    on_eval({"round": rounds_done, "time_s": now_s, **metrics})
