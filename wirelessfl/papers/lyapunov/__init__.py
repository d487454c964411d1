"""Perazzone et al., "Communication-Efficient Device Scheduling for Federated Learning Using Lyapunov
Optimization": the core paper, in two modules of recipes.

- ``figures``: Figs. 2-8 and Tables I-II, the scenarios and scales they run at, and the helpers
  both modules share;
- ``fidelity``: the studies of what the paper leaves open (the per-round gain at the paper's horizon,
  K = 10, the paper's printed rules), drawn with the figures' helpers.

``RECIPES`` holds both; any other name is the figures module's (``lyapunov.SCALES``).
"""
from __future__ import annotations

from . import fidelity, figures

RECIPES = [*figures.RECIPES, *fidelity.RECIPES]


def __getattr__(name: str):
    return getattr(figures, name)
