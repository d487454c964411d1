"""Perazzone et al., "Communication-Efficient Device Scheduling for Federated Learning Using Lyapunov
Optimization": the core paper, in two modules of recipes.

- ``common``: the paper's numbers, the cells (settings) the recipes run, the scales and base
  scenarios, and the analysis and plotting helpers both recipe modules draw with;
- ``figures``: Figs. 2-8 and Tables I-II;
- ``fidelity``: the studies of what the paper leaves open (the per-round gain at the paper's horizon,
  K = 10, the paper's printed rules).

``RECIPES`` holds both modules' recipes; any other name is looked up in ``common``, then ``figures``
(``lyapunov.SCALES``).
"""
from __future__ import annotations

from . import common, fidelity, figures

RECIPES = [*figures.RECIPES, *fidelity.RECIPES]


def __getattr__(name: str):
    return getattr(common if hasattr(common, name) else figures, name)
