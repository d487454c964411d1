"""The package's import graph, read from the source with ast: no cycle, and no import that runs up
the layers (foundation -> config -> discrete events -> physical models -> scheduling and learning -> sim -> experiments
-> papers -> cli), and no import between the packages of a layer that must stay apart (scheduling and
learning: what both need, a Decision and the reports, is in the foundation's ``decisions``). Imports
inside functions and under TYPE_CHECKING count too: a lazy import is still a dependency."""
from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "wirelessfl"

LAYERS = (
    ("fields", "files", "jsonio", "rng", "plugins", "capabilities", "traces", "decisions", "units", "outcomes"),  # no model of anything
    ("config",),
    ("des",),  # the simulated clock and an upload's phases: what every timed model runs on
    ("access", "battery", "devices", "fading", "harvest", "mobility", "network", "orbits", "participation", "path_loss",
     "radio", "wireless"),
    ("scheduling", "learning"),
    ("sim",),
    ("experiments",),
    ("papers",),
    ("cli", ""),  # "": the package's own __init__, the public API
)

APART = (("scheduling", "learning"),)
"""Packages of one layer that import neither from the other (docs/architecture.md)."""


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (``from .x import name`` counts x.name when that is
    a module, else x)."""
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names]
            else:
                continue
            graph[mod].update(t for t in targets if t in mods and t != mod)
    return graph


def layer(mod: str) -> int:
    parts = mod.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return next(i for i, names in enumerate(LAYERS) if top in names)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    assert [m for m in modules() if not any(m.split(".")[1:2] == [n] or (n == "" and m == "wirelessfl")
                                            for names in LAYERS for n in names)] == []


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_no_import_runs_up_the_layers():
    graph = import_graph()
    upward = [f"{a} -> {b}" for a, targets in graph.items() for b in sorted(targets) if layer(b) > layer(a)]
    assert upward == []


def between_apart(graph: dict[str, set[str]]) -> list[str]:
    """The imports from one package of an APART pair into the other, either way."""
    pairs = {frozenset(p) for p in APART}
    return [f"{a} -> {b}" for a, targets in graph.items() for b in sorted(targets)
            if top(a) != top(b) and frozenset((top(a), top(b))) in pairs]


def test_scheduling_and_learning_import_neither_from_the_other():
    assert between_apart(import_graph()) == []


def engine_imports_of_records(graph: dict[str, set[str]]) -> list[str]:
    """The imports from wirelessfl.sim.records into the rest of wirelessfl.sim (the engines, the round
    pipeline, the runner): the records read what the engines hand them and import none of them."""
    def under(mod: str, package: str) -> bool:
        return mod.split(".")[:len(package.split("."))] == package.split(".")

    return [f"{a} -> {b}" for a, targets in graph.items() if under(a, "wirelessfl.sim.records")
            for b in sorted(targets) if under(b, "wirelessfl.sim") and not under(b, "wirelessfl.sim.records")]


def test_the_records_import_nothing_of_the_engines():
    assert engine_imports_of_records(import_graph()) == []


SIM_LAYERS = (("records", "protocols"), ("round",), ("sync", "events"), ("run",))
"""The engine's sub-packages, from the bottom: what is written down and the protocols' contract; the
round both engines share; the two engines, which import neither from the other; the runner."""


def sim_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Which sub-package of wirelessfl.sim imports which."""
    def sub(mod: str) -> str | None:
        parts = mod.split(".")
        return parts[2] if len(parts) > 2 and parts[:2] == ["wirelessfl", "sim"] else None

    return {(sub(a), sub(b)) for a, targets in graph.items() for b in targets
            if sub(a) and sub(b) and sub(a) != sub(b)}


def sim_violations(edges: set[tuple[str, str]]) -> list[str]:
    """Imports between the engine's sub-packages that run up its layers or sideways."""
    level = {name: i for i, names in enumerate(SIM_LAYERS) for name in names}
    return [f"{a} -> {b}" for a, b in sorted(edges) if level[b] >= level[a]]


def test_the_engine_s_sub_packages_import_only_downwards():
    edges = sim_edges(import_graph())
    assert {name for edge in edges for name in edge} == {name for names in SIM_LAYERS for name in names}
    assert sim_violations(edges) == []


def test_the_checker_sees_a_cycle_and_an_upward_import():
    """The checks themselves, on a graph with every defect: they can fail."""
    graph = {"wirelessfl.sim.a": {"wirelessfl.sim.b"}, "wirelessfl.sim.b": {"wirelessfl.sim.a"},
             "wirelessfl.config.x": {"wirelessfl.papers.y"}, "wirelessfl.papers.y": set()}
    assert cycles(graph) == [["wirelessfl.sim.a", "wirelessfl.sim.b"]]
    assert layer("wirelessfl.papers.y") > layer("wirelessfl.config.x")
    sideways = {"wirelessfl.learning.learner": {"wirelessfl.scheduling.base", "wirelessfl.decisions"},
                "wirelessfl.scheduling.fair": {"wirelessfl.learning"}, "wirelessfl.sim.run.runner": {"wirelessfl.learning"}}
    assert between_apart(sideways) == ["wirelessfl.learning.learner -> wirelessfl.scheduling.base",
                                       "wirelessfl.scheduling.fair -> wirelessfl.learning"]
    records = {"wirelessfl.sim.records.recorder": {"wirelessfl.sim.records.columns", "wirelessfl.sim.round.pipeline",
                                                   "wirelessfl.files"}}
    assert engine_imports_of_records(records) == ["wirelessfl.sim.records.recorder -> wirelessfl.sim.round.pipeline"]
    assert sim_violations({("events", "sync"), ("round", "run"), ("run", "round")}) == ["events -> sync", "round -> run"]
    lazy = {m for m in import_graph()["wirelessfl.experiments.run"]}  # function-level imports are seen
    assert "wirelessfl.sim.run.runner" in lazy or "wirelessfl.sim" in lazy


LAYER_NAMES = ("foundation", "config", "discrete events", "physical models", "scheduling and learning", "sim", "experiments", "papers",
               "interfaces")
DRAWING = PACKAGE.parent / "docs" / "architecture.md"


def top(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "wirelessfl"


def top_level_edges() -> set[tuple[str, str]]:
    """Which top-level module or subpackage imports which (the drawing's arrows)."""
    return {(top(a), top(b)) for a, targets in import_graph().items() for b in targets if top(a) != top(b)}


def mermaid() -> str:
    """The drawing: one box per layer, an arrow per import between top-level modules."""
    lines = ["```mermaid", "flowchart BT"]
    for i, (title, names) in enumerate(zip(LAYER_NAMES, LAYERS)):
        shown = ["wirelessfl" if n == "" else n for n in names]
        lines += [f'  subgraph L{i}["{title}"]', *(f"    {n}" for n in shown), "  end"]
    lines += [f"  {a} --> {b}" for a, b in sorted(top_level_edges())]
    return "\n".join(lines + ["```"])


def sim_mermaid() -> str:
    """The engine's drawing: one box per layer of its sub-packages, an arrow per import between them."""
    lines = ["```mermaid", "flowchart BT"]
    for i, names in enumerate(SIM_LAYERS):
        lines += [f'  subgraph S{i}[" "]', *(f"    {n}" for n in names), "  end"]
    lines += [f"  {a} --> {b}" for a, b in sorted(sim_edges(import_graph()))]
    return "\n".join(lines + ["```"])


def test_the_drawing_in_docs_is_the_package_as_it_is():
    """docs/architecture.md draws the import graph; regenerate it with `python tests/test_import_graph.py`."""
    text = DRAWING.read_text(encoding="utf-8")
    assert mermaid() in text, "docs/architecture.md is out of date: python tests/test_import_graph.py"
    assert sim_mermaid() in text, "docs/architecture.md's engine drawing is out of date: python tests/test_import_graph.py"
    package_part = text.split("## The engine")[0]  # (the engine's own drawing follows)
    arrows = re.findall(r"^  (\w+) --> (\w+)$", package_part, flags=re.M)
    assert len(arrows) == len(top_level_edges()) > 30

    def level(name: str) -> int:
        return layer("wirelessfl" if name == "wirelessfl" else f"wirelessfl.{name}")

    assert all(level(b) <= level(a) for a, b in arrows)  # every arrow points down or sideways


if __name__ == "__main__":  # print the drawings for docs/architecture.md
    print(mermaid())
    print()
    print(sim_mermaid())
