"""Numerical extremes: whole scheduler decisions (power, selection, queue update) and whole runs at the
edges of the parameter space stay finite and raise no floating-point warning.

Grid of decisions (every combination; each is one ``decide`` call of both schedulers' code paths):
  N in {1, 2, 7, 40}, m in {1, N, 5N}, V in {1e-6, 1, 1e9}, lam in {0, 1, 1e6},
  power rule exact / paper, gains all at the floor 1e-3, at 1e-12, or spread over sigma 1e-3..1e3,
  queues all zero, tiny (1e-300), moderate (1) or huge (1e12).
Every field of the Decision (omega, q, power, queue, objective) must be finite, omega a probability
vector (or all zero when no device can send), q in [0, 1] and exactly 1 - (1 - omega)^m,
0 <= P <= Pmax, and the queue the scheduler carries into the next round finite and >= 0.
Floating-point trouble is an error here: numpy's divide/overflow/invalid raise (np.errstate) and
every Python warning is turned into an exception.
"""
from __future__ import annotations

import itertools
import math
import warnings
from contextlib import contextmanager

import numpy as np
import pytest

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.scheduling import LyapunovScheduler, RoundState, UniformScheduler, inclusion_probability
from wirelessfl.wireless import Link

BITS, BW, N0, PMAX, PBAR = 32 * 555178, 22e6, 1.0, 10 ** 3.5, 1.0
NS = (1, 2, 7, 40)
VS = (1e-6, 1.0, 1e9)
LAMS = (0.0, 1.0, 1e6)
RULES = ("exact", "paper")
QUEUES = (0.0, 1e-300, 1.0, 1e12)


@contextmanager
def strict():
    """numpy floating-point errors raise, and any warning is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(divide="raise", over="raise", invalid="raise"):
            yield


def gains_for(kind: str, n: int, rng) -> np.ndarray:
    if kind == "floor":
        return np.full(n, 1e-3)
    if kind == "tiny":
        return np.full(n, 1e-12)
    sigma = np.logspace(-3, 3, n) if n > 1 else np.array([1e-3])
    return np.maximum(rng.exponential(2.0 * sigma ** 2), 1e-3)  # sigma spread 1e-3 .. 1e3


def check_decision(d, n, m, p_max=PMAX, lyapunov=True):
    assert (d.queue is not None) == lyapunov  # only the Lyapunov scheduler keeps queues
    for name in ("omega", "q", "power") + (("queue",) if lyapunov else ()):
        value = np.asarray(getattr(d, name))
        assert value.shape == (n,), name
        assert np.all(np.isfinite(value)), (name, value)
    assert np.all(d.omega >= 0) and np.all(d.omega <= 1)
    if np.any(d.omega > 0):
        assert d.omega.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(d.q[d.omega > 0] > 0)
    assert np.all((d.q >= 0) & (d.q <= 1))
    np.testing.assert_allclose(d.q, inclusion_probability(d.omega, m), rtol=1e-12, atol=0)
    assert np.all((d.power >= 0) & (d.power <= p_max))
    assert np.all(d.queues() >= 0)
    if lyapunov:
        assert math.isfinite(d.info["objective"])


@pytest.mark.parametrize("gain_kind", ["floor", "tiny", "spread"])
def test_lyapunov_decisions_at_the_extremes(gain_kind):
    rng = np.random.default_rng(0)
    count = 0
    for n, V, lam, rule, z in itertools.product(NS, VS, LAMS, RULES, QUEUES):
        for m in sorted({1, n, 5 * n}):
            sched = LyapunovScheduler(n, m, V, lam, PBAR, PMAX, power_rule=rule)
            sched.queue = np.full(n, z)
            state = RoundState(round=0, gains=gains_for(gain_kind, n, rng), model_bits=BITS,
                               bandwidth_hz=BW, noise_power=N0)
            with strict():
                d = sched.decide(state)
            check_decision(d, n, m)
            assert np.array_equal(d.queue, np.full(n, z))
            assert np.all(np.isfinite(sched.queue)) and np.all(sched.queue >= 0)
            if z == 0 and lam > 0:
                assert np.all(d.power == PMAX)  # an empty queue sends at full power
            count += 1
    assert count == 11 * len(VS) * len(LAMS) * len(RULES) * len(QUEUES) == 792  # 11 (N, m) pairs


@pytest.mark.parametrize("n", NS)
def test_uniform_decisions_at_the_extremes(n):
    for m in sorted({1, n, 5 * n, 1000 * n}):
        for p_bar, p_max in ((1e-12, 1e-12), (1.0, PMAX), (1e6, 1e6), (1e-6, 1e12)):
            sched = UniformScheduler(n, m, p_bar, p_max)
            state = RoundState(round=0, gains=np.full(n, 1e-3), model_bits=BITS, bandwidth_hz=BW,
                               noise_power=N0)
            with strict():
                d = sched.decide(state)
            check_decision(d, n, m, p_max=p_max, lyapunov=False)
            assert np.all(d.power > 0) and np.all(d.power * d.q <= p_bar * (1 + 1e-12))


@pytest.mark.parametrize("V, lam", [(1e-6, 0.0), (1e-6, 1e6), (1e9, 0.0), (1e9, 1e6), (1.0, 1.0)])
def test_lyapunov_many_rounds_with_widely_spread_channels(V, lam):
    """50 rounds of queue dynamics with sigma from 1e-3 to 1e3 (gains from the 1e-3 floor to ~1e6)."""
    rng = np.random.default_rng(1)
    n, m = 30, 10
    sigma = np.logspace(-3, 3, n)
    sched = LyapunovScheduler(n, m, V, lam, PBAR, PMAX)
    for r in range(50):
        gains = np.maximum(rng.exponential(2.0 * sigma ** 2), 1e-3)
        state = RoundState(round=r, gains=gains, model_bits=BITS, bandwidth_hz=BW, noise_power=N0)
        before = sched.queue.copy()
        with strict():
            d = sched.decide(state)
        check_decision(d, n, m)
        np.testing.assert_array_equal(sched.queue, np.maximum(before + d.power * d.q - PBAR, 0.0))


def test_link_airtime_is_finite_for_any_positive_power():
    """A device sending at a positive power has a positive rate, even when g P / N0 is below the
    double-precision epsilon (log2(1 + x) would round to 0 there and the airtime to inf)."""
    link = Link(from_dict({"run": {"rounds": 1}}).link)
    gain = np.array([1e-3, 1e-3, 1.0, 1e6])
    power = np.array([1e-20, 1e-14, 1.0, PMAX])
    with strict():
        air = link.airtime_s(BITS, gain, power)
        energy = power * air
    assert np.all(np.isfinite(air)) and np.all(air > 0)
    assert np.all(np.isfinite(energy)) and np.all(energy > 0)
    # the rate is B log2(1 + snr): for tiny snr it is B snr / ln 2
    assert link.rate_bps(gain[:1], power[:1])[0] == pytest.approx(22e6 * 1e-23 / math.log(2), rel=1e-9)


RUNS = [
    # N = 1, m = 1; m = N; lambda = 0 and 1e6; V = 1e-6 and 1e9; sigma from 1e-3 to 1e3
    dict(devices={"count": 1}, scheduler={"m": 1}),
    dict(devices={"count": 12}, scheduler={"m": 12}),
    dict(devices={"count": 12}, scheduler={"m": 1, "lam": 0.0}),
    dict(devices={"count": 12}, scheduler={"m": 4, "lam": 1e6, "V": 1e9}),
    dict(devices={"count": 12}, scheduler={"m": 4, "lam": 1e6, "V": 1e-6}),
    dict(devices={"count": 12}, scheduler={"m": 4, "lam": 0.0, "V": 1e9}),
    dict(devices={"count": 12}, scheduler={"m": 4, "power_rule": "paper", "V": 1e9, "lam": 1.0}),
    dict(devices={"count": 12}, scheduler={"name": "uniform", "m": 60}),
    dict(devices={"count": 12}, scheduler={"m": 4}, channel={"gain_floor": 0.0}),
    dict(devices={"count": 12}, scheduler={"m": 4, "V": 1e-12, "lam": 1e-12},
         link={"model_bits": 1, "bandwidth_hz": 1e9}),
]


@pytest.mark.parametrize("over", RUNS, ids=lambda o: "-".join(f"{k}={v}" for s in o.values() for k, v in s.items()))
def test_whole_runs_at_the_extremes_stay_finite(over):
    data = {"seed": 4, "run": {"rounds": 25, "timing_only": True},
            "channel": {"profile": "linear", "sigma_min": 1e-3, "sigma_max": 1e3},
            "link": {"model_bits": BITS}, "devices": {"compute_s": 0.1}}
    for section, values in over.items():
        data.setdefault(section, {}).update(values)
    with strict():
        res = simulate(from_dict(data), progress=False)
    rounds = res.rounds.select_dtypes("number")
    if data["scheduler"].get("name") == "uniform":
        rounds = rounds.drop(columns="objective")
    assert len(res.rounds) == 25 and res.summary["status"] == "complete"
    assert np.all(np.isfinite(rounds.to_numpy(dtype=float))), rounds
    assert np.all(np.isfinite(res.devices.select_dtypes("number").to_numpy(dtype=float)))
    assert math.isfinite(res.summary["sim_time_s"]) and res.summary["sim_time_s"] > 0
