"""The ``wirelessfl`` command: argument parsing only; the work is in wirelessfl.experiments."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from .config import ConfigError, load_scenario


def _fmt_summary(name: str, s: dict) -> str:
    parts = [f"{name}: {s['rounds']} rounds", f"{s['sim_time_s']:.1f} s simulated"]
    if not math.isnan(s.get("final_accuracy", math.nan)):
        parts.append(f"accuracy {s['final_accuracy']:.3f}")
    if s.get("target_accuracy"):
        t = s["time_to_target_s"]
        parts.append(f"time to {s['target_accuracy']:g}: " + ("not reached" if math.isnan(t) else f"{t:.1f} s"))
    parts.append(f"{s['mean_distinct_per_round']:.2f} devices/round")
    parts.append(f"wall {s['wall_time_s']:.1f} s")
    return ", ".join(parts)


def cmd_run(args) -> int:
    from .experiments.plots import plot_runs
    from .experiments.run import run_variants

    overrides = list(args.set)
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    scenario = load_scenario(args.scenario, overrides)
    out = Path(args.out) if args.out else Path("runs") / scenario.name
    results = run_variants(scenario, out, progress=not args.no_progress,
                           timing_only=True if args.timing_only else None)
    for name, res in results.items():
        print(_fmt_summary(name, res.summary))
    if not args.timing_only and not scenario.run.timing_only:
        for path in plot_runs(results, out, title=scenario.name):
            print(f"wrote {path}")
    print(f"results in {out}")
    return 0


def cmd_plot(args) -> int:
    from .experiments.plots import find_runs, plot_runs

    runs = find_runs(args.runs)
    out = Path(args.out) if args.out else Path(args.runs[0])
    for path in plot_runs(runs, out, x=args.x):
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wirelessfl", description="Federated learning over wireless networks: "
                                     "simulate, sweep and plot accuracy against wall-clock time.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a scenario file (every variant in it)")
    p.add_argument("scenario", help="TOML scenario file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field, e.g. --set scheduler.V=1000 (repeatable)")
    p.add_argument("--out", help="run directory (default runs/NAME)")
    p.add_argument("--seed", type=int, help="root seed (overrides the file)")
    p.add_argument("--timing-only", action="store_true", help="simulate timing and scheduling without training")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("plot", help="plot accuracy and training loss of runs against wall-clock time")
    p.add_argument("runs", nargs="+", help="run directories, or folders of run directories")
    p.add_argument("--x", choices=("time", "round"), default="time", help="x axis (default: time)")
    p.add_argument("--out", help="folder for the PNGs (default: the first run folder)")
    p.set_defaults(func=cmd_plot)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``wirelessfl`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:  # missing dataset or run folder: the message says where we looked
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("wirelessfl: interrupted; records written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
