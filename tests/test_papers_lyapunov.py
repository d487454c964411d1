"""Paper recipes: every recipe end to end at the tiny scale, and the recipe-level analysis on
hand-made curves whose answers are known in closed form."""
from __future__ import annotations

import gzip
import math
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wirelessfl.cli import main
from wirelessfl.config import ConfigError
from wirelessfl.experiments.sweep import expand
from wirelessfl.papers import lyapunov as P, reproduce
from wirelessfl.papers.recipes import Runs, family

RECIPES = {r.name: r for r in P.RECIPES}


# ---------------------------------------------------------------------------------------------
# hand-made runs


def linear_run(rounds_to_one: float, round_s: float, rounds: int = 40) -> pd.DataFrame:
    """Accuracy r / rounds_to_one (capped at 1) after round r, each round taking round_s."""
    r = np.arange(rounds + 1, dtype=float)
    return pd.DataFrame({"round": r, "time_s": r * round_s, "accuracy": np.minimum(r / rounds_to_one, 1.0),
                         "train_loss": 1.0 / (1.0 + r)})


def test_seed_average_is_the_mean_of_interpolated_runs_with_the_compute_shift():
    a, b = linear_run(10, 1.0), linear_run(20, 1.0)
    avg = P.seed_average([a, b], compute_s=1.0, points=41)
    # with 1 s computation, round r ends at 2r s: accuracies r/10 and r/20 at t = 2r
    t = avg["time_s"].to_numpy()
    expected = (np.minimum(t / 20, 1) + np.minimum(t / 40, 1)) / 2
    np.testing.assert_allclose(avg["mean"], expected, atol=1e-12)
    np.testing.assert_allclose(avg["min"], np.minimum(t / 40, 1), atol=1e-12)
    assert t[-1] == pytest.approx(80.0)
    by_round = P.seed_average([a, b], x="round", points=41)
    assert list(by_round.columns[:2]) == ["round", "mean"]
    assert by_round["mean"].iloc[10] == pytest.approx((1.0 + 0.5) / 2)


def test_time_to_target_grid_follows_rounds_times_round_length():
    # target 0.5: 5 rounds of (1 + c) s for A, 2 rounds of (4 + c) s for B
    runs = {"A": [linear_run(10, 1.0)], "B": [linear_run(4, 4.0)]}
    times = P.time_to_target_grid(runs, 0.5, [0.0, 0.5, 2.0, 10.0])
    wide = times.pivot(index="compute_s", columns="setting", values="time_to_target_s")
    for c in (0.0, 0.5, 2.0, 10.0):
        assert wide.loc[c, "A"] == pytest.approx(5 * (1 + c), rel=2e-3)
        assert wide.loc[c, "B"] == pytest.approx(2 * (4 + c), rel=2e-3)


def test_ranges_table_finds_the_crossover_and_sits_beside_the_papers_rows():
    # A is best below c = 1 s (5 + 5c < 8 + 2c), B above
    runs = {"m=1 lam=100": [linear_run(10, 1.0)], "m=10 lam=1": [linear_run(4, 4.0)]}
    grid = np.round(np.arange(0, 3.01, 0.1), 6)
    times = P.time_to_target_grid(runs, 0.5, grid)
    paper_rows = [(0, 0.83, 1, 100), (0.83, 2.3, 10, 100), (2.3, math.inf, 5, 10)]
    table = P.ranges_table(times, "α=inf", "lyapunov", paper_rows)
    assert len(table) == 3  # the longer of ours (2 ranges) and the paper's (3)
    assert list(table["ours: m"][:2]) == ["1", "10"] and list(table["ours: λ"][:2]) == ["100", "1"]
    lo = float(table["ours: comp time (s)"][1].split("–")[0])
    assert lo == pytest.approx(1.0, abs=0.06)
    assert table["ours: comp time (s)"][1].endswith("∞")
    assert list(table["paper: m"]) == ["1", "10", "5"] and table["paper: comp time (s)"][2] == "2.3–∞"
    assert table["ours: m"][2] == ""  # padded row
    uni = P.ranges_table(times, "α=inf", "uniform", None)
    assert "ours: λ" not in uni and "paper: λ" not in uni


def test_rounds_to_target_of_the_averaged_curve():
    runs = [linear_run(10, 1.0), linear_run(30, 2.0)]
    # mean accuracy r (1/10 + 1/30) / 2 = r / 15 reaches 0.4 at round 6
    assert P.rounds_to_target(runs, 0.4) == pytest.approx(6.0, rel=1e-3)


def test_time_average_power_and_settle_round():
    power = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    q = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    avg = P.time_average_power({"power": power, "q": q})
    np.testing.assert_allclose(avg[:, 0], [2.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(avg[:, 1], [0.0, 0.5, 2 / 3, 0.75])
    assert P.settle_round(avg[:, 0]) == 2.0
    assert math.isnan(P.settle_round(avg[:, 1]))
    assert P.settle_round(np.ones(3)) == 1.0


# ---------------------------------------------------------------------------------------------
# cells, scales and scenarios


def test_cells_shared_by_recipes_are_the_same_runs():
    (fig3,) = (family(*f) for f in RECIPES["fig3"].families("cpu", ()).values())
    (table1,) = (family(*f) for f in RECIPES["table1"].families("cpu", ()).values())
    keys3 = {m.params["variant"]: m.key for m in expand(fig3)[1]}
    keys1 = {m.params["variant"]: m.key for m in expand(table1)[1]}
    assert set(keys3) <= set(keys1)
    assert all(keys1[name] == key for name, key in keys3.items())
    assert len(keys1) == 36  # 3 alphas x (9 lyapunov + 3 uniform settings)


def test_cell_overrides_set_the_case_and_the_budget():
    scale = P.SCALES["cpu"]
    ov = scale.overrides(P.uniform("hom", 1.0, 5))
    assert ov["channel.profile"] == "homogeneous" and ov["channel.sigma"] == 1.0
    assert ov["scheduler.name"] == "uniform" and "scheduler.lam" not in ov
    assert ov["run.target_accuracy"] == scale.targets[("hom", 1.0)]
    assert ov["run.eval_every_rounds"] >= 1
    assert P.lyapunov("het", math.inf, 10, 1).name == "het-ainf-lyapunov-m10-lam1"
    with pytest.raises(KeyError):
        P.Scale("x", (), (), {}, {}, 10, {}, np.zeros(1)).rounds_for(P.uniform("het", 1.0, 1))


def test_paper_scale_scenarios_hold_the_papers_parameters(monkeypatch):
    base = P.training_base(P.SCALES["paper"])
    assert (base.learning.dataset, base.learning.model, base.learning.lr) == ("cifar10", "paper_cnn", 0.01)
    assert base.devices.count == 100 and base.learning.samples_per_device == 500
    assert base.link.model_bits == 32 * 555178 and base.link.bandwidth_hz == 22e6
    assert base.link.p_max == pytest.approx(10 ** 3.5) and base.link.p_bar == 1.0
    assert base.scheduler.options.V == 100.0 and base.learning.local_steps == 10 and base.learning.batch_size == 32
    timing = P.timing_base(P.SCALES["cpu"])
    assert timing.run.timing_only and timing.devices.count == 100 and timing.link.model_bits == 32 * 555178
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # run.device is checked against the machine
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    cuda = [base for name in ("fig3", "fig7") for base, _ in RECIPES[name].families("paper", ['run.device="cuda"']).values()]
    assert cuda[0].run.device == "cuda" and cuda[1].run.device == "cpu"
    cpu = P.training_base(P.SCALES["cpu"])  # the channel and scheduler stay the paper's
    assert (cpu.learning.dataset, cpu.learning.model) == ("fashion_mnist", "mlp")
    assert cpu.link == base.link and cpu.scheduler == base.scheduler and cpu.channel == base.channel


def test_unknown_recipe_and_scale_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="fig9"):
        reproduce("fig9", scale="tiny", out=tmp_path)
    with pytest.raises(ConfigError, match="lyapunov:fig9"):
        reproduce("lyapunov:fig9", scale="tiny", out=tmp_path)
    with pytest.raises(ConfigError, match="huge"):
        reproduce("fig2", scale="huge", out=tmp_path)


# ---------------------------------------------------------------------------------------------
# every recipe end to end (tiny scale: 10 devices, a few rounds, one seed)


def small_fashion_mnist(folder: Path, n_train: int = 2000, n_test: int = 500) -> Path:
    """The first images of Fashion-MNIST as a small IDX folder (loading all 70,000 costs seconds per run)."""
    from wirelessfl.learning.datasets import DatasetNotFoundError, _locate

    try:
        source = Path(_locate("fashion_mnist", None))
    except DatasetNotFoundError:
        pytest.skip("Fashion-MNIST is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    for stem, n in (("train-images-idx3-ubyte", n_train), ("train-labels-idx1-ubyte", n_train),
                    ("t10k-images-idx3-ubyte", n_test), ("t10k-labels-idx1-ubyte", n_test)):
        blob = gzip.decompress((source / f"{stem}.gz").read_bytes())
        ndim = blob[3]
        dims = list(struct.unpack(f">{ndim}I", blob[4:4 + 4 * ndim]))
        item = int(np.prod(dims[1:])) if ndim > 1 else 1
        dims[0] = n
        header = blob[:4] + struct.pack(f">{ndim}I", *dims)
        (folder / stem).write_bytes(header + blob[4 + 4 * ndim:4 + 4 * ndim + n * item])
    return folder


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return small_fashion_mnist(tmp_path_factory.mktemp("data"))


def _reproduce_tiny(out: Path, data_dir: Path, names) -> dict:
    import torch

    torch.set_num_threads(1)
    reports = reproduce(names, scale="tiny", seeds=1, out=out, progress=False,
                          overrides=[f'learning.data_dir="{data_dir}"'])
    return {r.name: r for r in reports}


@pytest.fixture(scope="module")
def tiny_all(tmp_path_factory, data_dir):
    """Every recipe at tiny scale with one seed, once for the module (the tests below share its cache)."""
    out = tmp_path_factory.mktemp("paper_all")
    return out, _reproduce_tiny(out, data_dir, "lyapunov")


def _check_report(out: Path, report) -> None:
    assert not report.failed
    assert report.outputs and all(p.exists() and p.stat().st_size > 0 for p in report.outputs)
    assert (out / "figures" / f"lyapunov_{report.name}.md").read_text().startswith(f"# lyapunov:{report.name}")
    assert (out / "figures" / f"lyapunov_{report.name}.json").exists()
    assert len(pd.read_csv(out / "figures" / f"lyapunov_{report.name}.csv")) > 0


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_recipe_end_to_end(tiny_all, name):
    out, reports = tiny_all
    _check_report(out, reports[name])


def test_table_outputs_have_the_papers_layout(tiny_all):
    out, _ = tiny_all
    text = (out / "figures" / "table1.md").read_text()
    for needle in ("ours: comp time (s)", "paper: comp time (s)", "0.83–2.3", "α=0, target"):
        assert needle in text
    csv = pd.read_csv(out / "figures" / "table2.csv")
    assert set(csv["policy"]) == {"lyapunov", "uniform"} and set(csv["alpha"].astype(float)) == {math.inf, 1.0}
    assert (csv["from_s"].groupby([csv["alpha"], csv["policy"]]).min() == 0).all()


def test_second_call_reuses_the_cache_and_no_run_reports_missing(tiny_all, tmp_path, data_dir):
    out, _ = tiny_all
    ov = [f'learning.data_dir="{data_dir}"']
    before = sorted(p.name for p in (out / "cache" / "runs").iterdir())
    reproduce(["fig5", "fig8"], scale="tiny", seeds=1, out=out, figures=tmp_path, progress=False, overrides=ov)
    assert sorted(p.name for p in (out / "cache" / "runs").iterdir()) == before
    (report,) = reproduce("fig4", scale="tiny", seeds=2, out=out, figures=tmp_path, progress=False, run=False,
                            overrides=ov)
    # fig4 has 6 settings x 2 seeds; the fixture ran seed 0 of each
    assert len(report.failed) == 6 and all("not in the cache" in f for f in report.failed)
    assert sorted(p.name for p in (out / "cache" / "runs").iterdir()) == before


def test_cli_reproduce(tiny_all, tmp_path, capsys, data_dir):
    out, _ = tiny_all
    ov = ["--set", f'learning.data_dir="{data_dir}"']
    assert main(["reproduce", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(f"lyapunov:{name}" in listed for name in RECIPES)
    assert main(["reproduce", "fig2", "--scale", "tiny", "--seeds", "1", "--out", str(out),
                 "--figures", str(tmp_path), "--no-progress", *ov]) == 0
    assert (tmp_path / "fig2.png").exists() and "wrote" in capsys.readouterr().out
    assert main(["reproduce", "fig2", "--scale", "tiny", "--out", str(out), "--no-run", "--no-progress",
                 "--figures", str(tmp_path), *ov]) == 1  # seeds 1 and 2 are not in the cache
    assert main(["reproduce", "fig2", "fig5", "--scale", "tiny", "--seeds", "1", "--out", str(out), "--no-run",
                 "--no-progress", "--figures", str(tmp_path), *ov]) == 0  # several names, all cached
    assert (tmp_path / "fig5.png").exists()
    assert main(["reproduce", "nope", "--scale", "tiny", "--out", str(out)]) == 2
    assert main(["reproduce"]) == 2


# ---------------------------------------------------------------------------------------------
# the table recipe on hand-made runs: time to target 0.5 = (rounds_to_one / 2) x (round_s + c)

_R = {1: 40.0, 5: 20.0, 10: 16.0}            # rounds to accuracy 1, per m
_S = {1: 0.1, 5: 0.5, 10: 1.0}               # seconds per round, per m
_LAM_R = {1.0: 0.8, 10.0: 0.9, 100.0: 1.0}   # lower lambda: fewer rounds ...
_LAM_S = {1.0: 4.0, 10.0: 2.0, 100.0: 1.0}   # ... but longer rounds
_UNI = 1.5                                   # uniform rounds are longer


def _hand_made(cell: P.Cell) -> tuple[float, float]:
    if cell.policy == "lyapunov":
        return _R[cell.m] * _LAM_R[cell.lam], _S[cell.m] * _LAM_S[cell.lam]
    return _R[cell.m], _S[cell.m] * _UNI


def test_table_recipe_on_hand_made_runs_matches_closed_form(tmp_path):
    import dataclasses

    cells = P._table_cells("hom", (P.INF, 1.0))(P.SCALES["tiny"])
    frames = []
    for cell in cells:
        rounds_to_one, round_s = _hand_made(cell)
        frames.append(linear_run(rounds_to_one, round_s, rounds=int(rounds_to_one)).assign(variant=cell.name, seed=0))
    data = pd.concat(frames, ignore_index=True)
    grid = np.round(np.arange(0, 6.0001, 0.05), 6)
    scale = dataclasses.replace(P.SCALES["tiny"], targets={k: 0.5 for k in P.SCALES["tiny"].targets},
                                compute_grid=grid)
    report = P._table_recipe("table2", "hom", (P.INF, 1.0))(P.Context(scale, data, tmp_path))
    table = pd.read_csv(tmp_path / "table2.csv")
    assert (tmp_path / "table2.md").read_text().count("| α=") == 4  # 2 alphas x 2 policies
    checked = 0
    for (alpha, policy), rows in table.groupby(["alpha", "policy"]):
        pol = [c for c in cells if c.policy == policy and c.alpha == float(alpha)]
        for c in grid:
            expected = sorted((_hand_made(cell)[0] / 2 * (_hand_made(cell)[1] + c), cell.setting) for cell in pol)
            if expected[1][0] < expected[0][0] * 1.01:
                continue  # a near tie: the 2000-point grid of mean_time_to_target may pick either
            row = rows[(rows["from_s"] <= c) & (c < rows["to_s"])]
            assert list(row["setting"]) == [expected[0][1]], (alpha, policy, c)
            checked += 1
    assert checked > 400
    # the best setting changes with computation time: m = 1 first, larger m later
    lyap = table[(table["policy"] == "lyapunov") & (table["alpha"].astype(str) == "inf")]
    assert lyap["setting"].iloc[0].startswith("m=1 ") and not lyap["setting"].iloc[-1].startswith("m=1 ")
    assert report.numbers["ranges"]


def test_speedup_rows_split_into_rounds_ratio_and_per_round_gain(tmp_path):
    # to accuracy 0.5 with 2 s computation per round: uniform takes 10 rounds of 8 or 6 s airtime,
    # lyapunov 12 or 16 rounds of 1 s; the lyapunov folders are stored in the opposite seed order
    ly, un = P.lyapunov("het", P.INF, 10), P.uniform("het", P.INF, 10)
    shapes = {ly.name: [(24, 1.0, 1), (32, 1.0, 0)], un.name: [(20, 8.0, 0), (20, 6.0, 1)]}
    dirs = {}
    for name, runs in shapes.items():
        for i, (rounds_to_one, round_s, seed) in enumerate(runs):
            d = tmp_path / f"{name}-{i}"
            d.mkdir()
            run = linear_run(rounds_to_one, round_s, rounds=40)
            run.to_csv(d / "evals.csv", index=False)
            pd.DataFrame({"t_start": run["time_s"][:-1].to_numpy(), "t_end": run["time_s"][1:].to_numpy()}).to_csv(
                d / "rounds.csv", index=False)
            (d / "summary.json").write_text(f'{{"seed": {seed}}}')
            dirs.setdefault(name, []).append((seed, d))
    import dataclasses
    scale = dataclasses.replace(P.SCALES["tiny"], targets={k: 0.5 for k in P.SCALES["tiny"].targets})
    ctx = P.Context(scale, P.training_data(Runs(dirs), scale, [ly, un]), tmp_path)
    row = P._speedup_rows(ctx, [(ly, un)], compute_s=2.0).iloc[0]
    # seed averages: lyapunov r (1/24 + 1/32) / 2 reaches 0.5 at r = 96/7 rounds (3 s each);
    # uniform, with rounds of 10 and 8 s, t (1/200 + 1/160) / 2 reaches 0.5 at t = 1 / (1/200 + 1/160)
    r_ly = 96 / 7
    t_un = 1 / (1 / 200 + 1 / 160)
    assert row["rounds_ratio"] == pytest.approx(10 / r_ly, rel=2e-3)
    assert row["speedup"] == pytest.approx(t_un / (r_ly * 3), rel=2e-3)
    assert row["per_round_gain"] == pytest.approx((7 + 2) / (1 + 2))  # mean round lengths, averaged over seeds
    # per seed: seed 0 pairs 100 s with 16 x 3 s, seed 1 pairs 80 s with 12 x 3 s (not by folder order)
    per_seed = (100 / 48, 80 / 36)
    assert row["seed_mean"] == pytest.approx(sum(per_seed) / 2, rel=2e-3)
    assert row["seed_std"] == pytest.approx(abs(per_seed[0] - per_seed[1]) / 2, abs=5e-3)  # population std of two
    horizon = P._horizon_rows(ctx, [(ly, un)]).iloc[0]
    assert horizon["ratio (first 30)"] == pytest.approx(7.0) and horizon["ratio (to target)"] == pytest.approx(7.0)


# --- the horizon study ----------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["lyapunov", "uniform"])
def test_a_constant_computation_time_adds_itself_to_every_round_and_changes_nothing_else(policy):
    # what lyapunov:horizon relies on to give the gain at c from the runs without computation
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate

    def run(c):
        return simulate(from_dict({"seed": 4, "run": {"rounds": 300, "timing_only": True, "record_devices": False},
                                   "channel": {"profile": "linear"}, "devices": {"count": 30, "compute_s": c},
                                   "link": {"model_bits": 32 * 555178, "p_max": "35 dB"},
                                   "scheduler": {"name": policy, "m": 5}}), progress=False).rounds

    base = run(0.0)
    for c in (1.0, 2.0):
        shifted = run(c)
        assert shifted["selected"].tolist() == base["selected"].tolist()
        assert shifted["upload_order"].tolist() == base["upload_order"].tolist()
        lengths = (shifted.t_end - shifted.t_start).to_numpy()
        assert np.allclose(lengths, (base.t_end - base.t_start).to_numpy() + c, rtol=1e-12, atol=1e-9)


def test_horizon_gains_are_uniform_over_lyapunov_with_c_added_to_both():
    from wirelessfl.papers.lyapunov.fidelity import COMPUTE_S, horizon_gains

    data = pd.DataFrame([{"channel": "het", "m": 10, "compute_s": 0.0, "seed": s, "policy": p, "mean_round_s": v}
                         for s, (u, ly) in enumerate([(3.0, 0.5), (4.0, 1.0)])
                         for p, v in (("uniform", u), ("lyapunov", ly))])
    gains = horizon_gains(data).set_index(["seed", "compute_s"])["gain"]
    assert gains[(0, 0.0)] == 6.0 and gains[(1, 0.0)] == 4.0
    assert gains[(0, 2.0)] == pytest.approx(5.0 / 2.5) and gains[(1, 1.0)] == pytest.approx(5.0 / 2.0)
    assert len(gains) == 2 * len(COMPUTE_S)


@pytest.mark.slow
@pytest.mark.parametrize("channel", ["het", "hom"])
def test_the_committed_horizon_gains_agree_with_a_direct_timing_only_run(channel):
    """lyapunov:horizon's committed data went through the recipe's families, the sweep, the run cache
    and its collector; here the same m = 10 cells (seed 0, 15,000 rounds) run straight through
    simulate() from the paper's setting written out from docs/papers/lyapunov.md, "The experiments",
    and the mean round lengths and their ratio must be the committed ones (the CSV keeps 6
    significant digits)."""
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate

    committed = pd.read_csv(Path(__file__).resolve().parents[1] / "figures" / "lyapunov_horizon.csv")
    channel_cfg = ({"profile": "linear", "sigma_min": 0.1, "sigma_max": 10.0, "gain_floor": 0.001} if channel == "het"
                   else {"profile": "homogeneous", "sigma": 1.0, "gain_floor": 0.001})
    mean_round = {}
    for policy in ("lyapunov", "uniform"):
        scheduler = {"name": policy, "m": 10, **({"V": 100.0, "lam": 100.0} if policy == "lyapunov" else {})}
        scenario = from_dict({"seed": 0, "run": {"rounds": 15000, "timing_only": True, "record_devices": False},
                              "channel": channel_cfg, "devices": {"count": 100, "compute_s": 0.0},
                              "link": {"bandwidth_hz": 22e6, "noise_power": 1.0, "p_bar": 1.0, "p_max": "35 dB",
                                       "model_bits": 32 * 555178},
                              "scheduler": scheduler})
        rounds = simulate(scenario, progress=False).rounds
        mean_round[policy] = float((rounds.t_end - rounds.t_start).mean())
        row = committed[(committed.channel == channel) & (committed.policy == policy) & (committed.m == 10)
                        & (committed.seed == 0)]
        assert len(row) == 1 and int(row.rounds.iloc[0]) == len(rounds) == 15000
        assert mean_round[policy] == pytest.approx(float(row.mean_round_s.iloc[0]), rel=1e-5)
    from wirelessfl.papers.lyapunov.fidelity import horizon_gains

    gains = horizon_gains(committed)
    gain = gains[(gains.channel == channel) & (gains.m == 10) & (gains.seed == 0) & (gains.compute_s == 0)]["gain"]
    assert mean_round["uniform"] / mean_round["lyapunov"] == pytest.approx(float(gain.iloc[0]), rel=2e-5)
