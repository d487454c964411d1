"""wirelessfl: a discrete-event simulator of federated learning over wireless networks.

Public API:
    load_scenario(path, overrides=()) -> Scenario
    simulate(scenario, out_dir=None, progress=True) -> RunResult
    run_variants(scenario, out_dir=None, progress=True) -> dict[str, RunResult]
    load_run(run_dir) -> RunResult
Submodules: wirelessfl.scheduling (optimal_power, solve_selection, schedulers),
wirelessfl.learning (datasets, partitions, build_model, trainer).
"""
from .config import ConfigError, Scenario, load_scenario
from .experiments.run import RunResult, load_run, run_variants, simulate

__all__ = ["ConfigError", "Scenario", "load_scenario", "simulate", "run_variants", "load_run", "RunResult"]
__version__ = "0.1.0"
