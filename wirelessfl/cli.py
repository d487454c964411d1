"""The ``wirelessfl`` command: argument parsing only; the work is in wirelessfl.experiments."""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from .config import ConfigError, load_scenario
from .files import DamagedFile, UnsafeOutput, check_folder, check_output_folder
from .experiments.summary_line import summary_line as _fmt_summary
from .sim.run.checkpoint import ResumeError
from .learning import DatasetError, TrainingDiverged


def _event_figures(runs: dict, out: Path, window=None, title=None) -> list[Path]:
    """staleness.png and gantt.png, when a run's protocol is event-driven (or when asked)."""
    from .experiments.plots import plot_gantt, plot_staleness

    paths = [plot_staleness(runs, out, title=title), plot_gantt(runs, out, window=window, title=title)]
    return [p for p in paths if p is not None]


def _finish(results: dict, out: Path, title: str) -> int:
    """Print each variant's summary, draw the figures, and name the failed variants; the exit code."""
    from .experiments.network_plots import plot_network, plot_tiers
    from .experiments.plots import plot_battery, plot_runs, plot_timing

    for name, res in results.items():
        print(_fmt_summary(name, res.summary))
    done = {name: res for name, res in results.items() if not res.rounds.empty}
    training = any(not res.evals.empty for res in done.values())
    paths = plot_runs(done, out, title=title) if training else [plot_timing(done, out, title=title)] if done else []
    paths.append(plot_battery(done, out, title=title))
    paths += [plot_network(done, out, title=title), plot_tiers(done, out, title=title)]
    if any(res.run_dir is not None and (res.run_dir / "passes.csv").exists() for res in done.values()):
        from .experiments.orbit_plots import plot_orbits

        paths.append(plot_orbits(done, out, title=title))
    if any(_event_driven(res.summary.get("protocol", "sync")) for res in done.values()):
        paths += _event_figures(done, out, title=title)
    for path in paths:
        if path is not None:
            print(f"wrote {path}")
    print(f"results in {out}")
    failed = [name for name, res in results.items() if res.summary.get("status") != "complete"]
    for name in failed:
        print(f"wirelessfl: {name} did not complete: {_failure(results[name])}", file=sys.stderr)
    return 1 if failed else 0


def _event_driven(protocol: str) -> bool:
    """Whether runs of the round protocol named ``protocol`` are on the event engine
    (``wirelessfl.sim.protocols.event_driven``); True for one that cannot be loaded here (an import
    path away from its folder: any protocol but sync's closed form)."""
    from .sim.protocols import PROTOCOLS, event_driven

    try:
        return event_driven(PROTOCOLS.load(protocol))
    except ValueError:  # PluginError
        return True


def _failure(result) -> str:
    """A failed run's one line: its error, and where its traceback is."""
    summary = result.summary
    log = summary.get("error_log")
    where = f" (traceback in {result.run_dir / log})" if log and result.run_dir is not None else ""
    return f"{summary.get('error')}{where}"


def cmd_run(args) -> int:
    if args.resume and args.scenario:
        raise ConfigError(f"run: give a SCENARIO file or --resume RUN_DIR, not both (--resume continues the run "
                          f"with the scenario.toml in {args.resume})")
    if args.resume:
        if args.variant:
            raise ConfigError("run --resume: finishes every variant in the folder; --variant goes with a SCENARIO")
        given = [flag for flag, on in (("--set", args.set), ("--seed", args.seed is not None),
                                       ("--threads", args.threads is not None), ("--timing-only", args.timing_only),
                                       ("--out", args.out is not None), ("--overwrite", args.overwrite)) if on]
        if given:  # the run goes on as it began: a changed scenario would not be the run that was cut
            raise ConfigError(f"run --resume: continues the run with the scenario.toml in {args.resume} as it was; "
                              f"{given[0]} goes with a SCENARIO (a new run: wirelessfl run SCENARIO {given[0]} ...)")
        return _resume(args)
    if not args.scenario:
        raise ConfigError("run: give a SCENARIO file, or --resume RUN_DIR")
    if Path(args.scenario).is_dir():
        hint = (f"; continue the run in it with: wirelessfl run --resume {args.scenario}"
                if any(Path(args.scenario).glob("**/scenario.toml")) else "")
        raise ConfigError(f"run: {args.scenario} is a folder, not a scenario file{hint}")
    overrides = list(args.set)
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    if args.threads is not None:
        overrides.append(f"run.threads={args.threads}")
    from .experiments.run import run_variants
    from .experiments.scenario_input import load_kept, merged_variants

    scenario = load_kept(args.scenario, overrides, args.variant)
    for first, second in merged_variants(args.scenario, args.set, scenario):
        print(f"wirelessfl: warning: --set {' --set '.join(args.set)} makes the variants {first} and {second} one "
              "run (they now differ only in their names): both will give the same records", file=sys.stderr)

    timing = args.timing_only or all(m.run.timing_only for _, m in scenario.variant_scenarios())
    out = Path(args.out) if args.out else Path("runs") / (scenario.name + ("-timing" if timing else ""))
    if (out / "sweep.json").exists():
        raise ConfigError(f"run: {out} holds a sweep; a scenario's runs go to a folder of their own (--out)")
    results = run_variants(scenario, out, progress=not args.no_progress, timing_only=True if args.timing_only else None,
                           overwrite=args.overwrite, notice=print, variants=args.variant)
    return _finish(results, out, scenario.name)


def _resume(args) -> int:
    from .experiments.run import CHECKPOINT_NAME, load_run, resume_recorded, resume_variants

    root = Path(args.resume)
    sweep_dir = next((d for d in (root, root.parent) if (d / "sweep.json").exists() and (d == root or root.name in (
        "runs", "failed"))), None)  # the sweep's folder, or its runs/ or failed/
    if sweep_dir is not None:
        raise ConfigError(f"run --resume {root}: {sweep_dir} is a sweep's folder, not a run's; a sweep continues "
                          f"where it stopped when run again: wirelessfl sweep SCENARIO --out {sweep_dir}")
    if (root / "index.json").exists():  # a scenario's folder: finish every variant
        results = resume_variants(root, progress=not args.no_progress, notice=print)
        return _finish(results, root, root.name)
    if (root / "scenario.toml").exists():
        dirs = [root]
    else:
        dirs = sorted(p.parent for p in root.glob("*/scenario.toml"))
        for run_dir in dirs:  # run folders under the one named: never one a link planted there points to
            check_folder(run_dir)
    if not dirs:
        raise FileNotFoundError(f"{root}: no run directory (a folder with scenario.toml) to resume")
    results = {}
    for run_dir in dirs:
        # a summary that says complete over records that are not the run's is refused by the resume itself
        if load_run(run_dir).summary.get("status") not in ("complete", "unverified") \
                and not (run_dir / CHECKPOINT_NAME).exists():
            print(f"{run_dir.name}: no checkpoint, starting over")
        results[run_dir.name] = resume_recorded(run_dir, progress=not args.no_progress)
    for name, res in results.items():
        print(_fmt_summary(name, res.summary))
    failed = [name for name, res in results.items() if res.summary.get("status") != "complete"]
    for name in failed:
        print(f"wirelessfl: {name} did not complete: {_failure(results[name])}", file=sys.stderr)
    return 1 if failed else 0


def cmd_plot(args) -> int:
    from .experiments.plots import find_runs, plot_battery, plot_energy, plot_round_times, plot_runs, plot_timing

    if len(args.runs) == 1 and (Path(args.runs[0]) / "sweep.json").exists():
        return _plot_study(args)
    if args.x is not None and args.x not in ("time", "round"):
        print(f"wirelessfl: error: --x {args.x}: must be time or round for run directories "
              "(a parameter name needs a sweep folder)", file=sys.stderr)
        return 2
    runs = find_runs(args.runs)
    if args.round_times:
        target = Path(args.out) if args.out else Path(args.runs[0]) / "round_times.png"
        check_output_folder(target.parent, "plot --round-times:")
        print(f"wrote {plot_round_times(runs, target)}")
        return 0
    out = Path(args.out) if args.out else Path(args.runs[0])
    check_output_folder(out, "plot: --out" if args.out else "plot: the run folder")  # before the first figure
    title = ", ".join(Path(p).resolve().name for p in args.runs)  # what was plotted, as run does
    if args.events or args.window:
        for path in _event_figures(runs, out, window=_window(args.window), title=title):
            print(f"wrote {path}")
        return 0
    training = any(not run.evals.empty for run in runs.values())
    for path in (plot_runs(runs, out, x=args.x or "time", title=title) if training
                 else [plot_timing(runs, out, title=title)]):
        print(f"wrote {path}")
    from .experiments.network_plots import plot_network, plot_tiers

    for path in (plot_energy(runs, out), plot_battery(runs, out, title=title), plot_network(runs, out, title=title),
                 plot_tiers(runs, out, title=title)):
        if path is not None:
            print(f"wrote {path}")
    return 0


def _window(text: str | None) -> tuple[float, float] | None:
    """--window START,END in simulated seconds."""
    if text is None:
        return None
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"--window {text}: expected START,END in simulated seconds, e.g. 0,30") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise ConfigError(f"--window {text}: END must be a finite number greater than START")
    if max(abs(lo), abs(hi)) > _WINDOW_LIMIT_S:  # the axis' ticks beyond it overflow floating point
        raise ConfigError(f"--window {text}: START and END must lie within ±{_WINDOW_LIMIT_S:g} simulated seconds")
    return lo, hi


_WINDOW_LIMIT_S = 1e300
"""The largest time --window may name: matplotlib's tick arithmetic overflows near 1e308."""


def _plot_study(args) -> int:
    from .config import parse_value
    from .experiments.study_plots import plot_study

    if not args.x or not args.y:
        print("wirelessfl: error: a sweep folder needs --x PARAMETER and --y METRIC[,METRIC...]", file=sys.stderr)
        return 2
    where = {}
    for item in args.where:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"wirelessfl: error: --where {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        where[key.strip()] = parse_value(value.strip())
    kind = "heatmap" if args.heatmap else args.kind
    check_output_folder(Path(args.out).parent if args.out else Path(args.runs[0]),
                        "plot: the folder of --out" if args.out else "plot: the sweep folder")
    try:
        path = plot_study(args.runs[0], x=args.x, y=args.y.split(","), hue=args.hue, kind=kind,
                          out=args.out, where=where, logy=True if args.logy else None)
    except ValueError as exc:  # a column that is not in the table, a parameter left free, ...
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def cmd_sweep(args) -> int:
    import warnings

    scenario = load_scenario(args.scenario, args.set)
    from .experiments.sweep import SweepFailed, sweep

    if args.out and (Path(args.out) / "index.json").exists():
        raise ConfigError(f"sweep: {args.out} holds a scenario's runs (wirelessfl run); a sweep goes to a folder of "
                          "its own (--out)")

    executor = args.executor or ("dask" if args.address else "serial")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # failed runs are reported below
            res = sweep(scenario, grid=args.grid, seeds=args.seeds, executor=executor, workers=args.workers,
                        address=args.address, out_dir=args.out, progress=not args.no_progress,
                        timing_only=True if args.timing_only else None, overwrite=args.overwrite)
    except SweepFailed as exc:
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # another sweep holds the folder
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(res.table)} runs: {res.ran} ran, {res.skipped} already finished, {res.failed} failed")
    if res.failed:
        print(f"failed runs are described in {res.out_dir / 'failed'}; run the sweep again to retry them")
    print(f"table in {res.out_dir / 'table.csv'}")
    return 1 if res.failed else 0


def cmd_table(args) -> int:
    from .experiments.sweep import aggregate, format_table, load_table, sweep_parameters

    table = load_table(args.sweep_dir)
    if args.mean:
        table = aggregate(table, sweep_parameters(args.sweep_dir))
    if args.csv:
        print(table.to_csv(index=False), end="")
    else:
        print(format_table(table))
    return 0


def cmd_trace(args) -> int:
    from .experiments.recording import record_traces

    if args.rounds < 1:
        raise ConfigError(f"--rounds {args.rounds}: must be >= 1")
    from .experiments.scenario_input import load_kept

    scenario = load_kept(args.scenario, args.set, [args.variant] if args.variant is not None else [])
    members = dict(scenario.variant_scenarios())
    names = ", ".join(members)
    if args.variant is not None and args.variant not in members:
        raise ConfigError(f"--variant {args.variant}: {args.scenario} has the variants {names}")
    if args.variant is None and len(members) > 1:
        raise ConfigError(f"trace: {args.scenario} has variants ({names}); pick one with --variant")
    member = members[args.variant] if args.variant is not None else next(iter(members.values()))
    for path in record_traces(member, args.rounds, args.out, fmt=args.format, overwrite=args.overwrite).values():
        print(f"wrote {path}")
    return 0


def cmd_scenarios(args) -> int:
    from .config.packaged import describe, packaged_scenarios, scenario_root

    found = packaged_scenarios()
    width = max(map(len, found))
    for name, path in found.items():
        print(f"{name:{width}s}  {describe(path)}")
    print(f"\n{len(found)} scenarios in {scenario_root()}; run one by name, e.g. wirelessfl run quickstart")
    return 0


def cmd_reproduce(args) -> int:
    from .papers import list_recipes, reproduce

    if args.list:
        print(list_recipes())
        return 0
    if not args.name:
        print("wirelessfl: error: reproduce needs a recipe name (or --list, or all)", file=sys.stderr)
        return 2
    if args.data and not args.no_run:
        raise ConfigError("--data DIR redraws reports from data CSVs and runs nothing: give --no-run with it")
    try:
        reports = reproduce(args.name, scale=args.scale, seeds=args.seeds, out=args.out, figures=args.figures,
                            executor=args.executor, workers=args.workers, overrides=args.set,
                            progress=not args.no_progress, run=not args.no_run, data=args.data)
    except RuntimeError as exc:  # another sweep holds the cache folder
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 2
    for report in reports:
        print(f"## {report.name}\n\n{report.markdown}\n")
        for path in report.outputs:
            print(f"wrote {path}")
        for failure in report.failed:
            print(f"failed run: {failure}")
    return 1 if any(r.failed for r in reports) else 0


def _add_run(sub) -> None:
    """The ``run`` subcommand's arguments."""
    p = sub.add_parser("run", help="run a scenario file (every variant in it)")
    p.add_argument("scenario", nargs="?", help="TOML scenario file")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue an interrupted run (or every run under a folder) from its last checkpoint")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field, e.g. --set scheduler.V=1000 (repeatable)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME",
                   help="run only this variant of the scenario (repeatable); the others are left for a later "
                   "run or --resume")
    p.add_argument("--out", help="folder of the scenario's runs (default runs/NAME, runs/NAME-timing for timing only)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace runs already in --out (by default complete runs of the same scenario are reused "
                   "and anything else is refused)")
    p.add_argument("--seed", type=int, help="root seed (overrides the file)")
    p.add_argument("--timing-only", action="store_true", help="simulate timing and scheduling without training")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--threads", type=int, help="torch intra-op threads (overrides run.threads, default 1)")
    p.set_defaults(func=cmd_run)


def _add_plot(sub) -> None:
    """The ``plot`` subcommand's arguments."""
    p = sub.add_parser("plot", help="plot runs against wall-clock time, or a sweep's metric against a parameter")
    p.add_argument("runs", nargs="+", help="run directories, folders of run directories, or one sweep folder")
    p.add_argument("--x", help="runs: time or round (default time); sweep: a parameter, e.g. scheduler.V")
    p.add_argument("--y", help="sweep: metric(s), comma-separated, e.g. time_to_target_s")
    p.add_argument("--hue", help="sweep: a second parameter, one line per value (or the heatmap rows)")
    p.add_argument("--kind", choices=("line", "heatmap"), default="line", help="sweep: plot kind (default line)")
    p.add_argument("--heatmap", action="store_true", help="sweep: same as --kind heatmap")
    p.add_argument("--logy", action="store_true",
                   help="sweep: log y axis or heatmap colours (default: lines get one when y spans two decades)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="sweep: pin another parameter that varies (repeatable)")
    p.add_argument("--events", action="store_true",
                   help="runs: the staleness histogram and the Gantt chart of computations and uploads (updates.csv)")
    p.add_argument("--window", metavar="START,END",
                   help="runs: the Gantt chart's window in simulated seconds (default: until 40 uploads have ended)")
    p.add_argument("--round-times", action="store_true",
                   help="runs: simulated round times against downlink + max computation + sum of airtimes, "
                   "and the first two runs round by round (--out is then the PNG file)")
    p.add_argument("--out", help="runs: folder for the PNGs (default: the first run folder); "
                   "sweep: the PNG file (default: in the sweep folder)")
    p.set_defaults(func=cmd_plot)


def _add_sweep(sub) -> None:
    """The ``sweep`` subcommand's arguments."""
    p = sub.add_parser("sweep", help="run a parameter study: a grid of values x seeds, resumable")
    p.add_argument("scenario", help="TOML scenario file (its [sweep] table is the default grid)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="grid values of a field, e.g. --grid scheduler.V=1,10,100 (repeatable; "
                   "adds to or replaces the scenario's [sweep] table)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per grid point: seed, seed+1, ... (default 1)")
    p.add_argument("--executor", choices=("serial", "process", "dask"),
                   help="where runs execute (default serial, or dask with --address)")
    p.add_argument("--workers", type=int, help="processes for process/dask (default: one per core)")
    p.add_argument("--address", help="Dask scheduler address, e.g. tcp://host:8786 (default: a local cluster)")
    p.add_argument("--out", help="sweep folder (default runs/NAME-sweep); rerun to resume")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the table of a sweep of another scenario or grid in --out")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the base scenario (repeatable)")
    p.add_argument("--timing-only", action="store_true", help="simulate timing and scheduling without training")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sweep)


def _add_table(sub) -> None:
    """The ``table`` subcommand's arguments."""
    p = sub.add_parser("table", help="print the results table of a sweep folder")
    p.add_argument("sweep_dir", help="sweep folder (with table.csv)")
    p.add_argument("--csv", action="store_true", help="CSV instead of a fixed-width table")
    p.add_argument("--mean", action="store_true", help="mean and population std (ddof = 0) over seeds per grid point")
    p.set_defaults(func=cmd_table)


def _add_trace(sub) -> None:
    """The ``trace`` subcommand's arguments."""
    p = sub.add_parser("trace", help="record a scenario's channel gains, computation times and availability "
                       "as trace files (rounds x devices) to replay or replace with measurements")
    p.add_argument("scenario", help="TOML scenario file")
    p.add_argument("--rounds", type=int, required=True, help="rounds to record")
    p.add_argument("--out", required=True, help="folder for gains, compute_s and available files")
    p.add_argument("--format", choices=("csv", "npy"), default="csv", help="file format (default csv)")
    p.add_argument("--variant", help="the variant to record, for a scenario with variants")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a field (repeatable)")
    p.add_argument("--overwrite", action="store_true", help="replace trace files already in --out")
    p.set_defaults(func=cmd_trace)


def _add_scenarios(sub) -> None:
    """The ``scenarios`` subcommand's arguments."""
    p = sub.add_parser("scenarios", help="list the scenarios shipped with the package (run one by name)")
    p.set_defaults(func=cmd_scenarios)


def _add_reproduce(sub) -> None:
    """The ``reproduce`` subcommand's arguments."""
    p = sub.add_parser("reproduce", help="reproduce a figure or table of one of the papers")
    p.add_argument("name", nargs="*", help="recipes: PAPER:NAME (e.g. safari:table2), a short name of the "
                   "core paper (fig2 ... fig8, table1, table2), PAPER for all of a paper's, or all; see --list")
    p.add_argument("--list", action="store_true", help="list the recipes")
    p.add_argument("--scale", choices=("cpu", "paper", "tiny"), default="cpu",
                   help="cpu: Fashion-MNIST MLP (default); paper: CIFAR-10 and the paper's CNN; tiny: smoke test")
    p.add_argument("--seeds", type=int, default=3, help="seeds per setting (default 3)")
    p.add_argument("--out", default="runs/papers", help="folder for the shared run cache (OUT/cache)")
    p.add_argument("--figures", help="folder for each recipe's data CSV, figures, tables and report "
                   "(default OUT/figures)")
    p.add_argument("--executor", choices=("serial", "process", "dask"), default="serial")
    p.add_argument("--workers", type=int, help="processes for process/dask (default: one per core)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the base scenarios, e.g. --set run.device=cuda (repeatable)")
    p.add_argument("--threads", type=int, help="torch intra-op threads of serial runs (default 1)")
    p.add_argument("--no-run", action="store_true",
                   help="run nothing: analyse the runs already in the cache (missing settings are listed)")
    p.add_argument("--data", metavar="DIR", help="with --no-run: redraw the reports from the recipes' data CSVs in "
                   "DIR (e.g. the committed figures/) instead of the cache")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_reproduce)


def build_parser() -> argparse.ArgumentParser:
    """The ``wirelessfl`` command's parser: one subcommand per ``_add_*``."""
    parser = argparse.ArgumentParser(prog="wirelessfl", description="Federated learning over wireless networks: "
                                     "simulate, sweep and plot accuracy against wall-clock time.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_plot(sub)
    _add_sweep(sub)
    _add_table(sub)
    _add_trace(sub)
    _add_scenarios(sub)
    _add_reproduce(sub)
    return parser


def _refuse_empty_paths(args) -> None:
    """An empty path (--out "") is refused, never read as the default folder or the working one."""
    for name in ("out", "figures", "data", "resume", "scenario", "sweep_dir"):
        value = getattr(args, name, None)
        if isinstance(value, str) and not value.strip():
            if name in ("out", "figures", "data", "resume"):
                raise ConfigError(f"--{name} {value!r}: an empty path; name a folder (or leave --{name} out)")
            raise ConfigError(f"{name.upper()} {value!r}: an empty path; name a file or folder")
    for value in getattr(args, "runs", None) or ():
        if not value.strip():
            raise ConfigError(f"RUNS {value!r}: an empty path; name a run folder")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``wirelessfl`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _refuse_empty_paths(args)
        return args.func(args)
    except ConfigError as exc:
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:  # missing dataset or run folder: the message says where we looked
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 2
    except (FileExistsError, UnsafeOutput, ResumeError, DatasetError) as exc:  # runs are never overwritten or broken unasked
        print(f"wirelessfl: error: {exc}", file=sys.stderr)
        return 2
    except DamagedFile as exc:  # a run file edited or cut short: its run has to be written again
        print(f"wirelessfl: error: {exc}; write the run again (--overwrite)", file=sys.stderr)
        return 2
    except TrainingDiverged as exc:
        print(f"wirelessfl: error: {exc} (records so far are kept)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("wirelessfl: interrupted; records written so far are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the output went to a pager or `head` that stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a full disk, a file the system refuses
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"wirelessfl: error: {where}{exc.strerror or exc}; files written before it are kept", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
