"""The Per-FedAvg recipes (wirelessfl.papers.perfedavg): tiny runs whose data must be the run folders'
evaluations and whose reported cells are recomputed from the data CSV independently, the runs' own
scenarios (the setting each variant names), and the committed wireless data against its run folders."""
from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wirelessfl.papers import perfedavg as P
from wirelessfl.papers.recipes import Runs, cached_family, family, reproduce

RECIPES = {r.name: r for r in P.RECIPES}
FIGURES = Path(__file__).resolve().parents[1] / "figures"
LABELS = {"fedavg": "FedAvg + update", "perfedavg_fo": "Per-FedAvg (FO)", "perfedavg_hf": "Per-FedAvg (HF)"}


def table_cells(md: str, first: str, then: str | None = None) -> list[str]:
    """The cells of the first Markdown table row whose first cell is ``first`` (and second ``then``)."""
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] == first and (then is None or cells[1] == then):
            return cells
    raise AssertionError(f"no row {first!r} {then or ''} in the report")


def recipe_runs(name: str, cache: Path) -> Runs:
    """A recipe's tiny runs (seed 0) in the cache, by variant, found through the sweep's own keys."""
    runs = Runs()
    for base, variants in RECIPES[name].families("tiny", ()).values():
        runs.merge(cached_family(family(base, variants), 1, cache))
    assert not runs.failed, runs.failed
    return runs


def ci_cell(values) -> str:
    """Mean ± population std over seeds in %, written out by hand."""
    v = [100.0 * x for x in values]
    mean = sum(v) / len(v)
    if len(v) == 1:
        return f"{mean:.2f}"
    var = sum((x - mean) ** 2 for x in v) / len(v)
    return f"{mean:.2f} ± {math.sqrt(var):.2f}"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, one_torch_thread):
    """Table 1, equal_compute and the wireless study at the tiny scale, one seed, into one cache."""
    out = tmp_path_factory.mktemp("perfedavg")
    reports = reproduce(list(P.RECIPES), scale="tiny", seeds=1, out=out, progress=False)
    assert not any(r.failed for r in reports), [r.failed for r in reports]
    return out


def test_table1_data_holds_the_runs_personalised_accuracies(tiny):
    data = pd.read_csv(tiny / "figures" / "perfedavg_table1.csv")
    runs = recipe_runs("table1", tiny / "cache")
    settings = P.TABLE1_SCALES["tiny"].settings
    assert set(data["variant"]) == {st.variant(m) for st in settings for m in P.METHODS}
    for st in settings:
        for method in P.METHODS:
            (folder,) = runs.folders(st.variant(method))
            evals = pd.read_csv(folder / "evals.csv")
            kept = data[data["variant"] == st.variant(method)]
            assert list(kept["round"]) == list(evals["round"]) == list(range(P.TABLE1_SCALES["tiny"].rounds + 1))
            for col in ("personal_accuracy", "personal_accuracy_std", "local_accuracy", "accuracy"):
                np.testing.assert_allclose(kept[col], evals[col], rtol=1e-5, err_msg=col)
            # the per-device numbers average to the recorded personalised accuracy
            per_device = np.array(evals["personal_per_device"].iloc[-1].split(), float)
            assert per_device.size == 10
            assert per_device.mean() == pytest.approx(kept["personal_accuracy"].iloc[-1], abs=1e-3)
            # local computation: rounds x tau x 1, 2 or 4 FedAvg steps
            factor = {"fedavg": 1, "perfedavg_fo": 2, "perfedavg_hf": 4}[method]
            assert list(kept["fedavg_steps"]) == [r * st.tau * factor for r in evals["round"]]


def test_each_variant_runs_its_setting(tiny):
    """The run folder's own scenario is the setting and method its variant names: the paper's layout,
    uniform selection without replacement, tau, alpha."""
    runs = recipe_runs("table1", tiny / "cache")
    for st in P.TABLE1_SCALES["tiny"].settings:
        for method in P.METHODS:
            (folder,) = runs.folders(st.variant(method))
            sc = tomllib.loads((folder / "scenario.toml").read_text())
            learning = sc["learning"]
            assert learning["algorithm"] == method
            assert learning["local_steps"] == st.tau and learning["per_alpha"] == pytest.approx(st.alpha)
            assert learning["partition"] == ("perfedavg_groups_single" if st.single else "perfedavg_groups")
            assert learning["model"] == "mlp_80_60" and learning["samples_per_device"] == 5 * st.a
            assert sc["scheduler"]["name"] == "uniform"
            assert sc["scheduler"]["options"]["sampling"] == "without_replacement"
            rounds = pd.read_csv(folder / "rounds.csv", dtype={"selected": str}, keep_default_na=False)
            assert all(len(set(s.split())) == 2 for s in rounds["selected"])  # m = 2 distinct devices
    # the methods differ (Per-FedAvg's local rule is not FedAvg's at alpha > 0)
    first = P.TABLE1_SCALES["tiny"].settings[0]
    finals = {m: pd.read_csv(runs.folders(first.variant(m))[0] / "evals.csv")["accuracy"].iloc[-1] for m in P.METHODS}
    assert len(set(finals.values())) == 3, finals


def test_table1_cells_recomputed_from_the_data_csv(tiny):
    figures = tiny / "figures"
    data = pd.read_csv(figures / "perfedavg_table1.csv")
    md = (figures / "perfedavg_table1.md").read_text()
    for st in P.TABLE1_SCALES["tiny"].settings:
        of = data[data["setting"] == st.name]
        cells = table_cells(md, st.label, str(st.tau))
        assert cells[3] == str(of["round"].max())
        for k, method in enumerate(P.METHODS):
            runs = of[of["method"] == method]
            last = runs[runs["round"] == runs["round"].max()]
            assert cells[5 + k] == f"{ci_cell(last['personal_accuracy'])} (n/a)"
        spread = table_cells(md.split("Spread over the devices")[1], st.label, str(st.tau))
        for k, method in enumerate(P.METHODS):
            last = of[(of["method"] == method) & (of["round"] == of["round"].max())]
            assert spread[3 + k] == (f"{100 * last['personal_accuracy_std'].mean():.1f} / "
                                     f"{100 * last['local_accuracy'].mean():.2f}")


def test_table1_report_on_hand_made_data_orders_and_cites_the_paper():
    """Three seeds whose answers are known: means, population stds, the ordering count and the paper's row."""
    st = P.TABLE1_SCALES["cpu"].settings[0]  # fashion_mnist tau 10 alpha 0.01: the paper's MNIST row
    finals = {"fedavg": [0.80, 0.82, 0.84], "perfedavg_fo": [0.83, 0.81, 0.86], "perfedavg_hf": [0.85, 0.86, 0.87]}
    rows = []
    for method, values in finals.items():
        for seed, acc in enumerate(values):
            for i, rnd in enumerate((0, 300)):
                rows.append({"variant": st.variant(method), "seed": seed, "setting": st.name, "method": method,
                             "eval_index": i, "round": rnd, "personal_accuracy": acc if rnd else 0.3,
                             "personal_accuracy_std": 0.1, "local_accuracy": 0.5, "accuracy": 0.5,
                             "fedavg_steps": rnd * st.tau * P.steps_factor(method)})
    (row,) = P.table1_rows(pd.DataFrame(rows), "cpu")
    assert row["fedavg_mean"] == pytest.approx(82.0)
    assert row["perfedavg_hf_std"] == pytest.approx(math.sqrt(2 / 3))  # 85, 86, 87
    assert row["perfedavg_hf_minus_fedavg"] == pytest.approx(4.0)
    assert row["hf_fo_fedavg_ordered_seeds"] == "2/3"  # seed 1: FO 0.81 < FedAvg 0.82
    assert (row["fedavg_paper"], row["perfedavg_hf_paper"]) == ("75.96 ± 0.02", "79.85 ± 0.02")


def test_equal_compute_reads_fedavg_at_per_fedavgs_local_computation(tiny):
    data = pd.read_csv(tiny / "figures" / "perfedavg_equal_compute.csv")
    md = (tiny / "figures" / "perfedavg_equal_compute.md").read_text()
    first = P.TABLE1_SCALES["tiny"].settings[0]
    rounds = P.TABLE1_SCALES["tiny"].rounds
    fedavg = data[data["method"] == "fedavg"]
    assert fedavg["round"].max() == 4 * rounds
    # FO and HF are Table 1's own runs (shared through the cache): the same numbers
    table1 = pd.read_csv(tiny / "figures" / "perfedavg_table1.csv")
    for method in ("perfedavg_fo", "perfedavg_hf"):
        mine = data[data["method"] == method]["personal_accuracy"].to_numpy()
        theirs = table1[table1["variant"] == first.variant(method)]["personal_accuracy"].to_numpy()
        np.testing.assert_array_equal(mine, theirs)
    for method, factor in (("perfedavg_fo", 2), ("perfedavg_hf", 4)):
        steps = rounds * first.tau * factor
        # FedAvg has an evaluation at this many steps (round = steps / tau): no interpolation needed
        at = fedavg[fedavg["fedavg_steps"] == steps]["personal_accuracy"]
        assert len(at) == 1
        cells = table_cells(md, LABELS[method])
        assert cells[2] == str(steps)
        assert cells[5] == f"{100 * at.iloc[0]:.2f} ({steps // first.tau})"


def test_wireless_cells_recomputed_from_the_data_csv(tiny):
    data = pd.read_csv(tiny / "figures" / "perfedavg_wireless.csv")
    md = (tiny / "figures" / "perfedavg_wireless.md").read_text()
    runs = recipe_runs("wireless", tiny / "cache")
    for method in P.METHODS:
        (folder,) = runs.folders(method)
        evals = pd.read_csv(folder / "evals.csv")
        kept = data[data["variant"] == method]
        np.testing.assert_allclose(kept["personal_accuracy"], evals["personal_accuracy"], rtol=1e-5)
        cells = table_cells(md, LABELS[method])
        assert cells[2] == f"{kept['rounds'].iloc[0]:.0f}"
        assert cells[4] == f"{100 * kept['personal_accuracy'].iloc[-1]:.2f}"
        assert cells[5] == f"{100 * kept['personal_accuracy'].iloc[-5:].mean():.2f}"


def test_committed_wireless_data_is_its_run_folders_and_its_headline_holds():
    """figures/perfedavg_wireless.csv is the committed run folders' evaluations, and the report's
    final personalised accuracies and gains over FedAvg follow from the folders themselves."""
    data = pd.read_csv(FIGURES / "perfedavg_wireless.csv")
    md = (FIGURES / "perfedavg_wireless.md").read_text()
    final, per_seed = {}, {}
    for method in P.METHODS:
        finals = []
        for seed in (0, 1, 2):
            evals = pd.read_csv(FIGURES / "perfedavg_wireless" / f"seed{seed}" / method / "evals.csv")
            kept = data[(data["variant"] == method) & (data["seed"] == seed)]
            np.testing.assert_allclose(kept["personal_accuracy"], evals["personal_accuracy"], rtol=1e-5)
            finals.append(evals["personal_accuracy"].iloc[-1])
        final[method], per_seed[method] = 100 * np.mean(finals), 100 * np.array(finals)
        assert table_cells(md, LABELS[method])[4] == ci_cell(finals)
    gains = ", ".join(f"{LABELS[m]} {final[m] - final['fedavg']:+.2f} ± {np.std(per_seed[m] - per_seed['fedavg']):.2f}"
                      for m in ("perfedavg_fo", "perfedavg_hf"))  # the gain's spread: of the per-seed gains
    assert f"against FedAvg + update in the same seed (points): {gains}." in md
    assert final["perfedavg_fo"] > final["fedavg"] and final["perfedavg_hf"] > final["fedavg"]


def test_runs_per_seed_and_family_keys():
    assert [RECIPES[n].runs("cpu") for n in ("table1", "equal_compute", "wireless")] == [12, 3, 3]
    assert RECIPES["table1"].runs("paper") == 18  # the paper's six rows
    # equal_compute shares Table 1's family, so its FO and HF runs are Table 1's
    (key,) = RECIPES["equal_compute"].families("cpu", ())
    assert key in RECIPES["table1"].families("cpu", ())
    assert RECIPES["equal_compute"].variants("cpu") - RECIPES["table1"].variants("cpu") == \
        {"fashion_mnist-a196-tau10-alpha0.01-fedavg-r1200"}
