"""The core paper's results that depend on the horizon and on the paper's own rules
(docs/papers/lyapunov.md).

Three recipes beside the figures of ``figures.py``:

- ``lyapunov:horizon``: time to target = rounds x mean round length, and only the second factor
  needs no training. This measures it timing-only at the paper's horizons (m = 1: 40,000 rounds,
  m = 5: 20,000, m = 10: 15,000; N = 100, V = 100, lambda = 100) on heterogeneous and homogeneous
  channels, for 0, 1 and 2 s of computation per round: per-round gain = uniform's mean round length
  / lyapunov's, per seed (both policies on that seed's channel draws).
- ``lyapunov:k10``: the cpu scale with the paper's K = 10 local steps (everything else as the cpu
  scale, round budgets to fit): an ablation of the horizon, m = 1 and 10, both channel profiles.
- ``lyapunov:paper_rules``: Fig. 7, Fig. 8 and the m = 1 and m = 10 cells of Fig. 3 run again with
  the paper's printed power rule (``power_rule = "paper"``, the erratum in docs/papers/lyapunov.md,
  "Power") and its selection solver (``solver = "manifold"``, pymanopt), beside the same runs with the
  defaults.

Spreads over seeds follow recipes.SPREAD (population std).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import pandas as pd

from ...experiments.analysis import markdown_table
from ...sim.records.device_arrays import load_decisions
from .common import (INF, PAPER_NUMBERS, SCALES, SPEEDUP_LEGEND, HORIZON_LEGEND, Cell, Context, Scale,
                       TimingCell, _caption, _convergence_figure, _fig7_cells, _fig8_cells, _horizon_rows,
                       _speedup_rows, _timing_overrides, lyapunov, settle_round, time_average_power, timing_base,
                       training_base, training_data, uniform)
from ..recipes import SPREAD, Recipe, Report, Runs, mean_std, pyplot, save_figure, seed_std

# ---------------------------------------------------------------------------------------------
# per-round gain at the paper's horizon (timing only)

HORIZON_ROUNDS = {"tiny": {1: 60, 5: 40, 10: 30}, "cpu": {1: 40000, 5: 20000, 10: 15000}}
HORIZON_ROUNDS["paper"] = HORIZON_ROUNDS["cpu"]
COMPUTE_S = (0.0, 1.0, 2.0)
M_VALUES = (1, 5, 10)
CHANNELS = {"het": "heterogeneous", "hom": "homogeneous"}

PAPER_SPEEDUPS = {("het", 10, 0.0): PAPER_NUMBERS["fig3_speedup_m10_c0"],
                  ("het", 1, 0.0): PAPER_NUMBERS["fig3_speedup_m1_c0"],
                  ("het", 5, 2.0): PAPER_NUMBERS["fig3_speedup_best_c2"],
                  ("hom", 10, 0.0): PAPER_NUMBERS["fig6_speedup_m10"],
                  ("hom", 1, 0.0): PAPER_NUMBERS["fig6_speedup_m1"]}
"""The paper's time-to-target speed-ups (uniform / lyapunov) that a per-round gain can be set beside."""


@dataclasses.dataclass(frozen=True)
class HorizonCell:
    """A timing-only run: channel profile, policy, m and the computation time per round."""

    channel: str
    policy: str
    m: int
    compute_s: float
    rounds: int

    @property
    def name(self) -> str:
        """A stable name (part of the cache key)."""
        return f"horizon-{self.channel}-{self.policy}-m{self.m}-c{self.compute_s:g}-r{self.rounds}"

    def overrides(self) -> dict:
        ov = {"scheduler.name": self.policy, "scheduler.m": self.m, "run.rounds": self.rounds,
              "devices.compute_s": self.compute_s, "run.record_devices": False}
        if self.channel == "hom":
            ov.update({"channel.profile": "homogeneous", "channel.sigma": 1.0})
        if self.policy == "lyapunov":
            ov.update({"scheduler.V": 100.0, "scheduler.lam": 100.0})
        return ov


def horizon_cells(scale: str) -> list[HorizonCell]:
    """The runs: no computation time. A constant computation time c adds c to every round of both
    policies and changes nothing else (the scheduler does not see it, and every device starts to
    upload at c), so the gain at c is (uniform + c) / (lyapunov + c) of these runs' mean round
    lengths (tests/test_papers_lyapunov.py checks the shift on runs with c > 0)."""
    return [HorizonCell(ch, pol, m, 0.0, HORIZON_ROUNDS[scale][m]) for ch in CHANNELS for m in M_VALUES
            for pol in ("lyapunov", "uniform")]


def _horizon_families(scale: str, overrides: Sequence[str]):
    base = timing_base(SCALES[scale], overrides)
    return {f"lyapunov/horizon/{scale}": (base, {c.name: c.overrides() for c in horizon_cells(scale)})}


def _collect_horizon(runs: Runs, scale: str) -> pd.DataFrame:
    """Per run: its mean round length, airtime and computation per round."""
    rows = []
    for cell in horizon_cells(scale):
        for seed, folder in runs.seeds(cell.name):
            r = pd.read_csv(folder / "rounds.csv", usecols=["t_start", "t_end", "comm_s", "comp_s"])
            rows.append({"channel": cell.channel, "policy": cell.policy, "m": cell.m, "compute_s": cell.compute_s,
                         "seed": seed, "rounds": len(r), "mean_round_s": float((r.t_end - r.t_start).mean()),
                         "mean_airtime_s": float(r.comm_s.mean()), "mean_comp_s": float(r.comp_s.mean())})
    return pd.DataFrame(rows, columns=["channel", "policy", "m", "compute_s", "seed", "rounds", "mean_round_s",
                                       "mean_airtime_s", "mean_comp_s"])


def horizon_gains(data: pd.DataFrame) -> pd.DataFrame:
    """Per (channel, m, computation c in COMPUTE_S, seed): uniform's mean round length over lyapunov's,
    (uniform + c) / (lyapunov + c) of the runs without computation (see horizon_cells)."""
    runs = data[data.compute_s == 0].set_index(["channel", "m", "seed", "policy"])["mean_round_s"]
    rows = []
    for (channel, m, seed), _ in data.groupby(["channel", "m", "seed"], sort=False):
        try:
            u, ly = runs[(channel, m, seed, "uniform")], runs[(channel, m, seed, "lyapunov")]
        except KeyError:
            continue
        for c in COMPUTE_S:
            rows.append({"channel": channel, "m": int(m), "compute_s": c, "seed": int(seed), "uniform_s": u + c,
                         "lyapunov_s": ly + c, "gain": (u + c) / (ly + c)})
    return pd.DataFrame(rows)


def analyse_horizon(ctx: Context) -> Report:
    """The per-round gain at the paper's horizon, against the paper's speed-ups."""
    gains = horizon_gains(ctx.data)
    rows, numbers = [], {"gains": []}
    for (channel, m), sub in gains.groupby(["channel", "m"], sort=False):
        row = {"channels": CHANNELS[channel], "m": m, "rounds": int(ctx.data[(ctx.data.channel == channel)
                                                                             & (ctx.data.m == m)]["rounds"].max())}
        for c in COMPUTE_S:
            g = sub[sub.compute_s == c]
            row[f"gain, c = {c:g} s"] = mean_std(g["gain"])
            numbers["gains"].append({"channel": channel, "m": m, "compute_s": c, "mean": float(g["gain"].mean()),
                                     "std": seed_std(g["gain"]),
                                     "seeds": len(g), "uniform_s": float(g["uniform_s"].mean()),
                                     "lyapunov_s": float(g["lyapunov_s"].mean())})
        paper = [f"{PAPER_SPEEDUPS[(channel, mm, c)]:g}× (m = {mm}, c = {c:g})" for (ch, mm, c) in PAPER_SPEEDUPS
                 if ch == channel and mm == m]
        row["paper's speed-up"] = "; ".join(paper) or "—"
        rows.append(row)
    table = pd.DataFrame(rows)

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0), sharey=True)
    colours = {1: "tab:blue", 5: "tab:orange", 10: "tab:green"}
    for ax, channel in zip(axes, CHANNELS):
        for m in M_VALUES:
            g = gains[(gains.channel == channel) & (gains.m == m)].groupby("compute_s")["gain"]
            if not len(g.mean()):
                continue
            ax.errorbar(g.mean().index, g.mean().values, yerr=g.agg(seed_std).values, color=colours[m],
                        marker="o", capsize=3, label=f"m = {m}")
        for (ch, m, c), value in PAPER_SPEEDUPS.items():
            if ch == channel:
                ax.scatter([c], [value], marker="*", s=120, color=colours[m], edgecolor="black", zorder=5)
        ax.axhline(1.0, color="grey", ls=":", lw=1)
        ax.set_xticks(COMPUTE_S)
        ax.set_xlabel("computation time per round (s)")
        ax.set_title(f"{CHANNELS[channel]} channels")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("per-round gain: uniform / lyapunov mean round length")
    axes[0].set_yscale("log")
    axes[0].set_yticks([1, 1.5, 2, 3, 5, 8], labels=["1", "1.5", "2", "3", "5", "8"])
    axes[0].minorticks_off()
    axes[0].legend(fontsize=8, title="dots: mean ± std over seeds; ★: paper's speed-up", title_fontsize=7)
    horizon = ", ".join(f"m = {m}: {int(r):,}" for m, r in ctx.data.groupby("m")["rounds"].max().items())
    fig.suptitle(f"Per-round gain, timing only, λ = V = 100; {ctx.scale.name} scale, {ctx.seeds} seeds; "
                 f"rounds: {horizon}", fontsize=9)
    path = save_figure(fig, ctx.figures / "lyapunov_horizon.png")
    md = ["Per-round gain (uniform's mean round length / lyapunov's, λ = 100, V = 100), timing only at the paper's "
          f"horizons, mean ± {SPREAD} (seed count in brackets), each seed pairing both policies on its "
          "channel draws:", "", markdown_table(table), "",
          "Time to target = rounds × mean round length, so a speed-up is this gain times the rounds ratio (uniform's "
          "rounds to target / lyapunov's), which only training measures. The runs have no computation time; a "
          "constant computation time c adds c to every round of both policies and changes nothing else, so the "
          "gain at c is (uniform + c) / (lyapunov + c)."]
    return Report("horizon", [path], numbers, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# the cpu scale with K = 10 local steps

K10_SCALES = {
    # the cpu scale (Fashion-MNIST, MLP, γ = 0.02, targets 0.80) with the paper's K = 10: the targets
    # come about ten times sooner, so the budgets are a quarter of the cpu scale's
    "cpu": dataclasses.replace(SCALES["cpu"], name="cpu", training_overrides=(
        *SCALES["cpu"].training_overrides, "learning.local_steps=10"), rounds={(None, 1, None): 1000,
                                                                                 (None, 10, None): 400}),
    "tiny": dataclasses.replace(SCALES["tiny"], name="tiny", training_overrides=(
        *SCALES["tiny"].training_overrides, "learning.local_steps=10")),
}
K10_SCALES["paper"] = SCALES["paper"]  # the paper's scale has K = 10 already


def _k10_pairs() -> list[tuple[Cell, Cell]]:
    return [(lyapunov(ch, INF, m), uniform(ch, INF, m)) for ch in CHANNELS for m in (1, 10)]


def _k10_cells() -> list[Cell]:
    return [c for pair in _k10_pairs() for c in pair]


def _k10_families(scale: str, overrides: Sequence[str]):
    sc = K10_SCALES[scale]
    return {f"lyapunov/training_k10/{scale}": (training_base(sc, overrides),
                                               {c.name: sc.overrides(c) for c in _k10_cells()})}


def _collect_k10(runs: Runs, scale: str) -> pd.DataFrame:
    return training_data(runs, K10_SCALES[scale], _k10_cells())


def analyse_k10(ctx: Context) -> Report:
    """Speed-ups with K = 10 local steps at the cpu scale, and where they come from."""
    pairs = _k10_pairs()
    table = _speedup_rows(ctx, pairs, 0.0)
    horizon = _horizon_rows(ctx, pairs)
    path = ctx.figures / "lyapunov_k10.png"
    _convergence_figure(ctx, [c for c in _k10_cells() if c.channel == "het"], path, "time", (0.0,),
                        "K = 10 local steps, heterogeneous channels, α = ∞ (solid: lyapunov λ = 100, dashed: uniform)",
                        lambda c: {1: "tab:blue", 10: "tab:green"}[c.m], lambda c: f"{c.policy} m={c.m}")
    md = ["Time to target (s) and speed-up with K = 10 local steps (the cpu scale otherwise), α = ∞, no "
          "computation time:", "", markdown_table(table), "", SPEEDUP_LEGEND, "", markdown_table(horizon), "",
          HORIZON_LEGEND]
    return Report("k10", [path], {"speedups": table.to_dict("records"),
                                  "airtime_by_horizon": horizon.to_dict("records")}, "\n".join(md))


# ---------------------------------------------------------------------------------------------
# the paper's printed power rule and its manifold solver

RULES = {"defaults": {}, "paper": {"scheduler.power_rule": "paper", "scheduler.solver": "manifold"}}
"""The two ways of running the Lyapunov scheduler compared: ours (exact power, exact selection) and the paper's."""


def _rules_training_cells() -> list[Cell]:
    return [c for m in (1, 10) for c in (lyapunov("het", INF, m), uniform("het", INF, m))]


def _rules_timing_cells(scale: Scale) -> list[TimingCell]:
    return list(dict.fromkeys(_fig7_cells(scale) + _fig8_cells(scale)))


def _variant(name: str, rules: str) -> str:
    return name if rules == "defaults" else f"{name}-paper-rules"


def _rules_families(scale: str, overrides: Sequence[str]):
    sc = SCALES[scale]
    training, timing = {}, {}
    for rules, extra in RULES.items():
        for cell in _rules_training_cells():
            if cell.policy == "lyapunov" or rules == "defaults":  # uniform has no power rule or solver
                training[_variant(cell.name, rules)] = {**sc.overrides(cell), **extra}
        for cell in _rules_timing_cells(sc):
            if cell.policy == "lyapunov" or rules == "defaults":
                timing[_variant(cell.name, rules)] = {**_timing_overrides(cell), **extra}
    return {f"lyapunov/training/{scale}": (training_base(sc, overrides), training),
            f"lyapunov/timing/{scale}": (timing_base(sc, overrides), timing)}


def _collect_rules(runs: Runs, scale: str) -> pd.DataFrame:
    """Per lyapunov run under each rule: the training cells' evaluation curves (as the figures keep
    them) and, for the timing cells, the settling of the time-average power (Fig. 7), the share of
    the selections of the top 10 % σ and the mean distinct devices per round (Fig. 8)."""
    sc = SCALES[scale]
    frames = []
    for rules in RULES:
        cells = [c for c in _rules_training_cells() if c.policy == "lyapunov" or rules == "defaults"]
        renamed = Runs({c.name: runs.seeds(_variant(c.name, rules)) for c in cells})
        frame = training_data(renamed, sc, cells)
        frame.insert(0, "rules", rules)
        frames.append(frame)
        for cell in _rules_timing_cells(sc):
            if cell.policy != "lyapunov":
                continue
            for seed, folder in runs.seeds(_variant(cell.name, rules)):
                decisions = load_decisions(folder, keys=("power", "q"))
                power = time_average_power(decisions).mean(axis=1)
                devices = pd.read_csv(folder / "devices.csv")
                share = devices["selections"].to_numpy() / devices["selections"].sum()
                r = pd.read_csv(folder / "rounds.csv", usecols=["t_start", "t_end", "num_selected"])
                frames.append(pd.DataFrame([{
                    "rules": rules, "variant": cell.name, "seed": seed, "V": cell.V, "lam": cell.lam,
                    "rounds": len(r), "power_final": power[-1], "settle_mean_round": settle_round(power),
                    "share_top10pct_sigma": share[-len(share) // 10:].sum(),
                    "mean_distinct": r["num_selected"].mean(), "mean_round_s": (r.t_end - r.t_start).mean()}]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def analyse_rules(ctx: Context) -> Report:
    """The defaults against the paper's power rule and solver: speed-ups of Fig. 3's m = 1 and 10 cells,
    and Figs. 7-8's numbers."""
    data = ctx.data
    parts, numbers = [], {}
    for rules in RULES:
        # uniform runs once (it has neither power rule nor solver): both views compare against it
        sub = data[((data["rules"] == rules) | data["variant"].str.contains("-uniform-")) & data["round"].notna()]
        view = Context(ctx.scale, sub, ctx.figures)
        table = _speedup_rows(view, [(lyapunov("het", INF, m), uniform("het", INF, m)) for m in (1, 10)], 0.0)
        table.insert(0, "rules", rules)
        parts.append(table)
    speed = pd.concat(parts, ignore_index=True)
    numbers["speedups"] = speed.to_dict("records")
    timing = data[data["rounds"].notna() & data["round"].isna()] if "round" in data else data.iloc[0:0]
    rows = []
    for (variant, rules), g in timing.groupby(["variant", "rules"], sort=False):
        rows.append({"setting": variant.replace("timing-lyapunov-", ""), "rules": rules,
                     "power_final": mean_std(g["power_final"]), "rounds to within 5 % of P̄": mean_std(
                         g["settle_mean_round"]), "selection share of top 10 % σ": mean_std(g["share_top10pct_sigma"]),
                     "distinct devices per round": mean_std(g["mean_distinct"]),
                     "mean round (s)": mean_std(g["mean_round_s"])})
    fig78 = pd.DataFrame(rows)
    numbers["timing"] = rows

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0))
    for ax, m in zip(axes, (1, 10)):
        for rules, ls in (("defaults", "-"), ("paper", "--")):
            sub = data[(data["rules"] == rules) & data["round"].notna()]
            for cell, colour in ((lyapunov("het", INF, m), "tab:blue"), (uniform("het", INF, m), "tab:grey")):
                if cell.policy == "uniform" and rules == "paper":
                    continue
                curve = sub[sub["variant"] == cell.name].groupby("time_s")["accuracy"].mean()
                if len(curve):
                    label = f"{cell.policy}" + (f" ({'exact rules' if rules == 'defaults' else 'paper rules'})"
                                                if cell.policy == "lyapunov" else "")
                    ax.plot(curve.index, curve.values, color=colour if rules == "defaults" else "tab:red",
                            ls=ls, lw=1.4, label=label)
        ax.axhline(ctx.scale.targets[("het", INF)], color="grey", ls=":", lw=1, label="target")
        ax.set_title(f"m = {m}, heterogeneous channels, α = ∞")
        ax.set_xscale("log")  # uniform's m = 10 takes several times lyapunov's time
        ax.set_xlabel("simulated wall-clock time (s, log scale)")
        ax.set_ylabel("test accuracy (mean over seeds)")
        ax.set_ylim(bottom=0.55)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Exact power rule and solver (defaults) against the paper's printed rule and manifold solver; "
                 f"{_caption(ctx)}", fontsize=9)
    path = save_figure(fig, ctx.figures / "lyapunov_paper_rules.png")
    md = ["Fig. 3's m = 1 and m = 10 cells (heterogeneous, α = ∞, c = 0) with the defaults (exact power rule, "
          "exact selection) and with the paper's printed power rule and pymanopt's manifold solver:", "",
          markdown_table(speed), "", SPEEDUP_LEGEND, "",
          f"Figs. 7 and 8 (timing only, m = 10), mean ± {SPREAD} (seed count in brackets):", "",
          markdown_table(fig78)]
    return Report("paper_rules", [path], numbers, "\n".join(md))


# ---------------------------------------------------------------------------------------------


def _report_with(analyse, scales: dict):
    return lambda data, figures, scale: analyse(Context(scales[scale], data, figures))


# CPU minutes of all runs of 3 seeds at the cpu scale, measured serially on two cores shared with other
# work (paper_rules: the sum of its 39 timing runs' wall times at a load of 3-4 on 2 cores, most of it the
# manifold solver's; its Fig. 3 training runs are lyapunov:fig3's)
RECIPES: list[Recipe] = [
    Recipe("lyapunov", "horizon", "per-round gain at the paper's horizons, m in {1, 5, 10}, c in {0, 1, 2} s "
           "(timing only)", ("lyapunov_horizon.png",), _horizon_families, _collect_horizon,
           _report_with(analyse_horizon, SCALES), {"tiny": 0.01, "cpu": 10.9}),
    Recipe("lyapunov", "k10", "the cpu scale with K = 10 local steps: speed-ups at a short horizon", ("lyapunov_k10.png",),
           _k10_families, _collect_k10, _report_with(analyse_k10, K10_SCALES), {"cpu": 24.8}),
    Recipe("lyapunov", "paper_rules", "Figs. 3 (m = 1, 10), 7 and 8 with the paper's power rule and manifold solver",
           ("lyapunov_paper_rules.png",), _rules_families, _collect_rules, _report_with(analyse_rules, SCALES),
           {"cpu": 86.0}),
]
