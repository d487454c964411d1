"""The FedShuffle family as algorithms for the simulator (docs/papers/fedshuffle.md, "The FedShuffle
family as algorithms").

:class:`FedShuffleGen` is the general engine of that section: device i runs tau_i local minibatch
steps from x_t with its own step size lr_i over a fresh random permutation of its data (random
reshuffling: ``Trainer.minibatch_indices``), and the server applies

    x_{t+1} = x_t + server_lr * sum_{i in S} coef_i (y_i - x_t).

Every named method is a parameter setting (the table of docs/papers/fedshuffle.md, "The FedShuffle
family as algorithms"):

=============== ====================== ========================== ==================================
method          local work             step size of device i      coef_i
=============== ====================== ========================== ==================================
fedavg_rr       E epochs (tau_i)       lr                         w_i / sum_S w_j (SO)
fedavg_min      min_S tau_j steps      lr                         SO
fedavg_mean     mean_S tau_j steps     lr                         SO
fednova         E epochs               lr                         rho_i tau_eff / tau_i, rho = SO,
                                                                  tau_eff = sum_S rho_j tau_j
fedshuffle      E epochs               lr tau_ref / tau_i         w_i / p_i
fedshuffle_so   E epochs               lr tau_ref / tau_i         (w_i/p_i) / sum_S (w_j/p_j)
fedshuffle_mvr  E epochs, 2 grads/step lr tau_ref / tau_i         w_i / p_i, plus MVR momentum
=============== ====================== ========================== ==================================

w_i = |D_i| / |D| (over all devices), tau_i = E_i ceil(|D_i| / B), tau_ref = max_j tau_j over all
devices (the largest device uses the common lr, smaller ones a proportionally larger one), and
p_i is the marginal inclusion probability the scheduler used (the engine's q): with it
E[sum_S (w_i/p_i) Delta_i] = sum_i w_i Delta_i for any sampling (the same section).

:meth:`FedShuffleGen.objective_weights` gives the closed form of the objective a setting
actually optimises (the same section): w^_i proportional to E[coef_i] * lr_i * tau_i.

Heterogeneous epochs: with ``epochs_max`` every device draws E_i uniformly from
{local_epochs, ..., epochs_max} each round (docs/papers/fedshuffle.md, "Where the simulator departs
from the paper"; as in FedNova's CIFAR runs), from the named stream "local_epochs" keyed by the
round, so a device's draw does not depend on the cohort.

Global momentum (docs/papers/fedshuffle.md, "Global momentum and the local step direction") with
``momentum`` = 1 - a > 0: the server keeps m and sends it with x_t. Without ``mvr`` (the paper's
networks, every method): local direction a g(y) + (1 - a) m and m <- a g^ + (1 - a) m, with g^ the
cohort's rho-weighted mean of the gradient averages recovered from the deltas (no extra computation
or upload). With ``mvr`` (FedShuffleMVR, the notebook's ordering): local direction
g(y) + (1 - a)(m - g(x_t)) on the same minibatch, each device also sends
u_i = grad f_i(x_t) - (1 - a) grad f_i(x_{t-1}) (two full local passes), and
m <- (1 - a) m + sum_S (w_i / p_i) u_i.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

from ..fields import ConfigError, option
from ..rng import stream
from .algorithms import Algorithm, Updates, applies_stale_updates, require_inclusion_probabilities

__all__ = ["FEDSHUFFLE_METHODS", "FedShuffleGen", "FedShuffleOptions", "make_fedshuffle_method"]


class FedShuffleGen(Algorithm):
    """FedShuffleGen (docs/papers/fedshuffle.md, "The FedShuffle family as algorithms") with the knobs
    of the named methods.

    sizes: |D_i| for every device (all N of them, also those never selected).
    local_epochs (E), batch_size (B): tau_i = E ceil(|D_i| / B) local steps.
    lr: base local step size (the common lr of FedAvg; the largest device's lr for FedShuffle).
    work: "epochs" (tau_i steps), "min" / "mean" (every selected device runs min / rounded mean
        over the cohort of tau_j steps: FedAvgMin / FedAvgMean).
    lr_norm: "none" (lr for every device) or "steps" (lr tau_ref / tau_i: FedShuffle).
    aggregation: "unbiased" (w_i / p_i), "sum_one" (w_i / sum_S w_j) or "unbiased_sum_one"
        ((w_i/p_i) normalised to sum 1 over the cohort: FedShuffle w/ SO, biased).
    nova: None, "arith" or "harmonic": multiply the base coefficient rho_i by tau_eff / tau_i with
        tau_eff = sum_S rho_j tau_j (Wang et al.) or sum_S rho_j / sum_S (rho_j / tau_j).
    server_lr: eta_g.
    epochs_max: None (every device runs local_epochs epochs) or the top of the per-round draw
        E_i ~ U{local_epochs, ..., epochs_max}.
    momentum: 1 - a of the global momentum (0: none). mvr: FedShuffleMVR's corrected direction and
        momentum (needs momentum > 0). seed: the run's root seed (stream "local_epochs").
    """

    def __init__(
        self,
        sizes: Sequence[int] | None,
        *,
        local_epochs: int = 1,
        batch_size: int = 32,
        lr: float = 0.01,
        work: str = "epochs",
        lr_norm: str = "none",
        aggregation: str = "unbiased",
        nova: str | None = None,
        server_lr: float = 1.0,
        name: str = "fedshuffle_gen",
        epochs_max: int | None = None,
        momentum: float = 0.0,
        mvr: bool = False,
        seed: int = 0,
    ):
        if local_epochs < 1 or batch_size < 1:
            raise ValueError(f"local_epochs and batch_size must be >= 1, got {local_epochs}, {batch_size}")
        for key, value, allowed in (
            ("work", work, ("epochs", "min", "mean")),
            ("lr_norm", lr_norm, ("none", "steps")),
            ("aggregation", aggregation, ("unbiased", "sum_one", "unbiased_sum_one")),
            ("nova", nova, (None, "arith", "harmonic")),
        ):
            if value not in allowed:
                raise ValueError(f"{key} = {value!r}: must be one of {allowed}")
        self.local_epochs = int(local_epochs)
        self.batch_size = int(batch_size)
        self.lr = float(lr)
        self.work, self.lr_norm, self.aggregation, self.nova = work, lr_norm, aggregation, nova
        if epochs_max is not None and epochs_max < local_epochs:
            raise ValueError(f"epochs_max = {epochs_max}: must be >= local_epochs = {local_epochs}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum = {momentum!r}: must lie in [0, 1)")
        if mvr and momentum == 0.0:
            raise ValueError("mvr needs a momentum in (0, 1), e.g. 0.9")
        self.server_lr = float(server_lr)
        self.name = name
        self.epochs_max = None if epochs_max is None else int(epochs_max)
        self.momentum, self.mvr, self.seed = float(momentum), bool(mvr), int(seed)
        # MVR uploads u_i next to its delta; global momentum broadcasts m next to x_t, MVR also x_{t-1}
        self.upload_vectors = 1 + self.mvr
        self.broadcast_vectors = 1 + (self.momentum > 0) + self.mvr
        # server state of the global momentum (numpy, so that checkpoints carry it)
        self.m: np.ndarray | None = None
        self.prev_params: np.ndarray | None = None
        self.sizes = None
        if sizes is not None:
            self.set_sizes(sizes)

    def set_sizes(self, sizes: Sequence[int]) -> None:
        """|D_i| of every device: the weights w_i and the local work tau_i follow from them."""
        sizes = np.asarray(sizes, dtype=np.int64).reshape(-1)
        if sizes.size == 0 or np.any(sizes < 0) or sizes.sum() == 0:
            raise ValueError(f"sizes must be >= 0 with a positive total, got {sizes}")
        self.sizes = sizes
        self.weights = sizes / sizes.sum()
        # K_i = ceil(|D_i| / B) steps make one pass over the data; empty devices do no work
        self.steps_per_epoch = np.array([math.ceil(s / self.batch_size) for s in sizes], dtype=np.int64)
        self.tau = self.local_epochs * self.steps_per_epoch  # with fixed epochs
        self.tau_ref = int((self.epochs_max or self.local_epochs) * self.steps_per_epoch.max())

    def setup(self, trainer) -> None:
        """The devices' dataset sizes come from the trainer."""
        self.set_sizes(trainer.data_sizes)

    def state_dict(self) -> dict:
        """The global momentum and the previous model (MVR)."""
        return {"m": self.m, "prev_params": self.prev_params}

    def load_state(self, state: dict) -> None:
        """Restore the global momentum."""
        self.m, self.prev_params = state["m"], state["prev_params"]

    @property
    def num_devices(self) -> int:
        return self.sizes.size

    # ------------------------------------------------------------------------------------------
    # local rule

    def epochs(self, devices: Sequence[int], round_idx: int = 0) -> np.ndarray:
        """E_i of each device in round ``round_idx`` (local_epochs unless epochs_max is set)."""
        devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        if self.epochs_max is None:
            return np.full(devices.size, self.local_epochs, dtype=np.int64)
        rng = stream(self.seed, "local_epochs", round_idx)
        return rng.integers(self.local_epochs, self.epochs_max + 1, size=self.num_devices)[devices]

    def local_work(self, devices: Sequence[int], round_idx: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(steps, step sizes) of each device in ``devices`` (the cohort, for min/mean)."""
        devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        tau = self.epochs(devices, round_idx) * self.steps_per_epoch[devices]
        if self.work == "epochs" or devices.size == 0:
            steps = tau.copy()
        elif self.work == "min":
            steps = np.full(devices.size, tau.min())
        else:
            steps = np.full(devices.size, max(int(round(tau.mean())), 1))
        if self.lr_norm == "steps":
            lrs = self.lr * self.tau_ref / np.maximum(tau, 1)
        else:
            lrs = np.full(devices.size, self.lr)
        return steps, lrs

    def work_units(self, devices: Sequence[int], round_idx: int = 0) -> np.ndarray | None:
        """Minibatch-gradient evaluations of each device in units of local steps (the computation
        time scales with it): the steps, doubled by MVR's second gradient per step, plus MVR's
        two full local passes (docs/papers/fedshuffle.md, "The work cost of FedShuffleMVR"). None before
        the sizes are known (timing-only runs)."""
        if self.sizes is None:
            return None
        devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        steps = self.local_work(devices, round_idx)[0]
        if not self.mvr:
            return steps
        return 2 * steps + 2 * self.steps_per_epoch[devices]

    # ------------------------------------------------------------------------------------------
    # aggregation

    def coefficients(self, devices: np.ndarray, p: np.ndarray, steps: np.ndarray | None = None) -> np.ndarray:
        """coef_i (without server_lr) for distinct ``devices`` with inclusion probabilities ``p``
        (the full length-N vector); ``steps``: the local steps they ran (default local_work)."""
        devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        if devices.size == 0:
            return np.zeros(0)
        w = self.weights[devices]
        if self.aggregation == "sum_one":
            rho = w / w.sum()
        else:
            ps = np.asarray(p, dtype=np.float64)[devices]
            if np.any(~(ps > 0)):
                raise ValueError(f"selected devices need p > 0 for unbiased weights, got p = {ps}")
            rho = w / ps
            if self.aggregation == "unbiased_sum_one":
                rho = rho / rho.sum()
        if self.nova is not None:
            a = (self.local_work(devices)[0] if steps is None else np.asarray(steps)).astype(np.float64)
            a = np.maximum(a, 1.0)
            tau_eff = rho @ a if self.nova == "arith" else rho.sum() / (rho / a).sum()
            rho = rho * tau_eff / a
        return rho

    def aggregation_weights(self, selected: np.ndarray, q: np.ndarray, num_devices: int) -> np.ndarray:
        """server_lr * coef_i aligned with ``selected``; a repeated device counts once (first
        occurrence), as in :class:`FedAvg`."""
        selected = np.asarray(selected, dtype=np.int64).reshape(-1)
        q = np.asarray(q, dtype=np.float64)
        if num_devices != self.num_devices or q.shape != (num_devices,):
            raise ValueError(f"need {self.num_devices} devices and q of that length, got {num_devices}, {q.shape}")
        if selected.size and (selected.min() < 0 or selected.max() >= num_devices):
            raise ValueError(f"selected devices must lie in [0, {num_devices}), got {selected}")
        uniq, first = np.unique(selected, return_index=True)
        out = np.zeros(selected.size)
        out[first] = self.server_lr * self.coefficients(uniq, q)
        return out

    def round(self, trainer, selected: np.ndarray, q: np.ndarray, num_devices: int, round_idx: int) -> dict:
        """Train the distinct selected devices (their own step counts and step sizes), aggregate,
        and update the global momentum if there is one."""
        import torch

        from .trainer import LocalDirection

        devices = np.unique(np.asarray(selected, dtype=np.int64))
        devices = devices[self.sizes[devices] > 0]
        steps, lrs = self.local_work(devices, round_idx)
        weights = self.server_lr * self.coefficients(devices, q, steps)
        x0 = trainer.params.clone()
        c = self.momentum
        m = torch.zeros_like(x0) if self.m is None else torch.as_tensor(self.m, device=x0.device)
        direction = None
        if c > 0:
            direction = (LocalDirection(1.0, c, c * m) if self.mvr else LocalDirection(1.0 - c, 0.0, c * m))
        if devices.size:
            deltas = trainer.local_updates(devices, round_idx, local_steps=steps, lr=lrs, direction=direction)
            trainer.aggregate(deltas, weights)
        if c > 0:
            self._update_momentum(trainer, devices, q, steps, lrs, deltas if devices.size else None, x0, m)
        # max_weight: a rarely scheduled device with much data gets a huge w_n / q_n
        # (docs/papers/fedshuffle.md, "The FedShuffle family as algorithms": unbiased but high
        # variance); worth logging next to the scheduler's q
        return {"num_trained": int(devices.size), "weight_sum": float(weights.sum()),
                "max_weight": float(weights.max(initial=0.0)), "local_steps": int(steps.sum())}

    def _update_momentum(self, trainer, devices, q, steps, lrs, deltas, x0, m) -> None:
        import torch

        c = self.momentum
        new = c * m
        if devices.size:
            rho = self.weights[devices] / np.asarray(q, dtype=np.float64)[devices]  # data weights w_i / p_i
            if self.mvr:
                prev = x0 if self.prev_params is None else torch.as_tensor(self.prev_params, device=x0.device)
                u = trainer.full_gradients(devices, x0) - c * trainer.full_gradients(devices, prev)
                new = new + torch.as_tensor(rho, dtype=torch.float32, device=x0.device) @ u
            else:
                if self.aggregation != "unbiased":
                    rho = rho / rho.sum()  # the SO-normalised estimator of the reference code
                # delta_i = -lr_i steps_i (a g^_i + c m): recover g^_i, the mean local gradient
                scale = torch.as_tensor(1.0 / (lrs * np.maximum(steps, 1)), dtype=torch.float32, device=x0.device)
                g_hat = (-deltas * scale[:, None] - c * m) / (1.0 - c)
                new = new + (1.0 - c) * (torch.as_tensor(rho, dtype=torch.float32, device=x0.device) @ g_hat)
        self.m = new.cpu().numpy()
        self.prev_params = x0.cpu().numpy()

    # ------------------------------------------------------------------------------------------
    # event protocols (stale updates: without momentum, FedNova's tau_eff or cohort-wide work; see
    # _Method.check)

    def local_updates(self, trainer, devices: np.ndarray, round_idx: int):
        """The devices' deltas from the current model: their own steps and step sizes."""
        devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        steps, lrs = self.local_work(devices, round_idx)
        return trainer.local_updates(devices, round_idx, local_steps=steps, lr=lrs)

    def apply_updates(self, trainer, updates: Updates) -> dict:
        """The protocol's weights times the data weights: N w_i (unbiased: w_i / p_i with p_i the
        uniform share of the aggregation, folded into the protocol's 1 / K), or k w_i / sum w_j over
        the k updates (the sum-one rules)."""
        devices = np.asarray(updates.devices, dtype=np.int64)
        w = self.weights[devices]
        data = self.num_devices * w if self.aggregation == "unbiased" else len(w) * w / w.sum()
        weights = self.server_lr * np.asarray(updates.weights, dtype=np.float64) * data
        trainer.aggregate(updates.deltas, weights)
        return {"num_trained": int(devices.size), "weight_sum": float(weights.sum())}

    # ------------------------------------------------------------------------------------------
    # analysis

    def expected_coefficients(self, p: np.ndarray, cohorts: Sequence[Sequence[int]] | None = None,
                              probs: Sequence[float] | None = None) -> np.ndarray:
        """E[1_{i in S} coef_i] for every device: over the given cohorts with their probabilities,
        or, without cohorts, for the unbiased rules (w_i) / full participation."""
        p = np.asarray(p, dtype=np.float64)
        n = self.num_devices
        if cohorts is None:
            if self.aggregation == "unbiased" and self.nova is None:
                return self.weights.copy()
            cohorts, probs = [np.arange(n)], [1.0]
        e = np.zeros(n)
        for sel, pr in zip(cohorts, probs):
            sel = np.asarray(sel, dtype=np.int64)
            e[sel] += pr * self.coefficients(sel, p)
        return e

    def objective_weights(self, p: np.ndarray | None = None, cohorts=None, probs=None) -> np.ndarray:
        """w^_i of the objective actually optimised (docs/papers/fedshuffle.md, "The FedShuffle family as
        algorithms"), normalised to sum 1:
        w^_i proportional to E[coef_i] * lr_i * steps_i (work = "epochs")."""
        p = np.ones(self.num_devices) if p is None else np.asarray(p, dtype=np.float64)
        steps, lrs = self.local_work(np.arange(self.num_devices))
        v = self.expected_coefficients(p, cohorts, probs) * lrs * steps
        return v / v.sum()


SETTINGS = {
    "fedavg_rr": dict(aggregation="sum_one"),
    "fedavg_min": dict(work="min", aggregation="sum_one"),
    "fedavg_mean": dict(work="mean", aggregation="sum_one"),
    "fednova": dict(aggregation="sum_one", nova="arith"),
    "fedshuffle": dict(lr_norm="steps", aggregation="unbiased"),
    "fedshuffle_so": dict(lr_norm="steps", aggregation="unbiased_sum_one"),
    "fedshuffle_mvr": dict(lr_norm="steps", aggregation="unbiased", mvr=True),
}
"""Each named method of the family as FedShuffleGen settings (the table in the module docstring)."""
FEDSHUFFLE_METHODS = tuple(SETTINGS)


def make_fedshuffle_method(name: str, sizes: Sequence[int], *, local_epochs: int = 1, batch_size: int = 32,
                           lr: float = 0.01, server_lr: float = 1.0, epochs_max: int | None = None,
                           momentum: float = 0.0, nova: str = "arith", seed: int = 0) -> FedShuffleGen:
    """The named method of the family as a :class:`FedShuffleGen` setting (table in the module doc).

    ``momentum`` adds the global momentum to any method (FedShuffleMVR requires it); ``nova`` is
    FedNova's tau_eff ("arith" as Wang et al., or "harmonic")."""
    if name not in SETTINGS:
        raise ValueError(f"unknown method {name!r}; choose from {FEDSHUFFLE_METHODS}")
    settings = {**SETTINGS[name], **({"nova": nova} if name == "fednova" else {})}
    return FedShuffleGen(sizes, local_epochs=local_epochs, batch_size=batch_size, lr=lr,
                         server_lr=server_lr, name=name, epochs_max=epochs_max, momentum=momentum,
                         seed=seed, **settings)


@dataclass(frozen=True)
class FedShuffleOptions:
    """Options of the FedShuffle family."""

    global_lr: float = option(1.0, gt=0, doc="server step size eta_g on the aggregated update")
    local_epochs: int = option(1, ge=1, doc="local epochs E; device n runs E ceil(|D_n| / batch_size) steps "
                               "(learning.local_steps is then unused)")
    local_epochs_max: int | None = option(None, ge=1, doc="heterogeneous epochs: E_n ~ U{local_epochs, ..., "
                                          "local_epochs_max} per device and round")
    momentum: float = option(0.0, ge=0, lt=1, doc="global momentum 1 - a (docs/papers/fedshuffle.md: "
                             "global momentum; 0.9 in the paper); fedshuffle_mvr needs it > 0")


@dataclass(frozen=True)
class FedNovaOptions(FedShuffleOptions):
    """Options of FedNova: the family's plus its tau_eff."""

    nova_tau_eff: str = option("arith", choices=("arith", "harmonic"),
                               doc="tau_eff = sum rho_j tau_j (arith, Wang et al.) or harmonic")


class _Method(FedShuffleGen):
    """A named method of the family, built from a scenario (sizes arrive at ``setup``)."""

    method: ClassVar[str] = ""
    Options = FedShuffleOptions

    @classmethod
    def from_scenario(cls, scenario, options: FedShuffleOptions) -> "_Method":
        """The method with the scenario's batch size, step size and seed."""
        lc = scenario.learning
        settings = {**SETTINGS[cls.method], **cls._extra(options)}
        return cls(None, local_epochs=options.local_epochs, batch_size=lc.batch_size, lr=lc.lr,
                   server_lr=options.global_lr, name=cls.method, epochs_max=options.local_epochs_max,
                   momentum=options.momentum, seed=scenario.seed, **settings)

    @staticmethod
    def _extra(options) -> dict:
        return {}

    @classmethod
    def check(cls, scenario, options: FedShuffleOptions) -> None:
        """Epoch range, MVR's momentum, and inclusion probabilities for the weights."""
        if options.local_epochs_max is not None and options.local_epochs_max < options.local_epochs:
            raise ConfigError(f"learning.local_epochs_max = {options.local_epochs_max}: must be >= "
                              f"learning.local_epochs = {options.local_epochs}")
        if SETTINGS[cls.method].get("mvr") and options.momentum == 0:
            raise ConfigError(f"learning.momentum = 0: {cls.method} needs a momentum in (0, 1), e.g. 0.9")
        require_inclusion_probabilities(scenario, cls.method)
        settings = SETTINGS[cls.method]
        if applies_stale_updates(scenario) and (options.momentum > 0 or settings.get("nova")
                                                 or settings.get("work", "epochs") != "epochs"):
            why = ("its global momentum is the server state of a round" if options.momentum > 0
                   else "its coefficients need the whole cohort of a round")
            raise ConfigError(f"learning.algorithm = {cls.method!r}: {why}, which protocol.name = "
                              f"{scenario.protocol.name!r} with stale updates does not have; use fedavg_rr or "
                              "fedshuffle without momentum, or protocol.name = 'sync'")


class FedAvgRR(_Method):
    """FedAvg with random reshuffling, E epochs per device, weights normalised over the cohort."""

    method = "fedavg_rr"


class FedAvgMin(_Method):
    """FedAvgMin: every selected device runs the cohort's smallest step count."""

    method = "fedavg_min"


class FedAvgMean(_Method):
    """FedAvgMean: every selected device runs the cohort's mean step count."""

    method = "fedavg_mean"


class FedNova(_Method):
    """FedNova: normalised averaging, coef rho_i tau_eff / tau_i."""

    method = "fednova"
    Options = FedNovaOptions

    @staticmethod
    def _extra(options: FedNovaOptions) -> dict:
        return {"nova": options.nova_tau_eff}


class FedShuffle(_Method):
    """FedShuffle: step size lr tau_ref / tau_i, unbiased weights w_i / p_i."""

    method = "fedshuffle"


class FedShuffleSO(_Method):
    """FedShuffle with weights normalised to sum one over the cohort (biased)."""

    method = "fedshuffle_so"


class FedShuffleMVR(_Method):
    """FedShuffleMVR: FedShuffle with MVR's corrected direction and momentum (uploads two vectors)."""

    method = "fedshuffle_mvr"
