"""Fair client selection (docs/papers/fair_selection.md): schedulers that choose exactly kappa distinct devices.

- :class:`RandomScheduler`: kappa devices uniformly without replacement.
- :class:`PowerOfChoiceScheduler`: d candidates uniformly without replacement, then the kappa with
  the largest current local loss (each candidate uploads one 32-bit loss).
- :class:`SubmodularScheduler`: DivFL (lam = mu = 0), SubTrunc (lam > 0) and UnionFL (mu > 0) by
  (stochastic) greedy over the stored gradients of a :class:`ClientStore`; registered as
  :class:`DivFL`, :class:`SubTrunc` and :class:`UnionFL`.

All draw from ``state.rng`` (the engine's "selection" stream), so runs are reproducible and
strategies that differ only in lam or mu consume the same random numbers. The Decision carries the
chosen devices in ``selected`` (the engine uses them instead of drawing) and the extra uplink
traffic they cost in ``Decision.traffic``: ``pre_upload_bits`` (before the round: bootstrap gradients, loss scalars) and
``piggyback_bits`` (added to a selected device's model upload: its refreshed gradient and loss).
What the server learns comes through the scheduler's probe phase (``probe`` asks for losses or
gradients before the decision, ``Traffic.report_with_upload`` for those riding on the uploads);
training runs deliver them to ``receive``, timing-only runs deliver nothing and the store stays at
zeros. A gradient costs as much as one model upload (``state.model_bits``).

Power: every device transmits at P = min(Pmax, Pbar N / kappa), the uniform scheduler's
budget-matching rule with the inclusion rate q = kappa / N of random selection, so that the power
spent per round on average matches Pbar for Random and the comparison with uniform and lyapunov is
at the same budget. The Decision's q is that nominal kappa / N (it is recorded, not used to weigh
updates: these strategies average the kappa updates, see ``learning.algorithms.FedAvg`` with
aggregation "mean").
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..fields import ConfigError, option, require_memory
from .base import Decision, ReportRequest, Reports, RoundState, Scheduler, Traffic
from .client_store import ClientStore
from .schedulers import available_mask, per_device
from .submodular import SelectionObjective, greedy, sample_size_rule

__all__ = ["DivFL", "LOSS_BITS", "PHI", "PowerOfChoiceScheduler", "RandomScheduler", "SubTrunc",
           "SubmodularScheduler", "UnionFL"]

LOSS_BITS = 32.0
"""One float32 loss value on the uplink."""
PHI = {"log1p": np.log1p, "identity": lambda x: np.asarray(x, dtype=float)}
"""SubTrunc's phi: ln(1 + x) (the paper's default) or x."""


@dataclass(frozen=True)
class RandomOptions:
    """Options of random fair selection."""

    kappa: int = option(10, ge=1, doc="distinct devices per round")


@dataclass(frozen=True)
class PowerOfChoiceOptions(RandomOptions):
    """Options of Power-of-Choice."""

    poc_candidates: int | None = option(None, ge=1, doc="candidates d (default N)")
    fair_probe_samples: int | None = option(None, ge=1, doc="local samples a device uses for the loss it "
                                            "reports (evenly spaced, fixed; default all)")


@dataclass(frozen=True)
class DivFLOptions(RandomOptions):
    """Options of DivFL (and of SubTrunc and UnionFL, which add their own)."""

    fair_greedy: str = option("stochastic", choices=("stochastic", "naive"),
                              doc="stochastic greedy (r candidates per step) or plain greedy")
    fair_sample_size: int | None = option(None, ge=1, doc="stochastic greedy: r (default max(kappa, 0.1 N))")
    fair_epsilon: float | None = option(None, gt=0, lt=1, doc="stochastic greedy: r = ceil(N / kappa "
                                        "ln(1 / epsilon)) instead of fair_sample_size")
    fair_freshness: str = option("selected_only", choices=("selected_only", "all_every_round"),
                                 doc="stored gradients: all devices once, then the selected ones piggy-back "
                                     "(default), or all devices every round (oracle)")
    fair_normalize_distances: bool = option(False, doc="divide gradient distances by their maximum (ablation)")
    fair_projection_dim: int | None = option(None, ge=1, doc="store gradients as k-dim random projections "
                                             "(N x k floats instead of N x d)")
    fair_probe_samples: int | None = option(None, ge=1, doc="local samples a device uses for the loss and "
                                            "gradient it reports (evenly spaced, fixed; default all)")


@dataclass(frozen=True)
class SubTruncOptions(DivFLOptions):
    """Options of SubTrunc: DivFL's plus the truncated loss term."""

    fair_lambda: float = option(0.95, ge=0, doc="weight lambda of the truncated loss term")
    fair_budget: float = option(1.10, gt=0, doc="truncation budget b")
    fair_phi: str = option("log1p", choices=tuple(PHI), doc="phi(loss): ln(1+x) or x")


@dataclass(frozen=True)
class UnionFLOptions(DivFLOptions):
    """Options of UnionFL: DivFL's plus the penalty on recently selected devices."""

    fair_mu: float = option(1.0, ge=0, doc="penalty mu per recently selected device")
    fair_window: int = option(5, ge=0, doc="look-back window W in rounds")


class _FairBase(Scheduler):
    """Shared parts: kappa, the power rule and building the Decision."""

    method = "fair"
    Options = RandomOptions
    inclusion_probabilities = False  # q is nominal: the kappa updates are averaged
    fairness_metrics = True

    def __init__(self, num_devices: int, kappa: int, p_bar, p_max):
        self.num_devices = int(num_devices)
        if self.num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {num_devices!r}")
        if int(kappa) != kappa or not 1 <= kappa <= self.num_devices:
            raise ValueError(f"kappa must be an integer in [1, {self.num_devices}], got {kappa!r}")
        self.kappa = self.m = int(kappa)
        self.p_bar = per_device(p_bar, self.num_devices, "p_bar")
        self.p_max = per_device(p_max, self.num_devices, "p_max")

    @classmethod
    def check(cls, scenario, options) -> None:
        """kappa cannot exceed the number of devices; the server's memory of every device must fit."""
        n = scenario.devices.count
        if options.kappa > n:
            raise ConfigError(f"scheduler.kappa = {options.kappa}: must be <= devices.count = {n}")
        cls.require_store_memory(scenario, options)

    @classmethod
    def require_store_memory(cls, scenario, options, measure: bool = False) -> None:
        """ConfigError when the per-device store (``memory_bytes``) would not fit in this machine's memory."""
        n = scenario.devices.count
        require_memory("devices.count", n, cls.memory_bytes(scenario, options, measure),
                       f"scheduler.name = {scenario.scheduler.name!r} with {n} devices (its per-device store)")

    @classmethod
    def memory_bytes(cls, scenario, options, measure: bool = False) -> float:
        """The store of losses (and, for the submodular schedulers, distances and vectors)."""
        return 16.0 * scenario.devices.count

    def _decision(self, state: RoundState, avail: np.ndarray, selected: np.ndarray,
                  pre_bits: np.ndarray | None = None, piggyback_bits: np.ndarray | None = None,
                  report_with_upload: ReportRequest | None = None, **info) -> Decision:
        n = self.num_devices
        q = np.where(avail, min(1.0, self.kappa / max(int(avail.sum()), 1)), 0.0)
        power = np.where(avail, np.minimum(self.p_max, self.p_bar / np.where(q > 0, q, 1.0)), 0.0)
        omega = q / max(q.sum(), 1e-300) if q.any() else np.zeros(n)
        return Decision(omega=omega, q=q, power=power, m=self.kappa,
                        info={"method": self.method, "scheduled": int(avail.sum()), **info},
                        selected=np.sort(np.asarray(selected, dtype=np.int64)),
                        traffic=Traffic(pre_upload_bits=pre_bits, piggyback_bits=piggyback_bits,
                                        report_with_upload=report_with_upload))


def _rng(state: RoundState) -> np.random.Generator:
    if state.rng is None:
        raise ValueError("this scheduler draws from state.rng (the engine's 'selection' stream); got None")
    return state.rng


class RandomScheduler(_FairBase):
    """kappa available devices uniformly without replacement (docs/papers/fair_selection.md,
    "Baselines: Random and Power-of-Choice")."""

    method = "random"

    @classmethod
    def from_scenario(cls, scenario, options: RandomOptions) -> "RandomScheduler":
        """kappa devices per round at the scenario's power budget."""
        return cls(scenario.devices.count, options.kappa, scenario.link.p_bar, scenario.link.p_max)

    def decide(self, state: RoundState) -> Decision:
        """Draw the devices; no extra traffic."""
        avail = available_mask(state, self.num_devices)
        pool = np.flatnonzero(avail)
        sel = _rng(state).choice(pool, size=min(self.kappa, pool.size), replace=False) if pool.size else pool
        return self._decision(state, avail, sel)


class PowerOfChoiceScheduler(_FairBase):
    """pi_pow-d (Cho et al.; docs/papers/fair_selection.md, "Baselines: Random and Power-of-Choice"):
    d candidates uniformly without replacement receive the model, compute their local loss and upload
    it (32 bits each, before the round); the kappa with the largest losses are selected.
    ``candidates`` None: d = N (the DivFL code's choice)."""

    method = "power_of_choice"
    Options = PowerOfChoiceOptions

    def __init__(self, num_devices: int, kappa: int, p_bar, p_max, store: ClientStore | None = None,
                 candidates: int | None = None, probe_samples: int | None = None):
        super().__init__(num_devices, kappa, p_bar, p_max)
        d = self.num_devices if candidates is None else int(candidates)
        if not self.kappa <= d <= self.num_devices:
            raise ValueError(f"candidates must lie in [kappa, N] = [{self.kappa}, {self.num_devices}], got {d}")
        self.candidates = d
        self.store = ClientStore(self.num_devices) if store is None else store
        self.probe_samples = probe_samples
        self._pool = np.empty(0, dtype=np.int64)  # this round's candidates (between probe and decide)

    @classmethod
    def from_scenario(cls, scenario, options: PowerOfChoiceOptions) -> "PowerOfChoiceScheduler":
        """kappa of d candidates per round at the scenario's power budget."""
        return cls(scenario.devices.count, options.kappa, scenario.link.p_bar, scenario.link.p_max,
                   candidates=options.poc_candidates, probe_samples=options.fair_probe_samples)

    @classmethod
    def check(cls, scenario, options: PowerOfChoiceOptions) -> None:
        """kappa <= d <= N."""
        super().check(scenario, options)
        n, d = scenario.devices.count, options.poc_candidates
        if d is not None and not options.kappa <= d <= n:
            raise ConfigError(f"scheduler.poc_candidates = {d}: must lie in [scheduler.kappa, devices.count] "
                              f"= [{options.kappa}, {n}]")

    def probe(self, state: RoundState) -> ReportRequest:
        """Sample this round's candidates; they report their current loss."""
        pool = np.flatnonzero(available_mask(state, self.num_devices))
        if self.candidates < pool.size:
            pool = np.sort(_rng(state).choice(pool, size=self.candidates, replace=False))
        self._pool = pool
        return ReportRequest(pool, gradients=False, max_samples=self.probe_samples)

    def receive(self, reports: Reports) -> None:
        """Store the reported losses."""
        self.store.update(reports.devices, reports.losses, reports.gradients, reports.round)

    def decide(self, state: RoundState) -> Decision:
        """The kappa candidates with the largest stored losses; the candidates' losses cost airtime."""
        avail = available_mask(state, self.num_devices)
        cand = self._pool
        # stable sort on -loss: equal losses go to the lower index
        order = np.argsort(-self.store.losses[cand], kind="stable")
        pre = np.zeros(self.num_devices)
        pre[cand] = LOSS_BITS
        return self._decision(state, avail, cand[order[: self.kappa]], pre_bits=pre)

    def state_dict(self) -> dict:
        """The stored losses."""
        return {"store": self.store.state_dict()}

    def load_state(self, state: dict) -> None:
        """Restore the stored losses."""
        self.store.load_state(state["store"])


class SubmodularScheduler(_FairBase):
    """DivFL, SubTrunc and UnionFL (docs/papers/fair_selection.md, "DivFL" to "A training round")
    over a :class:`ClientStore`.

    lam, budget (b), phi: SubTrunc's term lam min(b, sum phi(loss)); mu, window: UnionFL's penalty on
    devices selected in the last ``window`` rounds. ``greedy``: "stochastic" (r candidates per step,
    r = ``sample_size`` or max(kappa, 0.1 N)) or "naive". ``freshness``: "selected_only" (all
    devices upload gradient and loss in the first round; afterwards each selected device's gradient
    and loss at x_t ride on its upload) or "all_every_round" (every device uploads them every round
    before selection: the oracle). ``normalize_distances`` divides d by its maximum (an ablation).
    ``probe_samples``: local samples behind each report (None: all).
    """

    method = "submodular"
    Options = DivFLOptions

    def __init__(self, num_devices: int, kappa: int, p_bar, p_max, store: ClientStore | None = None, *,
                 name: str = "divfl", lam: float = 0.0, budget: float = 1.10, phi: str = "log1p",
                 mu: float = 0.0, window: int = 5, greedy: str = "stochastic",
                 sample_size: int | None = None, freshness: str = "selected_only",
                 normalize_distances: bool = False, probe_samples: int | None = None):
        super().__init__(num_devices, kappa, p_bar, p_max)
        if phi not in PHI:
            raise ValueError(f"unknown phi {phi!r}; allowed: {', '.join(PHI)}")
        if greedy not in ("stochastic", "naive"):
            raise ValueError(f"greedy must be 'stochastic' or 'naive', got {greedy!r}")
        if freshness not in ("selected_only", "all_every_round"):
            raise ValueError(f"freshness must be 'selected_only' or 'all_every_round', got {freshness!r}")
        for label, v in (("lam", lam), ("mu", mu), ("budget", budget)):
            if not (v >= 0 and not math.isnan(v)):
                raise ValueError(f"{label} must be >= 0, got {v!r}")
        if int(window) != window or window < 0:
            raise ValueError(f"window must be an integer >= 0, got {window!r}")
        self.method = name
        self.store = ClientStore(self.num_devices) if store is None else store
        self.lam, self.budget, self.phi, self.mu = float(lam), float(budget), phi, float(mu)
        self.window = int(window)
        self.greedy = greedy
        self.sample_size = sample_size_rule(self.num_devices, self.kappa) if sample_size is None else int(sample_size)
        self.freshness = freshness
        self.normalize_distances = bool(normalize_distances)
        self.probe_samples = probe_samples
        self.bootstrapped = False  # every device has reported once
        self._probed_round = -1  # the round whose probe asked every device (its decision pays for it)
        # the last `window` selections, one row each (-1 pads short rows): a plain array for checkpoints
        self.history = np.full((0, self.kappa), -1, dtype=np.int64)
        # a list: each decision appends its greedy's steps (a diagnostic, see papers.fair_selection.gain_trace;
        # not in checkpoints, no effect on the selection)
        self.trace: list | None = None
        # the scheduler's name while its store's memory is still to be checked against the first
        # gradients' length (a model that declares no parameter count; see from_scenario)
        self.unchecked_store: str | None = None

    @classmethod
    def from_scenario(cls, scenario, options: DivFLOptions) -> "SubmodularScheduler":
        """The scheduler with its store (random projections from the "projection" stream), once its
        store's size with the model's own parameter count fits in memory (reading the scenario
        checked the distances and what link.model_bits declares)."""
        from .. import rng as rngs

        cls.require_store_memory(scenario, options, measure=True)
        n = scenario.devices.count
        r = options.fair_sample_size
        if options.fair_epsilon is not None:  # Mirzasoleiman et al.: r = (n / k) ln(1 / eps)
            r = min(n, math.ceil(n / options.kappa * math.log(1 / options.fair_epsilon)))
        store = ClientStore(n, projection_dim=options.fair_projection_dim,
                            rng=rngs.stream(scenario.seed, "projection"))
        scheduler = cls(n, options.kappa, scenario.link.p_bar, scenario.link.p_max, store,
                        greedy=options.fair_greedy, sample_size=r, freshness=options.fair_freshness,
                        normalize_distances=options.fair_normalize_distances,
                        probe_samples=options.fair_probe_samples, **cls._objective(options))
        if options.fair_projection_dim is None and cls._model_size(scenario, measure=True) is None:
            scheduler.unchecked_store = scenario.scheduler.name  # checked with the first gradients' length
        return scheduler

    @staticmethod
    def _objective(options) -> dict:
        """Constructor arguments of the objective's regularisers (none for DivFL)."""
        return {"name": "divfl"}

    @classmethod
    def memory_bytes(cls, scenario, options: DivFLOptions, measure: bool = False) -> float:
        """N x N float64 distances plus N stored vectors of float32 (the projection's size, or the
        model's: link.model_bits / 32, or, with ``measure``, the parameter count the model declares)."""
        return cls._store_bytes(scenario.devices.count,
                                options.fair_projection_dim or cls._model_size(scenario, measure) or 0)

    @staticmethod
    def _store_bytes(n: int, d: int) -> float:
        return 8.0 * n * n + 4.0 * n * d

    @staticmethod
    def _model_size(scenario, measure: bool) -> int | None:
        """The model's parameter count: link.model_bits / 32; else, with ``measure``, what the model
        part declares for the input shape and classes the dataset part declares
        (``Model.parameter_count``: the built-ins count their layers, without torch), else 0. None: the
        model or the dataset does not declare it (the gradients' length is checked when they arrive).
        Scheduling builds no model and loads no data: the parts say what they are."""
        if scenario.link.model_bits is not None:
            return scenario.link.model_bits // 32
        if not measure:
            return 0  # reading a scenario builds no model and loads no data
        shape = scenario.part("dataset").shape(scenario, scenario.options("dataset"))
        if shape is None:
            return None
        options = scenario.options("model")
        kwargs = ({f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
                  if dataclasses.is_dataclass(options) else dict(options or {}))
        counted = scenario.part("model").parameter_count(tuple(shape[0]), int(shape[1]), **kwargs)
        return None if counted is None else int(counted)

    @classmethod
    def check(cls, scenario, options: DivFLOptions) -> None:
        """kappa <= N, the store fits in memory, and one rule for the stochastic greedy's sample size."""
        super().check(scenario, options)
        if options.fair_sample_size is not None and options.fair_epsilon is not None:
            raise ConfigError("scheduler.fair_epsilon: set either scheduler.fair_sample_size or "
                              "scheduler.fair_epsilon, not both")

    def probe(self, state: RoundState) -> ReportRequest | None:
        """Every device reports its gradient and loss in the first round (and, for the oracle, in
        every round)."""
        if self.freshness == "all_every_round" or not self.bootstrapped:
            self.bootstrapped = True
            self._probed_round = state.round
            return ReportRequest(np.arange(self.num_devices), gradients=True, max_samples=self.probe_samples)
        return None

    def receive(self, reports: Reports) -> None:
        """Store reported losses and gradients (the first ones, of a model that declared no parameter
        count, once the store of N of them fits in memory)."""
        if self.unchecked_store is not None and reports.gradients is not None and self.store.dim is None:
            n, d = self.num_devices, int(np.asarray(reports.gradients).reshape(len(reports.devices), -1).shape[1])
            require_memory("devices.count", n, self._store_bytes(n, d),
                           f"scheduler.name = {self.unchecked_store!r} with {n} devices (its per-device store)")
            self.unchecked_store = None
        self.store.update(reports.devices, reports.losses, reports.gradients, reports.round)

    def decide(self, state: RoundState) -> Decision:
        """Greedy over the objective on the stored gradients and losses."""
        n = self.num_devices
        avail = available_mask(state, n)
        pre = None
        if self._probed_round == state.round:
            pre = np.full(n, state.model_bits + LOSS_BITS)
        dist = self.store.dist
        if self.normalize_distances and dist.max(initial=0.0) > 0:
            dist = dist / dist.max()
        in_union = np.zeros(n, dtype=bool)
        if self.mu and self.window:
            recent = self.history[-self.window:]
            in_union[recent[recent >= 0]] = True
        objective = SelectionObjective(dist, phi_loss=PHI[self.phi](self.store.losses), lam=self.lam,
                                       budget=self.budget, in_union=in_union, mu=self.mu)
        r = self.sample_size if self.greedy == "stochastic" else None
        steps = [] if self.trace is not None else None
        sel = greedy(objective, self.kappa, eligible=avail, rng=_rng(state) if r is not None else None,
                     sample_size=r, trace=steps)
        if steps is not None:
            self.trace.append({"round": state.round, "steps": steps, "phi": objective.phi_loss.copy(),
                               "fresh_round": self.store.fresh_round.copy(), "lam": self.lam,
                               "budget": self.budget, "mu": self.mu})
        row = np.full(self.kappa, -1, dtype=np.int64)
        row[: sel.size] = sel
        keep = max(self.window, 1)
        self.history = np.vstack([self.history, row[None]])[-keep:]
        piggy = report = None
        if self.freshness == "selected_only":
            piggy = np.zeros(n)
            piggy[sel] = state.model_bits + LOSS_BITS
            # the uploaded gradient and loss are taken at x_t, before local training
            # (docs/papers/fair_selection.md, "A training round (Algorithm 1) and the aggregation")
            report = ReportRequest(np.sort(sel), gradients=True, max_samples=self.probe_samples)
        return self._decision(state, avail, sel, pre_bits=pre, piggyback_bits=piggy, report_with_upload=report,
                              objective=objective.value(), union_size=int(in_union.sum()))

    def state_dict(self) -> dict:
        """The store, the selection window and whether the first reports are in."""
        return {"store": self.store.state_dict(), "history": self.history.copy(), "bootstrapped": self.bootstrapped}

    def load_state(self, state: dict) -> None:
        """Restore what state_dict returned."""
        self.store.load_state(state["store"])
        self.history = np.asarray(state["history"], dtype=np.int64).reshape(-1, self.kappa)
        self.bootstrapped = bool(state["bootstrapped"])


class DivFL(SubmodularScheduler):
    """DivFL (docs/papers/fair_selection.md, "DivFL: the facility-location objective"): facility
    location over the stored gradients."""


class SubTrunc(SubmodularScheduler):
    """SubTrunc (docs/papers/fair_selection.md, "SubTrunc: the truncated loss term"): DivFL plus
    fair_lambda min(fair_budget, sum phi(loss))."""

    Options = SubTruncOptions

    @staticmethod
    def _objective(options: SubTruncOptions) -> dict:
        return {"name": "subtrunc", "lam": options.fair_lambda, "budget": options.fair_budget,
                "phi": options.fair_phi}


class UnionFL(SubmodularScheduler):
    """UnionFL (docs/papers/fair_selection.md, "UnionFL: the look-back window W"): DivFL minus fair_mu
    per device selected in the last fair_window rounds."""

    Options = UnionFLOptions

    @staticmethod
    def _objective(options: UnionFLOptions) -> dict:
        return {"name": "unionfl", "mu": options.fair_mu, "window": options.fair_window}
