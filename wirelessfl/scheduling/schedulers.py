"""Schedulers: plain objects with ``decide(state) -> Decision`` (no torch, no SimPy).

- :class:`UniformScheduler`: omega = 1/N, powers meeting the average-power budget with equality
  (docs/papers/lyapunov.md, "The uniform baseline").
- :class:`LyapunovScheduler`: drift-plus-penalty with one virtual power queue per device
  (docs/papers/lyapunov.md, "The per-round problem").

Availability: when ``state.available`` is a mask, unavailable devices get omega = q = 0 and are
never selected (``draw_devices`` cannot draw them). Their q = 0 means "not eligible this round",
not an aggregation weight: an unselected device contributes nothing to the aggregate.
"""
from __future__ import annotations

import math

import numpy as np

from dataclasses import dataclass

from ..fields import ConfigError, option, require_memory
from .base import Decision, Dispatch, DispatchState, RoundState, Scheduler, check_frequency_choice, inclusion_probability
from .dispatch import DispatchQueues
from .power import POWER_RULES, check_gains
from .pricing import priced_power_and_airtime
from .selection import SELECTION_METHODS, solve_checked

_LN2 = math.log(2.0)


def per_device(value, n: int, name: str) -> np.ndarray:
    """``value`` (a scalar or one per device) as an (n,) float array, finite and >= 0; ValueError naming ``name``."""
    arr = np.asarray(value, dtype=float)
    try:
        arr = np.broadcast_to(arr, (n,)).astype(float)
    except ValueError:
        raise ValueError(f"{name} must be a scalar or have shape ({n},), got shape {arr.shape}") from None
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0")
    return arr


def available_mask(state: RoundState, n: int) -> np.ndarray:
    """The availability mask (shapes checked)."""
    avail = _availability(state, n)
    return np.ones(n, dtype=bool) if avail is None else avail


def _availability(state: RoundState, n: int) -> np.ndarray | None:
    """The availability mask after checking the shapes; None when every device is available."""
    gains = np.asarray(state.gains)
    if gains.shape != (n,):
        raise ValueError(f"state.gains must have shape ({n},), got {gains.shape}")
    if state.available is None:
        return None
    avail = np.asarray(state.available, dtype=bool)
    if avail.shape != (n,):
        raise ValueError(f"state.available must have shape ({n},), got {avail.shape}")
    return avail


_UNIFORM_INFO = {"method": "uniform"}  # one dict for every dispatch (read, never changed)


def _idle_counts(state: DispatchState) -> tuple[int, int, np.ndarray | None]:
    """(idle available devices, available devices, the mask of idle available ones or None: every
    device is available)."""
    n, avail = state.busy.size, state.available
    if avail is None:
        return n - state.num_busy, n, None
    eligible = avail & ~state.busy
    return int(np.count_nonzero(eligible)), int(np.count_nonzero(avail)), eligible


def _draw_idle(state: DispatchState, p_bar: np.ndarray, p_max: np.ndarray, n_available: int) -> tuple[int, float]:
    """One idle, available device drawn uniformly (uniform draws until one is: most devices are
    idle), and its power min(Pmax, Pbar N_available / K)."""
    random, busy, avail, n = state.rng.random, state.busy, state.available, state.busy.size
    while True:
        device = int(random() * n)
        if not busy[device] and (avail is None or avail[device]):
            return device, min(p_max.item(device), p_bar.item(device) * _power_scale(state, n_available))


def _power_scale(state: DispatchState, n_available: int) -> float:
    """N_available / K: a device's expected uploads per aggregation are K / N_available."""
    return n_available / max(state.per_aggregation, 1e-300)


def uniform_one(state: DispatchState, p_bar: np.ndarray, p_max: np.ndarray) -> tuple[int, float] | None:
    """(device, power) of uniform dispatch where one slot is to be filled and most devices are idle
    (the usual dispatch, once per upload): the same draws and numbers as ``uniform_idle``, without
    its arrays. None otherwise (before counting the idle devices where more slots are wanted)."""
    if int(state.slots) != 1:
        return None
    count, n_available, _ = _idle_counts(state)
    if count < 1 or 4 * count < state.busy.size:
        return None
    return _draw_idle(state, p_bar, p_max, n_available)


def uniform_idle(state: DispatchState, p_bar: np.ndarray, p_max: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(devices, powers) for uniform dispatch (see UniformScheduler.dispatch)."""
    n, busy, avail = state.busy.size, state.busy, state.available
    count, n_available, eligible = _idle_counts(state)
    k = min(int(state.slots), count)
    if k <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    rng = state.rng
    scale = _power_scale(state, n_available)
    if k == 1 and 4 * count >= n:
        device, power = _draw_idle(state, p_bar, p_max, n_available)
        return np.array([device], dtype=np.int64), np.array([power])
    if 4 * count >= n and k <= 8:  # mostly idle: a few uniform draws find k of them
        picked: list[int] = []
        while len(picked) < k:
            device = int(rng.random() * n)
            if not busy[device] and (avail is None or avail[device]) and device not in picked:
                picked.append(device)
        return (np.array(picked, dtype=np.int64),
                np.array([min(float(p_max[d]), float(p_bar[d]) * scale) for d in picked]))
    pool = np.flatnonzero(~busy if eligible is None else eligible)
    devices = rng.choice(pool, size=k, replace=False)
    return devices, np.minimum(p_max[devices], p_bar[devices] * scale)


def _check_m(m) -> int:
    if int(m) != m or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    return int(m)


@dataclass(frozen=True)
class UniformOptions:
    """Options of the uniform scheduler."""

    m: int = option(10, ge=1, doc="draws per round")
    sampling: str = option("with_replacement", choices=("with_replacement", "without_replacement"),
                           doc="without_replacement draws min(m, available) distinct devices (the SAFARI "
                               "paper's client sampling, docs/papers/safari.md)")


MAX_WEIGHT = 1e100
"""V, V lam and V age_weight at most this: the costs they weigh, and the exact solver's squares of
them, stay finite numbers (at 1e250 the solver's Newton steps divide by zero; at 1e308 every cost is
infinite and nobody is ever scheduled)."""


@dataclass(frozen=True)
class LyapunovOptions:
    """Options of the drift-plus-penalty scheduler (docs/papers/lyapunov.md)."""

    m: int = option(10, ge=1, doc="draws with replacement per round")
    V: float = option(100.0, gt=0, le=1e100, doc="drift-plus-penalty trade-off")
    lam: float = option(100.0, ge=0, doc="weight of airtime against 1/q in the objective")
    power_rule: str = option("exact", choices=POWER_RULES, doc="exact: the minimiser; paper: the printed rule")
    solver: str = option("exact", choices=SELECTION_METHODS, doc="exact KKT solver or pymanopt on the simplex")
    age_weight: float = option(1.0, ge=0, doc="event protocols' dispatch: weight mu of a device's age (aggregations "
                               "since the model last had its data) against its airtime and power (docs/dispatch.md)")
    initial_queue: float = option(0.0, ge=0, doc="every virtual queue Z_n at the start; the paper's 0 makes round 0 "
                                  "transmit at p_max and the next rounds pay it back (README: the power budget)")
    choose_frequency: bool = option(False, doc="also choose each device's CPU frequency f_n in [f_min, f_max] "
                                    "(devices.compute = 'cpu'; sync and semi_sync; docs/energy.md, CPU frequency)")
    lam_f: float = option(1e-4, ge=0, doc="choose_frequency: weight of the expected computation time C_n / f_n "
                          "(1e-4: at the cpu model's defaults f lands between 1e8 and 1e9 Hz for energy queues of "
                          "about 1 J; docs/energy.md)")
    e_bar_j: float = option(0.01, ge=0, doc="choose_frequency: each device's computation-energy budget, joules per "
                            "round on average (virtual queue Y_n)")


class UniformScheduler(Scheduler):
    """Every available device is drawn with probability 1 / N_available in each of the m draws.

    q_n = 1 - (1 - 1/N_available)^m and P_n = min(Pmax, Pbar_n / q_n), so that the expected power
    per round q_n P_n equals Pbar_n wherever Pbar_n / q_n <= Pmax (docs/papers/lyapunov.md, "The
    uniform baseline"). The Decision carries no queue (this scheduler keeps none).

    ``replace=False``: min(m, N_available) distinct available devices drawn without replacement
    (the SAFARI paper's client sampling, docs/papers/safari.md), so q_n = min(m, N_available) / N_available.
    """

    def __init__(self, num_devices: int, m: int, p_bar, p_max, replace: bool = True):
        self.num_devices = int(num_devices)
        if self.num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {num_devices!r}")
        self.m = _check_m(m)
        self.p_bar = per_device(p_bar, self.num_devices, "p_bar")
        self.p_max = per_device(p_max, self.num_devices, "p_max")
        self.replace = bool(replace)

    Options = UniformOptions

    @classmethod
    def check(cls, scenario, options: UniformOptions) -> None:
        """m draws a round must fit in memory."""
        require_memory("scheduler.m", options.m, 24.0 * options.m, f"drawing {options.m} devices a round")

    @classmethod
    def from_scenario(cls, scenario, options: UniformOptions) -> "UniformScheduler":
        """m draws (or distinct devices) per round at the scenario's power budget."""
        link = scenario.link
        return cls(scenario.devices.count, options.m, link.p_bar, link.p_max,
                   replace=options.sampling == "with_replacement")

    def decide(self, state: RoundState) -> Decision:
        """Uniform omega over the available devices and budget-matching powers."""
        n = self.num_devices
        avail = available_mask(state, n)
        count = int(avail.sum())
        omega = np.where(avail, 1.0 / max(count, 1), 0.0)
        if self.replace:
            q = inclusion_probability(omega, self.m)
        else:
            q = np.where(avail, min(self.m, count) / max(count, 1), 0.0)
        power = np.zeros(n)
        power[avail] = np.minimum(self.p_max[avail], self.p_bar[avail] / q[avail])
        return Decision(omega=omega, q=q, power=power, m=self.m,
                        info={"method": "uniform", "scheduled": count}, replace=self.replace)

    def dispatch(self, state: DispatchState) -> Dispatch:
        """``state.slots`` devices drawn uniformly without replacement from the idle, available ones,
        each at P_n = min(Pmax, Pbar_n N_available / K): a device's expected uploads per aggregation
        are K / N_available, so its expected power per aggregation is Pbar_n (the budget spent, as
        the round rule spends it)."""
        return Dispatch(*uniform_idle(state, self.p_bar, self.p_max), info=_UNIFORM_INFO)

    def dispatch_one(self, state: DispatchState) -> tuple[int, float, dict] | None:
        """``dispatch`` where one slot is to be filled and most devices are idle, as (device, power,
        info); None otherwise (DispatchesOne)."""
        one = uniform_one(state, self.p_bar, self.p_max)
        return None if one is None else (*one, _UNIFORM_INFO)


def _check_frequency_costs(scenario, options: LyapunovOptions) -> None:
    """ConfigError (one line) when a device's computation would make the frequency choice's costs
    overflow: its energy kappa C f^2 at f_max feeds the energy queue Y, whose cost is Y times that
    energy, and its time C / f_min is weighed by V lam_f; both at most MAX_WEIGHT keep them finite."""
    model = scenario.part("compute").from_scenario(scenario, scenario.options("compute"))
    everyone = np.arange(scenario.devices.count)
    f_min, f_max = model.frequency_bounds()
    with np.errstate(over="ignore"):
        energy = np.asarray(model.energy_at(everyone, f_max), dtype=float)
        cost = options.V * options.lam_f * np.asarray(model.times_at(everyone, f_min), dtype=float)
    for what, values in (("its energy at f_max, kappa f^2 c S,", energy),
                         ("V lam_f x its time at f_min, c S / f,", cost)):
        if not values.max(initial=0.0) <= MAX_WEIGHT:
            i = int(np.argmax(values))
            raise ConfigError(f"scheduler.choose_frequency: device {i}'s computation of a round "
                              f"(devices.cycles_per_sample x learning.local_steps x batch_size, devices.kappa, "
                              f"f_min_hz, f_max_hz) makes {what} {values[i]:.3g}; at most {MAX_WEIGHT:g} keeps the "
                              "scheduler's energy queues and costs finite numbers: choose fewer cycles_per_sample "
                              "or a smaller kappa")


class LyapunovScheduler(Scheduler):
    """Drift-plus-penalty scheduling with a virtual queue Z_n per device for its power budget.

    Each round (docs/papers/lyapunov.md, "The per-round problem"):

    1. P = optimal_power(g, Z) on [0, Pmax] (independent of q; ``power_rule`` "exact" or "paper").
    2. omega minimises sum_n a / q_n + b_n q_n with a = V / N (N = all devices) and
       b_n = V lam l / (B log2(1 + g_n P_n / N0)) + Z_n P_n (``solver`` "exact" or "manifold").
    3. Z_n <- max(Z_n + P_n q_n - Pbar_n, 0). The Decision carries the Z the round was decided with.

    With a ``frequency_model`` (option choose_frequency; capability ChoosesFrequency), each device's
    CPU frequency too (docs/energy.md, "CPU frequency"): f_n = (V lam_f / (2 kappa Y_n))^(1/3) on
    [f_min_n, f_max_n] (f_max_n where Y_n kappa = 0), b_n gains V lam_f C_n / f_n + Y_n kappa C_n f_n^2,
    and a second queue Y_n <- max(Y_n + q_n kappa C_n f_n^2 - e_bar, 0) keeps the computation energy
    within its budget. The Decision carries the frequencies in ``frequency``.

    Devices left out of step 2 get omega = q = 0 (never selected): unavailable devices (their
    queues are left unchanged) and devices that cannot send this round because their power is 0
    or their rate underflows to 0 (b_n = +inf: infinite airtime). Excluding the latter is the
    limit of the objective, in which any q_n > 0 costs infinitely much; replacing +inf by a large
    finite b would still give them a small positive q and an infinite airtime when drawn. Their
    queues are updated with q_n = 0 (they spent no power). If no device can be scheduled, omega is
    all zero and the round draws nothing.
    """

    def __init__(self, num_devices: int, m: int, V: float, lam: float, p_bar, p_max,
                 power_rule: str = "exact", solver: str = "exact", age_weight: float = 1.0,
                 initial_queue: float = 0.0, frequency_model=None, lam_f: float = 0.0, e_bar=0.0):
        self.num_devices = int(num_devices)
        if self.num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {num_devices!r}")
        self.m = _check_m(m)
        if not (math.isfinite(V) and V > 0):
            raise ValueError(f"V must be finite and > 0, got {V!r}")
        if not (math.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be finite and >= 0, got {lam!r}")
        self.V = float(V)
        self.lam = float(lam)
        self.p_bar = per_device(p_bar, self.num_devices, "p_bar")
        self.p_max = per_device(p_max, self.num_devices, "p_max")
        if power_rule not in POWER_RULES:
            raise ValueError(f"unknown power rule {power_rule!r}; allowed values: {', '.join(POWER_RULES)}")
        if solver not in SELECTION_METHODS:
            raise ValueError(f"unknown solver {solver!r}; allowed values: {', '.join(SELECTION_METHODS)}")
        self.power_rule = power_rule
        self.solver = solver
        if not (math.isfinite(initial_queue) and initial_queue >= 0):
            raise ValueError(f"initial_queue must be finite and >= 0, got {initial_queue!r}")
        self.initial_queue = float(initial_queue)
        self.queue = np.full(self.num_devices, self.initial_queue)
        self.age_weight = float(age_weight)
        self.dispatch_queues = DispatchQueues(self.p_bar)
        self.frequency_model = frequency_model
        if frequency_model is not None:
            if not (math.isfinite(lam_f) and lam_f >= 0):
                raise ValueError(f"lam_f must be finite and >= 0, got {lam_f!r}")
            everyone = np.arange(self.num_devices)
            self.lam_f = float(lam_f)
            self.e_bar = per_device(e_bar, self.num_devices, "e_bar")
            self.cycles = np.asarray(frequency_model.times_at(everyone, 1.0), dtype=float)        # C_n
            self.energy_coeff = np.asarray(frequency_model.energy_at(everyone, 1.0), dtype=float)  # kappa C_n
            self.f_min, self.f_max = (np.asarray(f, dtype=float) for f in frequency_model.frequency_bounds())
            safe = np.where(self.cycles > 0, self.cycles, 1.0)
            self.kappa = np.where(self.cycles > 0, self.energy_coeff / safe, 0.0)  # kappa of each device
            self.energy_queue = np.zeros(self.num_devices)  # Y_n
            self.energy_slots = DispatchQueues(self.e_bar)  # the dispatch rule's: Y_n per aggregation

    Options = LyapunovOptions

    @classmethod
    def chooses_frequency(cls, options: LyapunovOptions) -> bool:
        """Whether the scheduler chooses CPU frequencies: option choose_frequency (capability ChoosesFrequency)."""
        return bool(getattr(options, "choose_frequency", False))

    @classmethod
    def check(cls, scenario, options: LyapunovOptions) -> None:
        """m draws a round must fit in memory; the weights of the costs must multiply to finite numbers
        (V lam and V age_weight at 1e308 overflow: every cost infinite, nobody ever scheduled)."""
        require_memory("scheduler.m", options.m, 24.0 * options.m, f"drawing {options.m} devices a round")
        for name, weight in (("lam", options.lam), ("age_weight", options.age_weight), ("lam_f", options.lam_f)):
            if not options.V * weight <= MAX_WEIGHT:
                raise ConfigError(f"scheduler.V = {options.V:g}, scheduler.{name} = {weight:g}: their product "
                                  f"({options.V * weight:.3g}) leaves no room for the costs it weighs (an airtime, an "
                                  "age) and the solver's squares of them to stay finite numbers, and no device would "
                                  f"be scheduled; keep V x {name} at most {MAX_WEIGHT:g}")
        check_frequency_choice(scenario)
        if options.choose_frequency:
            _check_frequency_costs(scenario, options)

    @classmethod
    def from_scenario(cls, scenario, options: LyapunovOptions) -> "LyapunovScheduler":
        """The scheduler of docs/papers/lyapunov.md at the scenario's power budget, queues at
        ``initial_queue``."""
        link = scenario.link
        model = None
        if options.choose_frequency:
            check_frequency_choice(scenario)
            model = scenario.part("compute").from_scenario(scenario, scenario.options("compute"))
        return cls(scenario.devices.count, options.m, options.V, options.lam, link.p_bar, link.p_max,
                   power_rule=options.power_rule, solver=options.solver, age_weight=options.age_weight,
                   initial_queue=options.initial_queue, frequency_model=model, lam_f=options.lam_f,
                   e_bar=options.e_bar_j)

    def skip_round(self, state: RoundState, drain: bool) -> np.ndarray:
        """A round without the scheduler (a SAFARI server round): the queues stay, or, with
        ``drain``, the round counts as a slot of zero consumption (docs/papers/safari.md, "A server
        round under the Lyapunov scheduler"): Z_n <- max(Z_n - Pbar_n, 0). Returns the queues before the round."""
        queue = self.queue
        if drain:
            self.queue = np.maximum(queue - self.p_bar, 0.0)
            if self.frequency_model is not None:
                self.energy_queue = np.maximum(self.energy_queue - self.e_bar, 0.0)
        return queue.copy()

    def state_dict(self) -> dict:
        """The virtual queues (and the dispatch rule's power use in the current slot; the energy
        queues Y when it chooses frequencies)."""
        state = {"queue": self.queue.copy(), "dispatch": self.dispatch_queues.state_dict()}
        if self.frequency_model is not None:
            state["energy_queue"] = self.energy_queue.copy()
            state["energy_dispatch"] = self.energy_slots.state_dict()
        return state

    def load_state(self, state: dict) -> None:
        """Restore the virtual queues."""
        self.queue = np.asarray(state["queue"], dtype=float).copy()
        if "dispatch" in state:
            self.dispatch_queues.load_state(state["dispatch"])
        if self.frequency_model is not None and "energy_queue" in state:
            self.energy_queue = np.asarray(state["energy_queue"], dtype=float).copy()
            if "energy_dispatch" in state:
                self.energy_slots.load_state(state["energy_dispatch"])

    def frequencies(self, energy_queue: np.ndarray) -> np.ndarray:
        """Each device's minimiser of V lam_f C_n / f + Y_n kappa C_n f^2 on [f_min_n, f_max_n]:
        (V lam_f / (2 kappa Y_n))^(1/3), clipped; f_max_n where Y_n kappa = 0 (docs/energy.md)."""
        y_kappa = energy_queue * self.kappa
        with np.errstate(divide="ignore", over="ignore"):
            free = np.cbrt(self.V * self.lam_f / (2.0 * y_kappa))
        return np.where(y_kappa > 0, np.clip(free, self.f_min, self.f_max), self.f_max)

    def frequency_costs(self, f: np.ndarray, energy_queue: np.ndarray) -> np.ndarray:
        """V lam_f C_n / f_n + Y_n kappa C_n f_n^2: each device's part of b_n for its computation."""
        return self.V * self.lam_f * self.cycles / f + energy_queue * self.energy_coeff * f ** 2

    def dispatch(self, state: DispatchState) -> Dispatch:
        """Event protocols: the ``state.slots`` idle, available devices of least drift-plus-penalty
        cost V lam airtime + Z P - V mu age at their optimal power, with the queues updated once per
        aggregation by the power each device's uploads of that slot use (docs/dispatch.md)."""
        self.queue = self.dispatch_queues.advance(self.queue, state.version)
        frequency = extra = None
        if self.frequency_model is not None:  # each device's f_n, and its computation in J_n
            self.energy_queue = self.energy_slots.advance(self.energy_queue, state.version)
            frequency = self.frequencies(self.energy_queue)
            extra = self.frequency_costs(frequency, self.energy_queue)
        devices, power, info = self.dispatch_queues.choose(state, self.queue, self.p_max, V=self.V, lam=self.lam,
                                                           mu=self.age_weight, rule=self.power_rule, extra=extra)
        info["queue_mean"] = float(self.queue.mean())
        if frequency is None:
            return Dispatch(devices, power, info)
        f = frequency[devices]
        self.energy_slots.spend(devices, self.energy_coeff[devices] * f ** 2)
        info.update(frequency_hz=float(f.mean()) if f.size else math.nan,
                    energy_queue_mean=float(self.energy_queue.mean()))
        return Dispatch(devices, power, info, frequency=f)

    def costs(self, state: RoundState, queue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P, b): the powers and b_n = V lam airtime_n + Z P, +inf for a device that cannot send;
        airtime priced as the access scheme says for m devices sending together
        (wirelessfl.scheduling.pricing)."""
        power, airtime = priced_power_and_airtime(state, np.asarray(state.gains, dtype=float), queue, self.p_max,
                                                  V=self.V, lam=self.lam, k=self.m, rule=self.power_rule)
        return power, airtime + queue * power

    def decide(self, state: RoundState) -> Decision:
        """Powers, selection probabilities and the queue update for one round."""
        n, m = self.num_devices, self.m
        avail = _availability(state, n)
        check_gains(np.asarray(state.gains, dtype=float))
        z = self.queue  # replaced, never written in place, below
        power, b = self.costs(state, z)
        if self.frequency_model is not None:
            y = self.energy_queue
            frequency = self.frequencies(y)
            b = b + self.frequency_costs(frequency, y)
        eligible = b < np.inf
        if avail is not None:
            eligible &= avail
        info = {"method": self.solver, "power_rule": self.power_rule}
        omega, q = np.zeros(n), np.zeros(n)
        every = eligible.all()  # the usual round: nothing to mask
        if every or eligible.any():
            res = solve_checked(self.V / n, b if every else b[eligible], m, self.solver)
            if every:
                omega, q = res.omega, res.q
            else:
                omega[eligible], q[eligible] = res.omega, res.q
            info.update(scheduled=res.omega.size, objective=res.fun, success=res.success,
                        certificate=res.certificate)
        else:
            info.update(scheduled=0, objective=0.0, success=False, message="no device can be scheduled")
        queue = np.maximum(z + power * q - self.p_bar, 0.0)
        self.queue = queue if avail is None else np.where(avail, queue, z)
        if self.frequency_model is None:
            return Decision(omega=omega, q=q, power=power, queue=z, m=m, info=info)
        energy_queue = np.maximum(y + q * self.energy_coeff * frequency ** 2 - self.e_bar, 0.0)
        self.energy_queue = energy_queue if avail is None else np.where(avail, energy_queue, y)
        info.update(frequency_mean_hz=float(frequency.mean()), energy_queue_mean=float(y.mean()),
                    expected_compute_energy_j=float((q * self.energy_coeff * frequency ** 2).sum()))
        return Decision(omega=omega, q=q, power=power, queue=z, m=m, info=info, frequency=frequency)
