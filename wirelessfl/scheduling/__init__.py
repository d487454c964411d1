"""Device scheduling: per-round decisions and the solvers behind them (spec 002).

Plain numpy/scipy objects; no torch, no SimPy. The pymanopt simplex manifold (``Simplex``) is
loaded on first use only, because importing pymanopt pulls in its autodiff backends (torch).
"""
from .base import Decision, RoundState, draw_devices, inclusion_probability
from .power import POWER_RULES, optimal_power
from .schedulers import LyapunovScheduler, UniformScheduler
from .selection import SELECTION_METHODS, SelectionResult, selection_objective, solve_selection

__all__ = [
    "Decision",
    "LyapunovScheduler",
    "POWER_RULES",
    "RoundState",
    "SELECTION_METHODS",
    "SelectionResult",
    "Simplex",
    "UniformScheduler",
    "draw_devices",
    "inclusion_probability",
    "optimal_power",
    "selection_objective",
    "solve_selection",
]


def __getattr__(name):
    if name == "Simplex":
        from .simplex import Simplex

        return Simplex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
