"""SAFARI against scheduler-induced starvation: the wireless figure of spec 003 sec. 7.

Runs the variants of ``scenarios/studies/safari_lyapunov_starvation.toml`` (FedAvg with uniform
sampling, FedAvg with the Lyapunov scheduler at lam = 100, SAFARI with each, and the Lyapunov pair
with plain averaging) for several seeds through the sweep machinery (serial, resumable), then
draws accuracy against simulated wall-clock time and the per-device participation, and writes the
headline numbers.

Run: ``python -m wirelessfl.experiments.safari_wireless [--seeds 3]``; writes
figures/safari_wireless.png, figures/safari_wireless.csv and figures/safari_wireless.md.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import load_scenario
from ..jsonio import read_json
from .sweep import expand, sweep

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "studies" / "safari_lyapunov_starvation.toml"
LABELS = {"fedavg_uniform": "FedAvg + uniform", "fedavg_lyapunov": "FedAvg + Lyapunov (lam 100)",
          "safari_lyapunov": "SAFARI + Lyapunov (lam 100)", "safari_uniform": "SAFARI + uniform",
          "fedavg_lyapunov_mean": "FedAvg + Lyapunov, plain average",
          "safari_lyapunov_mean": "SAFARI + Lyapunov, plain average"}
TAIL_S = 200.0  # "late" accuracy: mean over the evaluations of the last TAIL_S simulated seconds


def collect(out: Path, seeds: int) -> tuple[pd.DataFrame, dict]:
    """Per run: the headline numbers; and per variant the eval curves and device tables."""
    base = load_scenario(SCENARIO)
    _, members = expand(base, None, seeds)
    rows, curves = [], {}
    for m in members:
        run_dir = out / "runs" / m.key
        if not (run_dir / "summary.json").exists():
            continue
        summary = read_json(run_dir / "summary.json")
        ev = pd.read_csv(run_dir / "evals.csv")
        dev = pd.read_csv(run_dir / "devices.csv")
        variant, budget = m.params["variant"], m.scenario.run.time_budget_s
        late = ev[ev.time_s >= budget - TAIL_S].accuracy
        sel = dev.selections.to_numpy()
        rounds = summary["rounds"] - summary["server_rounds"]  # client rounds
        rows.append({"variant": variant, "seed": m.seed, "final": 100 * summary["final_accuracy"],
                     "late_mean": 100 * late.mean(), "late_min": 100 * late.min(),
                     "time_to_target_s": summary["time_to_target_s"], "rounds": summary["rounds"],
                     "server_rounds": summary["server_rounds"],
                     "ever_participated": summary["ever_participated"],
                     "weak2_per_round": sel[:2].mean() / max(rounds, 1),
                     "weak2_share": sel[:2].sum() / max(sel.sum(), 1),
                     "weak2_per_100s": 100 * sel[:2].mean() / summary["sim_time_s"],
                     "strong2_share": sel[-2:].sum() / max(sel.sum(), 1)})
        curves.setdefault(variant, []).append((ev.time_s.to_numpy(), 100 * ev.accuracy.to_numpy(), sel))
    return pd.DataFrame(rows), curves


def plot(curves: dict, path: Path, budget_s: float, target: float) -> None:
    """Accuracy against simulated time (mean over seeds, band = min..max over seeds) with the
    unbiased 1 / (N q_n) weights and with the plain average; and the share of all device selections
    each device got (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.3), gridspec_kw={"width_ratios": [1.2, 1.2, 1]})
    grid = np.arange(0.0, budget_s + 1e-9, 10.0)
    colors = {"fedavg_uniform": "C0", "fedavg_lyapunov": "C1", "safari_lyapunov": "C2", "safari_uniform": "C3",
              "fedavg_lyapunov_mean": "C1", "safari_lyapunov_mean": "C2"}
    panels = (("fedavg_uniform", "safari_uniform", "fedavg_lyapunov", "safari_lyapunov"),
              ("fedavg_uniform", "fedavg_lyapunov_mean", "safari_lyapunov_mean"))
    titles = ("aggregation weights 1 / (N q_n) (unbiased)", "Lyapunov with the plain average of the uploads")
    for ax, shown, title in zip(axes[:2], panels, titles):
        for v in (v for v in shown if v in curves):
            acc = np.array([np.interp(grid, t, y) for t, y, _ in curves[v]])
            ls = ":" if v == "safari_uniform" else "-"
            ax.plot(grid, acc.mean(0), color=colors[v], ls=ls, label=f"{LABELS[v]} ({len(acc)} seeds)")
            if len(acc) > 1 and v != "safari_uniform":
                ax.fill_between(grid, acc.min(0), acc.max(0), color=colors[v], alpha=0.12)
        ax.axhline(100 * target, color="grey", ls=":", lw=1)
        ax.set(xlabel="simulated wall-clock time (s)", ylabel="test accuracy (%)", ylim=(0, 90), title=title)
        ax.legend(fontsize=7, loc="lower right")
    b = axes[2]
    width = 0.8 / 2
    for j, v in enumerate(("fedavg_uniform", "fedavg_lyapunov")):
        if v not in curves:
            continue
        share = np.mean([100 * sel / sel.sum() for _, _, sel in curves[v]], axis=0)
        b.bar(np.arange(share.size) + (j - 0.5) * width, share, width, color=colors[v], label=LABELS[v])
    b.set(xlabel="device (sigma from 0.1 to 10; device n holds class n // 2)",
          ylabel="share of all selections (%)", title="who takes part (mean over seeds)",
          xticks=range(0, 20, 2))
    b.legend(fontsize=7)
    fig.suptitle("Fashion-MNIST, logistic regression, 20 devices with one class each, TDMA, m = 10, V = 100",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(runs: pd.DataFrame, target: float) -> str:
    g = runs.groupby("variant")
    order = [v for v in LABELS if v in g.groups]
    lines = [f"| variant | seeds | time to {100 * target:.0f}% (s) | final acc % | mean acc, last {TAIL_S:.0f} s % | "
             f"min acc, last {TAIL_S:.0f} s % | rounds (server) | devices ever selected | weakest 2: share of "
             "client rounds | weakest 2: share of selections | weakest 2: selections per 100 s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in order:
        r = g.get_group(v)
        ttt = r.time_to_target_s
        ttt_s = (f"{ttt.mean():.0f} ± {ttt.std(ddof=0):.0f}" if ttt.notna().all()
                 else f"{ttt.mean():.0f} ({ttt.notna().sum()}/{len(r)} reached)" if ttt.notna().any() else "not reached")
        lines.append(f"| {LABELS[v]} | {len(r)} | {ttt_s} | {r.final.mean():.1f} ± {r.final.std(ddof=0):.1f} | "
                     f"{r.late_mean.mean():.1f} ± {r.late_mean.std(ddof=0):.1f} | {r.late_min.mean():.1f} | "
                     f"{r.rounds.mean():.0f} ({r.server_rounds.mean():.0f}) | {100 * r.ever_participated.mean():.0f}% | "
                     f"{100 * r.weak2_per_round.mean():.1f}% | {100 * r.weak2_share.mean():.1f}% | "
                     f"{r.weak2_per_100s.mean():.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default="runs/safari_wireless", help="sweep folder (resumable)")
    ap.add_argument("--figures", default="figures")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    out, base = Path(args.out), load_scenario(SCENARIO)
    if not args.report_only:
        sweep(base, seeds=args.seeds, executor="serial", out_dir=out)
    runs, curves = collect(out, args.seeds)
    fig_dir = Path(args.figures)
    fig_dir.mkdir(parents=True, exist_ok=True)
    runs.to_csv(fig_dir / "safari_wireless.csv", index=False)
    target = base.run.target_accuracy
    plot(curves, fig_dir / "safari_wireless.png", base.run.time_budget_s, target)
    text = ("# SAFARI against Lyapunov starvation (scenarios/studies/safari_lyapunov_starvation.toml)\n\n"
            "Generated by `python -m wirelessfl.experiments.safari_wireless`; mean ± std over seeds.\n\n"
            + markdown(runs, target))
    (fig_dir / "safari_wireless.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
