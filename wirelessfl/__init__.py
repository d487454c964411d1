"""wirelessfl: a discrete-event simulator of federated learning over wireless networks.

Public API:
    load_scenario(path, overrides=()) -> Scenario
    simulate(scenario, out_dir=None, progress=True) -> RunResult
    run_variants(scenario, out_dir=None, progress=True) -> dict[str, RunResult]
    load_run(run_dir) -> RunResult
    resume(run_dir, progress=True) -> RunResult (continue an interrupted run from its checkpoint)
    sweep(scenario, grid=None, seeds=1, executor="serial", ...) -> SweepResult (parameter studies)
    load_table(sweep_dir) -> DataFrame (a sweep's results table)
Submodules: wirelessfl.scheduling (optimal_power, solve_selection, schedulers),
wirelessfl.learning (datasets, partitions, build_model, trainer).
"""
from .config import ConfigError, Scenario, load_scenario
from .experiments.run import RunResult, TrainingDiverged, load_run, resume, run_variants, simulate
from .experiments.sweep import SweepResult, load_table, sweep

__all__ = ["ConfigError", "Scenario", "load_scenario", "simulate", "run_variants", "load_run", "RunResult",
           "resume", "TrainingDiverged", "sweep", "load_table", "SweepResult"]
__version__ = "0.1.0"
