"""Runs that would never end (issue 61, item 7, and the figures and records that grew with them): each
is refused before it runs, with the estimate that says why, or stops in one line. A scenario here is
the smallest that shows it: four devices, timing only."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from wirelessfl import simulate
from wirelessfl.config import ConfigError, from_dict

_SMALL = {"run": {"rounds": 3, "timing_only": True}, "devices": {"count": 4}, "link": {"model_bits": 10000}}
_FEDBUFF = {"name": "fedbuff", "concurrency": 2, "buffer": 1}
# a unicast downlink at a rate no channel carries: every transmission of the model misses
_CERTAIN_MISS = {"downlink": "unicast", "downlink_errors": "outage", "downlink_rate_bps": 1e30}


def small(**tables) -> dict:
    data = json.loads(json.dumps(_SMALL))
    for table, values in tables.items():
        data.setdefault(table, {}).update(values)
    return data


def test_the_model_s_retransmissions_are_bounded_as_an_upload_s_are():
    with pytest.raises(ConfigError) as err:
        from_dict(small(link={**_CERTAIN_MISS, "downlink_max_attempts": 10 ** 9}, protocol=_FEDBUFF))
    assert str(err.value) == ("link.downlink_max_attempts = 1,000,000,000: at most 1,000,000 transmissions of the "
                              "model to a device, as for an upload (link.max_attempts)")
    from_dict(small(link={**_CERTAIN_MISS, "downlink_max_attempts": 10 ** 6}, protocol=_FEDBUFF))  # the bound itself


def test_a_certain_miss_stops_after_as_many_transmissions_as_tasks_would_take():
    """Each of a lost task's transmissions counts toward the stall guard: 4 devices x 100 = 400 are
    allowed, so with 1,000 a task the first task that misses stops the run (before, 401 tasks of
    1,000 transmissions each: 400,000 draws)."""
    from wirelessfl.sim.events.engine import EventStall

    data = small(link={**_CERTAIN_MISS, "downlink_max_attempts": 1000}, protocol=_FEDBUFF)
    with pytest.raises(EventStall, match=r"^link.downlink: 1,000 transmissions of tasks in a row missed the model "
                                         r"before an aggregation \(t = [0-9.e+-]+ s, 0 aggregations of "
                                         r"run.rounds = 3\)"):
        simulate(from_dict(data), progress=False)


def test_updates_all_dropped_as_stale_stop_as_stalled(tmp_path):
    """A device that missed the model trains from its old one (downlink_miss = 'stale'); with
    max_staleness = 0 every update after the first aggregation is dropped, and no aggregation comes:
    the 401st drop in a row (4 devices x 100) stops the run."""
    from wirelessfl.sim.events.engine import EventStall

    data = small(link={**_CERTAIN_MISS, "downlink_miss": "stale"}, protocol={**_FEDBUFF, "max_staleness": 0})
    with pytest.raises(EventStall, match=r"^protocol.max_staleness: 401 tasks in a row dropped as stale before an "
                                         r"aggregation \(t = [0-9.e+-]+ s, 1 aggregations of run.rounds = 3\)"):
        simulate(from_dict(data), tmp_path / "run", progress=False)


# ---------------------------------------------------------------------------------------------
# edge servers and a cloud: the rows the run would make, estimated before it runs or from its pace

_EDGES = {"channel": {"path_loss": True}, "network": {"cells": 2}, "protocol": _FEDBUFF}


def test_cloud_aggregations_that_imply_too_many_edge_ones_are_refused_up_front():
    """5 cloud aggregations of a sync cloud over 2 edges, each after 10^6 aggregations of every edge:
    5 x (1 + 2 x 10^6) = 10,000,005 rows at least, past the 10^7 allowed; an async cloud waits for
    one edge's 10^6, 5 x (1 + 10^6) rows, and runs; a time budget is the user's bound."""
    def scenario(cloud, run=None):
        return small(**_EDGES, hierarchy={"tiers": "edge", "cloud": cloud, "cloud_every": 10 ** 6},
                     run={"rounds": 5, **(run or {})})

    with pytest.raises(ConfigError) as err:
        from_dict(scenario("sync"))
    assert str(err.value) == ("hierarchy.cloud_every = 1,000,000: run.rounds = 5 cloud aggregations (a sync cloud, "
                              "each after 1,000,000 aggregations of every one of the 2 edges) are at least 10,000,005 "
                              "aggregations, rows of rounds.csv; at most 10,000,000 estimated up front; lower "
                              "hierarchy.cloud_every or run.rounds, or set run.time_budget_s")
    from_dict(scenario("async"))
    from_dict(scenario("sync", {"time_budget_s": 10.0}))


@pytest.mark.parametrize("cloud, latency", [("sync", 1e308), ("async", 1e308), ("sync", 1e12)])
def test_a_backhaul_the_edges_would_aggregate_forever_behind_stops_at_its_pace(tmp_path, cloud, latency):
    """Edges never wait for the cloud: behind a backhaul of 1e308 s they would aggregate until the
    clock reached it. The pace of their first 64 rows says how many rows that is, and the run stops
    in one line then (no cloud aggregation yet)."""
    data = small(**_EDGES, hierarchy={"tiers": "edge", "cloud": cloud, "backhaul_latency_s": latency})
    with pytest.raises(ConfigError, match=rf"^hierarchy.backhaul_latency_s = {re.escape(f'{latency:g}')}: an edge's "
                                          rf"first update reaches the cloud after {re.escape(f'{latency:.3g}')} s on "
                                          r"the backhaul, and at the pace "
                                          r"of the first 64 rows \([0-9.e+]+ simulated s each\) that is about "
                                          r"[0-9.e+]+ rows of rounds.csv; at most 10,000,000"):
        simulate(from_dict(data), tmp_path / "run", progress=False)


def test_a_backhaul_the_pace_allows_runs_to_its_end():
    """1 s on the backhaul: a handful of edge rows before the cloud's first aggregation; the run ends
    with its 3 cloud aggregations."""
    res = simulate(from_dict(small(**_EDGES, hierarchy={"tiers": "edge", "backhaul_latency_s": 1.0})), progress=False)
    assert (res.rounds["tier"] == "cloud").sum() == 3


# ---------------------------------------------------------------------------------------------
# network.png scales with the devices, not with the cells


def _cells(cells: int, count: int = 6) -> dict:
    return small(channel={"path_loss": True}, network={"cells": cells}, devices={"count": count},
                 run={"rounds": 1})


def _drawn_map(tmp_path, monkeypatch, cells: int, count: int):
    from wirelessfl.experiments import network_plots

    figures = []
    monkeypatch.setattr(network_plots, "_save", lambda fig, out, name, **how: figures.append((fig, how)))
    res = simulate(from_dict(_cells(cells, count)), tmp_path / "run", progress=False)
    network_plots.plot_network({"run": res}, tmp_path)
    return res, *figures[0]


def test_a_map_of_many_cells_draws_as_few_things_as_one_of_three(tmp_path, monkeypatch):
    """61 cells (more than LABELLED_SITES = 30), 12 devices in 12 of them (more than LEGEND_CELLS =
    8): two scatters (devices, sites), no label per site and no legend (its colours named in the
    title), as for 3 cells but for their legend's markers and labels."""
    res, fig, how = _drawn_map(tmp_path, monkeypatch, 61, 12)
    ax = fig.axes[0]
    assert len(ax.collections) == 2 and not ax.texts and ax.get_legend() is None
    served = sum(1 for row in res.summary["cells"] if row["devices"])
    assert served == 12 and len(res.summary["cells"]) == 61
    assert ax.get_title(loc="left") == ("run: 61 cells; dot area: updates started\n"
                                        "colour: the serving cell (12 cells with devices)")
    assert how == {"crop": True}


def test_a_map_of_a_few_cells_names_only_those_with_devices(tmp_path, monkeypatch):
    """7 cells, 6 devices: every site labelled, a legend entry for each of the 6 cells with devices
    (the empty one left out), every entry's marker of one size whatever its dots' sizes."""
    res, fig, _ = _drawn_map(tmp_path, monkeypatch, 7, 6)
    ax = fig.axes[0]
    assert len(ax.texts) == 7
    served = [row["cell"] for row in res.summary["cells"] if row["devices"]]
    assert len(served) == 6
    legend = ax.get_legend()
    assert [t.get_text().split(":")[0] for t in legend.get_texts()] == [f"cell {c}" for c in served]
    assert {float(h.get_sizes()[0]) for h in legend.legend_handles} == {20.0}


def test_the_map_is_saved_without_empty_margins(tmp_path):
    """network.png is cut to what was drawn: its first and last columns of pixels each hold something
    other than the white background within 20 pixels (the axis labels on the left, the legend on the right)."""
    import matplotlib.image

    from wirelessfl.experiments import network_plots

    res = simulate(from_dict(_cells(7)), tmp_path / "run", progress=False)
    path = network_plots.plot_network({"run": res}, tmp_path / "figures")
    image = matplotlib.image.imread(path)[..., :3]
    drawn = np.flatnonzero((image < 0.9).any(axis=(0, 2)))  # columns with a pixel that is not white
    assert drawn[0] <= 20 and drawn[-1] >= image.shape[1] - 21


def test_edge_servers_that_would_each_schedule_over_too_many_devices_are_refused_up_front():
    """Every edge's scheduler works over all the devices: 10,000 edges x 10,000 devices = 1e8 slots a
    round, past the 10^7 allowed; 2,000 x 2,000 = 4e6 passes, and without edges the cells cost nothing."""
    def scenario(cells, count, tiers="edge"):
        return small(channel={"path_loss": True}, network={"cells": cells}, devices={"count": count},
                     hierarchy={"tiers": tiers})

    with pytest.raises(ConfigError) as err:
        from_dict(scenario(10_000, 10_000))
    assert str(err.value) == ("network.cells = 10,000 with hierarchy.tiers = 'edge': each of the 10,000 edge servers "
                              "schedules over all 10,000 devices, 1e+08 device slots a round (about 70 s a round); "
                              "at most 10,000,000; use fewer cells or devices, or hierarchy.tiers = 'cloud'")
    from_dict(scenario(2_000, 2_000))
    from_dict(scenario(10_000, 10_000, "cloud"))


def test_devices_times_sites_past_the_machine_s_memory_are_refused_up_front(monkeypatch):
    """Each device's mean gain to every site: 48 bytes a pair (measured), 10,000 x 10,000 = 4.47 GB
    against a machine of 2 GB; 1,000 x 1,000 (46 MB) fits."""
    from wirelessfl import fields

    monkeypatch.setattr(fields, "physical_memory", lambda: 2 * 1024 ** 3)

    def scenario(n):
        return small(channel={"path_loss": True}, network={"cells": n}, devices={"count": n})

    with pytest.raises(ConfigError) as err:
        from_dict(scenario(10_000))
    assert str(err.value) == ("network.cells = 10000: the mean gains of 10,000 devices to each of 10,000 sites needs "
                              "about 4.47 GB of memory and this machine has 2 GB")
    from_dict(scenario(1_000))
