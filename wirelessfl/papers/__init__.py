"""The papers this simulator reproduces, one module each, every figure and table a recipe.

``wirelessfl reproduce --list`` lists them; ``wirelessfl reproduce PAPER:NAME`` runs one (see
wirelessfl.papers.recipes for the mechanism). Modules are imported only when their recipes are asked
for, so the CLI stays quick.
"""
from __future__ import annotations

import importlib

from ..fields import ConfigError
from .recipes import SCALES, Recipe, Report, reproduce as run_recipes

PAPERS = {
    "lyapunov": "Perazzone et al., Communication-efficient device scheduling using Lyapunov optimization",
    "fair_selection": "Castillo et al., Fair submodular client selection (DivFL, SubTrunc, UnionFL)",
    "fedshuffle": "Horváth et al., FedShuffle: recipes for better use of local work",
    "safari": "SAFARI: server-assisted federated learning under incomplete participation",
    "perfedavg": "Fallah et al., Personalized federated learning: a meta-learning approach (Per-FedAvg)",
    "async_wireless": "A study of this simulator: asynchronous FL over a fading, shared uplink",
    "energy": "A study of this simulator: compressed updates on a narrow, shared, fading uplink, and batteries",
    "networks": "Studies of this simulator: edge servers and a cloud against the cloud alone, frequency reuse, and "
                "the devices' speed, over seven cells",
    "radio": "A study of this simulator: Shannon rates against the NR link abstraction in a 3GPP cell",
    "satellites": "A study of this simulator: FL over a LEO constellation, sync against FedBuff, ISL relaying, "
                  "one ground station against three",
}
"""Paper module name -> the paper."""

ALIASES = {name: f"lyapunov:{name}" for name in
           ("fig2", "fig3", "fig4", "fig5", "fig6", "fig7", "fig8", "table1", "table2")}
"""The core paper's recipes keep their short names."""


def paper_recipes(paper: str) -> list[Recipe]:
    """The recipes of one paper module."""
    if paper not in PAPERS:
        raise ConfigError(f"paper {paper!r}: unknown; known: {', '.join(PAPERS)}")
    return list(importlib.import_module(f"{__name__}.{paper}").RECIPES)


def all_recipes() -> list[Recipe]:
    """Every recipe of every paper, paper by paper."""
    return [r for paper in PAPERS for r in paper_recipes(paper)]


def find_recipes(names: list[str] | str) -> list[Recipe]:
    """Recipes by name: ``paper:name``, a short alias (``fig3``), ``paper`` or ``paper:all`` (all of a
    paper's), or ``all``; unknown names are a one-line ConfigError listing the known ones."""
    names = [names] if isinstance(names, str) else list(names)
    out: list[Recipe] = []
    for name in names:
        name = ALIASES.get(name, name)
        paper, _, recipe = name.partition(":")
        if name == "all":
            found = all_recipes()
        elif paper in PAPERS and recipe in ("", "all"):
            found = paper_recipes(paper)
        else:
            known = {r.name: r for r in paper_recipes(paper)} if paper in PAPERS else {}
            if recipe not in known:
                keys = ", ".join(r.key for r in all_recipes())
                raise ConfigError(f"recipe {name!r}: unknown; known: {keys} (or PAPER, or all)")
            found = [known[recipe]]
        out += [r for r in found if r not in out]
    return out


def list_recipes() -> str:
    """A table of every recipe: name, runs per seed, measured CPU minutes per scale, what it makes."""
    lines = [f"{'recipe':24s} {'runs/seed':>9s} {'tiny min':>8s} {'cpu min':>8s} {'paper min':>9s}  makes: title"]
    for paper in PAPERS:
        for r in paper_recipes(paper):
            cost = [("-" if r.cost.get(s) is None else f"{r.cost[s]:g}") for s in SCALES]
            lines.append(f"{r.key:24s} {r.runs('cpu'):9d} {cost[0]:>8s} {cost[1]:>8s} {cost[2]:>9s}  "
                         f"{', '.join(r.makes)}: {r.title}")
    lines += ["", "runs/seed: runs at --scale cpu per seed; min: measured CPU minutes of all runs of 3 seeds "
              "(one torch thread each; '-': not measured on this kind of machine). Short names: "
              + ", ".join(ALIASES) + "."]
    return "\n".join(lines)


def reproduce(names: list[str] | str, **kwargs) -> list[Report]:
    """Run recipes by name (see find_recipes); keyword arguments as wirelessfl.papers.recipes.reproduce."""
    return run_recipes(find_recipes(names), **kwargs)


__all__ = ["ALIASES", "PAPERS", "Recipe", "Report", "all_recipes", "find_recipes", "list_recipes",
           "paper_recipes", "reproduce"]
