"""The learning-algorithm seam: what the selected devices compute and how the server combines it.

Like Flower's ``Strategy`` the interface is narrow. A new algorithm subclasses :class:`Algorithm`
and writes three methods:

* ``from_scenario(scenario, options)`` builds it (also in timing-only runs, where it has no data:
  its timing facts, such as server rounds or extra uploads, still apply);
* ``local_updates(trainer, devices, round_idx)``: the devices' deltas from the current model;
* ``apply_updates(trainer, updates) -> dict``: one aggregation of them into the model; the numbers
  it returns become columns of rounds.csv.

``Algorithm.round`` (one client round) is defined once, in terms of these two: the distinct
selected devices' ``local_updates``, weighted by ``aggregation_weights`` (default: their mean) and
applied by ``apply_updates`` as fresh :class:`Updates` (``fresh`` True: staleness 0, weights to apply
as they are). The event protocols call the same two methods with stale updates and their own
weights. An algorithm with a round of another shape (FedShuffle's global momentum, a Flower
strategy) still overrides ``round``.

Everything else is optional, with defaults inherited by subclassing :class:`Algorithm`: its
``Options`` dataclass, ``check`` (cross-field rules at load time), ``setup`` (the data is loaded)
and the checkpoint state. What only some algorithms do is a capability (wirelessfl.capabilities),
provided by implementing its members. The contract declares none of them beyond its core (whose
``local_updates`` and ``apply_updates`` stubs are ``@absent``: inheriting them is not applying stale
updates), and the engines ask ``provides(algorithm, Capability)`` before calling them:
:class:`AppliesStaleUpdates` (``local_updates`` and ``apply_updates`` for updates from an older
model: the event protocols), :class:`ServerRounds`
(``plan_round`` and ``server_round``: rounds in which the server trains alone),
:class:`HearsTheUplink` (``uplink``: what the radio did to an aggregation's updates),
:class:`CountsWork` (``work_units``: work that scales the devices' computation time),
:class:`CostlierSteps` (``compute_factor``: a local step's cost relative to FedAvg's),
:class:`UploadsMoreVectors` and :class:`BroadcastsMoreVectors` (``upload_vectors``,
``broadcast_vectors``: model-sized vectors on the air per round, default 1) and
:class:`PersonalisedByDefault` (``personalised_eval``: runs record personalised accuracy).
FedShuffle, SAFARI and Per-FedAvg subclass :class:`FedAvg` and change the weights or the local rule
(``Trainer.local_updates`` accepts per-device step counts, step sizes and local directions).
This module does not import torch.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..capabilities import absent, provides
from ..fields import ConfigError, option

if TYPE_CHECKING:
    from .trainer import Trainer

__all__ = ["AGGREGATIONS", "Algorithm", "AppliesStaleUpdates", "BroadcastsMoreVectors", "CostlierSteps", "CountsWork",
           "FedAvg", "FedAvgOptions", "HearsTheUplink", "PersonalisedByDefault", "Safari", "SafariOptions",
           "ServerRound", "ServerRounds", "UploadsMoreVectors", "Updates", "applies_stale_updates", "broadcast_vectors",
           "can_apply_stale_updates", "compute_factor", "personalised_by_default", "upload_vectors"]


AGGREGATIONS = ("unbiased", "mean", "data_size")


@dataclass(frozen=True)
class Updates:
    """Updates an aggregation of an event protocol applies (see ``Algorithm.apply_updates``).

    devices: (k,) the devices they came from (a device may appear twice); deltas: (k, d) tensor of
    what each would move the model by (y - x_start; fedasync's mix: y - x_now); weights: (k,) the
    protocol's weight of each (fedbuff: s(tau) / K x its server_lr, fedasync: alpha s(tau),
    semi_sync's carried updates: s(tau) / m); staleness: (k,) versions between start and now.
    fresh: a client round's own updates (``Algorithm.round``): staleness 0 and ``weights`` the
    algorithm's ``aggregation_weights``, to apply as they are.
    """

    devices: np.ndarray
    deltas: Any
    weights: np.ndarray
    staleness: np.ndarray
    fresh: bool = False


@dataclass(frozen=True)
class ServerRound:
    """A round in which the server trains alone: it lasts ``duration_s`` simulated seconds, uses no
    airtime and does not consult the scheduler (``drain``: the scheduler counts it as a slot of
    zero consumption)."""

    duration_s: float = 0.0
    drain: bool = False


class Algorithm(Protocol):
    """A federated learning algorithm: the devices' local rule and the server's aggregation.

    A new algorithm writes ``from_scenario``, ``local_updates`` and ``apply_updates``; ``round`` is
    defined here in terms of them. Subclass this protocol to inherit the optional parts. What only
    some algorithms do (server rounds, hearing the uplink, work that scales) is a capability below,
    which an algorithm has by writing its members: this contract declares none of them.
    """

    Options: ClassVar[type | None] = None
    """A dataclass of the algorithm's own options, or None (options handed over as a dict)."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "Algorithm":
        """Build the algorithm for a run of ``scenario`` with its options (Options instance or dict)."""
        ...

    def round(self, trainer: "Trainer", selected: np.ndarray, q: np.ndarray, num_devices: int,
              round_idx: int) -> dict[str, Any]:
        """One client round on the devices whose uploads arrived; returns numbers to record.

        Each distinct device trains once (``local_updates``), and its update is applied with its
        ``aggregation_weights`` as fresh ``Updates`` (``apply_updates``); nobody arrived: the model
        stays as it is."""
        devices = np.unique(np.asarray(selected, dtype=np.int64))  # each device trains once
        weights = self.aggregation_weights(devices, q, num_devices)
        if not devices.size:
            return {"num_trained": 0, "weight_sum": float(weights.sum())}
        deltas = self.local_updates(trainer, devices, round_idx)
        return self.apply_updates(trainer, Updates(devices, deltas, weights, np.zeros(devices.size, dtype=np.int64),
                                                   fresh=True))

    def aggregation_weights(self, selected: np.ndarray, q: np.ndarray, num_devices: int) -> np.ndarray:
        """The weight of each of a round's updates, aligned with ``selected`` (distinct devices):
        here their plain mean 1 / |S| (FedAvg: 1 / (N q_n), the mean or data-size shares)."""
        selected = np.asarray(selected).reshape(-1)
        return np.full(selected.size, 1.0 / selected.size) if selected.size else np.zeros(0)

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this algorithm."""

    def setup(self, trainer: "Trainer") -> None:
        """Called once before the first round of a training run, with the data loaded."""

    @absent
    def local_updates(self, trainer: "Trainer", devices: np.ndarray, round_idx: int):
        """The devices' deltas y - x from the trainer's current model x (a (k, d) tensor), without
        changing the model; ``round_idx`` keys their minibatches (the version they started from)."""
        raise NotImplementedError(f"{type(self).__name__} implements neither local_updates nor round")

    @absent
    def apply_updates(self, trainer: "Trainer", updates: Updates) -> dict[str, Any]:
        """One aggregation of ``updates`` into the model: a round's own (``updates.fresh``: apply
        ``updates.weights`` as they are) or, under the event protocols, maybe stale ones weighted by
        the protocol; returns numbers to record."""
        raise NotImplementedError(f"{type(self).__name__} implements neither apply_updates nor round")

    def state_dict(self) -> dict[str, Any]:
        """Server state to continue after a checkpoint (numbers, strings, lists, numpy arrays)."""
        return {}

    @classmethod
    def runs_in_tiers(cls) -> bool:
        """Whether it runs with edge servers and a cloud (hierarchy.tiers = "edge"): its server keeps
        nothing but the model (the contract's ``state_dict``) and never trains alone (no
        ServerRounds), so each edge runs it on a model of its own and the cloud averages the models."""
        return cls.state_dict is Algorithm.state_dict and not provides(cls, ServerRounds)

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


@runtime_checkable
class AppliesStaleUpdates(Protocol):
    """An algorithm that applies updates computed from an older model (fedbuff, fedasync, semi_sync
    carrying late uploads): it trains devices apart from a round and applies what they sent."""

    def local_updates(self, trainer: "Trainer", devices: np.ndarray, round_idx: int):
        """The devices' deltas y - x from the trainer's current model (see Algorithm)."""

    def apply_updates(self, trainer: "Trainer", updates: Updates) -> dict[str, Any]:
        """One aggregation of ``updates`` into the model (see Algorithm)."""


@runtime_checkable
class ServerRounds(Protocol):
    """An algorithm with rounds in which the server trains alone (SAFARI)."""

    def plan_round(self, round_idx: int, rng: np.random.Generator) -> ServerRound | None:
        """None for a client round; a ServerRound for a round in which the server trains alone
        (``rng``: the run's "round_type" stream, drawn from only by an algorithm that has this)."""

    def server_round(self, trainer: "Trainer", round_idx: int) -> dict[str, Any]:
        """The server's training in a server round; returns numbers to record."""


@runtime_checkable
class HearsTheUplink(Protocol):
    """An algorithm whose aggregation depends on what the radio did (over-the-air noise, channel-aware
    weights)."""

    def uplink(self, facts) -> None:
        """Called before each aggregation with what the uplink did for its updates
        (wirelessfl.access.UplinkFacts: devices, gains, power, arrived, noise_var): the algorithm
        keeps what its aggregation needs."""


@runtime_checkable
class CostlierSteps(Protocol):
    """An algorithm whose local step costs more than a FedAvg step (Per-FedAvg's extra gradients)."""

    compute_factor: float
    """Cost of one local step relative to a FedAvg step: multiplies every device's computation time."""


@runtime_checkable
class UploadsMoreVectors(Protocol):
    """An algorithm whose devices upload more than their model delta (SCAFFOLD's control variates)."""

    upload_vectors: int
    """Model-sized vectors each selected device uploads per round."""


@runtime_checkable
class BroadcastsMoreVectors(Protocol):
    """An algorithm whose server broadcasts more than the model (SCAFFOLD's c, a global momentum)."""

    broadcast_vectors: int
    """Model-sized vectors the server broadcasts per round."""


@runtime_checkable
class PersonalisedByDefault(Protocol):
    """An algorithm whose runs record personalised accuracy unless run.personalised_eval says no."""

    personalised_eval: bool
    """True: personalised accuracy by default."""


def compute_factor(algorithm) -> float:
    """A local step's cost relative to FedAvg's (1 unless the algorithm is CostlierSteps)."""
    return algorithm.compute_factor if provides(algorithm, CostlierSteps) else 1.0


def upload_vectors(algorithm) -> int:
    """Model-sized vectors each selected device uploads per round (1 unless UploadsMoreVectors)."""
    return algorithm.upload_vectors if provides(algorithm, UploadsMoreVectors) else 1


def broadcast_vectors(algorithm) -> int:
    """Model-sized vectors the server broadcasts per round (1 unless BroadcastsMoreVectors)."""
    return algorithm.broadcast_vectors if provides(algorithm, BroadcastsMoreVectors) else 1


def personalised_by_default(algorithm) -> bool:
    """Whether the algorithm (or its class) asks for personalised accuracy by default."""
    return provides(algorithm, PersonalisedByDefault) and bool(algorithm.personalised_eval)


@runtime_checkable
class CountsWork(Protocol):
    """An algorithm that gives devices other work than a FedAvg round's: their computation times
    scale with it."""

    def work_units(self, devices: np.ndarray, round_idx: int) -> np.ndarray | None:
        """Local steps of each device this round (scales work-proportional computation models and
        devices.step_time_s); None: learning.local_steps each."""


def can_apply_stale_updates(algorithm) -> bool:
    """Whether an algorithm (or its class) applies stale updates. A class that still says so with
    ``asynchronous = False`` (the flag this capability replaced) is taken at its word, with a notice."""
    cls = algorithm if isinstance(algorithm, type) else type(algorithm)
    flag = getattr(cls, "asynchronous", None)
    if flag is not None:
        warnings.warn(f"{cls.__name__}.asynchronous is deprecated and will be ignored in the next release: an "
                      "algorithm applies stale updates when it implements local_updates and apply_updates "
                      "(wirelessfl.learning.algorithms.AppliesStaleUpdates)", DeprecationWarning, stacklevel=2)
        if not flag:
            return False
    return provides(cls, AppliesStaleUpdates)




def scales_work(algorithm) -> bool:
    """Whether the algorithm gives devices other work than a FedAvg round's, so computation times
    must be scaled."""
    return provides(algorithm, CountsWork)


def applies_stale_updates(scenario) -> bool:
    """Whether the scenario's round protocol applies updates computed from an older model."""
    return scenario.facts.stale_updates


def require_inclusion_probabilities(scenario, algorithm: str) -> None:
    """ConfigError when an algorithm that weighs updates by 1 / q meets a scheduler without q."""
    if not scenario.facts.inclusion_probabilities:
        raise ConfigError(f"learning.algorithm = {algorithm!r}: it weighs updates by 1 / q, and scheduler.name = "
                          f"{scenario.scheduler.name!r} chooses its devices without inclusion probabilities; "
                          "use 'fedavg'")


def _tell_of_round_updates(cls: type) -> None:
    """A FedAvg subclass of a user's that overrides apply_updates and inherits round was written when
    FedAvg's rounds aggregated without it: its apply_updates now also gets each round's own updates
    (``updates.fresh``), which it must apply with ``updates.weights`` as they are (``update_weights``
    does). Said once, when the class is made; defining ``round`` (even ``round = FedAvg.round``)
    says that it knows."""
    if "apply_updates" in cls.__dict__ and "round" not in cls.__dict__ and not cls.__module__.startswith("wirelessfl."):
        warnings.warn(f"{cls.__qualname__}.apply_updates now also applies each client round's updates "
                      "(updates.fresh True: apply updates.weights as they are, as FedAvg.update_weights does); "
                      f"check that it does, then define {cls.__qualname__}.round (round = FedAvg.round) to say so",
                      FutureWarning, stacklevel=3)


@dataclass(frozen=True)
class FedAvgOptions:
    """Options of FedAvg."""

    global_lr: float = option(1.0, gt=0, doc="server step size eta_g on the aggregated update")
    aggregation: str | None = option(None, choices=AGGREGATIONS,
                                     doc="unbiased (weights 1 / (N q_n), docs/papers/lyapunov.md), mean (the plain "
                                         "average of the devices' models, docs/papers/safari.md: Algorithm 1, "
                                         "docs/papers/fair_selection.md: a training round) or "
                                         "data_size (shares |D_n| / sum |D_j| over the devices that trained); "
                                         "default unbiased, mean with schedulers that choose their devices "
                                         "without inclusion probabilities (fair selection)")


class FedAvg(Algorithm):
    """FedAvg with unbiased aggregation under arbitrary participation probabilities
    (docs/papers/lyapunov.md, "Sampling with replacement").

    x_{t+1} = x_t + server_lr * (1/N) * sum_{n selected} (1/q_n) (y_K^n - x_t).
    With server_lr = 1 (the paper) and q_n = 1 for all n this is plain full-participation FedAvg.

    ``aggregation="mean"``: x_{t+1} = x_t + server_lr * (1/|S|) sum_{n in S} (y_K^n - x_t), the
    unweighted average over the distinct devices that trained (docs/papers/safari.md, "Algorithm 1:
    client rounds and server rounds"; docs/papers/fair_selection.md, "A training round (Algorithm 1)
    and the aggregation", for schedulers that choose their devices themselves, where q is unused).
    ``aggregation="data_size"``: weights server_lr |D_n| / sum_{j in S} |D_j| (``data_sizes``, or the
    trainer's at ``setup``).
    """

    Options = FedAvgOptions

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _tell_of_round_updates(cls)

    def __init__(self, server_lr: float = 1.0, aggregation: str = "unbiased", data_sizes=None):
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation = {aggregation!r}: must be one of {', '.join(AGGREGATIONS)}")
        self.server_lr = float(server_lr)
        self.aggregation = aggregation
        self.data_sizes = None if data_sizes is None else np.asarray(data_sizes, dtype=np.float64)

    @classmethod
    def from_scenario(cls, scenario, options: FedAvgOptions) -> "FedAvg":
        """FedAvg with the scenario's global step size and aggregation rule."""
        return cls(server_lr=options.global_lr, aggregation=cls._aggregation(scenario, options))

    @staticmethod
    def _aggregation(scenario, options: FedAvgOptions) -> str:
        # the fair schedulers' kappa updates are averaged (docs/papers/fair_selection.md: a training
        # round), not weighted by 1 / (N q)
        return options.aggregation or ("unbiased" if scenario.facts.inclusion_probabilities else "mean")

    @classmethod
    def check(cls, scenario, options: FedAvgOptions) -> None:
        """Unbiased weights need a scheduler with inclusion probabilities."""
        if options.aggregation == "unbiased" and not scenario.facts.inclusion_probabilities:
            raise ConfigError(f"learning.aggregation = 'unbiased': scheduler.name = {scenario.scheduler.name!r} "
                              "chooses its devices without inclusion probabilities; use 'mean' or 'data_size'")

    def setup(self, trainer: "Trainer") -> None:
        """Take the devices' dataset sizes from the trainer (for ``aggregation="data_size"``)."""
        if self.data_sizes is None:
            self.data_sizes = np.asarray(trainer.data_sizes, dtype=np.float64)

    def aggregation_weights(self, selected: np.ndarray, q: np.ndarray, num_devices: int) -> np.ndarray:
        """Weights server_lr / (N q_n) (or the mean / data-size shares), aligned with ``selected``.

        A device that appears more than once in ``selected`` counts once (the indicator 1_n, not
        the number of draws): its first occurrence gets the weight, later ones get 0.
        """
        selected = np.asarray(selected, dtype=np.int64).reshape(-1)
        first = np.zeros(selected.size, dtype=bool)
        first[np.unique(selected, return_index=True)[1]] = True
        if self.aggregation != "unbiased":
            if self.aggregation == "data_size" and self.data_sizes is None:
                raise ValueError("aggregation 'data_size' needs data_sizes")
            raw = np.ones(selected.size) if self.aggregation == "mean" else self.data_sizes[selected]
            raw = np.where(first, raw, 0.0)
            return self.server_lr * raw / raw.sum() if raw.size else raw
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (num_devices,):
            raise ValueError(f"q must have shape ({num_devices},), got {q.shape}")
        if selected.size and (selected.min() < 0 or selected.max() >= num_devices):
            raise ValueError(f"selected devices must lie in [0, {num_devices}), got {selected}")
        qs = q[selected]
        if np.any(~(qs > 0)):
            raise ValueError(f"selected devices need q > 0 for unbiased weights, got q = {qs}")
        return np.where(first, self.server_lr / (num_devices * qs), 0.0)

    def local_updates(self, trainer: "Trainer", devices: np.ndarray, round_idx: int):
        """The devices' deltas y_K - x_t (plain local SGD; subclasses change the local rule)."""
        return trainer.local_updates(devices, round_idx)

    def apply_updates(self, trainer: "Trainer", updates: Updates) -> dict:
        """x <- x + sum_i w_i delta_i: a round's own weights (``aggregation_weights``), or global_lr
        times the protocol's weights (FedBuff's s(tau) / K, ...), each scaled by |D_i| over the mean
        |D| of the updates under aggregation = "data_size"."""
        weights = self.update_weights(updates)
        trainer.aggregate(updates.deltas, weights)
        return {"num_trained": int(len(weights)), "weight_sum": float(weights.sum())}

    def update_weights(self, updates: Updates) -> np.ndarray:
        """global_lr x the protocol's weights, each scaled by |D_i| over the updates' mean |D| under
        aggregation = "data_size"; a round's own (``updates.fresh``) as they are (aggregation_weights
        has server_lr and the shares in them already)."""
        if updates.fresh:
            return np.asarray(updates.weights, dtype=np.float64)
        weights = self.server_lr * np.asarray(updates.weights, dtype=np.float64)
        if self.aggregation == "data_size" and len(weights):
            sizes = self.data_sizes[np.asarray(updates.devices, dtype=np.int64)]
            weights = weights * sizes / sizes.mean()
        return weights


@dataclass(frozen=True)
class SafariOptions(FedAvgOptions):
    """Options of SAFARI: FedAvg's plus the server rounds."""

    safari_q: float = option(0.8, ge=0, le=1, doc="probability that a round is a client round")
    server_steps: int | None = option(None, ge=1, doc="SGD steps per server round (1: the paper's "
                                      "Algorithm 1); default one epoch over the auxiliary set")
    server_lr: float | None = option(None, gt=0, doc="server step size eta_s (default: learning.lr)")
    server_round_is_slot: bool = option(False, doc="a server round counts as a Lyapunov slot with zero "
                                        "consumption (queues drain by p_bar); default: queues change only "
                                        "in client rounds")
    server_compute_s: float = option(0.0, ge=0, doc="simulated time of one server round (server "
                                     "computation on the auxiliary set; no airtime)")
    server_step_s: float = option(0.0, ge=0, doc="server time per SGD step on the auxiliary set, added to "
                                  "server_compute_s (steps: server_steps or one epoch)")


class Safari(FedAvg):
    """SAFARI, server-assisted FedAvg (docs/papers/safari.md): client rounds are FedAvg rounds; a server
    round is SGD on the server's auxiliary set T and involves no device.

    Each round is a client round with probability q (``plan_round``, from the run's "round_type"
    stream), else a server round of ``server_round_s`` seconds. ``server_steps`` None: one epoch over
    T in minibatches of min(B, |T|) (the simulator's default, docs/papers/safari.md, "Where the
    simulator departs from the paper"); 1: the paper's Algorithm 1 (one SGD step).
    ``server_lr`` None: the devices' step size (eta_s = eta_c = 0.1 in the paper).
    """

    Options = SafariOptions

    def __init__(self, aux_indices: np.ndarray | None = None, server_lr: float | None = None,
                 server_steps: int | None = None, global_lr: float = 1.0, aggregation: str = "unbiased",
                 data_sizes=None, client_round_prob: float = 1.0, server_round_s: float = 0.0,
                 drain: bool = False):
        super().__init__(server_lr=global_lr, aggregation=aggregation, data_sizes=data_sizes)
        self.aux_indices = np.asarray([] if aux_indices is None else aux_indices, dtype=np.int64).reshape(-1)
        self.eta_s = None if server_lr is None else float(server_lr)
        self.server_steps = None if server_steps is None else int(server_steps)
        self.client_round_prob, self.server_round_s, self.drain = float(client_round_prob), float(server_round_s), drain

    @classmethod
    def from_scenario(cls, scenario, options: SafariOptions) -> "Safari":
        """SAFARI with a server round of server_compute_s plus server_step_s per SGD step (server_steps,
        else one epoch: ceil(n_T / min(batch_size, n_T)) steps)."""
        lc = scenario.learning
        steps = options.server_steps
        if steps is None:
            steps = -(-lc.aux_samples // min(lc.batch_size, lc.aux_samples)) if lc.aux_samples else 0
        return cls(server_lr=options.server_lr, server_steps=options.server_steps, global_lr=options.global_lr,
                   aggregation=cls._aggregation(scenario, options), client_round_prob=options.safari_q,
                   server_round_s=options.server_compute_s + options.server_step_s * steps,
                   drain=options.server_round_is_slot)

    @classmethod
    def check(cls, scenario, options: SafariOptions) -> None:
        """Server rounds need an auxiliary set to train on."""
        super().check(scenario, options)
        if options.safari_q < 1 and not scenario.run.timing_only and scenario.learning.aux_samples < 1:
            raise ConfigError("learning.aux_samples = 0: safari with learning.safari_q < 1 needs an "
                              "auxiliary set (learning.aux_samples >= 1)")

    def setup(self, trainer: "Trainer") -> None:
        """The server's auxiliary set is the trainer's server data."""
        super().setup(trainer)
        if self.aux_indices.size == 0:
            self.aux_indices = np.asarray(trainer.server_indices, dtype=np.int64)

    @absent  # its server rounds are rounds: it applies its client rounds' updates, never stale ones
    def apply_updates(self, trainer: "Trainer", updates: Updates) -> dict:
        """A client round's updates, as FedAvg applies them."""
        if not updates.fresh:
            raise NotImplementedError("Safari cannot apply stale updates")
        return super().apply_updates(trainer, updates)

    def plan_round(self, round_idx: int, rng: np.random.Generator) -> ServerRound | None:
        """A client round with probability q, else a server round."""
        if rng.random() < self.client_round_prob:
            return None
        return ServerRound(self.server_round_s, self.drain)

    def server_round(self, trainer: "Trainer", round_idx: int) -> dict:
        """x_{r+1} = x_r after SGD on T (no communication)."""
        steps = trainer.server_sgd(self.aux_indices, round_idx, steps=self.server_steps, lr=self.eta_s)
        return {"server_steps": steps}
