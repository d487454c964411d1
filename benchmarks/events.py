"""The event core's speed, as ratios measured in one run.

1. fedbuff, timing only, records on (a run folder): N = 10,000 devices, concurrency 1,000, K = 1, 5
   and 100, and N = 200, concurrency 20, K = 1, each against the same model hand-written on a bare
   SimPy loop with the same K (the same processes, resource, event count and random draws; see
   ``bare_simpy``). Goal: within 2x of the bare loop in every case: the median ratio of ``--pairs``
   runs back to back. Memory: the peak resident memory
   of the K = 100 run, in a process of its own, at a tenth of the uploads and at all of them (flat:
   the same peak).
2. sync, timing only, N = 100, m = 10, Lyapunov: a round's CPU time against the channel draw and
   scheduling decision inside it (goal <= 2x). With ``--baseline DIR`` (a checkout of an earlier
   commit) the same rounds are timed with that code too, back to back, for the ratio against it.
3. Training: CPU time per trained device under sync (m = 10) against per update under fedbuff
   (concurrency 10, K = 10), the same MLP on Fashion-MNIST, no evaluation (goal <= 1.1x).
4. Checkpoints: a timing-only fedbuff run (N = 200, concurrency 20, K = 1) checkpointing every
   1,000 aggregations; the size and time of its checkpoint at a hundredth of the uploads and at the
   end (goal: within 1.2x: a checkpoint holds state, not history).
5. Figures: the seconds to draw each figure the CLI draws for that run (goal: under 1 s each).

    python benchmarks/events.py [--uploads 1000000] [--pairs 3] [--rounds 5000] [--baseline ../old-checkout]
                                [--skip-fedbuff] [--skip-sync] [--skip-training] [--skip-checkpoints]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- 1. fedbuff against a bare SimPy loop ---------------------------------------------------------


def bare_simpy(devices: int, concurrency: int, k: int, uploads: int, airtime_s: float, seed: int = 0) -> int:
    """The same model hand-written on bare SimPy: the same processes (one per device in flight:
    computation, then a one-transmitter resource, then a Store the server reads), the same resource,
    the same number of events and the same draws (a device picked uniformly, its computation time,
    its gain when its upload starts, all from numpy Generators), and nothing else: no records, no
    protocol or scheduler objects, no checkpointable state. Returns the number of uploads."""
    import math

    import simpy

    env = simpy.Environment()
    band = simpy.Resource(env, capacity=1)
    store = simpy.Store(env)
    pick, compute, channel = (np.random.default_rng(seed + i) for i in range(3))
    busy = np.zeros(devices, dtype=bool)
    state = {"uploads": 0, "buffer": 0, "version": 0}

    def device(n):
        yield env.timeout(float(compute.exponential(1.0, 1)[0]))   # computation
        with band.request() as slot:                                 # the uplink
            yield slot
            gain = max(channel.standard_exponential() * 2e-12, 1e-3)  # its gain: at the floor, as the scenario's
            yield env.timeout(airtime_s if gain > 0 else math.inf)
        busy[n] = False
        yield store.put(n)

    def start():
        while True:
            n = int(pick.random() * devices)
            if not busy[n]:
                busy[n] = True
                env.process(device(n))
                return

    def server():
        while state["uploads"] < uploads:
            yield store.get()
            state["uploads"] += 1
            state["buffer"] += 1
            if state["buffer"] == k:
                state["buffer"], state["version"] = 0, state["version"] + 1
            start()

    for _ in range(concurrency):
        start()
    env.run(until=env.process(server()))
    return state["uploads"]


MODEL_BITS = 69
"""With every gain at the floor 1e-3 and uniform dispatch's power min(Pmax, Pbar N / K) = 100, an
upload takes 69 / (1e6 log2(1.1)) = 0.5 ms: the uplink is busy about half the time."""


def airtime_s(devices: int, k: int) -> float:
    """The engine's airtime of every upload in the fedbuff scenario below."""
    import math

    power = min(10 ** 3.5, 1.0 * devices / k)
    return MODEL_BITS / (1e6 * math.log2(1 + 1e-3 * power))


def fedbuff_scenario(devices: int, concurrency: int, k: int, uploads: int):
    from wirelessfl.config import from_dict

    return from_dict({"seed": 0, "run": {"rounds": uploads // k, "timing_only": True},
                      "devices": {"count": devices, "compute": "shifted_exponential", "delay_mean_s": 1.0},
                      "channel": {"sigma": 1e-6, "gain_floor": 1e-3},  # one gain: one airtime, as the bare loop
                      "link": {"model_bits": MODEL_BITS, "bandwidth_hz": 1e6},
                      "protocol": {"name": "fedbuff", "concurrency": concurrency, "buffer": k},
                      "scheduler": {"name": "uniform"}})


CASES = ((10000, 1000, 1), (10000, 1000, 5), (10000, 1000, 100), (200, 20, 1))
"""(devices, concurrency, K) of section 1."""


def child(kind: str, uploads: int, devices: int, concurrency: int, k: int) -> None:
    """One measurement in this process: prints the run's CPU seconds (imports before the clock
    starts, on both sides: start-up is benchmarks/cli.py's), uploads and peak memory."""
    import tempfile

    if kind == "bare":
        import simpy  # noqa: F401  (what bare_simpy imports)

        start = time.process_time()
        done = bare_simpy(devices, concurrency, k, uploads, airtime_s=airtime_s(devices, k))
    else:
        from wirelessfl.experiments.run import simulate

        scenario = fedbuff_scenario(devices, concurrency, k, uploads)
        with tempfile.TemporaryDirectory() as tmp:
            start = time.process_time()
            res = simulate(scenario, Path(tmp) / "run", progress=False)
            done = res.summary["uploads"]
    print(f"{time.process_time() - start:.3f} {done} {peak_rss_mb():.0f}")


def run_child(kind: str, uploads: int, case=CASES[2]) -> tuple[float, int, float]:
    out = subprocess.run([sys.executable, __file__, "--child", kind, str(uploads), *map(str, case)],
                         capture_output=True, text=True, check=True)
    cpu, done, peak = out.stdout.split()
    return float(cpu), int(done), float(peak)


def fedbuff_against_bare(uploads: int, pairs: int) -> None:
    print(f"1. fedbuff, timing only, records on, {uploads:,} uploads each (CPU s of the run; each in its own "
          f"process; {pairs} pairs back to back, bare then engine: the median of the pairs' ratios, since this "
          "machine's speed drifts from one minute to the next):")
    for case in CASES:
        devices, concurrency, k = case
        ratios, bare, engine = [], [], []
        for _ in range(pairs):
            b, _, _ = run_child("bare", uploads, case)
            e, done, peak = run_child("engine", uploads, case)
            ratios.append(e / b)
            bare.append(b)
            engine.append((e, done, peak))
        done = engine[0][1]
        print(f"   N = {devices:,}, concurrency {concurrency:,}, K = {k}: bare {min(bare) / done * 1e6:5.1f} us/upload, "
              f"engine {min(e for e, _, _ in engine) / done * 1e6:5.1f} us/upload (fastest of each); "
              f"{float(np.median(ratios)):.2f}x (pairs {', '.join(f'{r:.2f}' for r in ratios)}; goal <= 2)")
        if case == CASES[2]:
            small = run_child("engine", uploads // 10, case)
            big = max(p for _, _, p in engine)
            print(f"      peak memory at {uploads // 10:,} uploads {small[2]:.0f} MB, at {uploads:,} {big:.0f} MB "
                  "(rows stream to the run folder; the processes are the ones in flight)")


# --- 2. sync rounds against their decisions -------------------------------------------------------


SYNC_CODE = r"""
import sys, tempfile, pathlib
sys.path.insert(0, "benchmarks")
from scale import decisions_alone, whole_run   # the same measurements as benchmarks/scale.py
rounds = int(sys.argv[1])
whole_run(50); d, w, f = [], [], []
with tempfile.TemporaryDirectory() as tmp:
    for i in range(3):
        d.append(decisions_alone(rounds)); w.append(whole_run(rounds)); f.append(whole_run(rounds, pathlib.Path(tmp) / str(i)))
print(min(d), min(w), min(f))
"""


def sync_rounds(rounds: int, baseline: str | None) -> None:
    print(f"2. sync, timing only, N = 100, m = 10, Lyapunov, {rounds} rounds (CPU s, min of 3):")
    setups = [("this checkout", None)] + ([("baseline " + baseline, baseline)] if baseline else [])
    times = {}
    for _ in range(2):  # back to back, twice: the machine's speed drifts
        for name, path in setups:
            env = dict(os.environ)
            if path is not None:
                env["PYTHONPATH"] = str(Path(path).resolve())
            out = subprocess.run([sys.executable, "-c", SYNC_CODE, str(rounds)], capture_output=True, text=True,
                                 check=True, env=env, cwd=path or Path(__file__).resolve().parents[1])
            new = tuple(map(float, out.stdout.split()))
            times[name] = tuple(min(a, b) for a, b in zip(times.get(name, (np.inf,) * 3), new))
    for name, (d, w, f) in times.items():
        print(f"   {name}: decisions alone {d / rounds * 1e3:.3f} ms/round; whole round {w / rounds * 1e3:.3f} ms "
              f"in memory ({w / d:.2f}x the decision; goal <= 2), {f / rounds * 1e3:.3f} ms with its records "
              f"written to a folder ({f / d:.2f}x)")
    if baseline:
        now, before = times["this checkout"], times["baseline " + baseline]
        print(f"   this checkout / baseline: {now[1] / before[1]:.3f}x in memory, {now[2] / before[2]:.3f}x to a "
              "folder (goal <= 1.05; the folder now also gets updates.csv, a row per selected device)")


# --- 3. training: per update against per trained device ---------------------------------------------


def training(rounds: int) -> None:
    import torch

    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate
    from wirelessfl.learning.learner import FederatedLearner

    torch.set_num_threads(1)
    spent = {"s": 0.0}

    def timed(method):
        def wrapper(*args, **kwargs):
            start = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                spent["s"] += time.process_time() - start
        return wrapper

    for name in ("train_round", "local_updates", "apply_updates"):  # the training side of both engines
        setattr(FederatedLearner, name, timed(getattr(FederatedLearner, name)))
    base = {"seed": 0, "run": {"eval_every_rounds": 100000, "eval_at_start": False, "record_devices": False},
            "devices": {"count": 100, "compute": "shifted_exponential"}, "channel": {"profile": "linear"},
            "scheduler": {"name": "uniform", "m": 10},
            "learning": {"model": "mlp", "eval_train_samples": 500, "lr": 0.05}}
    cases = {"sync (m = 10)": {"protocol": {"name": "sync"}, "run": {**base["run"], "rounds": rounds}},
             "fedbuff (C = 10, K = 10)": {"protocol": {"name": "fedbuff", "concurrency": 10, "buffer": 10},
                                          "run": {**base["run"], "rounds": rounds}}}
    per = {}
    print(f"3. training, MLP on Fashion-MNIST, {rounds} aggregations (CPU ms of training and aggregation per "
          "applied update; min of 2):")
    for _ in range(2):
        for name, over in cases.items():
            spent["s"] = 0.0
            res = simulate(from_dict({**base, **over}), progress=False)
            per[name] = min(per.get(name, np.inf), spent["s"] / res.summary["updates_applied"])
    for name, value in per.items():
        print(f"   {name}: {value * 1e3:.2f} ms")
    a, b = per.values()
    print(f"   fedbuff / sync: {b / a:.2f}x (goal <= 1.1; fedbuff also trains the devices in flight at the end, "
          "which are never applied)")


# --- 4. checkpoints: state, not history; 5. the figures of a long run ------------------------------


def checkpoints_and_figures(uploads: int) -> None:
    import tempfile

    from wirelessfl.experiments import plots
    from wirelessfl.experiments.run import simulate
    from wirelessfl.sim.run import runner

    sizes = []
    real = runner.save_checkpoint

    def measured(path, state):
        start = time.perf_counter()
        real(path, state)
        sizes.append((state["engine"]["rounds_done"], path.stat().st_size, time.perf_counter() - start))

    runner.save_checkpoint = measured
    scenario = fedbuff_scenario(200, 20, 1, uploads).replace("run.checkpoint_every=1000")
    print(f"4. checkpoints of a timing-only fedbuff run (N = 200, concurrency 20, K = 1, {uploads:,} uploads, "
          "one every 1,000 aggregations):")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        res = simulate(scenario, Path(tmp) / "run", progress=False)
        whole = time.perf_counter() - start
        runner.save_checkpoint = real
        early = next(s for s in sizes if s[0] >= uploads // 100)
        late = sizes[-1]
        print(f"   at {early[0]:,} aggregations: {early[1] / 1024:.1f} KB in {early[2] * 1e3:.1f} ms; at {late[0]:,}: "
              f"{late[1] / 1024:.1f} KB in {late[2] * 1e3:.1f} ms: {late[1] / early[1]:.2f}x the size (goal <= 1.2); "
              f"the whole run {whole:.1f} s with {len(sizes)} checkpoints")
        print(f"5. the figures of that run ({res.summary['uploads']:,} uploads), seconds each (goal < 1):")
        runs = {"run": res}
        out = Path(tmp) / "figures"
        for name, draw in (("timing.png", lambda: plots.plot_timing(runs, out)),
                           ("staleness.png", lambda: plots.plot_staleness(runs, out)),
                           ("gantt.png", lambda: plots.plot_gantt(runs, out))):
            start = time.perf_counter()
            draw()
            print(f"   {name}: {time.perf_counter() - start:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uploads", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=3, help="bare and engine runs of each case, back to back")
    ap.add_argument("--rounds", type=int, default=5000)
    ap.add_argument("--train-rounds", type=int, default=40)
    ap.add_argument("--baseline", help="a checkout of an earlier commit, for the sync ratio against it")
    ap.add_argument("--skip-fedbuff", action="store_true")
    ap.add_argument("--skip-sync", action="store_true")
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--skip-checkpoints", action="store_true")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], *map(int, args.child[1:]))
        return
    if not args.skip_fedbuff:
        fedbuff_against_bare(args.uploads, args.pairs)
    if not args.skip_sync:
        sync_rounds(args.rounds, args.baseline)
    if not args.skip_training:
        training(args.train_rounds)
    if not args.skip_checkpoints:
        checkpoints_and_figures(args.uploads)


if __name__ == "__main__":
    main()
