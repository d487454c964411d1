"""Device scheduling: per-round decisions and the solvers behind them (docs/papers/lyapunov.md,
docs/papers/fair_selection.md).

Plain numpy/scipy objects; no torch, no SimPy. A scheduler fits :class:`Scheduler` (see
docs/extending.md); ``SCHEDULERS`` names the built-ins that ``scheduler.name`` accepts besides
installed plugins and import paths. The pymanopt simplex manifold (``Simplex``) is loaded on first
use only, because importing pymanopt pulls in its autodiff backends (torch).
"""
from ..plugins import Registry
from .base import (NO_TRAFFIC, ChoosesFrequency, Decision, Dispatch, Dispatches, DispatchesOne, DispatchState, Probes,
                   ReportRequest, Reports, RoundState, Scheduler, Traffic, draw_devices, has_dispatch,
                   inclusion_probability)
from .power import POWER_RULES, optimal_power
from .schedulers import LyapunovScheduler, UniformScheduler
from .selection import SELECTION_METHODS, SelectionResult, selection_objective, solve_selection

SCHEDULERS = Registry("scheduler", "wirelessfl.scheduling:Scheduler", {
    "lyapunov": "wirelessfl.scheduling.schedulers:LyapunovScheduler",
    "uniform": "wirelessfl.scheduling.schedulers:UniformScheduler",
    "random": "wirelessfl.scheduling.fair:RandomScheduler",
    "power_of_choice": "wirelessfl.scheduling.fair:PowerOfChoiceScheduler",
    "divfl": "wirelessfl.scheduling.fair:DivFL",
    "subtrunc": "wirelessfl.scheduling.fair:SubTrunc",
    "unionfl": "wirelessfl.scheduling.fair:UnionFL",
})
"""Built-in schedulers by the name ``scheduler.name`` gives them."""

__all__ = [
    "ChoosesFrequency",
    "Decision",
    "NO_TRAFFIC",
    "Dispatch",
    "Dispatches",
    "DispatchesOne",
    "DispatchState",
    "LyapunovScheduler",
    "POWER_RULES",
    "Probes",
    "ReportRequest",
    "Reports",
    "RoundState",
    "Traffic",
    "SCHEDULERS",
    "SELECTION_METHODS",
    "Scheduler",
    "SelectionResult",
    "Simplex",
    "UniformScheduler",
    "draw_devices",
    "has_dispatch",
    "inclusion_probability",
    "optimal_power",
    "selection_objective",
    "solve_selection",
]


def __getattr__(name):
    if name == "Simplex":
        from .manifold import Simplex

        return Simplex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
