"""Edge servers under the event protocols and a cloud, synchronous or asynchronous
(wirelessfl.sim.events.tiers): one edge sending after every aggregation over an instant backhaul is
the plain run; the cloud's timeline against the edges' rows; what an edge learned is neither lost
nor counted twice when messages cross, by hand; refusals in one line; an exact resume with messages
on the backhaul."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from test_tiers import scenario
from wirelessfl.config import from_dict
from wirelessfl.des import Clock
from wirelessfl.experiments.run import simulate
from wirelessfl.network import NO_BACKHAUL
from wirelessfl.fields import ConfigError
from wirelessfl.sim.events.tiers import TieredEvents
from wirelessfl.sim.round.parts import EvalRule, StopRule

TRANSFER = 1e6 / 1e8 + 0.05  # test_tiers' backhaul: a model of 1 Mbit at 100 Mbit/s, 50 ms


def edges(protocol: str = "fedbuff", cloud: str = "sync", **kw) -> dict:
    data = scenario(cloud=cloud, **kw)
    data["protocol"] = {"name": protocol, **({"concurrency": 3, "buffer": 2} if protocol == "fedbuff" else
                                              {"concurrency": 3} if protocol == "fedasync" else {})}
    return data


@pytest.mark.parametrize("cloud", ["sync", "async"])
def test_one_edge_sending_after_every_aggregation_is_the_plain_run(cloud):
    data = edges(cloud=cloud, cells=1, rounds=8, timing=False, cloud_every=1, backhaul_latency_s=0.0)
    data["network"] = {"cells": 1}
    data["hierarchy"].pop("backhaul_rate_bps")
    tiered = simulate(from_dict(data), None, progress=False)
    data.pop("hierarchy")
    plain = simulate(from_dict(data), None, progress=False)
    a, b = (r.updates[r.updates["outcome"] == "applied"].reset_index(drop=True) for r in (tiered, plain))
    assert len(a) == len(b) > 10
    for column in ("update", "device", "tx_end_s", "version_started", "version_applied"):
        assert a[column].tolist() == b[column].tolist(), column
    assert tiered.evals["time_s"].tolist() == plain.evals["time_s"].tolist()
    assert tiered.evals["test_loss"].to_numpy() == pytest.approx(plain.evals["test_loss"].to_numpy(), abs=1e-6)
    rows = tiered.rounds
    assert (rows["tier"] == "cloud").sum() == 8 and (rows["tier"] == "edge").sum() == 8
    # the one edge's model as it sent it is the cloud's after applying it: the same accuracy
    sent = rows[rows["tier"] == "cloud"]["edge_accuracy"].astype(float).to_numpy()
    assert sent == pytest.approx(tiered.evals["accuracy"].iloc[1:].to_numpy(), abs=1e-6)


def sends(rounds, cloud_every: int) -> dict[int, list[float]]:
    """When each edge sent up: the end of every cloud_every-th of its aggregations."""
    mine = rounds[rounds["tier"] == "edge"]
    out = {}
    for cell, rows in mine.groupby(mine["edge"].astype(float).astype(int)):
        rows = rows[(rows["edge_round"].astype(int) + 1) % cloud_every == 0]
        out[cell] = rows["t_end"].tolist()
    return out


@pytest.mark.parametrize("protocol", ["fedbuff", "semi_sync"])
def test_a_sync_cloud_aggregates_when_every_edges_next_update_is_in(protocol):
    res = simulate(from_dict(edges(protocol, rounds=5)), None, progress=False)
    rows = res.rounds
    clouds = rows[rows["tier"] == "cloud"]
    sent = sends(rows, cloud_every=2)
    for k, (_, row) in enumerate(clouds.iterrows()):
        assert row["t_end"] == pytest.approx(max(times[k] for times in sent.values()) + TRANSFER, abs=1e-12)
        assert row["edge"] == "0 1 2" and row["num_updates"] == 3
    assert res.summary["tiers"]["cloud_aggregations"] == 5
    assert res.summary["tiers"]["edge_rounds"] == [int((rows["edge"].astype(str) == str(c)).sum()) for c in range(3)]
    dev = res.devices  # each device counts its own edge's aggregations, at all of which it was there
    own = np.array(res.summary["tiers"]["edge_rounds"])[dev["cell"]]
    assert (dev["available_rate"] == 1.0).all()
    assert dev["selection_rate"].to_numpy() == pytest.approx(dev["selections"].to_numpy() / own)


def test_an_async_cloud_applies_each_edges_update_as_it_arrives():
    res = simulate(from_dict(edges("fedasync", cloud="async", rounds=12)), None, progress=False)
    rows = res.rounds
    clouds = rows[rows["tier"] == "cloud"]
    arrivals = sorted((t + TRANSFER, cell) for cell, times in sends(rows, cloud_every=2).items() for t in times)
    assert clouds["t_end"].to_numpy() == pytest.approx([t for t, _ in arrivals[:12]], abs=1e-12)
    assert clouds["edge"].astype(int).tolist() == [c for _, c in arrivals[:12]]
    assert (clouds["num_updates"] == 1).all()


def bare_tiers(weights: list[float], synchronous: bool) -> TieredEvents:
    """The cloud's bookkeeping alone, on a clock of its own: its edges are models to set by hand."""
    t = TieredEvents.__new__(TieredEvents)
    x0 = torch.zeros(2, dtype=torch.float64)
    count = len(weights)
    t.learner, t.weights, t.synchronous, t.backhaul = SimpleNamespace(params=x0.clone()), weights, synchronous, NO_BACKHAUL
    t.parts = SimpleNamespace(downlink_bits=1.0)
    t.edges = [SimpleNamespace(cell=c, version=0, learner=SimpleNamespace(params=x0.clone())) for c in range(count)]
    t.env, t.messages, t.numbered, t.cloud_every = Clock(), [], 0, 1
    t.waiting, t.base, t.sent = [[] for _ in range(count)], [x0.clone() for _ in range(count)], [[] for _ in range(count)]
    t.stopping, t._settle_pending, t.version, t.rows, t.last_cloud_s = False, False, 0, 0, 0.0
    t.on_cloud, t.after_round, t.evals_at = lambda row: None, None, []
    t.stop, t.eval_rule = StopRule(), EvalRule(every_rounds=10 ** 9, at_start=False)
    return t


def learn(t: TieredEvents, cell: int, step) -> None:
    """Edge ``cell`` learns ``step`` and aggregates (sending it up)."""
    edge = t.edges[cell]
    edge.learner.params = edge.learner.params + torch.tensor(step, dtype=torch.float64)
    edge.version += 1
    t._edge_aggregated(edge)


def test_crossing_messages_lose_and_double_count_nothing_by_hand():
    """One edge (weight 1) sends twice before the first answer comes back, learning in between and
    after: the cloud ends with all the edge sent, the edge with that and what it learned since."""
    t = bare_tiers([1.0], synchronous=False)
    learn(t, 0, [1.0, 0.0])     # sends Δ1 = (1, 0)
    learn(t, 0, [0.0, 2.0])     # sends Δ2 = (0, 2) before Δ1 arrived
    t.env.run()                 # both reach the cloud, both answers reach the edge
    assert t.learner.params.tolist() == [1.0, 2.0]
    assert t.edges[0].learner.params.tolist() == [1.0, 2.0]
    learn(t, 0, [4.0, 0.0])
    t.edges[0].learner.params += torch.tensor([0.0, 8.0], dtype=torch.float64)  # learned after sending
    t.env.run()
    assert t.learner.params.tolist() == [5.0, 2.0] and t.edges[0].learner.params.tolist() == [5.0, 10.0]
    assert t.version == 3


def test_a_sync_cloud_averages_the_edges_by_their_data_by_hand():
    t = bare_tiers([0.25, 0.75], synchronous=True)
    learn(t, 0, [4.0, 0.0])
    t.env.run()
    assert t.version == 0 and t.learner.params.tolist() == [0.0, 0.0]  # waits for edge 1
    learn(t, 1, [0.0, 4.0])
    t.env.run()
    assert t.version == 1 and t.learner.params.tolist() == [1.0, 3.0]  # the data-weighted average
    assert all(e.learner.params.tolist() == [1.0, 3.0] for e in t.edges)  # every edge goes on from it


@pytest.mark.parametrize("changes, message", [
    ({"hierarchy": {"cloud": "async"}}, r"^hierarchy.cloud = 'async' with protocol.name = 'sync': an asynchronous"),
    ({"hierarchy": {"tiers": "cloud", "cloud": "async", "cloud_every": 1}},
     r"^hierarchy.cloud = 'async': needs hierarchy.tiers = 'edge'"),
])
def test_bad_edge_options_are_refused_in_one_line(changes, message):
    from fakes import changed

    with pytest.raises(ConfigError, match=message):
        from_dict(changed(scenario(), changes))


@pytest.mark.parametrize("protocol, cloud, timing", [("fedbuff", "sync", False), ("fedasync", "async", False),
                                                     ("semi_sync", "async", True)])
def test_event_edges_resume_exactly(tmp_path, interrupted_and_resumed, protocol, cloud, timing):
    data = edges(protocol, cloud=cloud, rounds=12, timing=timing)
    data["run"]["checkpoint_every"] = 1
    data["run"]["eval_every_rounds"] = 3  # evaluations cost most of a training run; a few check resume
    full, resumed = interrupted_and_resumed(from_dict(data), after=14)
    assert resumed.summary["status"] == "complete" and (timing or len(full.evals) >= 4)
    for name in ("rounds.csv", "updates.csv", "devices.csv", "evals.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
    # messages were on the backhaul at the checkpoints it could resume from
    rows = full.rounds
    clouds = rows[rows["tier"] == "cloud"]["t_end"].to_numpy()
    sent = np.concatenate([np.array(t) for t in sends(rows, cloud_every=2).values()])
    assert ((sent[:, None] < clouds) & (clouds < sent[:, None] + TRANSFER)).any()


def test_edges_on_one_sub_band_interfere_on_one_uplink(tmp_path, interrupted_and_resumed):
    """Three cells at reuse 1, each edge under FedBuff: every upload goes at the rate the other cells'
    transmissions leave it (slower than alone on the band, some strictly), each cell counts its
    SINR loss, and a run resumes exactly with uploads of several edges on the air."""
    data = edges("fedbuff", cloud="async", rounds=12)
    data["network"]["reuse"] = 1
    data["run"]["checkpoint_every"] = 1
    full, resumed = interrupted_and_resumed(from_dict(data), after=14)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
    assert resumed.summary["cells"] == full.summary["cells"]
    assert all(c["sinr_loss_db"] > 0 for c in full.summary["cells"] if c["uploads"])
    up = full.updates.dropna(subset=["tx_end_s"])
    b = 22e6  # the band, not split (reuse 1); test_tiers' noise power
    alone = 1e6 / (b * np.log2(1 + up["gain"] * up["power"] / 1e-12))
    assert (up["airtime_s"].to_numpy() >= alone.to_numpy() * (1 - 1e-9)).all()
    assert (up["airtime_s"].to_numpy() > alone.to_numpy() * 1.01).any()


def test_an_edge_without_devices_is_refused_in_one_line():
    data = edges("fedbuff", cells=3)
    data["devices"]["count"] = 2  # per cell: devices 0 and 1 in cells 0 and 1, none in cell 2
    data["protocol"].update(concurrency=1, buffer=1)
    data["scheduler"]["m"] = 1
    with pytest.raises(ConfigError, match=r"^hierarchy.tiers = 'edge': cell 2 serves no device"):
        simulate(from_dict(data), None, progress=False)


@pytest.mark.parametrize("protocol", ["fedbuff", "semi_sync"])
def test_edges_whose_devices_come_and_go(tmp_path, interrupted_and_resumed, protocol):
    """Each edge steps its own devices' availability: devices leave mid-task (outcome offline), are
    available at only some of their edge's aggregations, and a run resumes exactly."""
    data = edges(protocol, rounds=12)
    data["devices"].update(p_on_to_off=0.3, p_off_to_on=0.5, availability_period_s=0.05)
    data["run"]["checkpoint_every"] = 1
    full, resumed = interrupted_and_resumed(from_dict(data), after=14)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
    assert (full.updates["outcome"] == "offline").any()
    rate = full.devices["available_rate"]
    assert (rate < 1.0).all() and (rate > 0.0).all()
