"""Every model of time, radio and link against what is known exactly (docs/validation.md).

Each case measures what the simulator does and returns :class:`Check` rows: the measured value, the
exact one (an equation, with its source in docs/validation.md) and the measurement's standard
error, estimated from the sample itself (batch means of a run, the sample's own variance, a
binomial count). ``tests/test_validation.py`` runs every case at a small size (seconds) and, in the
slow suite, at the size the page quotes, and asserts |measured - exact| <= 4 standard errors.
Deterministic cases (an exact replay of a run's records) have no sampling error: they must agree to
rounding (1e-9 relative).

Run as a script it prints every case at the page's size, as the page's tables, and draws the
figures that say more as a curve than as a number (figures/validation/)::

    python benchmarks/validation.py                       # every case, the page's numbers (a few minutes)
    python benchmarks/validation.py queue jakes           # some cases
    python benchmarks/validation.py --scale 0.1           # smaller samples, larger errors
    python benchmarks/validation.py --figures figures/validation

The page's sizes are scale 1; the tests' quick versions run at the scales in ``QUICK``.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from wirelessfl.access import TDMA, Link

HERE = Path(__file__).resolve().parent
K_SE = 4.0
"""Agreement: within this many standard errors (a normal estimate lands outside with probability 6e-5)."""
ROUNDING = 1e-9
"""Deterministic agreement: within this relative rounding."""


@dataclass
class Check:
    """One measured quantity beside its exact value."""

    what: str
    measured: float
    exact: float
    se: float = 0.0
    """The measurement's standard error, from the sample itself (0: deterministic)."""
    n: int = 0
    """The sample the measurement is taken over (uploads, draws, batches: see ``unit``)."""
    unit: str = ""

    def bound(self, k: float = K_SE) -> float:
        """How far the measured value may lie from the exact one: k standard errors plus rounding."""
        return k * self.se + ROUNDING * max(1.0, abs(self.exact))

    def agrees(self, k: float = K_SE) -> bool:
        return bool(abs(self.measured - self.exact) <= self.bound(k))

    @property
    def z(self) -> float:
        """(measured - exact) / se; nan for a deterministic check."""
        return (self.measured - self.exact) / self.se if self.se > 0 else math.nan


@dataclass
class Result:
    """A case's checks, and what its figure draws (``curves``: name -> arrays)."""

    case: str
    checks: list[Check]
    curves: dict = field(default_factory=dict)
    wall_s: float = 0.0


def mean_se(x) -> tuple[float, float]:
    """The mean of independent draws and its standard error (the sample's own std / sqrt(n))."""
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


def proportion_se(hits: int, n: int, p: float) -> float:
    """The binomial standard error of a proportion of n independent trials at the exact p."""
    return math.sqrt(p * (1 - p) / n)


def batch_means(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard error of per-batch estimates of one run (consecutive batches are nearly
    independent when each is long against the run's correlation time)."""
    return mean_se(values)


def _simulate(data: dict):
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate

    return simulate(from_dict({"plugin_path": [str(HERE)], **data}), progress=False)


# ---------------------------------------------------------------------------------------------
# 1. the event core as a finite-source queue


def finite_source_queue(c: int, lam: float, lst: Callable[[float], float], mean_s: float) -> dict[str, float]:
    """The M/G/1//C queue (machine repairman): C customers, each thinking for an Exp(lam) time, then
    served first come first served by one server with service times of Laplace-Stieltjes transform
    ``lst`` and mean ``mean_s``. Takacs (1962); Takagi, Queueing Analysis vol. 2 (1993), sec. 1.3:

        1 / P0 = 1 + C lam E[S] sum_{n=0}^{C-1} binom(C-1, n) prod_{i=1}^{n} (1 - lst(i lam)) / lst(i lam)

    utilisation U = 1 - P0, throughput X = U / E[S], mean time at the server (Little's law on the
    closed loop) R = C / X - 1 / lam, mean wait W = R - E[S]."""
    total, prod = 0.0, 1.0
    for n in range(c):
        if n:
            phi = lst(n * lam)
            prod *= (1 - phi) / phi
        total += math.comb(c - 1, n) * prod
    p0 = 1.0 / (1.0 + c * lam * mean_s * total)
    throughput = (1 - p0) / mean_s
    return {"utilisation": 1 - p0, "throughput": throughput, "wait": c / throughput - 1 / lam - mean_s}


def md1_embedded_chain(c: int, lam: float, d: float) -> float:
    """M/D/1//C utilisation from the chain embedded at departures (an independent route to the same
    number): between departures each of the N - i customers not at the server arrives within the
    service time D with probability 1 - exp(-lam D); an idle period after a departure that leaves the
    server empty lasts Exp(C lam); so U = D / (D + pi_0 / (C lam))."""
    from scipy.stats import binom

    p = 1 - math.exp(-lam * d)
    chain = np.zeros((c, c))
    for i in range(c):
        away, base = c - max(i, 1), max(i, 1) - 1
        for a in range(away + 1):
            chain[i, base + a] += binom.pmf(a, away, p)
    w, v = np.linalg.eig(chain.T)
    pi = np.real(v[:, np.argmin(abs(w - 1))])
    pi /= pi.sum()
    return d / (d + pi[0] / (c * lam))


class ExponentialAirtime(TDMA):
    """A test-only access scheme (``link.access = "validation:ExponentialAirtime"``): TDMA whose
    upload lasts |h|^2 seconds, the upload's gain. Under Rayleigh fading with gain_floor = 0 the
    gain is exponential with mean 2 sigma^2, so the airtimes are exponential: no built-in channel and
    scheme give that (a Shannon airtime bits / (B log2(1 + g P / N0)) of an exponential gain is not)."""

    @classmethod
    def from_scenario(cls, scenario, options) -> "ExponentialAirtime":
        return cls(Link(scenario.link))

    def upload_s(self, bits, gain, power) -> float:
        return float(gain)

    def airtime_s(self, bits, gain, power) -> np.ndarray:
        return np.array(gain, dtype=float)


QUEUE_SETTINGS = [(c, load) for c in (1, 4, 16) for load in (0.5, 1.0, 2.0)]
"""(C devices in flight, offered load C E[S] / E[computation]): light, balanced and saturated."""


def fedbuff_queue_run(c: int, load: float, airtime: str, uploads: int, seed: int = 1, batches: int = 20):
    """FedBuff with C devices in flight on one TDMA uplink, exponential computation of mean C / load
    (airtime 1 s), no downlink, always available: the finite-source queue. ``airtime``: "constant"
    (every gain at a floor of 1: 1 Mbit at 1 MHz and SNR 1 is 1 s) or "exponential" (the test-only
    scheme above, Rayleigh gains of mean 1). Measured over the run after a warm-up of 5 %, in
    ``batches`` batches of equal time: uploads per second, the mean wait for the band (upload start
    - computation end) and the share of time the uplink carried an upload."""
    mean_compute = c / load
    exact = finite_source_queue(c, 1 / mean_compute, (lambda s: math.exp(-s)) if airtime == "constant"
                                else (lambda s: 1 / (1 + s)), 1.0)
    span = uploads / exact["throughput"]
    warm = 0.05 * span
    link = {"model_bits": 1_000_000, "bandwidth_hz": 1e6, "noise_power": 1.0, "p_max": 1.0, "p_bar": 1.0}
    channel = {"sigma": 1e-9, "gain_floor": 1.0}
    if airtime == "exponential":
        link["access"], channel = "validation:ExponentialAirtime", {"sigma": math.sqrt(0.5), "gain_floor": 0.0}
    res = _simulate({"seed": seed, "run": {"timing_only": True, "time_budget_s": warm + span, "record_devices": False},
                     "devices": {"count": max(2 * c, 10), "compute": "shifted_exponential", "delay_shift_s": 0.0,
                                 "delay_mean_s": mean_compute},
                     "channel": channel, "link": link,
                     "protocol": {"name": "fedbuff", "concurrency": c, "buffer": 1}, "scheduler": {"name": "uniform"}})
    up = res.updates
    edges = np.linspace(warm, warm + span, batches + 1)
    start, end, ready = up.tx_start_s.to_numpy(), up.tx_end_s.to_numpy(), up.compute_end_s.to_numpy()
    rate, busy, wait = [], [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        rate.append(np.count_nonzero((end >= lo) & (end < hi)) / (hi - lo))
        on = np.clip(np.fmin(end, hi), lo, hi) - np.clip(start, lo, hi)
        busy.append(np.nansum(np.where(np.isnan(end) & (start < hi), hi - np.clip(start, lo, hi), on)) / (hi - lo))
        began = (start >= lo) & (start < hi)
        wait.append((start[began] - ready[began]).mean())
    n = int(np.count_nonzero((end >= warm) & (end < warm + span)))
    checks = []
    for name, values, unit in (("throughput", rate, "uploads/s"), ("wait", wait, "s"), ("utilisation", busy, "")):
        m, se = batch_means(np.asarray(values))
        checks.append(Check(f"C = {c}, load {load:g}: {name}", m, exact[name], se, n, unit))
    return checks


def case_queue(scale: float = 1.0) -> Result:
    """FedBuff on TDMA with exponential computation against M/D/1//C (constant airtime) and M/M/1//C
    (exponential airtime)."""
    uploads = max(int(100_000 * scale), 2000)
    checks, curves = [], {}
    for airtime, name in (("constant", "M/D/1//C"), ("exponential", "M/M/1//C")):
        for c, load in QUEUE_SETTINGS:
            rows = fedbuff_queue_run(c, load, airtime, uploads)
            for r in rows:
                r.what = f"{name}, {r.what}"
            checks += rows
    # the curves: utilisation and wait against the load, exact, for the figure
    loads = np.linspace(0.05, 2.5, 60)
    for airtime, lst in (("M/D/1//C", lambda s: math.exp(-s)), ("M/M/1//C", lambda s: 1 / (1 + s))):
        for c in (1, 4, 16):
            curves[(airtime, c)] = (loads, np.array([[finite_source_queue(c, x / c, lst, 1.0)[k]
                                                       for k in ("throughput", "wait")] for x in loads]))
    return Result("queue", checks, curves)


# ---------------------------------------------------------------------------------------------
# 2. the shared band (FDMA, OFDMA) against its own rule


def shared_band_ends(start: np.ndarray, bits: np.ndarray, rates: Callable[[np.ndarray], np.ndarray],
                     horizon: float = math.inf) -> np.ndarray:
    """When each upload ends on a band shared by those on the air at each moment (processor sharing
    with rates ``rates(active)`` for the indices on the air), written from the rule alone: uploads join
    at ``start`` with ``bits``; between two joins or ends every rate is constant, so each upload's bits
    left fall linearly and the next end is the smallest bits-left / rate. NaN: not over by ``horizon``."""
    order = np.argsort(start, kind="stable")
    end = np.full(start.size, np.nan)
    left = bits.astype(float).copy()
    active: list[int] = []
    t, p = -math.inf, 0
    while p < order.size or active:
        join = start[order[p]] if p < order.size else math.inf
        if active:
            idx = np.array(active)
            r = rates(idx)
            finish = t + left[idx] / r
            j = int(np.argmin(finish))
            if finish[j] <= join:
                left[idx] -= r * (finish[j] - t)
                t = float(finish[j])
                if t > horizon:
                    break
                end[idx[j]] = t
                active.remove(int(idx[j]))
                continue
            left[idx] -= r * (join - t)
        if join > horizon:
            break
        t = float(join)
        active.append(int(order[p]))
        p += 1
    return end


def fdma_rates(gain: np.ndarray, power: np.ndarray, bandwidth_hz: float, noise_power: float):
    """FDMA's rule for the uploads on the air: each of k gets B / k with noise N0 / k."""
    def rates(idx: np.ndarray) -> np.ndarray:
        k = idx.size
        return bandwidth_hz / k * np.log2(1 + gain[idx] * power[idx] * k / noise_power)
    return rates


def ergodic_log2(snr):
    """E[log2(1 + snr X)] for X ~ Exp(1) (a Rayleigh block of mean SNR snr): e^(1/snr) E1(1/snr) / ln 2
    (e.g. Goldsmith, Wireless Communications (2005), eq. 4.12 with Rayleigh fading; Alouini & Goldsmith 1999)."""
    from scipy.special import exp1

    a = 1.0 / np.asarray(snr, dtype=float)
    return np.exp(a) * exp1(a) / math.log(2.0)


def case_shared_band(scale: float = 1.0) -> Result:
    """The event engine's shared band against its rule, replayed from a FedBuff run's records (FDMA:
    every upload's end), and OFDMA's frequency-selective equal shares against the ergodic rate."""
    from wirelessfl.access import OFDMA, Link
    from wirelessfl.config import LinkConfig

    checks = []
    bandwidth, noise, bits = 1e6, 1.0, 200_000
    uploads = max(int(20_000 * scale), 500)
    res = _simulate({"seed": 7, "run": {"timing_only": True, "rounds": uploads, "record_devices": False},
                     "devices": {"count": 40, "compute": "shifted_exponential", "delay_shift_s": 0.0,
                                 "delay_mean_s": 1.0},
                     "channel": {"profile": "linear", "sigma_min": 0.2, "sigma_max": 2.0},
                     "link": {"model_bits": bits, "bandwidth_hz": bandwidth, "noise_power": noise, "access": "fdma"},
                     "protocol": {"name": "fedbuff", "concurrency": 12, "buffer": 1}, "scheduler": {"name": "uniform"}})
    up = res.updates[res.updates.tx_start_s.notna()]
    start, gain, power = up.tx_start_s.to_numpy(), up.gain.to_numpy(), up.power.to_numpy()
    done = up.tx_end_s.notna().to_numpy()
    horizon = float(up.tx_end_s.max())
    ends = shared_band_ends(start, np.full(start.size, float(bits)), fdma_rates(gain, power, bandwidth, noise), horizon)
    recorded = up.tx_end_s.to_numpy()
    worst = float(np.max(np.abs(ends[done] - recorded[done]) / recorded[done]))
    overlap = float(np.mean(_on_air_at_starts(start, recorded) > 1))
    checks.append(Check("FDMA under fedbuff: every upload's end, replayed from its start, gain and power "
                        f"(largest relative difference; {overlap:.0%} of uploads start beside others)",
                        worst, 0.0, 0.0, int(done.sum()), "uploads"))
    # OFDMA, frequency selective, equal shares: the mean rate is (B / k) E[log2(1 + g P k X / N0)]
    draws = max(int(20_000 * scale), 1000)
    link = Link(LinkConfig(bandwidth_hz=bandwidth, noise_power=noise))
    for k, r_blocks in ((1, 25), (4, 25), (8, 6)):
        scheme = OFDMA(link, r_blocks, "equal", True, np.random.default_rng(k))
        g = np.geomspace(0.1, 10, k) if k > 1 else np.array([1.0])
        p = np.ones(k)
        rates = np.array([scheme.rates_bps(g, p, scheme.block_fading(k)) for _ in range(draws)])
        exact = bandwidth / k * ergodic_log2(g * p * k / noise)
        for i in (0, k - 1) if k > 1 else (0,):
            m, se = mean_se(rates[:, i])
            checks.append(Check(f"OFDMA equal, {r_blocks} blocks, k = {k}: mean rate at SNR g P k / N0 = "
                                f"{g[i] * k:.3g}", m, float(exact[i]), se, draws, "bit/s"))
    return Result("shared_band", checks)


def _on_air_at_starts(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many uploads are on the air as each one starts (itself included)."""
    end = np.where(np.isnan(end), np.inf, end)
    s, e = np.sort(start), np.sort(end)
    return np.searchsorted(s, start, side="right") - np.searchsorted(e, start, side="right")


# ---------------------------------------------------------------------------------------------
# 3. semi_sync's first k against the k-th order statistic


def order_statistic_moments(k: int, m: int, mean: float) -> tuple[float, float]:
    """Mean and variance of the k-th smallest of m i.i.d. Exp(mean) (Renyi's representation: the
    gaps are independent exponentials of means mean / m, mean / (m - 1), ...; David & Nagaraja,
    Order Statistics (2003), sec. 2.5): mean sum_{j=m-k+1}^{m} 1/j, variance mean^2 sum 1/j^2."""
    j = np.arange(m - k + 1, m + 1, dtype=float)
    return float(mean * np.sum(1 / j)), float(mean ** 2 * np.sum(1 / j ** 2))


def order_statistic_cdf(t: np.ndarray, k: int, m: int, mean: float) -> np.ndarray:
    """P(X_(k:m) <= t) = P(Binomial(m, F(t)) >= k), F(t) = 1 - exp(-t / mean)."""
    from scipy.stats import binom

    return binom.sf(k - 1, m, 1 - np.exp(-np.asarray(t, dtype=float) / mean))


def case_semi_sync(scale: float = 1.0) -> Result:
    """semi_sync with m devices a round, exponential computation and uploads that never wait
    (dedicated sub-bands, one gain for all): the round ends at the k-th order statistic of the
    computations plus the one airtime."""
    rounds = max(int(20_000 * scale), 500)
    m, mean = 10, 1.0
    bits, bandwidth, subbands = 100_000, 1e6, 20
    airtime = bits / (bandwidth / subbands * math.log2(1 + 1.0 * 1.0 * subbands / 1.0))  # g = P = N0 = 1
    checks, curves = [], {}
    for k in (1, 3, 5, 10):
        res = _simulate({"seed": 10 + k, "run": {"timing_only": True, "rounds": rounds, "record_devices": False},
                         "devices": {"count": 40, "compute": "shifted_exponential", "delay_shift_s": 0.0,
                                     "delay_mean_s": mean},
                         "channel": {"sigma": 1e-9, "gain_floor": 1.0},
                         "link": {"model_bits": bits, "bandwidth_hz": bandwidth, "access": "dedicated",
                                  "subbands": subbands, "p_max": 1.0, "p_bar": 1.0},
                         "protocol": {"name": "semi_sync", "first_k": k, "late": "drop"},
                         "scheduler": {"name": "uniform", "m": m, "sampling": "without_replacement"}})
        length = (res.rounds.t_end - res.rounds.t_start).to_numpy() - airtime
        mu, var = order_statistic_moments(k, m, mean)
        got, se = mean_se(length)
        checks.append(Check(f"first {k} of {m}: mean round length - airtime", got, mu, se, length.size, "s"))
        # the sample variance's standard error: sqrt((m4 - s^4) / n) with the sample's own fourth moment
        centred = length - length.mean()
        s2, m4 = float(np.mean(centred ** 2)), float(np.mean(centred ** 4))
        checks.append(Check(f"first {k} of {m}: variance of the round length", s2, var,
                            math.sqrt(max(m4 - s2 ** 2, 0.0) / length.size), length.size, "s^2"))
        curves[k] = np.sort(length)
    return Result("semi_sync", checks, {"lengths": curves, "m": m, "mean": mean})


# ---------------------------------------------------------------------------------------------
# 4. the sync round against its closed form, and against the event engine on the same draws


def tdma_makespan(ready: np.ndarray, airtime: np.ndarray) -> float:
    """One transmitter, first come first served: the last upload ends at
    max_j (r_(j) + sum_{i >= j} a_(i)) over the devices in order of readiness (the queue's
    busy-period form of Lindley's recursion); with every device ready at once, r + sum a."""
    order = np.argsort(ready, kind="stable")
    r, a = ready[order], airtime[order]
    tail = np.cumsum(a[::-1])[::-1]
    return float(np.max(r + tail))


def case_sync_round(scale: float = 1.0) -> Result:
    """Sync rounds (random computation, heterogeneous Rayleigh gains) against the closed forms from
    each round's recorded draws: TDMA the queue's makespan, FDMA the slowest of ready + bits / ((B / k)
    log2(1 + g P k / N0)); and the event engine (semi_sync awaiting every upload) on the same draws:
    TDMA the same rounds, FDMA the band split again as uploads end (the shared band's rule)."""
    rounds = max(int(4000 * scale), 200)
    bits, bandwidth, noise = 200_000, 1e6, 1.0
    base = {"seed": 3, "run": {"timing_only": True, "rounds": rounds, "record_devices": False},
            "devices": {"count": 20, "compute": "shifted_exponential", "delay_shift_s": 0.1, "delay_mean_s": 0.5},
            "channel": {"profile": "linear", "sigma_min": 0.2, "sigma_max": 2.0},
            "link": {"model_bits": bits, "bandwidth_hz": bandwidth, "noise_power": noise, "downlink_s": 0.05},
            "scheduler": {"name": "uniform", "m": 5}}
    checks = []
    for access in ("tdma", "fdma"):
        runs = {}
        for protocol in ("sync", "semi_sync"):
            runs[protocol] = _simulate({**base, "link": {**base["link"], "access": access},
                                        "protocol": {"name": protocol}})
        sync, semi = runs["sync"], runs["semi_sync"]
        same_draws = bool(np.array_equal(sync.updates.gain.to_numpy(), semi.updates.gain.to_numpy())
                          and np.allclose(sync.updates.compute_end_s - sync.updates.dispatch_s,
                                          semi.updates.compute_end_s - semi.updates.dispatch_s, rtol=1e-9, atol=1e-9))
        worst = {"sync": 0.0, "semi_sync": 0.0}
        shorter = []
        sync_lengths = (sync.rounds.t_end - sync.rounds.t_start).to_numpy()
        for protocol, res in runs.items():
            rows = res.rounds.set_index("round")
            for r, up in res.updates.groupby("version_started"):
                t0 = float(rows.t_start[r])
                ready = up.compute_end_s.to_numpy() - t0
                g, p = up.gain.to_numpy(), up.power.to_numpy()
                k = len(up)
                if access == "tdma":
                    length = 0.05 + tdma_makespan(ready - 0.05, bits / (bandwidth * np.log2(1 + g * p / noise)))
                elif protocol == "sync":
                    length = 0.05 + float(np.max(ready - 0.05 + bits / (bandwidth / k * np.log2(1 + g * p * k / noise))))
                else:
                    ends = shared_band_ends(ready, np.full(k, float(bits)), fdma_rates(g, p, bandwidth, noise))
                    length = float(np.max(ends))
                recorded = float(rows.t_end[r] - rows.t_start[r])
                worst[protocol] = max(worst[protocol], abs(length - recorded) / recorded)
                if protocol == "semi_sync":
                    shorter.append(recorded / sync_lengths[r])
        form = "makespan of the queue" if access == "tdma" else "max of ready + airtime on B / k"
        checks.append(Check(f"{access} sync: round length against the {form} (largest relative difference)",
                            worst["sync"], 0.0, 0.0, rounds, "rounds"))
        event = "the same queue" if access == "tdma" else "the band split again as uploads end"
        checks.append(Check(f"{access} semi_sync on the same draws ({'same' if same_draws else 'OTHER'} gains "
                            f"and computations): round length against {event} "
                            f"(largest relative difference; mean length / sync's {np.mean(shorter):.4f})",
                            worst["semi_sync"] if same_draws else math.inf, 0.0, 0.0, rounds, "rounds"))
    return Result("sync_round", checks)
