"""The FedShuffle paper's recipes: the quadratic's data against its closed forms, the tables' report
against its data."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wirelessfl.papers import fedshuffle as F, quadratic as quad
from wirelessfl.papers.recipes import Runs


@pytest.fixture(scope="module")
def fig1():
    return F.collect_fig1(Runs(), "cpu")


def test_fig1_data_meets_the_closed_forms(fig1):
    last = fig1[fig1["round"] == fig1["round"].max()].set_index(["panel", "method"])["mean"]
    # FedAvg stalls at its fixed point; FedShuffle at its O(eta) offset: the squared distance of E[x]'s
    # exact fixed point, give or take the iterates' own noise (3 seeds, one round)
    for method in ("fedavg_rr", "fedshuffle"):
        expected = np.sum((quad.expected_fixed_point(method) - quad.paper_problem().optimum) ** 2)
        assert last[("1a", method)] == pytest.approx(expected, rel=0.1)
    assert last[("1a", "fedavg_rr")] > 1e4 * last[("1a", "fedshuffle")]
    assert last[("1b", "fedshuffle")] < last[("1a", "fedshuffle")] / 10  # momentum (MVR) goes lower
    assert last[("1d", "IS p = (0.8, 0.1, 0.1), η = 1/300")] < last[("1d", "uniform p = 1/3, η = 1/500")]
    # the kept points are the curves' own values: round 0 is ||x0 - x*||^2 = 6 / 36 for every method
    first = fig1[(fig1["round"] == 0) & (fig1["panel"] != "1d")]
    assert np.allclose(first["mean"], 6 / 36)


def test_fig1_report_reads_the_data(fig1, tmp_path):
    report = F.report_fig1(fig1, tmp_path, "cpu")
    last = int(fig1["round"].max())
    row = fig1[(fig1["panel"] == "1a") & (fig1["method"] == "fednova") & (fig1["round"] == last)]
    assert report.numbers["final"]["1a fednova"] == pytest.approx(float(row["mean"].iloc[0]))
    assert (tmp_path / "fedshuffle_quadratic.png").stat().st_size > 0


def test_tables_report_is_the_mean_and_population_std_of_its_runs(tmp_path):
    rows = [{"setting": s, "method": m, "momentum": mom, "seed": seed, "lr": 0.02, "rounds": 37,
             "accuracy": 0.5 + 0.1 * seed + (0.05 if m == "fedshuffle" else 0.0) + (0.01 if mom else 0.0),
             "train_loss": 0.5 if m == "fedshuffle" else 1.0 - 0.1 * seed, "sim_time_s": 10.0}
            for s in F.SETTINGS for m in F.TABLE_METHODS for mom in (0.0, 0.9) for seed in (0, 1)]
    report = F.report_tables(pd.DataFrame(rows), tmp_path, "cpu")
    assert report.markdown.startswith("37 rounds;")  # the runs' own round count, not the scale's
    # seeds 0 and 1 give 0.55 and 0.65 for FedShuffle without momentum: 60.00 ± 5.00 (population std)
    assert report.numbers["imbalanced fedshuffle momentum 0"] == pytest.approx(60.0)
    assert ("| fedshuffle | 60.00 ± 5.00 | 61.00 ± 5.00 | 0.500 ± 0.000 | 0.500 ± 0.000 | 59.57 | 67.63 |"
            in report.markdown)
    assert "| fedshuffle_mvr |  |  |  |  |  |  |" in report.markdown  # no MVR runs: empty cells, not zeros
    # FedShuffle is 5 points above every other method in both seeds, in both settings
    assert report.markdown.count("highest accuracy of the five in 2 of 2 seeds without momentum and 2 of 2 with, "
                                 "and the lowest training loss in 2 of 2 and 2 of 2") == 2
    assert "| fedavg_rr | 55.00 ± 5.00 | 56.00 ± 5.00 | 0.950 ± 0.050 |" in report.markdown
    # FedShuffle is 5 points above FedAvgRR in each seed: the paired gap has no spread, the paper's is 59.57 - 48.61
    assert ("FedShuffle − FedAvgRR in the same seed: +5.00 ± 0.00 points without momentum and +5.00 ± 0.00 with "
            "(paper +10.96 and +2.99)") in report.markdown


def test_every_table_setting_is_a_variant_with_its_step_size():
    (base, variants), = F.tables_families("cpu", ()).values()
    assert len(variants) == 2 * (2 * len(F.TABLE_METHODS) + 1)
    mvr = variants["imbalanced-fedshuffle_mvr-momentum0.9"]
    assert mvr["learning.lr"] == F.MVR_LR and mvr["learning.momentum"] == 0.9
    epochs = variants["epochs-fednova-momentum0"]
    assert epochs["learning.local_epochs_max"] == 5 and epochs["learning.size_sigma"] == 0.0
    assert base.devices.count == 20 and base.learning.model == "mlp"


def test_nn_at_tiny_scale_reports_what_its_runs_logged(tmp_path):
    # the one recipe of this paper run end to end here: the simulator's runs, their data CSV, the report
    from wirelessfl.papers.recipes import reproduce

    nn = next(r for r in F.RECIPES if r.name == "nn")
    report, = reproduce([nn], scale="tiny", seeds=1, out=tmp_path, progress=False)
    assert not report.failed
    data = pd.read_csv(tmp_path / "figures" / "fedshuffle_nn.csv")
    assert sorted(data["method"].unique()) == sorted(F.NN_METHODS)
    # the data holds every evaluation each run logged (evals.csv of its cached run folder)
    runs = sorted((tmp_path / "cache" / "runs").glob("*/evals.csv"))
    assert len(runs) == len(F.NN_METHODS)
    assert len(data) == sum(len(pd.read_csv(f)) for f in runs)
    logged_final_losses = sorted(pd.read_csv(f)["train_loss"].iloc[-1] for f in runs)
    last = data[data["round"] == data["round"].max()]
    assert np.allclose(sorted(last["train_loss"]), logged_final_losses, rtol=1e-5)
    # the report's final training loss per method is the data's, recomputed here
    shown = {row["method"]: float(row["train loss"].split(" ± ")[0]) for row in report.numbers["final"]}
    for method, loss in last.groupby("method")["train_loss"].mean().items():
        assert shown[method] == pytest.approx(loss, abs=5e-4)
    assert (tmp_path / "figures" / "fedshuffle_nn.png").stat().st_size > 0
