"""The recipe mechanism: a paper's figure or table as the runs it needs, the data kept from them, and
the report drawn from that data alone.

A recipe names its runs as scenario *families* (a base scenario with one named variant per setting)
at a scale (``tiny`` for tests, ``cpu`` for the committed figures, ``paper`` for the paper's own
setup). Every run goes through the simulator's sweep into one content-addressed cache folder (a
run's folder is the hash of its resolved scenario and seed), shared by every recipe of every paper,
so a setting two recipes need is run once and an interrupted call resumes.

From the finished runs a recipe *collects* a compact table (one CSV: per run its seed, settings,
evaluation curve points and the run-level numbers its report needs) and *reports* from that table
alone: figures, Markdown tables and headline numbers beside the paper's. So the data committed
beside a figure redraws it (``reproduce NAME --no-run --data DIR``) without running anything.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from ..config import ConfigError, Scenario, from_dict, load_scenario, to_dict
from ..experiments.analysis import SPREAD, seed_std, with_spread  # noqa: F401  (the papers' one spread convention)


def reached_mean(values: pd.Series, fmt: str = ".1f") -> str:
    """The mean ± spread over the seeds that reached the target (NaN: did not), with how many did
    when not all; "not reached" when none did."""
    reached = values.dropna()
    if not len(reached):
        return "not reached"
    text = with_spread(reached.mean(), seed_std(reached), fmt)
    return text if len(reached) == len(values) else f"{text} ({len(reached)} of {len(values)} seeds)"
from ..files import check_folder, check_output_folder, make_folder, write_atomic, write_figure
from ..jsonio import read_json, write_json_atomic

SCALES = ("tiny", "cpu", "paper")
"""tiny: seconds, for tests; cpu: the committed figures, on a laptop; paper: the paper's own setup."""


# ---------------------------------------------------------------------------------------------
# what a recipe is


@dataclass
class Report:
    """What a recipe produced: files, headline numbers (ours vs the paper's) and a Markdown summary."""

    name: str
    outputs: list[Path]
    numbers: dict
    markdown: str
    wall_s: float = 0.0
    failed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Recipe:
    """A figure or table of a paper.

    ``families(scale, overrides)`` gives the runs: ``{key: (base scenario, {variant: dotted
    overrides})}``, the key unique across papers (recipes naming the same key share one sweep, the
    union of their variants);
    ``collect(runs, scale)`` turns their finished runs into the recipe's data table;
    ``report(data, figures, scale)`` draws the figures and writes the tables from the data alone.
    ``cost`` is the measured CPU minutes of all its runs at each scale (None: not measured here).
    """

    paper: str
    name: str
    title: str
    makes: tuple[str, ...]
    families: Callable[[str, Sequence[str]], dict[str, tuple[Scenario, dict[str, dict]]]]
    collect: Callable[["Runs", str], pd.DataFrame]
    report: Callable[[pd.DataFrame, Path, str], Report]
    cost: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``paper:name``, the name ``wirelessfl reproduce`` takes."""
        return f"{self.paper}:{self.name}"

    @property
    def data_file(self) -> str:
        """The name of the recipe's data CSV (beside its figures)."""
        return f"{self.paper}_{self.name}.csv"

    @property
    def report_file(self) -> str:
        """The name of the recipe's Markdown report (beside its figures)."""
        return f"{self.paper}_{self.name}.md"

    def runs(self, scale: str) -> int:
        """How many runs the recipe needs per seed at ``scale``."""
        return sum(len(v) for _, v in self.families(scale, ()).values())

    def variants(self, scale: str, overrides: Sequence[str] = ()) -> set[str]:
        """The names of the settings (variants) the recipe needs at ``scale``."""
        return {name for _, v in self.families(scale, overrides).values() for name in v}


# ---------------------------------------------------------------------------------------------
# running families through the shared cache


def _nest(flat: dict) -> dict:
    out: dict = {}
    for key, value in flat.items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def family(base: Scenario, variants: dict[str, dict]) -> Scenario:
    """``base`` with one named variant per setting (dotted overrides); its members are the runs."""
    data = to_dict(base)
    data.pop("sweep", None)
    data["variants"] = {name: _nest(ov) for name, ov in variants.items()}
    return from_dict(data)


def packaged(name: str, overrides: Iterable[str] = ()) -> Scenario:
    """A packaged scenario (``paper/training``, ``studies/safari_tables``) with overrides; a recipe's
    runs are sized by its scale, so $WIRELESSFL_SET does not apply."""
    return load_scenario(name, list(overrides), environment=False)


@dataclass
class Runs:
    """Finished runs per variant name: a list of (seed, run folder); failed or missing ones listed."""

    dirs: dict[str, list[tuple[int, Path]]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def folders(self, name: str) -> list[Path]:
        """The run folders of a variant, in seed order."""
        return [d for _, d in sorted(self.dirs.get(name, []))]

    def seeds(self, name: str) -> list[tuple[int, Path]]:
        """(seed, run folder) of a variant, in seed order."""
        return sorted(self.dirs.get(name, []))

    def evals(self, name: str) -> list[pd.DataFrame]:
        """The evaluation tables of a variant's seeds."""
        return [pd.read_csv(d / "evals.csv") for d in self.folders(name)]

    def merge(self, other: "Runs") -> None:
        """Add another family's runs."""
        self.dirs.update(other.dirs)
        self.failed += other.failed
        self.wall_s += other.wall_s


def run_family(scenario: Scenario, seeds: int, cache: Path, executor: str = "serial", workers: int | None = None,
               progress: bool = True) -> Runs:
    """Run every variant x seed of ``scenario`` into the cache (finished runs are reused)."""
    from ..experiments.sweep import sweep

    started = time.perf_counter()
    # the cache holds the runs of every family of a recipe: its table is the latest family's
    res = sweep(scenario, seeds=seeds, executor=executor, workers=workers, out_dir=cache, progress=progress,
                overwrite=True)
    runs = Runs(wall_s=time.perf_counter() - started)
    for row in res.table.itertuples(index=False):
        if row.status == "complete":
            runs.dirs.setdefault(row.variant, []).append((int(row.seed), cache / "runs" / row.key))
        else:
            runs.failed.append(f"{row.variant} seed {row.seed}: {row.error}")
    return runs


def cached_family(scenario: Scenario, seeds: int, cache: Path) -> Runs:
    """The runs of ``scenario``'s variants x seeds already finished in the cache (nothing is run)."""
    from ..experiments.executors import read_summary
    from ..experiments.sweep import expand

    _, members = expand(scenario, seeds=seeds)
    runs = Runs()
    for m in members:
        run_dir = cache / "runs" / m.key
        if read_summary(run_dir, m.scenario) is not None:  # checked against its manifest
            runs.dirs.setdefault(m.params["variant"], []).append((int(m.seed), run_dir))
        else:
            runs.failed.append(f"{m.params['variant']} seed {m.seed}: not in the cache")
    return runs


# ---------------------------------------------------------------------------------------------
# data tables


def write_data(data: pd.DataFrame, path: Path) -> Path:
    """Write a recipe's data CSV: floats to 6 significant digits (compact, and stable across platforms)."""
    write_atomic(path, data.to_csv(index=False, float_format="%.6g").encode())
    return path


def read_data(path: Path) -> pd.DataFrame:
    """Read a recipe's data CSV; a one-line error when it is not there."""
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise ConfigError(f"--data: {path} does not exist (a recipe's data CSV: run the recipe, or use the "
                          "committed figures/ folder)") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--data: {path} cannot be read as a CSV: {exc}") from None


# ---------------------------------------------------------------------------------------------
# plotting helpers shared by the papers


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_caption(scale: str, data: pd.DataFrame) -> str:
    """What every figure says about itself: its scale and the seeds of its data."""
    seeds = data_seeds(data)
    return f"{scale} scale, {seeds} seed{'' if seeds == 1 else 's'}"


def seed_mean_curves(ax, curves: pd.DataFrame, variants: Sequence[tuple[str, str]], target: float) -> None:
    """Seed-averaged accuracy (%) against simulated time on ``ax``, one line per (variant, label) of
    ``curves`` (rows with variant, seed, time_s, accuracy), and the target as a dotted line."""
    styles = ("-", "--", "-.", ":")
    for i, (variant, label) in enumerate(variants):
        of = curves[curves["variant"] == variant] if len(curves) else curves
        if not len(of):
            continue
        grid = np.arange(0.0, of["time_s"].max() + 1e-9, 1.0)
        acc = np.array([np.interp(grid, c["time_s"], c["accuracy"]) for _, c in of.groupby("seed")])
        ax.plot(grid, 100 * acc.mean(0), color=f"C{i}", ls=styles[i % 4], lw=1.5,
                label=f"{label} ({len(acc)} seed{'' if len(acc) == 1 else 's'})")
    if math.isfinite(target):
        ax.axhline(100 * target, color="grey", ls=":", lw=1, label=f"target {100 * target:.0f} %")
    ax.set(xlabel="simulated wall-clock time (s)", ylabel="test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def save_figure(fig, path: Path, dpi: int = 120, caption: str | None = None) -> Path:
    """Lay out, write and close a figure (``caption``: a line at its bottom right); returns its path."""
    fig.tight_layout()
    if caption:
        fig.text(0.995, 0.003, caption, ha="right", va="bottom", fontsize=7, color="dimgrey")
    write_figure(fig, path, dpi=dpi, metadata={"Software": None})
    pyplot().close(fig)
    return path


def wireless_figure(data: pd.DataFrame, path: Path, variants: Sequence[str],
                    panels: Sequence[tuple[str, str, str, str]], curve: Callable[[pd.DataFrame, str], pd.DataFrame],
                    line: Callable[[str, pd.DataFrame], dict], title: str, caption: str,
                    figsize: tuple[float, float], title_size: float | None = None, dpi: int = 120) -> Path:
    """The figure of a paper's wireless study: panels side by side, one line per variant of ``variants``
    that ``data`` holds runs of (its "variant" column), the legend in the first panel.

    ``panels``: each panel's (x column, y column, x label, y label); ``curve(runs, x)``: a variant's
    runs reduced to the curve drawn against ``x`` (mean over seeds), a frame with the x and y columns;
    ``line(variant, runs)``: the line's matplotlib keywords, its legend label among them."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=figsize, squeeze=False)
    axes = axes[0]
    for variant in variants:
        runs = data[data["variant"] == variant]
        if runs.empty:
            continue
        style = line(variant, runs)
        for ax, (x, y, _, _) in zip(axes, panels):
            points = curve(runs, x)
            ax.plot(points[x], points[y], **style)
    for ax, (_, _, xlabel, ylabel) in zip(axes, panels):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, **({} if title_size is None else {"fontsize": title_size}))
    return save_figure(fig, path, dpi=dpi, caption=caption)


# ---------------------------------------------------------------------------------------------
# running recipes


def reproduce(recipes: Sequence[Recipe], scale: str = "cpu", seeds: int = 3, out: str | Path = "runs/papers",
              figures: str | Path | None = None, executor: str = "serial", workers: int | None = None,
              overrides: Sequence[str] = (), progress: bool = True, run: bool = True,
              data: str | Path | None = None) -> list[Report]:
    """Run, collect and report recipes; return one Report per recipe.

    Runs go to ``out/cache`` (shared by every recipe and call: finished runs are reused); each
    recipe's data CSV, figures and report go to ``figures`` (default ``out/figures``). With
    ``run=False`` nothing is run: the recipes use the runs already in the cache and list the
    missing ones as failed. With ``data`` (a folder holding recipes' data CSVs, e.g. the committed
    figures/) nothing is run or collected: the reports are drawn again from that data.
    """
    if scale not in SCALES:
        raise ConfigError(f"--scale {scale!r}: must be one of {', '.join(SCALES)}")
    if seeds < 1:
        raise ConfigError(f"--seeds {seeds}: must be at least 1")
    out = Path(out)
    given = figures is not None
    figures = Path(figures) if given else out / "figures"
    check_output_folder(figures, "--figures")  # a read-only folder: one line before the runs, not after
    if data is not None:  # every data file is read before anything is written
        tables = [(r, read_data(Path(data) / r.data_file)) for r in recipes]
        _figures_folder(figures, theirs=given)
        return [_report_from_given(r, table, Path(data) / r.data_file, figures, scale) for r, table in tables]
    # the cache is wirelessfl's own folder under --out: a link planted there is refused, not written through
    check_folder(out / "cache")
    families: dict[str, tuple[Scenario, dict]] = {}
    for recipe in recipes:
        for key, (base, variants) in recipe.families(scale, overrides).items():
            families.setdefault(key, (base, {}))[1].update(variants)
    runs = Runs()
    for base, variants in families.values():
        scenario = family(base, variants)
        runs.merge(run_family(scenario, seeds, out / "cache", executor, workers, progress) if run
                   else cached_family(scenario, seeds, out / "cache"))
    _figures_folder(figures, theirs=given)
    reports = []
    for recipe in recipes:
        needed = recipe.variants(scale, overrides)
        failed = [f for f in runs.failed if f.split(" seed ")[0] in needed]
        # the report is drawn from the data as written, so that the data alone redraws it exactly
        path = write_data(recipe.collect(runs, scale), figures / recipe.data_file)
        reports.append(_report(recipe, read_data(path), figures, scale, failed))
        reports[-1].outputs.insert(0, path)
    return reports


def _figures_folder(figures: Path, theirs: bool) -> None:
    """The figures' folder, made unless it is one (a link the user named as --figures is theirs;
    one planted at OUT/figures is refused)."""
    make_folder(figures, theirs=theirs)


def _report_from_given(recipe: Recipe, table: pd.DataFrame, path: Path, figures: Path, scale: str) -> Report:
    """_report on data a user gave (--data): data that lack what the report draws are one line."""
    try:
        return _report(recipe, table, figures, scale, [])
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
        what = f"no column {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"--data: {path} is not the data of recipe {recipe.key} ({what})") from None


def run_summary(run_dir: Path) -> dict:
    """A run's summary.json."""
    return read_json(Path(run_dir) / "summary.json")


def last_rows(data: pd.DataFrame, order: str = "round") -> pd.DataFrame:
    """Each run's (variant and seed) last evaluation by ``order``: the numbers the tables report."""
    if data.empty:
        return data
    last = data.groupby(["variant", "seed"])[order].transform("max")
    return data[data[order] == last].sort_values(["variant", "seed"], kind="stable").reset_index(drop=True)


def mean_std(values, digits: int = 3) -> str:
    """"mean ± std (n)" of per-seed values, std as SPREAD says, n the seeds counted."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return "n/a"
    if v.size == 1:
        return f"{v[0]:.{digits}g} (1)"
    return f"{v.mean():.{digits}g} ± {seed_std(v):.2g} ({v.size})"


def spread_cell(values: pd.Series, fmt: str) -> str:
    """A table cell: the mean ± std over seeds of ``values`` (NaN left out: a seed that did not reach
    a target), "not reached" when none is left."""
    values = values.dropna()
    return with_spread(values.mean(), seed_std(values), fmt) if len(values) else "not reached"


def runs_and_curves(data: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A recipe's data split into its rows of kind "run" and of kind "curve" (an empty table: both)."""
    if not len(data):
        return data, data
    return data[data["kind"] == "run"], data[data["kind"] == "curve"]


def curve_rows(run_dir: Path, key: dict) -> list[dict]:
    """A run's accuracy curve as data rows of kind "curve" (time_s, accuracy of each evaluation), with ``key``."""
    evals = pd.read_csv(Path(run_dir) / "evals.csv")
    return [{"kind": "curve", **key, "time_s": t, "accuracy": a} for t, a in zip(evals.time_s, evals.accuracy)]


def data_seeds(table: pd.DataFrame) -> int:
    """How many seeds a data table holds: its seed column, or the seeds a seed-averaged one counts."""
    if "seed" in table and len(table):
        return int(table["seed"].nunique())
    return int(table["seeds"].max()) if "seeds" in table and len(table) else 0


def _report(recipe: Recipe, table: pd.DataFrame, figures: Path, scale: str, failed: list[str]) -> Report:
    """Draw a recipe's report from its data and write it (Markdown beside the figures, numbers as JSON)."""
    started = time.perf_counter()
    report = recipe.report(table, figures, scale)
    report.wall_s = time.perf_counter() - started
    report.failed = failed
    # the report depends on the data alone, so the committed one can be compared with a redrawn one
    text = [f"# {recipe.key}: {recipe.title}", "", f"Scale {scale}; data: {recipe.data_file} "
            f"({data_seeds(table)} seed(s)).", "", report.markdown]
    if failed:
        text += ["", "Failed or missing runs:", *(f"- {f}" for f in failed)]
    md = figures / recipe.report_file
    write_atomic(md, "\n".join(text) + "\n")  # never through a link planted there
    write_json_atomic(md.with_suffix(".json"), report.numbers)
    report.outputs = [md, *report.outputs]
    return report
