"""SAFARI's recipes: the runs hold the protocol they claim, and the reports read their data."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wirelessfl.config import load_scenario
from wirelessfl.jsonio import read_json
from wirelessfl.learning.learner import federated_data
from wirelessfl.learning.partition import classes_per_device_partition
from wirelessfl.papers import reproduce, safari as S
from wirelessfl.papers.recipes import cached_family, family


@pytest.mark.parametrize("M,p", [(10, 1), (10, 2), (30, 2), (20, 5)])
def test_balanced_partition(M, p):
    """The partition the tables run on: p classes per client, each class held by p M / 10 clients."""
    labels = np.repeat(np.arange(10), 100)
    parts = classes_per_device_partition(labels, M, p, np.random.default_rng(0))
    assert len(parts) == M
    allidx = np.concatenate(parts)
    assert np.unique(allidx).size == allidx.size == labels.size  # disjoint and complete
    holders = np.zeros(10, dtype=int)
    for ix in parts:
        classes = np.unique(labels[ix])
        assert classes.size == p
        holders[classes] += 1
    assert (holders == p * M // 10).all()
    sizes = [len(ix) for ix in parts]
    assert max(sizes) - min(sizes) <= p  # equal classes cut into near-equal chunks


def test_table_variants_set_the_protocol():
    (base, variants), = S._table_families("table3")("cpu", ()).values()
    assert base.devices.count == 10 and base.scheduler.options.m == 5
    assert len(variants) == 4 + 4 * 4  # FedAvg at s = 4 per p, SAFARI per p and n_T
    v = variants[S._table_variant("safari", 1, 4, 50)]
    assert v == {"learning.algorithm": "safari", "learning.classes_per_device": 1, "devices.excluded_count": 4,
                 "learning.aux_samples": 50}
    (base67, v67), = S.tables67_families("cpu", ()).values()
    assert base67.devices.count == 30 and base67.learning.classes_per_device == 2 and base67.scheduler.options.m == 10
    assert v67[S._t67_variant("safari", 18, 0.2)]["learning.aux_samples"] == 12000


def test_gain_is_paired_by_seed():
    rows = [{"algorithm": a, "p": 1, "s": 4, "n_T": n, "seed": seed, "final": f, "last5": f, "label_coverage": 1.0,
             "server_rounds": 0}
            for a, n, seed, f in (("fedavg", 0, 0, 50.0), ("fedavg", 0, 1, 70.0),
                                  ("safari", 1000, 0, 60.0), ("safari", 1000, 1, 71.0))]
    table = S.summarise(pd.DataFrame(rows))
    safari = table[table.algorithm == "safari"].iloc[0]
    assert safari.gain_final == pytest.approx((10.0 + 1.0) / 2)  # per seed, then averaged
    assert safari.gain_final_std == pytest.approx(4.5)  # population std of the per-seed gains 10 and 1
    assert math.isnan(table[table.algorithm == "fedavg"].iloc[0].gain_final)


@pytest.fixture(scope="module")
def tiny_tables67(tmp_path_factory, one_torch_thread):
    """safari:tables67 at the tiny scale, seed 0: its report, its data and its runs by variant."""
    out = tmp_path_factory.mktemp("tables67")
    (report,) = reproduce("safari:tables67", scale="tiny", seeds=1, out=out, progress=False)
    (base, variants), = S.tables67_families("tiny", ()).values()
    runs = cached_family(family(base, variants), 1, out / "cache")
    return report, pd.read_csv(out / "figures" / "safari_tables67.csv"), runs


def _selected(cell: str) -> set[int]:
    """The devices of a rounds.csv "selected" cell (space-separated ids)."""
    return {int(d) for d in cell.split()}


@pytest.mark.slow
def test_tiny_tables67_runs_exclude_s_clients_and_sample_m_of_the_others(tiny_tables67):
    _, _, runs = tiny_tables67
    assert not runs.failed
    excluded_at = {}
    for algorithm, s, share in S._t67_settings():
        (folder,) = runs.folders(S._t67_variant(algorithm, s, share))
        summary = read_json(folder / "summary.json")
        excluded = set(summary["excluded"])
        assert len(excluded) == s
        # FedAvg and SAFARI at the same s exclude the same clients, so SAFARI's gain is paired
        assert excluded_at.setdefault(s, excluded) == excluded
        rounds = pd.read_csv(folder / "rounds.csv", dtype={"selected": str})
        client_rounds = rounds[rounds["server_round"] == 0]
        assert len(client_rounds) > 0
        for cell in client_rounds["selected"]:
            chosen = _selected(cell)
            # m = 10 distinct clients (all that are left at s = 24), none of them excluded
            assert len(chosen) == min(10, S.M67 - s) and not chosen & excluded
        devices = pd.read_csv(folder / "devices.csv").set_index("device")
        assert (devices.loc[sorted(excluded), "selections"] == 0).all()
        if algorithm == "fedavg":
            assert summary["server_rounds"] == 0


@pytest.mark.slow
def test_tiny_tables67_clients_hold_p_classes_and_coverage_is_theirs(tiny_tables67):
    _, data, runs = tiny_tables67
    for algorithm, s, share in (("fedavg", 24, 0.0), ("safari", 18, 0.2)):
        (folder,) = runs.folders(S._t67_variant(algorithm, s, share))
        scenario = load_scenario(folder / "scenario.toml", environment=False)
        dataset, parts, aux = federated_data(scenario)
        labels = dataset.y_train.numpy()
        assert len(parts) == S.M67 and all(np.unique(labels[ix]).size == 2 for ix in parts)
        assert aux.size == S.AUX67.get(share, 0)
        assert not np.intersect1d(aux, np.concatenate(parts)).size  # the server's set is kept from the clients
        # label coverage recomputed from the partition: the classes the clients left in hold
        excluded = set(read_json(folder / "summary.json")["excluded"])
        held = np.unique(np.concatenate([labels[ix] for d, ix in enumerate(parts) if d not in excluded]))
        row = data[(data.algorithm == algorithm) & (data.s == s) & (data.aux_share == share)].iloc[0]
        assert row.label_coverage == pytest.approx(held.size / 10)


@pytest.mark.slow
def test_tiny_tables67_data_is_the_runs_and_the_report_reads_it(tiny_tables67):
    report, data, runs = tiny_tables67
    assert len(data) == len(S._t67_settings())
    for row in data.itertuples():
        (folder,) = runs.folders(S._t67_variant(row.algorithm, row.s, row.aux_share))
        accuracy = 100 * pd.read_csv(folder / "evals.csv")["accuracy"].to_numpy()
        assert row.final == pytest.approx(accuracy[-1], rel=1e-5)
        assert row.last5 == pytest.approx(accuracy[-5:].mean(), rel=1e-5)
    cover = data[data.algorithm == "fedavg"].set_index("s")["label_coverage"]
    assert cover[0] == 1.0 and cover[24] <= cover[0]  # excluding clients can only lose classes
    fed0 = data[(data.algorithm == "fedavg") & (data.s == 0)].iloc[0]
    assert f"| {fed0.final:.2f} |" in report.markdown  # one seed: the mean alone, no spread


@pytest.mark.slow
def test_tiny_table3_gains_are_the_paired_differences_of_the_data(tmp_path, one_torch_thread):
    (report,) = reproduce("safari:table3", scale="tiny", seeds=1, out=tmp_path, progress=False)
    data = pd.read_csv(tmp_path / "figures" / "safari_table3.csv")
    assert len(data) == 4 + 4 * 4 and set(data.s) == {4}
    fedavg = data[data.algorithm == "fedavg"].set_index("p")
    for n_t in (*S.AUX_VALUES, S.AUX_MAX):
        safari = data[(data.algorithm == "safari") & (data.n_T == n_t)].set_index("p")
        row = next(line for line in report.markdown.splitlines() if line.startswith(f"| {n_t} |"))
        for p in S.P_VALUES:
            gain = (safari.final[p] - fedavg.final[p], safari.last5[p] - fedavg.last5[p])
            assert f"{gain[0]:+.1f} / {gain[1]:+.1f} | " in row


@pytest.mark.slow
def test_tiny_wireless_late_accuracy_is_its_curves(tmp_path, one_torch_thread):
    (report,) = reproduce("safari:wireless", scale="tiny", seeds=1, out=tmp_path, progress=False)
    data = pd.read_csv(tmp_path / "figures" / "safari_wireless.csv")
    runs = data[data.kind == "run"].set_index("variant")
    curves = data[data.kind == "curve"]
    assert set(runs.index) == set(S.LABELS)
    budget = float(next(o for o in S.WIRELESS_SCALES["tiny"] if o.startswith("run.time_budget_s")).split("=")[1])
    for variant, label in S.LABELS.items():
        curve = curves[curves.variant == variant]
        late = curve[curve.time_s >= budget - S.TAIL_S].accuracy
        assert runs.loc[variant, "late_mean"] == pytest.approx(late.mean(), abs=1e-3)
        assert runs.loc[variant, "final"] == pytest.approx(curve.accuracy.iloc[-1], abs=1e-3)
        row = next(line for line in report.markdown.splitlines() if line.startswith(f"| {label} |"))
        assert f"| {runs.loc[variant, 'late_mean']:.1f} |" in row  # one seed: no spread
    # SAFARI's variants take server rounds, FedAvg's none
    assert ((runs.server_rounds > 0) <= runs.index.str.startswith("safari")).all()
