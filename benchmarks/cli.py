"""Start-up of the command line: wall time of the answers that need no simulation (help, a one-line
config error, the recipe list), against a bare ``python -c pass`` measured in the same run; then a
training run's start-up to its first round, and which of torch's compiler and distributed modules
that run imported beyond ``import torch`` (a run imports only what it uses).

Target: every answer within 1 s (torch is imported only where training starts).

    python benchmarks/cli.py [--repeat 5] [--device cuda]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def wall(cmd: list[str], repeat: int) -> float:
    """Fastest of ``repeat`` runs (the others are disturbed by the machine, not by the command)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="run.device of the training run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "bad.toml"
        bad.write_text("[run]\nrounds = 3\n[scheduler]\nm = -1\n")
        cli = [sys.executable, "-m", "wirelessfl.cli"]
        cases = {
            "python -c pass (baseline)": [sys.executable, "-c", "pass"],
            "wirelessfl --help": [*cli, "--help"],
            "wirelessfl run --help": [*cli, "run", "--help"],
            "wirelessfl run BAD (config error)": [*cli, "run", str(bad)],
            "wirelessfl sweep BAD (config error)": [*cli, "sweep", str(bad)],
            "wirelessfl reproduce --list": [*cli, "reproduce", "--list"],
        }
        times = {name: wall(cmd, args.repeat) for name, cmd in cases.items()}
    base = times["python -c pass (baseline)"]
    print(f"{'command':40s} {'wall (s)':>9s} {'minus python':>13s}")
    for name, t in times.items():
        flag = "" if t <= 1.0 else "  (over the 1 s target)"
        print(f"{name:40s} {t:9.3f} {t - base:13.3f}{flag}")
    first_round(args.device)


# a run of one round of the async scenario's sync variant (10 devices train), then what it imported
FIRST_ROUND = """
import sys, time
start = time.perf_counter()
import torch
before = set(sys.modules)
from wirelessfl.cli import main
try:
    main(["run", "scenarios/async.toml", "--variant", "sync", "--set", "run.rounds=1", "--set", "run.device=%s",
          "--out", sys.argv[1], "--no-progress"])
except SystemExit:
    pass
wall = time.perf_counter() - start
new = set(sys.modules) - before
counts = {p: sum(m == p or m.startswith(p + ".") for m in new) for p in %r}
print(f"{wall:.2f}", *(f"{p}={n}" for p, n in counts.items()))
"""
WATCHED = ("torch._dynamo", "torch._inductor", "torch.distributed", "triton", "sympy")


def first_round(device: str) -> None:
    """Launch to the end of a one-round training run, and the modules it imported beyond torch's own."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-c", FIRST_ROUND % (device, WATCHED), tmp], cwd=repo,
                              capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        print(f"the one-round run failed: {done.stderr.strip()[-500:]}")
        return
    wall, *counts = done.stdout.strip().splitlines()[-1].split()
    print(f"{'wirelessfl run async.toml, 1 round (' + device + ')':40s} {float(wall):9.3f}   "
          f"modules imported after torch: {', '.join(counts)}")


if __name__ == "__main__":
    main()
