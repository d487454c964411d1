"""How long the orbital layer takes for a week of a 100-satellite constellation and 3 ground stations
(the satellites issue's budget: such a timing-only run within a minute on 2 cores).

    python benchmarks/orbits.py          # the extra [orbits] installed

Prints the seconds of each step (propagation onto a 30 s grid, then the contact windows), the best of
three runs in this process, and the passes found; then the seconds of a whole timing-only run of that
week through the engine (``simulate``: a scenario's [orbits], FedBuff with 20 satellites in flight,
no folder, so no figures), the satellites issue's budget.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone

from wirelessfl.orbits import Ephemeris, find_passes, walker

EPOCH = datetime(2024, 6, 1, tzinfo=timezone.utc)
STATIONS = ["hawaii", "singapore", "hartebeesthoek"]


def main() -> None:
    best = None
    for _ in range(3):
        start = time.perf_counter()
        eph = Ephemeris(walker(550.0, 53.0, 10, 10, 1, epoch=EPOCH), 7 * 86400.0, 30.0)
        propagated = time.perf_counter()
        rows = find_passes(eph, STATIONS, 10.0)
        done = time.perf_counter()
        run = (propagated - start, done - propagated, len(rows))
        best = run if best is None or sum(run[:2]) < sum(best[:2]) else best
    prop, passes, count = best
    print(f"a week, 100 satellites (Walker 10 x 10 at 550 km, 53 deg), {len(STATIONS)} stations, 30 s grid: "
          f"propagation {prop:.2f} s, passes {passes:.2f} s, {prop + passes:.2f} s in all ({count} passes; best of 3)")


WEEK = {
    "name": "week", "seed": 0,
    "run": {"time_budget_s": 7 * 86400.0, "timing_only": True},
    "scheduler": {"name": "uniform", "m": 10},
    "protocol": {"name": "fedbuff", "options": {"concurrency": 20, "buffer": 10}},
    "learning": {"dataset": "synthetic", "model": "logreg"},
    "orbits": {"planes": 10, "per_plane": 10, "phasing": 1, "ground_stations": STATIONS},
}


def week_run() -> None:
    """A timing-only week of FedBuff over the 100 satellites and 3 stations, through the engine."""
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate

    start = time.perf_counter()
    result = simulate(from_dict(WEEK), None, progress=False)
    took = time.perf_counter() - start
    print(f"timing-only run of that week (FedBuff, 20 in flight, every 10 updates): {took:.2f} s, "
          f"{len(result.rounds)} aggregations, {len(result.updates)} uploads")


if __name__ == "__main__":
    main()
    week_run()
