"""Runs from the Python API: one scenario, every variant of one, resume, and reading a run back."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..config import Scenario, dumps
from ..learning.learner import TrainingDiverged
from ..sim.checkpoint import CHECKPOINT_NAME, load_checkpoint
from ..jsonio import read_json, write_json_atomic
from ..sim.runner import Run, RunResult

__all__ = ["RunResult", "TrainingDiverged", "load_run", "resume", "run_variants", "simulate"]


def simulate(scenario: Scenario, out_dir: str | Path | None = None, progress: bool = True,
             timing_only: bool | None = None) -> RunResult:
    """Run one scenario (no variants) and return its records; with ``out_dir``, also write them there.

    The run directory holds scenario.toml (the resolved scenario), rounds.csv and evals.csv (streamed
    while the run goes), devices.csv, decisions.npz and summary.json (written last; its "status" is
    "complete" only for a run that finished). With ``run.checkpoint_every = k`` a checkpoint is
    written every k rounds, from which ``resume(out_dir)`` continues an interrupted run.
    """
    if scenario.variants:
        raise ValueError("simulate() runs one scenario; use run_variants() for a scenario with [variants]")
    if timing_only is not None and timing_only != scenario.run.timing_only:
        scenario = scenario.replace(f"run.timing_only={'true' if timing_only else 'false'}")
    run_dir = Path(out_dir) if out_dir is not None else None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("summary.json", CHECKPOINT_NAME):
            (run_dir / stale).unlink(missing_ok=True)
        (run_dir / "scenario.toml").write_text(dumps(scenario))
    return Run(scenario, run_dir, progress).execute()


def resume(run_dir: str | Path, progress: bool = True) -> RunResult:
    """Continue an interrupted run from its last checkpoint; the records equal an uninterrupted run's.

    A complete run is returned as it is; a run without a checkpoint starts again from round 0.
    """
    run_dir = Path(run_dir)
    done = load_run(run_dir)
    if done.summary.get("status") == "complete":
        return done
    from ..config import load_scenario

    scenario = load_scenario(run_dir / "scenario.toml")
    run = Run(scenario, run_dir, progress)
    if (run_dir / CHECKPOINT_NAME).exists():
        run.load_state(load_checkpoint(run_dir / CHECKPOINT_NAME))
    return run.execute()


def load_run(run_dir: str | Path) -> RunResult:
    """Read a run directory back (also an incomplete one: its summary then says so or is missing)."""
    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    summary = read_json(summary_path) if summary_path.exists() else {"status": "incomplete"}

    def read(name: str) -> pd.DataFrame:
        path = run_dir / name
        if not path.exists() or path.stat().st_size == 0:  # a run killed before its first row
            return pd.DataFrame()
        return pd.read_csv(path, keep_default_na=False, na_values=[""])

    return RunResult(rounds=read("rounds.csv"), evals=read("evals.csv"), devices=read("devices.csv"),
                     summary=summary, run_dir=run_dir)


def run_variants(scenario: Scenario, out_dir: str | Path | None = None, progress: bool = True,
                 timing_only: bool | None = None) -> dict[str, RunResult]:
    """Run every variant of a scenario (or the scenario itself) into ``out_dir/VARIANT``."""
    results = {}
    for name, member in scenario.variant_scenarios():
        sub = None if out_dir is None else Path(out_dir) / name
        results[name] = simulate(member, sub, progress=progress, timing_only=timing_only)
    if out_dir is not None:
        write_json_atomic(Path(out_dir) / "index.json", {"scenario": scenario.name, "runs": list(results)})
    return results
