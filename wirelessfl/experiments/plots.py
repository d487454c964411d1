"""Figures of runs: accuracy and training loss against simulated wall-clock time (or rounds)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed or assumed
import matplotlib.pyplot as plt  # noqa: E402

from .run import RunResult, load_run  # noqa: E402

_X = {"time": ("time_s", "simulated wall-clock time (s)"), "round": ("round", "round")}
_Y = {"accuracy": "test accuracy", "train_loss": "training loss", "test_loss": "test loss"}


def find_runs(paths: list[str | Path]) -> dict[str, RunResult]:
    """Runs under the given paths: each path is a run directory or a folder of run directories."""
    runs: dict[str, RunResult] = {}
    for path in map(Path, paths):
        if (path / "evals.csv").exists():
            runs[path.name] = load_run(path)
            continue
        subs = sorted(p.parent for p in path.glob("*/evals.csv"))
        if not subs:
            raise FileNotFoundError(f"{path}: no run directory (a folder with evals.csv) found there")
        for sub in subs:
            runs[sub.name if len(paths) == 1 else f"{path.name}/{sub.name}"] = load_run(sub)
    return runs


def plot_runs(runs: dict[str, RunResult], out_dir: str | Path, x: str = "time",
              metrics: tuple[str, ...] = ("accuracy", "train_loss"), title: str | None = None) -> list[Path]:
    """One PNG per metric with one line per run; returns the written paths."""
    if x not in _X:
        raise ValueError(f"x = {x!r}: must be one of {', '.join(_X)}")
    xcol, xlabel = _X[x]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for metric in metrics:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for name, run in runs.items():
            if run.evals.empty or metric not in run.evals:
                continue
            # the model only changes when a round ends: hold each value until the next evaluation
            ax.step(run.evals[xcol], run.evals[metric], where="post", label=name, lw=1.6)
        target = next((r.summary.get("target_accuracy") for r in runs.values()
                       if r.summary.get("target_accuracy")), None)
        if metric == "accuracy" and target:
            ax.axhline(target, color="grey", ls=":", lw=1, label=f"target {target:g}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(_Y.get(metric, metric))
        if title:
            ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out_dir / f"{metric}_vs_{x}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written
