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
    python benchmarks/validation.py --scale 0.1           # smaller samples, larger errors (figures: runs/validation-scale-0.1)
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
"""Deterministic agreement: within this relative rounding (float64 arithmetic, records to 12 digits)."""
FLOAT32 = 1e-6
"""The same for a float32 model: a few units in the last place of a sum of a few terms."""


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
    rounding: float = ROUNDING
    """Relative rounding allowed on top (float32 arithmetic: FLOAT32)."""

    def bound(self, k: float = K_SE) -> float:
        """How far the measured value may lie from the exact one: k standard errors plus rounding."""
        return k * self.se + self.rounding * max(1.0, abs(self.exact))

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
    ``lst`` and mean ``mean_s``. Takacs (1962), Introduction to the Theory of Queues; Takagi (1993), Queueing Analysis
    vol. 2 (finite systems):

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
    # near saturation a short run may see no idle period at all, and every batch is busy throughout
    # (batch standard error 0): the idle time is a sum of idle periods of Exp(C lam) length (every
    # device computing), so the utilisation is known no better than one such period over the span:
    # its root mean square sqrt(2) / (C lam), divided by the span
    idle_floor = math.sqrt(2.0) / (c / mean_compute * span)
    checks = []
    for name, values in (("throughput (uploads/s)", rate), ("wait (s)", wait), ("utilisation", busy)):
        m, se = batch_means(np.asarray(values))
        if name == "utilisation":
            se = max(se, idle_floor)
        checks.append(Check(f"C = {c}, load {load:g}: {name}", m, exact[name.split(" ")[0]], se, n, "uploads"))
    return checks


def case_queue(scale: float = 1.0) -> Result:
    """FedBuff on TDMA with exponential computation against M/D/1//C (constant airtime) and M/M/1//C
    (exponential airtime)."""
    uploads = max(int(100_000 * scale), 2000)
    checks, curves = [], {}
    for airtime, name in (("constant", "M/D/1//C"), ("exponential", "M/M/1//C")):
        for i, (c, load) in enumerate(QUEUE_SETTINGS):
            rows = fedbuff_queue_run(c, load, airtime, uploads, seed=1 + i + (100 if airtime == "exponential" else 0))
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
    (Alouini & Goldsmith, IEEE Trans. Veh. Technol. 48(4), 1999: the ergodic capacity of Rayleigh fading)."""
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
                                f"{g[i] * k:.3g} (bit/s)", m, float(exact[i]), se, draws, "draws"))
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
    Order Statistics (2003)): mean sum_{j=m-k+1}^{m} 1/j, variance mean^2 sum 1/j^2."""
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
        checks.append(Check(f"first {k} of {m}: mean round length - airtime (s)", got, mu, se, length.size, "rounds"))
        # the sample variance's standard error: sqrt((m4 - s^4) / n) with the sample's own fourth moment
        centred = length - length.mean()
        s2, m4 = float(np.mean(centred ** 2)), float(np.mean(centred ** 4))
        checks.append(Check(f"first {k} of {m}: variance of the round length (s^2)", s2, var,
                            math.sqrt(max(m4 - s2 ** 2, 0.0) / length.size), length.size, "rounds"))
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


# ---------------------------------------------------------------------------------------------
# 5. the channel


def _channel(n: int, seed: int = 0, **channel):
    """The channel a scenario with these [channel] settings and n devices builds (as a run does)."""
    from wirelessfl.config import from_dict
    from wirelessfl.wireless import build_channel

    channel = {k: [list(map(float, p)) for p in v] if k == "positions_m" else v for k, v in channel.items()}
    sc = from_dict({"seed": seed, "run": {"rounds": 1}, "devices": {"count": n}, "channel": channel})
    return build_channel(sc, np.random.default_rng(seed))


def case_rayleigh_outage(scale: float = 1.0) -> Result:
    """P(|h|^2 < g_th) = 1 - exp(-g_th / mean) for Rayleigh fading (|h|^2 exponential; Goldsmith,
    Wireless Communications (2005), ch. 3), through a round's draw and through one upload's draw (the event protocols')."""
    n, rounds = 1000, max(int(1000 * scale), 50)
    sigma = 1.5
    mean = 2 * sigma ** 2
    ch = _channel(n, sigma=sigma, gain_floor=0.0)
    rng = np.random.default_rng(1)
    g = np.concatenate([ch.draw(rng) for _ in range(rounds)])
    one = np.array([ch.draw_one(rng, i % n) for i in range(max(int(200_000 * scale), 10_000))])
    checks = []
    for x in (0.01, 0.1, 1.0, 3.0):
        p = 1 - math.exp(-x)
        for name, sample in (("a round's draw", g), ("an upload's draw", one)):
            hits = int(np.count_nonzero(sample < x * mean))
            checks.append(Check(f"outage at g_th = {x:g} x mean, {name}", hits / sample.size, p,
                                proportion_se(hits, sample.size, p), sample.size, "draws"))
    return Result("rayleigh_outage", checks)


def rician_moment(order: int, omega: float, k: float) -> float:
    """E[|h|^(2n)] of Rician fading with mean power omega and K factor k: n! (omega / (K + 1))^n L_n(-K)
    (L_n: Laguerre polynomial; Simon & Alouini, Digital Communication over Fading Channels (2005),
    ch. 2). K = 0: Rayleigh, n! omega^n, the Nakagami-m moments Gamma(m + n) / (Gamma(m) m^n) omega^n at m = 1."""
    from scipy.special import eval_laguerre

    return math.factorial(order) * (omega / (k + 1)) ** order * float(eval_laguerre(order, -k))


def case_fading_moments(scale: float = 1.0) -> Result:
    """The first three moments of |h|^2 under rayleigh, gauss_markov (its stationary law: Rayleigh)
    and rician (K = 1, 5), against the closed forms."""
    n = max(int(400_000 * scale), 20_000)
    sigma = 0.8
    omega = 2 * sigma ** 2
    checks = []
    for model, k, opts in (("rayleigh", 0.0, {}), ("gauss_markov", 0.0, {"rho": 0.9}),
                           ("rician", 1.0, {"rician_k": 1.0}), ("rician", 5.0, {"rician_k": 5.0})):
        ch = _channel(n, model=model, sigma=sigma, gain_floor=0.0, **opts)
        rng = np.random.default_rng(2)
        for _ in range(3):  # gauss_markov: three steps of its chain from the stationary start
            g = ch.draw(rng)
        for order in (1, 2, 3):
            m, se = mean_se(g ** order)
            label = f"{model}{f' K = {k:g}' if model == 'rician' else ''}: E[g^{order}]"
            checks.append(Check(label, m, rician_moment(order, omega, k), se, n, "draws"))
    return Result("fading_moments", checks)


def case_path_loss(scale: float = 1.0) -> Result:
    """10 log10 g against 10 log10 (d / d0) with per-round log-normal shadowing and Rayleigh fading:
    a straight line of slope -exponent (least squares over every draw, with its standard error from
    the residuals), intercept ref_db + 10 log10(2 sigma^2) - 10 gamma / ln 10 (E ln X = -gamma for
    X ~ Exp(1)), residual variance shadowing_db^2 + (10 / ln 10)^2 pi^2 / 6 (Var ln X = pi^2 / 6); and
    per-device shadowing's spread across devices at one distance."""
    d0, exponent, ref_db, shadow_db, sigma = 2.0, 3.5, -30.0, 6.0, 0.8
    distances = np.geomspace(d0, 400.0, 40)
    n_dev = 40 * max(int(100 * scale), 5)
    d = np.tile(distances, n_dev // 40)
    positions = np.stack([d, np.zeros_like(d)], axis=1)
    ch = _channel(d.size, sigma=sigma, gain_floor=0.0, path_loss=True, positions_m=positions,
                  reference_distance_m=d0, reference_gain_db=ref_db, path_loss_exponent=exponent,
                  shadowing_db=shadow_db, shadowing="per_round")
    rng = np.random.default_rng(3)
    rounds = 50
    y = np.concatenate([10 * np.log10(ch.draw(rng)) for _ in range(rounds)])
    x = np.tile(10 * np.log10(d / d0), rounds)
    xc = x - x.mean()
    slope = float(xc @ (y - y.mean()) / (xc @ xc))
    intercept = float(y.mean() - slope * x.mean())
    resid = y - intercept - slope * x
    s2 = float(resid @ resid / (y.size - 2))
    se_slope = math.sqrt(s2 / (xc @ xc))
    se_intercept = math.sqrt(s2 * (1 / y.size + x.mean() ** 2 / (xc @ xc)))
    c = 10 / math.log(10)
    checks = [Check("slope of 10 log10 g against 10 log10 (d / d0)", slope, -exponent, se_slope, y.size, "draws"),
              Check("intercept (dB)", intercept, ref_db + 10 * math.log10(2 * sigma ** 2) - c * np.euler_gamma,
                    se_intercept, y.size, "draws")]
    m4 = float(np.mean((resid - resid.mean()) ** 4))
    checks.append(Check("residual variance (dB^2): shadowing^2 + the fading's (10 / ln 10)^2 pi^2 / 6", s2,
                        shadow_db ** 2 + c ** 2 * math.pi ** 2 / 6, math.sqrt(max(m4 - s2 ** 2, 0) / y.size),
                        y.size, "draws"))
    # per-device shadowing: drawn once per device, so its spread is across devices
    n = max(int(50_000 * scale), 2000)
    fixed = _channel(n, seed=4, sigma=sigma, path_loss=True, positions_m=np.full((n, 2), 30.0),
                     reference_distance_m=d0, path_loss_exponent=exponent, shadowing_db=shadow_db)
    db = 10 * np.log10(fixed.path_loss.mean_scale() / fixed.path_loss.distance_gain)
    v = float(db.var(ddof=1))
    checks.append(Check("per-device shadowing: variance across devices (dB^2)", v, shadow_db ** 2,
                        math.sqrt(max(float(np.mean((db - db.mean()) ** 4)) - v ** 2, 0) / n), n, "devices"))
    m, se = mean_se(db)
    checks.append(Check("per-device shadowing: mean across devices (dB)", m, 0.0, se, n, "devices"))
    return Result("path_loss", checks)


def case_jakes(scale: float = 1.0) -> Result:
    """Fading within an upload: the correlation of |h|^2 between blocks k coherence times apart
    against the Gauss-Markov rule rho^(2k) (its own law, circular Gaussian h) and, at k = 1, Jakes'
    J0(2 pi f_D T_c)^2 (Clarke's model: E[h(t) h*(t + tau)] / E|h|^2 = J0(2 pi f_D tau); Clarke (1968);
    Jakes, Microwave Mobile Communications (1974), ch. 1; |h|^2's correlation is its square)."""
    from scipy.special import j0

    from wirelessfl.config import from_dict
    from wirelessfl.fading import block_fading, doppler_hz
    from wirelessfl.wireless import build_channel

    sequences, blocks = max(int(40_000 * scale), 2000), 12
    checks, curves = [], {}
    for kmh, coherence in ((30.0, 0.002), (3.0, None), (120.0, 0.001)):
        sc = from_dict({"seed": 5, "run": {"rounds": 1}, "devices": {"count": 1, "speed_mps": kmh / 3.6},
                        "channel": {"sigma": 1.0, "gain_floor": 0.0,
                                    **({} if coherence is None else {"coherence_s": coherence})}})
        fading = block_fading(sc, build_channel(sc))
        f_d = doppler_hz(kmh / 3.6, sc.link.carrier_hz)
        rng = np.random.default_rng(int(kmh))
        g = np.empty((sequences, blocks))
        for s in range(sequences):  # independent uploads, each from a stationary first block
            it = fading.block_gains(0, float(rng.exponential(2.0)), rng)
            g[s] = [next(it) for _ in range(blocks)]
        tc = fading.coherence_s
        label = f"{kmh:g} km/h, T_c = {tc * 1e3:.3g} ms{' (the default 0.423 / f_D)' if coherence is None else ''}"
        lags = np.arange(1, 6)
        measured = []
        for lag in lags:
            groups = np.array_split(np.arange(sequences), 20)  # batches of sequences: independent
            corr = [np.corrcoef(g[ix, :-lag].ravel(), g[ix, lag:].ravel())[0, 1] for ix in groups]
            m, se = mean_se(corr)
            measured.append((m, se))
            checks.append(Check(f"{label}: corr of |h|^2 at lag {lag}: rho^{2 * lag}", m,
                                fading.rho ** (2 * lag), se, sequences, "uploads"))
        checks.append(Check(f"{label}: rho against Jakes' J0(2 pi f_D T_c)", fading.rho,
                            float(j0(2 * math.pi * f_d * tc)), 0.0, 1, "formula"))
        curves[label] = {"f_d": f_d, "tc": tc, "rho": fading.rho, "lags": lags, "measured": np.array(measured)}
    return Result("jakes", checks, curves)


# ---------------------------------------------------------------------------------------------
# 6. the link: packet errors, retransmissions, fading within an upload


def truncated_geometric(p_fail: float, limit: int) -> dict[str, float]:
    """Transmissions of one packet sent until it gets through, at most ``limit`` times, each failing
    independently with p: P(A = a) = p^(a-1) (1 - p) for a < limit, P(A = limit) = p^(limit-1);
    E[A] = (1 - p^limit) / (1 - p); the packet is lost with probability p^limit."""
    return {"mean": (1 - p_fail ** limit) / (1 - p_fail), "lost": p_fail ** limit,
            "var": sum(a * a * p_fail ** (a - 1) * (1 - p_fail) for a in range(1, limit))
            + limit ** 2 * p_fail ** (limit - 1) - ((1 - p_fail ** limit) / (1 - p_fail)) ** 2}


def case_arq(scale: float = 1.0) -> Result:
    """Packets with errors and retransmissions, end to end through runs: fedbuff at a fixed rate with
    outage errors (each transmission draws a fresh Rayleigh gain: it fails with the outage probability
    p = 1 - exp(-g_th / mean), g_th = (2^(R / B) - 1) N0 / P), and sync with waterfall errors at one SNR
    (PER = 1 - exp(-m / SNR)); transmissions per upload against the truncated geometric law, uploads
    lost exactly when a packet failed link.max_attempts times. With n packets an upload is lost with
    probability 1 - (1 - p^L)^n and sends E[A] (1 - (1 - p^L)^n) / p^L transmissions on average
    (packet j is sent only if the j - 1 before it got through)."""
    checks = []
    limit = 4
    budget = max(400.0 * scale, 40.0)
    bandwidth, rate, sigma = 1e6, 1e6, 1.0
    g_th = (2 ** (rate / bandwidth) - 1) * 1.0 / 1.0  # P = N0 = 1
    p_out = 1 - math.exp(-g_th / (2 * sigma ** 2))
    law = truncated_geometric(p_out, limit)
    for packets in (1, 3):
        res = _simulate({"seed": 20 + packets, "run": {"timing_only": True, "time_budget_s": budget,
                                                       "record_devices": False},
                         "devices": {"count": 40, "compute": "shifted_exponential", "delay_shift_s": 0.0,
                                     "delay_mean_s": 0.05},
                         "channel": {"sigma": sigma, "gain_floor": 0.0},
                         "link": {"model_bits": 3000, "packet_bits": 3000 // packets, "bandwidth_hz": bandwidth,
                                  "rate_bps": rate, "errors": "outage", "max_attempts": limit, "p_max": 1.0,
                                  "p_bar": 1.0},
                         "protocol": {"name": "fedbuff", "concurrency": 8, "buffer": 1},
                         "scheduler": {"name": "uniform"}})
        up = res.updates[res.updates.outcome.isin(["applied", "lost"])]
        attempts, lost = up.attempts.to_numpy(), (up.outcome == "lost").to_numpy()
        tag = f"fedbuff, outage, {packets} packet{'s' if packets > 1 else ''} of {3000 // packets} bits"
        if packets == 1:  # every transmission of a lost upload failed; all but the last of an applied one
            failures = int(attempts.sum() - np.count_nonzero(~lost))
            trials = int(attempts.sum())
            checks.append(Check(f"{tag}: share of transmissions that fail, the Rayleigh outage 1 - exp(-g_th / mean)",
                                failures / trials, p_out, proportion_se(failures, trials, p_out), trials,
                                "transmissions"))
            for a in range(1, limit + 1):
                pa = p_out ** (a - 1) * ((1 - p_out) if a < limit else 1.0)
                hits = int(np.count_nonzero(attempts == a))
                checks.append(Check(f"{tag}: P(transmissions = {a})", hits / attempts.size, pa,
                                    proportion_se(hits, attempts.size, pa), attempts.size, "uploads"))
        through = (1 - law["lost"]) ** packets
        m, se = mean_se(attempts)
        checks.append(Check(f"{tag}: mean transmissions per upload", m,
                            law["mean"] * (1 - through) / law["lost"], se, attempts.size, "uploads"))
        checks.append(Check(f"{tag}: share of uploads lost", float(lost.mean()), 1 - through,
                            proportion_se(int(lost.sum()), lost.size, 1 - through), lost.size, "uploads"))
        applied_at = res.updates.loc[up.index].version_applied.notna().to_numpy()
        wrong = int(np.count_nonzero(lost & (attempts < limit)) + np.count_nonzero(attempts > packets * limit)
                    + np.count_nonzero(lost & applied_at) + np.count_nonzero(~lost & ~applied_at))
        checks.append(Check(f"{tag}: uploads lost below the attempt limit, lost and applied, or kept and not applied",
                            wrong, 0, 0.0, int(lost.sum()), "lost uploads"))
    # sync, waterfall errors at one SNR: every gain at the floor, one power
    snr, m_wf = 0.01 * 4.0, 0.04
    per = 1 - math.exp(-m_wf / snr)
    law = truncated_geometric(per, limit)
    rounds = max(int(4000 * scale), 200)
    res = _simulate({"seed": 30, "run": {"timing_only": True, "rounds": rounds, "record_devices": False},
                     "devices": {"count": 40, "compute": "constant", "compute_s": 0.0},
                     "channel": {"sigma": 1e-9, "gain_floor": 0.01},
                     "link": {"model_bits": 2000, "bandwidth_hz": 1e6, "errors": "waterfall", "waterfall_m": m_wf,
                              "max_attempts": limit, "p_max": 4.0, "p_bar": 4.0},
                     "protocol": {"name": "sync"}, "scheduler": {"name": "uniform", "m": 5}})
    up = res.updates
    attempts, lost = up.attempts.to_numpy(), (up.outcome == "lost").to_numpy()
    tag = f"sync, waterfall at SNR {snr:g}, m = {m_wf:g} (PER {per:.3f})"
    m, se = mean_se(attempts)
    checks.append(Check(f"{tag}: mean transmissions per upload", m, law["mean"], se, attempts.size, "uploads"))
    checks.append(Check(f"{tag}: share of uploads lost, PER^{limit}", float(lost.mean()), law["lost"],
                        proportion_se(int(lost.sum()), lost.size, law["lost"]), lost.size, "uploads"))
    wrong = int(np.count_nonzero(lost & (attempts < limit)) + np.count_nonzero(attempts > limit)
                + np.count_nonzero(~lost & (up.outcome != "applied").to_numpy()))
    checks.append(Check(f"{tag}: uploads lost below the attempt limit", wrong, 0, 0.0, int(lost.sum()), "lost uploads"))
    return Result("arq", checks)


def case_fading_upload(scale: float = 1.0) -> Result:
    """Fading within an upload: an upload's time against the integral of its rate over its blocks
    (replayed from the same draws), the blocks' mean capacity against the ergodic capacity
    B E[log2(1 + g P / N0)] = B e^(1/s) E1(1/s) / ln 2 at mean SNR s, and at a fixed rate R the time of
    an upload of b blocks' worth: T_c x the trials to the b-th block whose capacity reaches R, a
    negative binomial of mean b / p and variance b (1 - p) / p^2 (p = exp(-g_R / mean))."""
    from wirelessfl.fading import BlockFading

    checks = []
    bandwidth, tc, mean, power = 1e6, 0.01, 2.0, 1.0
    # the integral of the rate, block by block, until the bits are sent
    fading = BlockFading(tc, 0.7, mean_gains=np.array([mean]), floors=np.array([0.0]), bandwidth_hz=bandwidth,
                         noise_power=1.0)
    worst, n = 0.0, max(int(2000 * scale), 100)
    rng = np.random.default_rng(40)
    for seed in range(n):
        bits, gain = float(rng.uniform(1e3, 5e5)), float(rng.exponential(mean))
        got = fading.upload_s(bits, gain, power, 0, np.random.default_rng(seed))
        blocks, sent, t = fading.block_gains(0, gain, np.random.default_rng(seed)), 0.0, 0.0
        while True:
            r = bandwidth * math.log2(1 + next(blocks) * power)
            if sent + r * tc >= bits:
                t += (bits - sent) / r
                break
            sent, t = sent + r * tc, t + tc
        worst = max(worst, abs(got - t) / t)
    checks.append(Check("an upload's time against the integral of its rate over its blocks (largest relative "
                        "difference)", worst, 0.0, 0.0, n, "uploads"))
    # the blocks' capacity, correlated (rho = 0.7) and independent: the mean over blocks is ergodic
    uploads, blocks_each = max(int(20_000 * scale), 1000), 20
    for rho in (0.0, 0.7):
        fading = BlockFading(tc, rho, mean_gains=np.array([mean]), floors=np.array([0.0]), bandwidth_hz=bandwidth,
                             noise_power=1.0)
        rng = np.random.default_rng(41)
        per_upload = np.empty(uploads)
        for u in range(uploads):
            it = fading.block_gains(0, float(rng.exponential(mean)), rng)
            g = np.array([next(it) for _ in range(blocks_each)])
            per_upload[u] = bandwidth * np.log2(1 + g * power).mean()
        m, se = mean_se(per_upload)
        checks.append(Check(f"rho = {rho:g}: the blocks' mean capacity, B e^(1/s) E1(1/s) / ln 2", m,
                            float(bandwidth * ergodic_log2(mean * power)), se, uploads, "uploads"))
    # a fixed rate: blocks below it carry nothing (rate x T_c a power of two: the bits left stay exact)
    rate, tc = 2.0 ** 20, 2.0 ** -7
    g_r = (2 ** (rate / bandwidth) - 1) / power
    p_good = math.exp(-g_r / mean)
    fading = BlockFading(tc, 0.0, mean_gains=np.array([mean]), floors=np.array([0.0]), bandwidth_hz=bandwidth,
                         noise_power=1.0, fixed_rate_bps=rate)
    rng = np.random.default_rng(42)
    count = max(int(40_000 * scale), 2000)
    for b in (1, 4):
        times = np.array([fading.upload_s(b * rate * tc, float(rng.exponential(mean)), power, 0, rng)
                          for _ in range(count)])
        m, se = mean_se(times)
        checks.append(Check(f"fixed rate, {b} block{'s' if b > 1 else ''}' worth: mean time, b T_c / p", m,
                            b * tc / p_good, se, count, "uploads"))
        v = float(times.var(ddof=1))
        c4 = float(np.mean((times - times.mean()) ** 4))
        checks.append(Check(f"fixed rate, {b} block{'s' if b > 1 else ''}' worth: variance, b (1 - p) T_c^2 / p^2", v,
                            b * (1 - p_good) * tc ** 2 / p_good ** 2, math.sqrt(max(c4 - v * v, 0) / count),
                            count, "uploads"))
    return Result("fading_upload", checks)


# ---------------------------------------------------------------------------------------------
# 7. over-the-air aggregation


def case_aircomp(scale: float = 1.0) -> Result:
    """AirComp through a sync run (homogeneous Rayleigh, mean gain gbar, threshold g_th): a selected
    device is silent with probability 1 - exp(-g_th / gbar); a sender inverts its channel at power
    rho0 / g, of mean E[rho0 / g | g >= g_th] = rho0 E1(x) / (gbar e^(-x)), x = g_th / gbar (the
    truncated channel inversion's mean power, Goldsmith & Varaiya, IEEE Trans. Inf. Theory 43(6), 1997,
    with Rayleigh fading);
    every upload lasts (bits / bits_per_symbol) / B however many send; the aggregate's error has
    variance N0 / (rho0 K^2) times the updates' power per entry (the trainer's noise, sampled)."""
    import torch
    from types import SimpleNamespace
    from scipy.special import exp1

    from wirelessfl.access import AirComp, Link
    from wirelessfl.config import LinkConfig
    from wirelessfl.learning.trainer import Trainer

    checks = []
    sigma, g_th, p_max, bits, bandwidth = 1.0, 0.5, 20.0, 64_000, 1e6
    gbar, rho0 = 2 * sigma ** 2, p_max * g_th
    rounds = max(int(4000 * scale), 200)
    res = _simulate({"seed": 50, "run": {"timing_only": True, "rounds": rounds, "record_devices": False},
                     "devices": {"count": 50, "compute": "shifted_exponential", "delay_mean_s": 0.2},
                     "channel": {"sigma": sigma, "gain_floor": 0.0},
                     "link": {"model_bits": bits, "bandwidth_hz": bandwidth, "p_max": p_max, "access": "aircomp",
                              "truncation_gain": g_th},
                     "scheduler": {"name": "uniform", "m": 8, "sampling": "without_replacement"}})
    up = res.updates
    silent = (up.outcome == "silent").to_numpy()
    p = 1 - math.exp(-g_th / gbar)
    checks.append(Check("share of selected devices silent, 1 - exp(-g_th / gbar)", float(silent.mean()), p,
                        proportion_se(int(silent.sum()), silent.size, p), silent.size, "uploads"))
    x = g_th / gbar
    m, se = mean_se(up.power[~silent])
    checks.append(Check("a sender's mean power, rho0 E1(x) / (gbar e^-x)", m, rho0 * float(exp1(x)) / (gbar * math.exp(-x)),
                        se, int((~silent).sum()), "senders"))
    sent = up[~silent]
    joint = sent.groupby("version_started").agg(k=("device", "size"), start=("tx_start_s", "min"),
                                                first=("tx_start_s", "max"), end=("tx_end_s", "max"))
    length = bits / 32 / bandwidth
    worst = float(max(np.max(np.abs(sent.airtime_s - length)), np.max(np.abs(joint.end - joint.start - length)),
                      np.max(np.abs(joint.first - joint.start))) / length)
    checks.append(Check(f"every joint upload lasts (bits / 32) / B, with 1 to {joint.k.max()} senders "
                        "(largest relative difference)", worst, 0.0, 0.0, len(joint), "joint uploads"))
    # the aggregate's noise: UplinkFacts.noise_var, then the trainer's draws of it
    scheme = AirComp(Link(LinkConfig(noise_power=2.0)), truncation_gain=g_th, p_max=p_max)
    d, aggregations = 2000, max(int(400 * scale), 40)
    for k in (1, 4, 16):
        var = scheme.uplink_facts(np.arange(k), np.ones(k), np.ones(k), np.ones(k, dtype=bool)).noise_var
        checks.append(Check(f"K = {k}: noise_var against N0 / (rho0 K^2)", var, 2.0 / (rho0 * k * k), 0.0, 1,
                            "formula"))
        deltas = torch.randn(k, d, generator=torch.Generator().manual_seed(k)) * 0.3
        weights = torch.full((k,), 1.0 / k)
        power = float((deltas * (k * weights)[:, None]).square().mean())
        noise = []
        for a in range(aggregations):
            stub = SimpleNamespace(root_seed=k, aggregations=a, aggregate_noise_var=var, device=torch.device("cpu"))
            noise.append(Trainer.aggregate_noise(stub, deltas, weights).double().numpy())
        e = np.concatenate(noise) / math.sqrt(power)
        v = float(e.var())
        checks.append(Check(f"K = {k}: the aggregate's error variance / the updates' power", v, var,
                            math.sqrt(max(float(np.mean((e - e.mean()) ** 4)) - v * v, 0) / e.size), e.size,
                            "entries"))
    return Result("aircomp", checks)


# ---------------------------------------------------------------------------------------------
# 8. mobility


def billiard_distance(p0: np.ndarray, v: np.ndarray, radius: float, t: np.ndarray) -> np.ndarray:
    """Distance to the centre of a point moving at constant speed inside a circle and reflecting off
    it like a mirror. Reflections keep the distance b of the line from the centre (the angular
    momentum), so every chord has length L = 2 sqrt(R^2 - b^2) and is run through at the same speed:
    d(t)^2 = b^2 + u(t)^2, u(t) = ((s0 + |v| t + L/2) mod L) - L/2, s0 = p0 . v / |v| (where along
    its first chord the device starts)."""
    speed = float(np.hypot(*v))
    unit = v / speed
    b = float(abs(p0[0] * unit[1] - p0[1] * unit[0]))
    chord = 2 * math.sqrt(radius ** 2 - b ** 2)
    u = np.mod(float(p0 @ unit) + speed * t + chord / 2, chord) - chord / 2
    return np.sqrt(b * b + u * u)


def case_mobility(scale: float = 1.0) -> Result:
    """Devices at constant velocity (devices.mobility = "constant_velocity") through the channel a run
    builds: the distance over time against the billiard's closed form, over many reflections, and the
    path loss of that distance, ref (max(d, d0) / d0)^-exponent."""
    from wirelessfl.config import from_dict
    from wirelessfl.wireless import build_channel

    radius, speed, d0, exponent, ref_db = 100.0, 7.0, 1.0, 3.0, -20.0
    starts = np.array([[0.0, 0.0], [30.0, -40.0], [-99.0, 5.0], [10.0, 95.0], [0.5, 0.0]])
    sc = from_dict({"seed": 6, "run": {"rounds": 1},
                    "devices": {"count": len(starts), "mobility": "constant_velocity", "speed_mps": speed},
                    "channel": {"path_loss": True, "cell_radius_m": radius, "positions_m": starts.tolist(),
                                "reference_distance_m": d0, "path_loss_exponent": exponent,
                                "reference_gain_db": ref_db}})
    ch = build_channel(sc, np.random.default_rng(6))
    v0 = ch.mobility.velocity.copy()  # each device's direction, drawn at the start
    times = np.linspace(0.0, 600.0 * max(scale, 0.1), max(int(6000 * scale), 600))  # ~20 chords
    got_d, got_pl = [], []
    for t in times:
        ch.set_time(float(t))
        got_d.append(np.hypot(*ch.positions_m().T))
        got_pl.append(ch.path_loss.distance_gain.copy())
    got_d, got_pl = np.array(got_d), np.array(got_pl)
    checks, curves = [], {"t": times, "devices": {}}
    for i, p0 in enumerate(starts):
        exact = billiard_distance(p0, v0[i], radius, times)
        pl = 10 ** (ref_db / 10) * (np.maximum(exact, d0) / d0) ** -exponent
        checks.append(Check(f"device from ({p0[0]:g}, {p0[1]:g}): distance over time (largest difference, m)",
                            float(np.max(np.abs(got_d[:, i] - exact))), 0.0, 0.0, times.size, "times"))
        checks.append(Check(f"device from ({p0[0]:g}, {p0[1]:g}): path loss over time (largest relative difference)",
                            float(np.max(np.abs(got_pl[:, i] / pl - 1))), 0.0, 0.0, times.size, "times"))
        curves["devices"][i] = (got_d[:, i], exact, 10 * np.log10(got_pl[:, i]))
    return Result("mobility", checks, curves)


# ---------------------------------------------------------------------------------------------
# 9. learning


def case_fedavg(scale: float = 1.0) -> Result:
    """FedAvg's round against the weighted mean by hand: x + sum_n w_n delta_n over the distinct
    devices drawn, w_n = 1 / (N q_n) (unbiased), 1 / |S| (mean) or |D_n| / sum_S |D_j| (data_size),
    with each delta the trainer's own local update from x (tests/test_trainer.py holds that one to a
    bare PyTorch loop)."""
    import torch

    from wirelessfl.learning import Dataset, FedAvg, Trainer

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ds = Dataset(name="tiny", x_train=torch.randn(400, 1, 6, 6, generator=g),
                 y_train=torch.randint(0, 10, (400,), generator=g), x_test=torch.randn(50, 1, 6, 6, generator=g),
                 y_test=torch.randint(0, 10, (50,), generator=g), num_classes=10, input_shape=(1, 6, 6))
    sizes = [20, 35, 50, 65, 80, 30, 45, 60]
    parts = np.split(np.arange(sum(sizes)), np.cumsum(sizes)[:-1])
    n = len(parts)
    q = np.linspace(0.2, 1.0, n)
    selected = np.array([6, 2, 6, 4, 0])
    devices = np.unique(selected)
    checks = []
    for aggregation in ("unbiased", "mean", "data_size"):
        tr = Trainer(ds, parts, "logreg", local_steps=3, batch_size=8, lr=0.1, root_seed=1)
        algo = FedAvg(server_lr=0.9, aggregation=aggregation)
        algo.setup(tr)
        x0 = tr.params.clone().double()
        deltas = tr.local_updates(devices, 5).double()
        w = {"unbiased": 0.9 / (n * q[devices]), "mean": np.full(devices.size, 0.9 / devices.size),
             "data_size": 0.9 * np.array(sizes)[devices] / np.array(sizes)[devices].sum()}[aggregation]
        by_hand = x0 + torch.from_numpy(w) @ deltas
        algo.round(tr, selected, q, n, 5)
        scale_ = float(by_hand.abs().max())
        checks.append(Check(f"aggregation = {aggregation!r}: the model after a round against x + sum w delta "
                            "by hand (largest difference / largest entry; float32)",
                            float((tr.params.double() - by_hand).abs().max()) / scale_, 0.0, 0.0, devices.size,
                            "devices", FLOAT32))
    return Result("fedavg", checks)


class QuadraticLearner:
    """A learner on f_n(x) = |x - c_n|^2 / 2 in float64 for the event engine: local updates are
    ``steps`` gradient steps from the current model; an aggregation applies FedAvg's own
    ``update_weights`` (server_lr x the protocol's weights) and remembers what it applied."""

    model_bits = 64

    def __init__(self, centres: np.ndarray, algorithm, lr: float = 0.3, steps: int = 3):
        import torch

        self.torch = torch
        self.centres = torch.as_tensor(centres, dtype=torch.float64)
        self.x = torch.zeros(self.centres.shape[1], dtype=torch.float64)
        self.algorithm, self.lr, self.steps = algorithm, lr, steps
        self.applied: list = []  # (devices, weights, staleness) per aggregation

    def descend(self, x, n: int):
        for _ in range(self.steps):
            x = x - self.lr * (x - self.centres[n])
        return x

    def local_updates(self, devices, key):
        return self.torch.stack([self.descend(self.x, int(n)) - self.x for n in devices])

    def apply_updates(self, devices, deltas, weights, staleness, starts=None):
        from wirelessfl.learning.algorithms import Updates

        w = self.algorithm.update_weights(Updates(devices, self.torch.stack(deltas), weights, staleness))
        self.applied.append((np.asarray(devices), np.asarray(w, dtype=float), np.asarray(staleness)))
        self.x = self.x + self.torch.from_numpy(np.asarray(w, dtype=float)) @ self.torch.stack(deltas)
        return {}

    @property
    def params(self):
        return self.x

    def evaluate(self):
        return {"accuracy": 0.0, "test_loss": 0.0, "train_loss": 0.0}


def case_fedbuff_weights(scale: float = 1.0) -> Result:
    """FedBuff's aggregation through the event engine on a quadratic: every applied update's weight is
    global_lr x server_lr x s(tau) / K with tau = the version applied to - the version started from
    (from the update log), and the model after the run equals x_{v+1} = x_v + global_lr server_lr / K
    sum_i s(tau_i) (y_i - x_{started_i}) replayed by hand (Nguyen et al. 2022, Algorithm 1)."""
    from wirelessfl.access import TDMA, Link
    from wirelessfl.config import LinkConfig
    from wirelessfl.devices import ShiftedExponentialCompute
    from wirelessfl.learning import FedAvg
    from wirelessfl.scheduling.schedulers import UniformScheduler
    from wirelessfl.sim.round.parts import STREAMS, EvalRule, Parts, StopRule
    from wirelessfl.sim.events.engine import EventEngine
    from wirelessfl.sim.protocols import FedBuff, FedBuffOptions, staleness_weight
    from wirelessfl.wireless import RayleighFading

    n, d, k = 12, 4, 3
    aggregations = max(int(2000 * scale), 100)
    centres = np.random.default_rng(0).normal(size=(n, d)) * 3
    checks = []
    for name, a, b in (("polynomial", 0.5, 4.0), ("hinge", 0.5, 1.0)):
        learner = QuadraticLearner(centres, FedAvg(server_lr=0.8))
        options = FedBuffOptions(concurrency=8, buffer=k, server_lr=0.9, staleness=name, staleness_a=a,
                                 staleness_b=b)
        parts = Parts(channel=RayleighFading(np.linspace(0.3, 2.0, n), 1e-3),
                      compute=ShiftedExponentialCompute(0.05, 1.0), scheduler=UniformScheduler(n, 1, 1.0, 10.0),
                      algorithm=learner.algorithm, access=TDMA(Link(LinkConfig(bandwidth_hz=1e6))), num_devices=n,
                      upload_bits=1e5)
        log = []
        engine = EventEngine(parts, FedBuff(options), streams={s: np.random.default_rng(i) for i, s in enumerate(STREAMS)},
                             stop=StopRule(rounds=aggregations), evaluate=EvalRule(every_rounds=10 ** 9, at_start=False),
                             learner=learner, on_update=lambda u: log.append((u.device, u.version, u.version_applied)))
        engine.run()
        applied = [x for x in log if x[2] >= 0]
        tau = np.array([at - started for _, started, at in applied], dtype=float)
        logged: dict[int, list] = {}  # per aggregation, (device, the weight its tau in the update log gives)
        for dev, started, at in applied:
            logged.setdefault(at, []).append((dev, 0.8 * 0.9 * float(staleness_weight(name, [at - started], a, b)[0]) / k))
        worst = 0.0 if len(logged) == len(learner.applied) else math.inf
        for v, (devices, weights, _) in enumerate(learner.applied):  # the weights the algorithm applied
            got, want = sorted(zip(devices.tolist(), weights.tolist())), sorted(logged.get(v, []))
            if [g[0] for g in got] != [w[0] for w in want]:
                worst = math.inf
                break
            worst = max(worst, max(abs(g[1] - w[1]) for g, w in zip(got, want)) / (0.72 / k))
        stale = float(np.mean(tau > 0))
        checks.append(Check(f"{name} s(tau): every applied weight against 0.8 x 0.9 x s(tau) / {k}, tau from the "
                            f"update log ({stale:.0%} of the updates stale, tau up to {int(tau.max())})", worst, 0.0,
                            0.0, tau.size, "updates"))
        versions = [learner.torch.zeros(d, dtype=learner.torch.float64)]
        by_version: dict[int, list] = {}
        for device, started, at in applied:
            by_version.setdefault(at, []).append((device, started))
        for v in range(len(by_version)):
            step = sum(0.72 / k * float(staleness_weight(name, [v - s], a, b)[0])
                       * (learner.descend(versions[s], dev) - versions[s]) for dev, s in by_version[v])
            versions.append(versions[v] + step)
        checks.append(Check(f"{name} s(tau): the model after {len(by_version)} aggregations against the replay by "
                            "hand (largest relative difference)",
                            float((learner.x - versions[-1]).abs().max() / versions[-1].abs().max()), 0.0, 0.0,
                            len(by_version), "aggregations"))
    return Result("fedbuff_weights", checks)


def case_unbiased(scale: float = 1.0) -> Result:
    """The 1 / (N q_n)-weighted aggregate under the Lyapunov scheduler (m draws with replacement from
    its omega, q_n = 1 - (1 - omega_n)^m, each distinct device once) is unbiased for full
    participation's mean (1/N) sum_n delta_n: a Monte Carlo over the draws of the scheduler's own
    decisions at several rounds (docs/papers/lyapunov.md, "Sampling with replacement")."""
    from wirelessfl.learning import FedAvg
    from wirelessfl.scheduling.base import RoundState, draw_devices
    from wirelessfl.scheduling.schedulers import LyapunovScheduler

    n, m, d = 10, 3, 3
    rng = np.random.default_rng(60)
    sigmas = np.linspace(0.1, 3.0, n)
    deltas = rng.normal(size=(n, d)) + np.arange(n)[:, None]  # devices differ systematically
    full = deltas.mean(axis=0)
    sched = LyapunovScheduler(n, m, V=100.0, lam=100.0, p_bar=1.0, p_max=10 ** 3.5)
    keep = {0, 10, 100, 499}
    decisions, never = {}, 0
    for t in range(500):
        dec = sched.decide(RoundState(round=t, gains=rng.exponential(2 * sigmas ** 2), model_bits=320_000,
                                      bandwidth_hz=1e6, noise_power=1.0))
        never += int(np.count_nonzero(dec.omega <= 0))
        if t in keep:
            decisions[t] = dec
    draws = max(int(40_000 * scale), 2000)
    algo = FedAvg()
    # a device the scheduler gives omega = 0 is never drawn, and the aggregate is then biased against it
    checks = [Check("devices with omega = 0 in any of the 500 rounds (unbiasedness needs q > 0)", never, 0, 0.0,
                    500 * n, "device-rounds")]
    for t, dec in decisions.items():
        draw_rng = np.random.default_rng(t)
        est = np.empty((draws, d))
        for i in range(draws):
            sel = draw_devices(dec.omega, dec.m, draw_rng)
            est[i] = algo.aggregation_weights(sel, dec.q, n) @ deltas[sel]
        for j in range(d):
            mj, se = mean_se(est[:, j])
            checks.append(Check(f"round {t} (q from {dec.q.min():.3f} to {dec.q.max():.3f}): coordinate {j} of the "
                                "mean aggregate", mj, float(full[j]), se, draws, "draws"))
    return Result("unbiased", checks)


# ---------------------------------------------------------------------------------------------
# the cases, the page's tables and the figures


CASES: dict[str, Callable[[float], Result]] = {
    "queue": case_queue,
    "shared_band": case_shared_band,
    "semi_sync": case_semi_sync,
    "sync_round": case_sync_round,
    "rayleigh_outage": case_rayleigh_outage,
    "fading_moments": case_fading_moments,
    "path_loss": case_path_loss,
    "jakes": case_jakes,
    "arq": case_arq,
    "fading_upload": case_fading_upload,
    "aircomp": case_aircomp,
    "mobility": case_mobility,
    "fedavg": case_fedavg,
    "fedbuff_weights": case_fedbuff_weights,
    "unbiased": case_unbiased,
}
"""Every case by name, in the page's order."""


def _num(x: float) -> str:
    if abs(x) < 1e-14:  # zero, or a formula's rounding of it
        return "0"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3e}" if abs(x) < 1e-3 or abs(x) >= 1e6 else f"{x:.5g}"


def table(result: Result) -> str:
    """The case's checks as the page's Markdown table."""
    if result.case == "queue":
        return queue_table(result)
    lines = ["| quantity | exact | measured | standard error | z | sample |", "|---|---|---|---|---|---|"]
    for c in result.checks:
        se = _num(c.se) if c.se > 0 else "none (deterministic)"
        z = f"{c.z:+.2f}" if c.se > 0 else "-"
        flag = "" if c.agrees() else " **DISAGREES**"
        lines.append(f"| {c.what} | {_num(c.exact)} | {_num(c.measured)}{flag} | {se} | {z} | {c.n:,} {c.unit} |")
    return "\n".join(lines)


def queue_table(result: Result) -> str:
    """The queue's checks, one row per setting: each quantity as exact / measured ± standard error."""
    lines = ["| queue | C | load | throughput (uploads/s): exact / measured ± SE | wait (s) | utilisation | "
             "uploads |", "|---|---|---|---|---|---|---|"]
    rows: dict = {}
    for c in result.checks:
        model, rest = c.what.split(", ", 1)
        setting = rest.split(":")[0]
        rows.setdefault((model, setting), []).append(c)
    for (model, setting), checks in rows.items():
        cells = []
        for c in checks:
            flag = "" if c.agrees() else " **DISAGREES**"
            cells.append(f"{_num(c.exact)} / {_num(c.measured)} ± {_num(c.se)}{flag}" if c.se > 0
                         else f"{_num(c.exact)} / {_num(c.measured)}{flag}")
        c_val, load = setting.split(", load ")
        lines.append(f"| {model} | {c_val.split('= ')[1]} | {load} | {' | '.join(cells)} | {checks[0].n:,} |")
    return "\n".join(lines)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    from wirelessfl.files import write_figure

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_figure(fig, path, dpi=110, metadata={"Software": None})
    _plt().close(fig)
    return path


def figure_queue(result: Result, folder: Path) -> Path:
    """Throughput and mean wait against the offered load, exact curves and measured points."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    colours = {1: "tab:blue", 4: "tab:orange", 16: "tab:green"}
    for (model, c), (loads, values) in result.curves.items():
        style = "-" if model == "M/D/1//C" else "--"
        for ax, col in zip(axes, (0, 1)):
            ax.plot(loads, values[:, col], style, color=colours[c], lw=1.2,
                    label=f"{model}, C = {c}" if col == 0 else None)
    for check in result.checks:
        model, rest = check.what.split(", ", 1)
        c = int(rest.split(",")[0].split("=")[1])
        load = float(rest.split("load ")[1].split(":")[0])
        col = 0 if "throughput" in check.what else 1 if "wait" in check.what else None
        if col is None:
            continue
        axes[col].errorbar(load, check.measured, yerr=K_SE * check.se, fmt="o" if model == "M/D/1//C" else "s",
                           mfc="none", color=colours[c], ms=5, capsize=2)
    axes[0].set(xlabel="offered load C E[S] / E[computation]", ylabel="uploads per second (E[S] = 1 s)",
                title="throughput")
    axes[1].set(xlabel="offered load C E[S] / E[computation]", ylabel="mean wait for the band (s)",
                title="wait for the uplink")
    axes[0].legend(fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle("FedBuff on one TDMA uplink = the finite-source queue (lines: exact; points: simulated, ± 4 SE)",
                 fontsize=10)
    return _save(fig, folder / "queue.png")


def figure_semi_sync(result: Result, folder: Path) -> Path:
    """The round length's distribution against the k-th order statistic's."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    m, mean = result.curves["m"], result.curves["mean"]
    for k, lengths in result.curves["lengths"].items():
        t = np.linspace(0, float(np.quantile(lengths, 0.999)), 300)
        line, = ax.plot(t, order_statistic_cdf(t, k, m, mean), lw=1.2, label=f"first {k} of {m}: exact")
        ax.step(lengths, np.arange(1, lengths.size + 1) / lengths.size, where="post", color=line.get_color(),
                lw=2.5, alpha=0.35, label="simulated")
    ax.set(xlabel="round length - airtime (s)", ylabel="P(round length - airtime <= t)",
           title="semi_sync: the round ends at the k-th order statistic of Exp(1) computations")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return _save(fig, folder / "semi_sync.png")


def figure_jakes(result: Result, folder: Path) -> Path:
    """|h|^2's autocorrelation against the lag: Gauss-Markov blocks (simulated, and rho^2k) and Jakes."""
    from scipy.special import j0

    plt = _plt()
    fig, axes = plt.subplots(1, len(result.curves), figsize=(12, 3.6), sharey=True)
    for ax, (label, c) in zip(axes, result.curves.items()):
        tau = np.linspace(0, 5.5 * c["tc"], 400)
        ax.plot(tau * 1e3, j0(2 * math.pi * c["f_d"] * tau) ** 2, color="black", lw=1.2,
                label="Jakes: J0(2 pi f_D tau)^2")
        lags = np.arange(0, 6)
        ax.plot(lags * c["tc"] * 1e3, c["rho"] ** (2 * lags), "--", color="tab:blue", lw=1,
                label="Gauss-Markov: rho^(2k)")
        ax.errorbar(c["lags"] * c["tc"] * 1e3, c["measured"][:, 0], yerr=K_SE * c["measured"][:, 1], fmt="o",
                    color="tab:blue", ms=4, capsize=2, label="simulated blocks")
        ax.set(xlabel="lag tau (ms)", title=label)
        ax.title.set_fontsize(8)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("correlation of |h|^2")
    axes[0].legend(fontsize=7)
    fig.suptitle("Fading within an upload: equal to Jakes at one coherence time, geometric beyond", fontsize=10)
    return _save(fig, folder / "jakes.png")


def figure_mobility(result: Result, folder: Path) -> Path:
    """Distance and path loss over time of devices at constant velocity: closed form and simulated."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
    t = result.curves["t"]
    window = t <= 120.0
    t = t[window]
    for i in (0, 1, 2):
        got, exact, pl_db = (x[window] for x in result.curves["devices"][i])
        line, = axes[0].plot(t, exact, lw=1, label=f"device {i}: billiard closed form")
        every = max(t.size // 80, 1)
        axes[0].plot(t[::every], got[::every], "o", ms=3, mfc="none", color=line.get_color())
        axes[1].plot(t, pl_db, lw=1, color=line.get_color())
    axes[0].set(xlabel="time (s)", ylabel="distance to the base station (m)")
    axes[1].set(xlabel="time (s)", ylabel="large-scale gain (dB): -20 - 30 log10 d")
    axes[0].legend(fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle("Constant velocity in a 100 m cell at 7 m/s: reflections off the edge", fontsize=10)
    return _save(fig, folder / "mobility.png")


FIGURES: dict[str, Callable[[Result, Path], Path]] = {
    "queue": figure_queue, "semi_sync": figure_semi_sync, "jakes": figure_jakes, "mobility": figure_mobility,
}
"""The cases whose curve says more than their numbers."""


def figures_folder(scale: float) -> Path:
    """Where the figures go unless --figures says: the committed folder only at the page's size (the
    figures there are the page's), a folder of runs/ in the working folder at any other scale."""
    if scale == 1.0:
        return HERE.parent / "figures" / "validation"
    return Path("runs") / f"validation-scale-{scale:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"cases to run (default: all): {', '.join(CASES)}")
    parser.add_argument("--scale", type=float, default=1.0, help="sample sizes x this (1: the page's)")
    parser.add_argument("--figures", type=Path,
                        help="where the figures go (default figures/validation at the page's size, scale 1; "
                        "runs/validation-scale-S at another --scale, so the committed figures stay the page's)")
    parser.add_argument("--no-figures", action="store_true")
    args = parser.parse_args(argv)
    unknown = [name for name in args.cases if name not in CASES]
    if unknown:
        parser.error(f"unknown case {', '.join(unknown)}; choose from {', '.join(CASES)}")
    names = args.cases or list(CASES)
    figures = args.figures if args.figures is not None else figures_folder(args.scale)
    bad = 0
    for name in names:
        started = time.perf_counter()
        result = CASES[name](args.scale)
        result.wall_s = time.perf_counter() - started
        print(f"\n### {name} ({result.wall_s:.1f} s)\n")
        print(table(result))
        bad += sum(not c.agrees() for c in result.checks)
        if name in FIGURES and not args.no_figures:
            print(f"\n{FIGURES[name](result, figures)}")
        sys.stdout.flush()
    print(f"\n{'every check agrees' if not bad else f'{bad} checks DISAGREE'} (within {K_SE:g} standard errors, "
          f"or {ROUNDING:g} relative for exact replays)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
