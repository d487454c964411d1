"""Time one LyapunovScheduler.decide() per round, exact vs manifold selection solver.

Paper setting (docs/papers/lyapunov.md, "The experiments"): B = 22 MHz, N0 = 1, Pmax = 35 dB,
Pbar = 1, V = 100, lam = 100, m = 10, l = 32 x 555,178 bits, Rayleigh fading with sigma linear from
0.1 to 10 across devices.
Both schedulers see the same gains and the same queues every round (the manifold one is handed
the exact one's queues), so they solve identical problems. Prints median times per round, the
manifold/exact ratios measured in this run (for decide() and for the selection solve alone), the
power allocation alone (part of both decide() times), how far the manifold objective is above
the exact one (relative; <= 0 means no worse), and the exact solver's routes over the rounds
(bracket: the monotone bracket of the concave branch; no-concave: the bracket proved the concave
branch empty, Newton on the convex one; scan: the grid scan; convex: mu <= 0).

    python benchmarks/solver.py [--sizes 100 1000 10000 100000] [--seed 0]
"""
from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np

from wirelessfl.scheduling import LyapunovScheduler, RoundState, optimal_power, solve_selection

PAPER = dict(m=10, V=100.0, lam=100.0, p_bar=1.0, p_max=10 ** 3.5)
LINK = dict(model_bits=32 * 555178, bandwidth_hz=22e6, noise_power=1.0)
MANIFOLD_MAX_N = 1000  # beyond this a pymanopt run per round takes seconds


def rounds_for(n: int, solver: str) -> int:
    if solver == "manifold":
        return 10 if n <= 100 else 3
    return 60 if n <= 1000 else (20 if n <= 10_000 else 5)


def bench(n: int, seed: int, with_manifold: bool):
    """Median seconds of decide() and of the selection solve alone, per solver, over the rounds."""
    rng = np.random.default_rng([seed, n])
    sigma = np.linspace(0.1, 10.0, n)
    exact = LyapunovScheduler(n, PAPER["m"], PAPER["V"], PAPER["lam"], PAPER["p_bar"], PAPER["p_max"])
    manifold = LyapunovScheduler(n, PAPER["m"], PAPER["V"], PAPER["lam"], PAPER["p_bar"],
                                 PAPER["p_max"], solver="manifold")
    times = {"decide exact": [], "decide manifold": [], "solve exact": [], "solve manifold": [],
             "power": []}
    gaps = []
    routes = Counter()
    a = PAPER["V"] / n

    def timed(key, fn):
        t0 = time.perf_counter()
        out = fn()
        times[key].append(time.perf_counter() - t0)
        return out

    for r in range(rounds_for(n, "exact")):
        gains = np.maximum((sigma * rng.rayleigh(1.0, n)) ** 2, 1e-3)
        state = RoundState(round=r, gains=gains, **LINK)
        queue = exact.queue.copy()
        power = timed("power", lambda: optimal_power(gains, queue, V=PAPER["V"], lam=PAPER["lam"],
                                                    p_max=PAPER["p_max"], **LINK))
        _, b = exact.costs(state, queue)
        d_exact = timed("decide exact", lambda: exact.decide(state))
        routes[route_label(d_exact.info["certificate"]["route"])] += 1
        timed("solve exact", lambda: solve_selection(a, b, PAPER["m"], method="exact"))
        if with_manifold and r < rounds_for(n, "manifold"):
            manifold.queue = queue
            d_manifold = timed("decide manifold", lambda: manifold.decide(state))
            timed("solve manifold", lambda: solve_selection(a, b, PAPER["m"], method="manifold"))
            f_e, f_m = d_exact.info["objective"], d_manifold.info["objective"]
            gaps.append((f_m - f_e) / f_e)
    medians = {k: (float(np.median(v)) if v else None) for k, v in times.items()}
    return medians, gaps, ", ".join(f"{k} {v}" for k, v in routes.most_common())


def route_label(route: str) -> str:
    """A short name for the exact solver's route (the certificate's "route")."""
    for prefix, label in (("monotone bracket of", "bracket"), ("monotone bracket:", "no-concave"),
                          ("scan", "scan"), ("convex", "convex"), ("m = 1", "m=1")):
        if route.startswith(prefix):
            return label
    return route


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10_000, 100_000])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"Median milliseconds per round (m={PAPER['m']}, V={PAPER['V']:g}, lam={PAPER['lam']:g}); "
          "'solve' = solve_selection alone on that round's costs b")
    head = (f"{'N':>7} {'decide exact':>13} {'decide manif.':>14} {'ratio':>6} "
            f"{'solve exact':>12} {'solve manif.':>13} {'ratio':>6} {'power':>7} {'manifold gap':>13}  routes")
    print(head)
    for n in args.sizes:
        t, gaps, routes = bench(n, args.seed, with_manifold=n <= MANIFOLD_MAX_N)
        de, se, pw = t["decide exact"] * 1e3, t["solve exact"] * 1e3, t["power"] * 1e3
        if t["decide manifold"] is None:
            print(f"{n:>7} {de:>13.3f} {'skipped':>14} {'':>6} {se:>12.3f} {'skipped':>13} {'':>6} {pw:>7.3f} "
                  f"{'(N > ' + str(MANIFOLD_MAX_N) + ')':>13}  {routes}")
            continue
        dm, sm = t["decide manifold"] * 1e3, t["solve manifold"] * 1e3
        print(f"{n:>7} {de:>13.3f} {dm:>14.1f} {dm / de:>5.0f}x {se:>12.3f} {sm:>13.1f} {sm / se:>5.0f}x {pw:>7.3f} "
              f"{max(gaps):>13.1e}  {routes}")


if __name__ == "__main__":
    main()
