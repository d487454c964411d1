"""Start-up of the command line: wall time of the answers that need no simulation (help, a one-line
config error, the recipe list), against a bare ``python -c pass`` measured in the same run.

Target: every answer within 1 s (torch is imported only where training starts).

    python benchmarks/cli.py [--repeat 5]
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


if __name__ == "__main__":
    main()
