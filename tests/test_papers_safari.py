"""SAFARI's recipes: the runs hold the protocol they claim, and the reports read their data."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wirelessfl.learning.partition import classes_per_device_partition
from wirelessfl.papers import reproduce, safari as S


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
    assert math.isnan(table[table.algorithm == "fedavg"].iloc[0].gain_final)


@pytest.mark.slow
def test_tiny_runs_exclude_clients_and_the_report_reads_the_data(tmp_path, one_torch_thread):
    (report,) = reproduce("safari:tables67", scale="tiny", seeds=1, out=tmp_path, progress=False)
    data = pd.read_csv(tmp_path / "figures" / "safari_tables67.csv")
    assert len(data) == len(S._t67_settings())
    # s of 30 clients excluded, each with 2 of 10 classes: coverage can only fall as s grows
    cover = data[data.algorithm == "fedavg"].set_index("s")["label_coverage"]
    assert cover[0] == 1.0 and cover[24] <= cover[0]
    fed0 = data[(data.algorithm == "fedavg") & (data.s == 0)].iloc[0]
    assert f"{fed0.final:.2f} ± 0.00" in report.markdown
    safari = data[data.algorithm == "safari"]
    assert (safari["server_rounds"] > 0).any() and (data[data.algorithm == "fedavg"]["server_rounds"] == 0).all()
