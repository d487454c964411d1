"""The fair client selection recipes (wirelessfl.papers.fair_selection): tiny runs whose reported cells
are recomputed from the data CSV and the run folders independently, the selection invariants, and
the report on hand-made data whose answers are known."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wirelessfl.papers import fair_selection as F
from wirelessfl.papers.recipes import Runs, cached_family, family, reproduce

RECIPES = {r.name: r for r in F.RECIPES}
KAPPA_TINY = 3
FAIR = ("random", "power_of_choice", "divfl", "subtrunc", "unionfl")


def table_cells(md: str, label: str) -> list[str]:
    """The cells of the Markdown table row whose first cell is ``label``."""
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r} in the report")


def run_folders(cache: Path) -> dict[str, list[Path]]:
    """The cache's run folders by scheduler name (read from each run's summary)."""
    out: dict[str, list[Path]] = {}
    for d in sorted((cache / "runs").iterdir()):
        summary = json.loads((d / "summary.json").read_text())
        out.setdefault(summary["scheduler"], []).append(d)
    return out


def recipe_runs(name: str, cache: Path) -> Runs:
    """A recipe's tiny runs in the cache, by variant (found through the sweep's own keys)."""
    runs = Runs()
    for base, variants in RECIPES[name].families("tiny", ()).values():
        runs.merge(cached_family(family(base, variants), 1, cache))
    assert not runs.failed, runs.failed
    return runs


def the_run(name: str, variant: str, cache: Path) -> Path:
    """The one (seed 0) run folder of a recipe's variant."""
    (folder,) = recipe_runs(name, cache).folders(variant)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Tables I and II and the wireless study at the tiny scale, one seed, into one cache."""
    out = tmp_path_factory.mktemp("fair_selection")
    reports = reproduce([RECIPES["table1"], RECIPES["table2"], RECIPES["wireless"]], scale="tiny", seeds=1,
                        out=out, progress=False)
    assert not any(r.failed for r in reports), [r.failed for r in reports]
    return out


def test_table1_cells_are_the_last_evaluation_of_each_run(tiny):
    figures = tiny / "figures"
    data = pd.read_csv(figures / "fair_selection_table1.csv")
    md = (figures / "fair_selection_table1.md").read_text()
    for variant, label in (("random", "Random"), ("unionfl", "UnionFL"), ("power_of_choice", "Power-of-Choice")):
        runs = data[data["variant"] == variant]
        last = runs[runs["round"] == runs["round"].max()]
        cells = table_cells(md, label)
        assert len(last) == 1  # one seed: the mean alone, no "± 0.00" that reads as a measured spread
        assert cells[1] == f"{100 * last['accuracy'].mean():.2f}"
        assert cells[2] == f"{100 * last['dissimilarity'].mean():.2f}"
        assert cells[3] == f"{100 * last['device_acc_p10'].mean():.2f}"
    # the evaluations kept are those of the run folders
    folder = the_run("table1", "random", tiny / "cache")
    evals = pd.read_csv(folder / "evals.csv")
    kept = data[data["variant"] == "random"]
    np.testing.assert_allclose(kept["accuracy"], evals["accuracy"], rtol=1e-5)
    assert list(kept["round"]) == list(evals["round"])


def test_fair_schedulers_select_kappa_distinct_devices_every_round(tiny):
    folders = run_folders(tiny / "cache")
    for scheduler in FAIR:
        assert folders.get(scheduler), f"no {scheduler} run"
        for d in folders[scheduler]:
            rounds = pd.read_csv(d / "rounds.csv", dtype={"selected": str})
            assert len(rounds) == 6
            for sel, count in zip(rounds["selected"], rounds["num_selected"]):
                devices = [int(x) for x in sel.split()]
                assert len(devices) == len(set(devices)) == count == KAPPA_TINY
                assert all(0 <= x < 10 for x in devices)


def test_distinct_devices_and_divfl_comparison_match_the_run_folders(tiny):
    data = pd.read_csv(tiny / "figures" / "fair_selection_table1.csv")
    by_variant = {}
    for variant in FAIR:
        row = data[data["variant"] == variant].iloc[0]
        folder = the_run("table1", variant, tiny / "cache")
        selected = [set(s.split()) for s in pd.read_csv(folder / "rounds.csv", dtype={"selected": str})["selected"]]
        windows = [len(set().union(*selected[i:i + 5])) for i in range(len(selected) - 4)]
        assert row["distinct_per_5_rounds"] == pytest.approx(np.mean(windows))
        by_variant[variant] = (row["selections_digest"], selected)
    md = (tiny / "figures" / "fair_selection_table1.md").read_text()
    for variant, label in (("subtrunc", "SubTrunc"), ("unionfl", "UnionFL"), ("random", "Random")):
        same = by_variant[variant][1] == by_variant["divfl"][1]
        assert (by_variant[variant][0] == by_variant["divfl"][0]) == same
        assert table_cells(md, label)[6] == f"{int(same)} of 1"


def test_tables_share_the_divfl_runs(tiny):
    # Table I's five settings and Table II's two normalised SubTrunc ones, beside the wireless study's seven
    assert len(list((tiny / "cache" / "runs").iterdir())) == 5 + 2 + 7
    assert the_run("table1", "divfl", tiny / "cache") == the_run("table2", "divfl", tiny / "cache")
    table2 = pd.read_csv(tiny / "figures" / "fair_selection_table2.csv")
    table1 = pd.read_csv(tiny / "figures" / "fair_selection_table1.csv")
    pd.testing.assert_frame_equal(table2[table2["variant"] == "divfl"].reset_index(drop=True),
                                  table1[table1["variant"] == "divfl"].reset_index(drop=True), check_dtype=False)


def test_wireless_totals_are_those_of_the_rounds(tiny):
    data = pd.read_csv(tiny / "figures" / "fair_selection_wireless.csv")
    md = (tiny / "figures" / "fair_selection_wireless.md").read_text()
    runs = recipe_runs("wireless", tiny / "cache")
    assert set(runs.dirs) == set(F.WIRELESS)
    for variant in F.WIRELESS:
        (d,) = runs.folders(variant)
        rounds = pd.read_csv(d / "rounds.csv")
        summary = json.loads((d / "summary.json").read_text())
        row = data[data["variant"] == variant].iloc[-1]
        extra = rounds["extra_airtime_s"].sum()
        assert row["extra_airtime_s"] == pytest.approx(extra, rel=1e-5, abs=1e-9)
        assert row["model_airtime_s"] == pytest.approx(rounds["comm_s"].sum() - extra, rel=1e-5, abs=1e-9)
        assert row["sim_time_s"] == pytest.approx(summary["sim_time_s"], rel=1e-5)
        assert row["time_s"] == pytest.approx(summary["sim_time_s"], rel=1e-5)  # the last evaluation ends the run
        # only the gradient-store schedulers pay a bootstrap, only the others none at all
        if variant in ("divfl", "subtrunc", "unionfl"):
            assert row["bootstrap_s"] > 0
        else:
            assert row["bootstrap_s"] == 0
        if variant in ("random", "lyapunov", "uniform"):
            assert extra == 0
        assert table_cells(md, variant)[1] == f"{summary['sim_time_s']:.1f}"  # one seed: no spread


def test_report_on_hand_made_data():
    """Two seeds with known final numbers; SubTrunc repeats DivFL's selections in one seed of two."""
    rows = []
    for variant, acc, digest in (("divfl", (0.60, 0.70), ("a", "b")), ("subtrunc", (0.50, 0.80), ("a", "c")),
                                 ("random", (0.40, 0.40), ("x", "y")), ("power_of_choice", (0.2, 0.3), ("p", "q")),
                                 ("unionfl", (0.9, 0.7), ("u", "v"))):
        for seed in (0, 1):
            for rnd, scale in ((0, 0.1), (40, 1.0)):  # an early evaluation the table must not read
                rows.append({"variant": variant, "seed": seed, "round": rnd, "accuracy": scale * acc[seed],
                             "device_acc_mean": 0.5, "dissimilarity": 0.1 * (seed + 1), "pairwise_gap": 0.1,
                             "device_acc_p10": 0.3, "train_loss": 1.0 + seed, "scheduler": variant,
                             "distinct_per_5_rounds": 40.0 + seed, "selections_digest": digest[seed], "wall_s": 1.0})
    data = pd.DataFrame(rows)
    md = "\n".join(F.table_markdown("table1", data, "cpu"))
    assert table_cells(md, "DivFL")[1:7] == ["65.00 ± 5.00", "15.00 ± 5.00", "30.00 ± 0.00", "1.500 ± 0.500",
                                             "40.5", "–"]
    assert table_cells(md, "SubTrunc")[1] == "65.00 ± 15.00"
    assert table_cells(md, "SubTrunc")[6] == "1 of 2"
    assert table_cells(md, "Random")[6] == "0 of 2"
    assert "40 rounds" in md
    numbers = {r["label"]: r for r in F.table_rows("table1", data)}
    assert numbers["UnionFL"]["accuracy_mean"] == pytest.approx(80.0)
    assert numbers["UnionFL"]["accuracy_std"] == pytest.approx(10.0)
    assert numbers["SubTrunc"]["same_selections_as_divfl"] == "1/2"


def test_distinct_in_windows_by_hand():
    rounds = ["0 1", "1 2", "2 3", "3 4", "4 5", "0 9"]
    # windows of 5: {0..5} (6 devices), {1,2,3,4,5,0,9} (7 devices)
    assert F.distinct_in_windows(rounds) == pytest.approx(6.5)
    assert np.isnan(F.distinct_in_windows(rounds[:4]))


def test_committed_table1_data_gives_the_documented_unionfl_row():
    data = pd.read_csv(Path(__file__).resolve().parents[1] / "figures" / "fair_selection_table1.csv")
    md = "\n".join(F.table_markdown("table1", data, "cpu"))
    assert table_cells(md, "UnionFL")[1:6] == ["81.19 ± 1.50", "9.78 ± 3.37", "65.60 ± 7.47", "0.460 ± 0.019",
                                               "39.2"]
    assert table_cells(md, "SubTrunc")[6] == "0 of 5"  # at 200 rounds SubTrunc departs from DivFL in every seed
    assert "200 rounds" in md


def test_recipes_name_their_runs():
    assert {r.key for r in F.RECIPES} >= {"fair_selection:table1", "fair_selection:wireless"}
    assert RECIPES["table1"].runs("cpu") == 5
    assert RECIPES["table2"].runs("cpu") == 3  # two lambdas and DivFL
    assert RECIPES["table3"].variants("cpu") == {"unionfl-W2", "unionfl", "unionfl-W10"}
    assert RECIPES["table4"].variants("cpu") == {"subtrunc", "subtrunc-phi-identity", "divfl"}
    assert RECIPES["wireless"].runs("cpu") == 7


def test_gain_trace_replays_the_recipe_run_and_splits_its_gains(tiny):
    """The diagnostic behind the README's scale section: one SubTrunc run traced in-process makes the
    selections of the recipe's cached run, and its rows obey what the objective implies."""
    trace = F.gain_trace(0, "tiny")
    folder = the_run("table1", "subtrunc", tiny / "cache")
    selected = pd.read_csv(folder / "rounds.csv", dtype={"selected": str})["selected"]
    picks = trace.groupby("round")["pick"].apply(lambda p: " ".join(map(str, sorted(p))))
    assert picks.tolist() == selected.tolist()
    assert len(trace) == 6 * KAPPA_TINY and (trace["candidates"] == KAPPA_TINY).all()  # r = max(3, 1)
    lam_b = 0.95 * 1.10
    assert (trace["dH_max"] <= lam_b + 1e-12).all() and (trace["dH_min"] >= 0).all()
    for _, g in trace.groupby("round"):  # F_S grows by each pick's phi
        np.testing.assert_allclose(g["mass_before"].iloc[1:], np.cumsum(g["pick_phi"]).iloc[:-1], rtol=1e-12)
    # where Delta_H is the same for every candidate it cannot change the argmax
    flat = trace["dH_spread"] <= 1e-12
    assert (trace.loc[flat, "pick"] == trace.loc[flat, "pick_by_G"]).all()
    # DivFL has no regulariser
    divfl = F.gain_trace(0, "tiny", scheduler="divfl")
    assert (divfl["dH_max"] == 0).all() and (divfl["pick"] == divfl["pick_by_G"]).all()
    assert "| 1 |" in "\n".join(F.gain_summary(trace))
