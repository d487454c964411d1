"""The learning-algorithm seam: what the selected devices compute and how the server combines it.

Like Flower's ``Strategy`` the interface is narrow. An algorithm fits :class:`Algorithm`:

* ``from_scenario(scenario, options)`` builds it (also in timing-only runs, where it has no data:
  its timing facts, such as server rounds or extra uploads, still apply);
* ``round(trainer, selected, q, num_devices, round_idx) -> dict``: one round's learning work on
  the trainer (local updates, then aggregation); the numbers it returns become columns of
  rounds.csv.

Everything else is optional, with defaults inherited by subclassing :class:`Algorithm`: its
``Options`` dataclass, ``check`` (cross-field rules at load time), ``setup`` (the data is loaded),
``compute_factor`` (a local step's cost), ``upload_vectors`` and ``broadcast_vectors`` (model-sized
vectors on the air per round), and the checkpoint state. What only some algorithms do is a
capability (wirelessfl.capabilities), provided by implementing its members:
:class:`AppliesStaleUpdates` (``local_updates`` and ``apply_updates``: the event protocols),
:class:`ServerRounds` (``plan_round`` and ``server_round``: rounds in which the server trains
alone), :class:`HearsTheUplink` (``uplink``: what the radio did to an aggregation's updates) and
:class:`CountsWork` (``work_units``: work that scales the devices' computation time).
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

__all__ = ["AGGREGATIONS", "Algorithm", "AppliesStaleUpdates", "CountsWork", "FedAvg", "FedAvgOptions",
           "HearsTheUplink", "Safari", "SafariOptions", "ServerRound", "ServerRounds", "Updates",
           "applies_stale_updates", "can_apply_stale_updates"]


AGGREGATIONS = ("unbiased", "mean", "data_size")


@dataclass(frozen=True)
class Updates:
    """Updates an aggregation of an event protocol applies (see ``Algorithm.apply_updates``).

    devices: (k,) the devices they came from (a device may appear twice); deltas: (k, d) tensor of
    what each would move the model by (y - x_start; fedasync's mix: y - x_now); weights: (k,) the
    protocol's weight of each (fedbuff: s(tau) / K x its server_lr, fedasync: alpha s(tau),
    semi_sync's carried updates: s(tau) / m); staleness: (k,) versions between start and now.
    """

    devices: np.ndarray
    deltas: Any
    weights: np.ndarray
    staleness: np.ndarray


@dataclass(frozen=True)
class ServerRound:
    """A round in which the server trains alone: it lasts ``duration_s`` simulated seconds, uses no
    airtime and does not consult the scheduler (``drain``: the scheduler counts it as a slot of
    zero consumption)."""

    duration_s: float = 0.0
    drain: bool = False


class Algorithm(Protocol):
    """A federated learning algorithm: the devices' local rule and the server's aggregation.

    Required: ``from_scenario`` and ``round``. Subclass this protocol to inherit the optional parts.
    """

    Options: ClassVar[type | None] = None
    """A dataclass of the algorithm's own options, or None (options handed over as a dict)."""
    personalised_eval: ClassVar[bool] = False
    """True: runs record personalised accuracy by default (run.personalised_eval overrides)."""
    upload_vectors: int = 1
    """Model-sized vectors each selected device uploads per round."""
    broadcast_vectors: int = 1
    """Model-sized vectors the server broadcasts per round."""
    compute_factor: float = 1.0
    """Cost of one local step relative to a FedAvg step: multiplies every device's computation time."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "Algorithm":
        """Build the algorithm for a run of ``scenario`` with its options (Options instance or dict)."""
        ...

    def round(self, trainer: "Trainer", selected: np.ndarray, q: np.ndarray, num_devices: int,
              round_idx: int) -> dict[str, Any]:
        """One client round on the devices whose uploads arrived; returns numbers to record."""
        ...

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this algorithm."""

    def setup(self, trainer: "Trainer") -> None:
        """Called once before the first round of a training run, with the data loaded."""

    @absent
    def plan_round(self, round_idx: int, rng: np.random.Generator) -> ServerRound | None:
        """None for a client round; a ServerRound for a round in which the server trains alone
        (``rng``: the run's "round_type" stream)."""
        return None

    @absent
    def server_round(self, trainer: "Trainer", round_idx: int) -> dict[str, Any]:
        """The server's training in a server round; returns numbers to record."""
        return {}

    @absent
    def local_updates(self, trainer: "Trainer", devices: np.ndarray, round_idx: int):
        """Event protocols: the devices' deltas y - x from the trainer's current model x (a (k, d)
        tensor), without changing the model; ``round_idx`` keys their minibatches (the version they
        started from)."""
        raise NotImplementedError(f"{type(self).__name__} cannot train devices apart from a round")

    @absent
    def apply_updates(self, trainer: "Trainer", updates: Updates) -> dict[str, Any]:
        """Event protocols: one aggregation of ``updates`` (maybe stale) into the model; returns
        numbers to record."""
        raise NotImplementedError(f"{type(self).__name__} cannot apply stale updates")

    @absent
    def uplink(self, facts) -> None:
        """Called before each aggregation with what the uplink did for its updates
        (wirelessfl.access.UplinkFacts: devices, gains, power, arrived, noise_var): an algorithm whose
        aggregation depends on the radio (over-the-air noise, channel-aware weights) keeps what it
        needs. Default: nothing."""

    @absent
    def work_units(self, devices: np.ndarray, round_idx: int) -> np.ndarray | None:
        """Local steps of each device this round (scales work-proportional computation models and
        devices.step_time_s); None: learning.local_steps each."""
        return None

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
        """None for a client round, a ServerRound for a server round (see Algorithm)."""

    def server_round(self, trainer: "Trainer", round_idx: int) -> dict[str, Any]:
        """The server's training in a server round (see Algorithm)."""


@runtime_checkable
class HearsTheUplink(Protocol):
    """An algorithm whose aggregation depends on what the radio did (over-the-air noise, channel-aware
    weights)."""

    def uplink(self, facts) -> None:
        """What the uplink did for the next aggregation's updates (see Algorithm)."""


@runtime_checkable
class CountsWork(Protocol):
    """An algorithm that gives devices other work than a FedAvg round's: their computation times
    scale with it."""

    def work_units(self, devices: np.ndarray, round_idx: int) -> np.ndarray | None:
        """Local steps of each device this round (see Algorithm)."""


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

    def round(self, trainer: "Trainer", selected: np.ndarray, q: np.ndarray, num_devices: int,
              round_idx: int) -> dict:
        """Train the distinct selected devices from x_t and apply the weighted sum of their deltas."""
        devices = np.unique(np.asarray(selected, dtype=np.int64))  # each device trains once
        weights = self.aggregation_weights(devices, q, num_devices)
        if devices.size:
            deltas = self.local_updates(trainer, devices, round_idx)
            trainer.aggregate(deltas, weights)
        return {"num_trained": int(devices.size), "weight_sum": float(weights.sum())}

    def local_updates(self, trainer: "Trainer", devices: np.ndarray, round_idx: int):
        """The devices' deltas y_K - x_t (plain local SGD; subclasses change the local rule)."""
        return trainer.local_updates(devices, round_idx)

    def apply_updates(self, trainer: "Trainer", updates: Updates) -> dict:
        """x <- x + global_lr sum_i w_i delta_i with the protocol's weights w_i (FedBuff's s(tau) / K,
        ...); aggregation = "data_size" scales each by |D_i| over the mean |D| of the updates."""
        weights = self.update_weights(updates)
        trainer.aggregate(updates.deltas, weights)
        return {"num_trained": int(len(weights)), "weight_sum": float(weights.sum())}

    def update_weights(self, updates: Updates) -> np.ndarray:
        """global_lr x the protocol's weights, each scaled by |D_i| over the updates' mean |D| under
        aggregation = "data_size"."""
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
    # its server rounds are rounds: it applies no stale updates (the contract's default: it cannot)
    apply_updates = Algorithm.apply_updates

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

    def plan_round(self, round_idx: int, rng: np.random.Generator) -> ServerRound | None:
        """A client round with probability q, else a server round."""
        if rng.random() < self.client_round_prob:
            return None
        return ServerRound(self.server_round_s, self.drain)

    def server_round(self, trainer: "Trainer", round_idx: int) -> dict:
        """x_{r+1} = x_r after SGD on T (no communication)."""
        steps = trainer.server_sgd(self.aux_indices, round_idx, steps=self.server_steps, lr=self.eta_s)
        return {"server_steps": steps}
