"""Edge servers and a cloud (hierarchy.tiers = "edge", wirelessfl.sim.sync.tiers) and the backhaul
(wirelessfl.network.Backhaul): transfers by hand, the tiers' timeline against the records, the
cloud's data-weighted average of the edges' models, one edge every round being plain FedAvg exactly,
a cloud-only round paying its sites' forwarding by hand, refusals in one line, an exact resume."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError
from wirelessfl.network import Backhaul

BITS = 1e6


def test_a_transfer_takes_bits_over_rate_plus_latency():
    assert Backhaul(1e8, 0.05).transfer_s(2e6) == pytest.approx(0.02 + 0.05)
    assert Backhaul(None, 0.05).transfer_s(2e6) == pytest.approx(0.05)


def test_each_site_forwards_the_updates_that_reached_it_from_its_last_one():
    cells = SimpleNamespace(serving=np.array([0, 0, 1, 1, 1]))
    selected = np.array([0, 1, 2, 3, 4])
    arrived = np.array([True, True, True, False, True])
    ends = np.array([1.0, 2.0, 1.0, 2.0, 3.0])
    b = Backhaul(1e6, 0.5)
    # site 0: its two updates end at 2, two models of 1 Mbit at 1 Mbit/s take 2 s, + 0.5; site 1: two arrived, ends at 3
    assert b.forward_end_s(cells, selected, arrived, ends, BITS) == pytest.approx(max(2 + 2 + 0.5, 3 + 2 + 0.5))
    assert b.forward_end_s(cells, selected, np.zeros(5, bool), ends, BITS) == -math.inf


def scenario(cells: int = 3, rounds: int = 4, timing: bool = True, **hierarchy) -> dict:
    return {"seed": 1, "run": {"rounds": rounds, "timing_only": timing, "eval_every_rounds": 1},
            "devices": {"count": 21, "compute": "shifted_exponential", "delay_mean_s": 0.01},
            "channel": {"path_loss": True, "reference_gain_db": -30.0},
            "network": {"cells": cells, "reuse": 3 if cells <= 3 else 7, "inter_site_m": 200.0},
            "link": {"model_bits": BITS, "noise_power": 1e-12},
            "hierarchy": {"tiers": "edge", "cloud_every": 2, "backhaul_rate_bps": 1e8, "backhaul_latency_s": 0.05,
                          **hierarchy},
            "learning": {"model": "mlp", "local_steps": 2, "alpha": math.inf, "samples_per_device": 60},
            "scheduler": {"name": "uniform", "m": 3}}


def test_the_tiers_timeline(tmp_path):
    """Between two cloud aggregations every edge runs cloud_every rounds back to back, from the
    model's arrival down the backhaul; the cloud aggregates when the last edge's model has come up."""
    res = simulate(from_dict(scenario(rounds=3)), tmp_path / "run", progress=False)
    r = res.rounds
    transfer = BITS / 1e8 + 0.05
    assert r["round"].tolist() == list(range(len(r)))
    clouds = r[r["tier"] == "cloud"]
    assert clouds["edge_round"].tolist() == [0, 1, 2] and np.allclose(clouds["backhaul_s"], transfer)
    previous = 0.0
    for k, (_, cloud) in enumerate(clouds.iterrows()):
        edges = r[(r["tier"] == "edge") & (r["t_end"] <= cloud["t_end"]) & (r["t_start"] >= previous)]
        assert sorted(edges["edge"].astype(int).value_counts().tolist()) == [2, 2, 2]
        for _, mine in edges.groupby("edge"):
            mine = mine.sort_values("edge_round")
            start = previous + (transfer if k else 0.0)
            assert mine["t_start"].iloc[0] == pytest.approx(start)
            assert mine["t_start"].iloc[1] == pytest.approx(mine["t_end"].iloc[0])
        assert cloud["t_end"] == pytest.approx(edges["t_end"].max() + transfer)
        assert cloud["t_start"] == pytest.approx(previous)
        previous = cloud["t_end"]


def test_an_edge_round_draws_only_its_cells_devices(tmp_path):
    res = simulate(from_dict(scenario()), tmp_path / "run", progress=False)
    up, r = res.updates, res.rounds.set_index("round")
    edge_of_row = r.loc[up["version_started"], "edge"].astype(int).to_numpy()
    assert (up["cell"].to_numpy() == edge_of_row).all()


def test_the_cloud_averages_the_edges_models_by_their_data(tmp_path, monkeypatch):
    from wirelessfl.sim.sync import tiers

    seen = []
    real = tiers.TieredEngine._cloud

    def cloud(self, start, *accuracy):
        models = [e.learner.params.clone() for e in self.edges]
        real(self, start, *accuracy)
        seen.append((models, self.learner.params.clone(), [e.learner.params for e in self.edges],
                     self.learner.sample_counts(), [e.devices for e in self.edges]))

    monkeypatch.setattr(tiers.TieredEngine, "_cloud", cloud)
    simulate(from_dict(scenario(rounds=2, timing=False)), tmp_path / "run", progress=False)
    for models, average, after, samples, devices in seen:
        data = np.array([samples[d].sum() for d in devices], dtype=float)
        expected = sum(float(w) * m for w, m in zip(data / data.sum(), models))
        assert np.allclose(average.numpy(), expected.numpy(), atol=1e-7)
        assert all(a is after[0] for a in after)  # every edge goes on from the average
        assert not all(np.allclose(models[0].numpy(), m.numpy()) for m in models[1:])  # the edges did differ


def test_one_edge_aggregating_every_round_is_plain_fedavg(tmp_path):
    """One cell, cloud_every = 1 and a backhaul that takes no time: the cloud's model after each round
    is the edge's, which is FedAvg's: the evaluations are the plain sync run's exactly."""
    base = scenario(cells=1, rounds=3, timing=False)
    base["network"] = {}
    base["channel"] = {}
    base["hierarchy"] = {}
    plain = simulate(from_dict(base), tmp_path / "plain", progress=False)
    base["hierarchy"] = {"tiers": "edge"}
    tiered = simulate(from_dict(base), tmp_path / "tiered", progress=False)
    assert tiered.evals["accuracy"].tolist() == plain.evals["accuracy"].tolist()
    assert tiered.evals["test_loss"].tolist() == plain.evals["test_loss"].tolist()
    edges = tiered.rounds[tiered.rounds["tier"] == "edge"]
    assert edges["t_end"].tolist() == plain.rounds["t_end"].tolist()
    # the one edge's model as it came up is the cloud's: the same accuracy at every evaluation
    clouds = tiered.rounds[tiered.rounds["tier"] == "cloud"]
    assert clouds["edge_accuracy"].astype(float).tolist() == pytest.approx(tiered.evals["accuracy"].iloc[1:].tolist(),
                                                                           abs=1e-6)


def test_a_cloud_only_round_pays_its_sites_forwarding_and_the_model_back(tmp_path):
    data = scenario(rounds=5, tiers="cloud", cloud_every=1)
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    up, r = res.updates, res.rounds
    model_back = BITS / 1e8 + 0.05
    for _, row in r.iterrows():
        mine = up[(up["version_started"] == row["round"]) & (up["outcome"] == "applied")]
        forwarded = max(g["tx_end_s"].max() + len(g) * BITS / 1e8 + 0.05 for _, g in mine.groupby("cell"))
        assert row["t_end"] == pytest.approx(forwarded + model_back)
        assert row["backhaul_s"] == pytest.approx(row["t_end"] - mine["tx_end_s"].max())


@pytest.mark.parametrize("changes, message", [
    ({"learning": {"algorithm": "scaffold"}}, r"^hierarchy.tiers = 'edge' with learning.algorithm = 'scaffold'"),
    ({"learning": {"algorithm": "safari"}}, r"^hierarchy.tiers = 'edge' with learning.algorithm = 'safari'"),
    ({"devices": {"p_on_to_off": 0.1}}, r"^hierarchy.tiers = 'edge' with protocol.name = 'sync': the sync edges' "
                                        r"devices are always available"),
    ({"devices": {"availability": "battery", "compute": "cpu", "delay_mean_s": None}},
     r"^hierarchy.tiers = 'edge' with devices.availability = 'battery'"),
    ({"hierarchy": {"tiers": "cloud", "cloud_every": 3}}, r"^hierarchy.cloud_every = 3: needs hierarchy.tiers = 'edge'"),
    ({"hierarchy": {"tiers": "fog"}}, r"^hierarchy.tiers = 'fog'"),
])
def test_bad_hierarchy_options_are_refused_in_one_line(changes, message):
    from fakes import changed

    with pytest.raises(ConfigError, match=message):
        from_dict(changed(scenario(), changes))


@pytest.mark.parametrize("timing", [True, False])
def test_a_tiered_run_resumes_exactly(tmp_path, interrupted_and_resumed, timing):
    data = scenario(rounds=6, timing=timing)
    data["run"]["checkpoint_every"] = 1
    data["run"]["eval_every_rounds"] = 2  # evaluations cost most of a training run; a few check resume
    full, resumed = interrupted_and_resumed(from_dict(data), after=9)
    assert resumed.summary["status"] == "complete" and (timing or len(full.evals) >= 3)
    for name in ("rounds.csv", "updates.csv", "devices.csv", "evals.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name


def test_the_summary_counts_each_tier_and_devices_their_own_edges_rounds(tmp_path):
    from wirelessfl.experiments.summary_line import summary_line

    res = simulate(from_dict(scenario(rounds=3)), tmp_path / "run", progress=False)
    r, s, dev = res.rounds, res.summary, res.devices
    edges = r[r["tier"] == "edge"]
    assert s["tiers"]["cloud_aggregations"] == (r["tier"] == "cloud").sum() == 3
    assert s["tiers"]["edge_rounds"] == [int((edges["edge"] == c).sum()) for c in range(3)]
    assert s["mean_distinct_per_round"] == pytest.approx(edges["num_selected"].sum() / len(edges))
    own = np.array(s["tiers"]["edge_rounds"])[dev["cell"]]
    assert (dev["available_rate"] == 1.0).all()  # every device is its own edge's, every round of it
    assert dev["selection_rate"].to_numpy() == pytest.approx(dev["selections"].to_numpy() / own)
    assert summary_line("x", s).startswith(f"x: 3 cloud aggregations of {len(edges)} edge rounds, ")


EVENT_EDGES = """
    [protocol]
    name = "fedbuff"
    concurrency = 2
    buffer = 2
    """


@pytest.mark.slow
@pytest.mark.parametrize("events", [False, True])
def test_kill_9_and_resume_of_cells_and_tiers_gives_identical_records(tmp_path, events):
    """Seven cells with edge servers and a cloud (sync edges; FedBuff edges and an asynchronous cloud),
    training, killed with SIGKILL after a checkpoint: the resumed run's records are the whole run's,
    byte for byte."""
    import textwrap

    from fakes import killed_and_resumed

    text = textwrap.dedent("""
        name = "kill"
        seed = 3
        [run]
        rounds = 40
        checkpoint_every = 2
        eval_every_rounds = 5
        [devices]
        count = 28
        [channel]
        path_loss = true
        reference_gain_db = -30.0
        [link]
        noise_power = 1e-12
        [network]
        cells = 7
        reuse = 7
        inter_site_m = 200.0
        [hierarchy]
        tiers = "edge"
        cloud_every = 3
        backhaul_rate_bps = 1e8
        backhaul_latency_s = 0.02
        [scheduler]
        name = "uniform"
        m = 2
        [learning]
        model = "mlp"
        local_steps = 2
        samples_per_device = 50
        eval_train_samples = 200
        """)
    if events:
        text = text.replace('tiers = "edge"\n', 'tiers = "edge"\ncloud = "async"\n') + textwrap.dedent(EVENT_EDGES)
    full, cut = killed_and_resumed(tmp_path, text, "kill")
    for name in ("rounds.csv", "updates.csv", "devices.csv", "evals.csv"):
        assert (full / name).read_text() == (cut / name).read_text(), name


def test_the_tiers_figure_draws_the_clouds_accuracy_and_each_edges(tmp_path, monkeypatch):
    from wirelessfl.experiments import network_plots

    figures = []
    monkeypatch.setattr(network_plots, "_save", lambda fig, out, name: figures.append(fig))
    res = simulate(from_dict(scenario(rounds=3, timing=False)), tmp_path / "run", progress=False)
    network_plots.plot_tiers({"edges": res}, tmp_path)
    ax = figures[0].axes[0]
    (line,) = [ln for ln in ax.lines if ln.get_label() == "the cloud's model"]
    assert np.allclose(line.get_xdata(), res.evals["time_s"]) and np.allclose(line.get_ydata(), 100 * res.evals["accuracy"])
    clouds = res.rounds[res.rounds["tier"] == "cloud"]
    dots = [c.get_offsets() for c in ax.collections if len(c.get_offsets())]
    assert len(dots) == len(clouds) == 3
    for offsets, (_, row) in zip(dots, clouds.iterrows()):
        assert np.allclose(offsets[:, 0], row["t_end"])
        assert np.allclose(offsets[:, 1], 100 * np.array(row["edge_accuracy"].split(), dtype=float))
