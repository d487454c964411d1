"""wirelessfl: a discrete-event simulator of federated learning over wireless networks.

Public API:
    load_scenario(path, overrides=()) -> Scenario
    simulate(scenario, out_dir=None, progress=True) -> RunResult
    run_variants(scenario, out_dir=None, progress=True) -> dict[str, RunResult]
    load_run(run_dir) -> RunResult
    resume(run_dir, progress=True) -> RunResult (continue an interrupted run from its checkpoint)
    sweep(scenario, grid=None, seeds=1, executor="serial", ...) -> SweepResult (parameter studies)
    load_table(sweep_dir) -> DataFrame (a sweep's results table)
    load_decisions(run_dir) -> dict of per-round arrays of every device (gains, omega, q, power, queue, available)
Submodules: wirelessfl.scheduling (schedulers, optimal_power, solve_selection), wirelessfl.learning
(algorithms, datasets, partitions, build_model, trainer), wirelessfl.wireless (channels, links),
wirelessfl.devices (computation models); docs/extending.md shows how to plug in your own.
Names are imported on first use, so that the command line answers quickly.
"""
from importlib import import_module

from .config import ConfigError, Scenario, load_scenario

_LAZY = {"simulate": "experiments.run", "run_variants": "experiments.run", "load_run": "experiments.run",
         "resume": "experiments.run", "RunResult": "experiments.run", "TrainingDiverged": "experiments.run",
         "sweep": "experiments.sweep", "load_table": "experiments.sweep", "SweepResult": "experiments.sweep",
         "load_decisions": "sim.records.device_arrays"}

__all__ = ["ConfigError", "Scenario", "load_scenario", *_LAZY]
__version__ = "0.1.0"


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
