"""Per-FedAvg (docs/papers/perfedavg.md): FedAvg whose devices run local SGD on the MAML meta-function
F_i(w) = f_i(w - alpha grad f_i(w)) instead of on f_i.

One local step at w (docs/papers/perfedavg.md, "A local step"), with three independent batches D, D',
D'' of B samples:

    g  = grad f_i(w; D)                  inner (adaptation) gradient
    u  = grad f_i(w - alpha g; D')       outer gradient at the adapted point
    h  = u - alpha H(w; D'') u           meta-gradient; the variant decides how H u is computed
    w <- w - beta h

* ``"fo"``: first order, h = u (H u dropped); 2 gradient evaluations per step.
* ``"hf"``: Hessian-free, H u ~ (grad f(w + delta u; D'') - grad f(w - delta u; D'')) / (2 delta);
  4 gradient evaluations.
* ``"exact"``: H u by reverse-over-reverse autodiff; about 4 gradient evaluations.

The server side is FedAvg's: the same download and upload, and the same 1/(N q) aggregation
weights (with uniform sampling of m devices, q = m / N, the plain average of the paper).

Batches: D' is the (round, device) batch of the named stream "minibatch", the one FedAvg uses, so
with alpha = 0 Per-FedAvg (FO) is FedAvg step for step. D and D'' come from their own named streams
"perfedavg_inner" and "perfedavg_hessian" keyed the same way: the three batches are independent and
reproducible, and do not depend on which other devices were selected.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence


from ..fields import option
from .algorithms import FedAvg, require_inclusion_probabilities

if TYPE_CHECKING:
    import torch

    from .trainer import Trainer

__all__ = ["PERFEDAVG_VARIANTS", "PerFedAvg", "PerFedAvgExact", "PerFedAvgFO", "PerFedAvgHF"]

PERFEDAVG_VARIANTS = ("fo", "hf", "exact")
# Gradient evaluations (forward + backward on B samples) per local step, relative to FedAvg's one:
# docs/papers/perfedavg.md, "Server side, aggregation and cost" (FO: D and D'; HF: D, D' and D'' at
# w +- delta u; exact: D, D' and an HVP on D'' that costs about two gradients).
GRADIENT_EVALUATIONS = {"fo": 2, "hf": 4, "exact": 4}
# Named streams of the three batches of a local step.
BATCH_STREAMS = {"D": "perfedavg_inner", "D_prime": "minibatch", "D_second": "perfedavg_hessian"}


@dataclass(frozen=True)
class PerFedAvgOptions:
    """Options of Per-FedAvg (its inner step size alpha is learning.per_alpha, shared with the
    personalised evaluation)."""

    global_lr: float = option(1.0, gt=0, doc="server step size eta_g on the aggregated update")
    per_beta: float | None = option(None, gt=0, doc="local (meta) step size beta; default: learning.lr")


@dataclass(frozen=True)
class PerFedAvgHFOptions(PerFedAvgOptions):
    """Options of Per-FedAvg (HF): the finite-difference radius besides the others."""

    per_delta: float = option(1e-3, gt=0, doc="finite-difference radius delta")


class PerFedAvg(FedAvg):
    """Per-FedAvg with the meta-gradient ``variant`` ("fo", "hf" or "exact").

    alpha: inner step size (>= 0; 0 turns FO into FedAvg). beta: local (meta) step size; None uses
    the trainer's lr. delta: finite-difference radius of "hf". server_lr: as for FedAvg.
    Registered as perfedavg_fo, perfedavg_hf and perfedavg_exact (:class:`PerFedAvgFO`, ...).
    """

    Options = PerFedAvgOptions
    personalised_eval = True
    variant = "fo"

    def __init__(self, variant: str, alpha: float, beta: float | None = None, delta: float = 1e-3,
                 server_lr: float = 1.0):
        if variant not in PERFEDAVG_VARIANTS:
            raise ValueError(f"variant = {variant!r}: must be one of {', '.join(PERFEDAVG_VARIANTS)}")
        if not alpha >= 0:
            raise ValueError(f"alpha = {alpha}: must be >= 0")
        if beta is not None and not beta > 0:
            raise ValueError(f"beta = {beta}: must be > 0")
        if not delta > 0:
            raise ValueError(f"delta = {delta}: must be > 0")
        super().__init__(server_lr=server_lr)
        self.variant, self.alpha, self.delta = variant, float(alpha), float(delta)
        self.beta = None if beta is None else float(beta)

    @classmethod
    def from_scenario(cls, scenario, options: PerFedAvgOptions) -> "PerFedAvg":
        """The variant of the class, alpha = learning.per_alpha."""
        return cls(cls.variant, scenario.learning.per_alpha, options.per_beta, server_lr=options.global_lr)

    @classmethod
    def check(cls, scenario, options) -> None:
        """The 1 / (N q) weights need inclusion probabilities."""
        require_inclusion_probabilities(scenario, scenario.learning.algorithm)

    @property
    def compute_factor(self) -> int:
        """Gradient evaluations per local step relative to a FedAvg step (2 for FO, 4 for HF and exact)."""
        return GRADIENT_EVALUATIONS[self.variant]

    def meta_gradient(self, trainer: Trainer, w: torch.Tensor, inner: tuple, outer: tuple,
                      hessian: tuple) -> torch.Tensor:
        """h_t at the un-adapted point w from the batches D (inner), D' (outer) and D'' (hessian),
        each an (x, y) pair; D'' is not used by "fo". ``w`` is one flat parameter vector (d,) with
        batches (B, ...), or a stack (k, d) of k devices' vectors with batches (k, B, ...)."""
        stacked = w.ndim == 2
        grad_fn = trainer.batched_grad if stacked else trainer.grad
        g = grad_fn(w, *inner)
        u = grad_fn(w - self.alpha * g, *outer)
        if self.variant == "fo" or self.alpha == 0:
            return u
        if self.variant == "hf":
            # central difference along u (docs/papers/perfedavg.md, "Where the simulator departs from the
            # paper": /2 delta, the same D'' for both points)
            hu = (grad_fn(w + self.delta * u, *hessian) - grad_fn(w - self.delta * u, *hessian)) / (2 * self.delta)
        else:
            hu = (trainer.batched_hvp if stacked else trainer.hvp)(w, u, *hessian)
        return u - self.alpha * hu

    def local_updates(self, trainer: Trainer, devices: Sequence[int], round_idx: int) -> torch.Tensor:
        """Each device's tau = trainer.local_steps Per-FedAvg steps from the global model; returns the
        deltas y_tau - x_t, shape (len(devices), num_params), in the order of ``devices``.

        Follows ``trainer.batching_for``: "vmap" computes all devices' steps in one vectorised call,
        "loop" one device after another (the same arithmetic per device)."""
        import torch

        devices = [int(d) for d in devices]
        for n in devices:
            if not 0 <= n < trainer.num_devices:
                raise ValueError(f"device {n} out of range [0, {trainer.num_devices})")
        beta = trainer.lr if self.beta is None else self.beta
        x0 = trainer.params
        if not devices:
            return torch.empty(0, trainer.num_params, dtype=torch.float32, device=trainer.device)
        # (k, tau, B) indices per batch kind
        idx = {key: torch.stack([trainer.minibatch_indices(n, round_idx, stream_name=name) for n in devices])
               for key, name in BATCH_STREAMS.items()}
        if trainer.batching_for(len(devices), plain=False) == "vmap":
            y = x0.expand(len(devices), -1).clone()
            for s in range(trainer.local_steps):
                y.sub_(self.meta_gradient(trainer, y, *(trainer.batch(idx[key][:, s]) for key in BATCH_STREAMS)),
                       alpha=beta)
            return trainer.upload(devices, y.sub_(x0), round_idx)
        out = torch.empty(len(devices), trainer.num_params, dtype=torch.float32, device=trainer.device)
        for j in range(len(devices)):
            y = x0.clone()
            for s in range(trainer.local_steps):
                y.sub_(self.meta_gradient(trainer, y, *(trainer.batch(idx[key][j, s]) for key in BATCH_STREAMS)),
                       alpha=beta)
            out[j] = y.sub_(x0)
        return trainer.upload(devices, out, round_idx)


class PerFedAvgFO(PerFedAvg):
    """Per-FedAvg, first order (2 gradient evaluations per step)."""

    variant = "fo"


class PerFedAvgHF(PerFedAvg):
    """Per-FedAvg, Hessian-free (4 gradient evaluations per step)."""

    Options = PerFedAvgHFOptions
    variant = "hf"

    @classmethod
    def from_scenario(cls, scenario, options: PerFedAvgHFOptions) -> "PerFedAvgHF":
        """HF with the finite-difference radius per_delta."""
        return cls("hf", scenario.learning.per_alpha, options.per_beta, options.per_delta,
                   server_lr=options.global_lr)


class PerFedAvgExact(PerFedAvg):
    """Per-FedAvg with autodiff Hessian-vector products (about 4 gradient evaluations per step)."""

    variant = "exact"
