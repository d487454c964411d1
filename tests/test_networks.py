"""Several cells (network.cells > 1, wirelessfl.network): the sites of a hexagonal grid and their
reuse bands, the devices' placement and association against brute force, each device's gain to its
own site, each cell's uplink timed alone (a sync round's closed form per cell, the event protocols'
uplink per cell), the per-cell records and summary, refusals in one line, and an exact resume."""
from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError
from wirelessfl.network import build_sites, hex_axial, reuse_bands
from wirelessfl.network.association import Nearest, Strongest
from wirelessfl.network.placement import place_devices

D = 200.0


def network(**kw):
    from wirelessfl.config import NetworkConfig

    return NetworkConfig(**{"inter_site_m": D, **kw})


def neighbours(positions: np.ndarray) -> list[tuple[int, int]]:
    d = np.hypot(*(positions[:, None, :] - positions[None, :, :]).transpose(2, 0, 1))
    return [(i, j) for i in range(len(d)) for j in range(i + 1, len(d)) if abs(d[i, j] - D) < 1e-6]


def test_a_hexagonal_grid_puts_neighbours_one_inter_site_distance_apart():
    sites = build_sites(network(cells=19, reuse=7))
    p = sites.positions_m
    assert len({tuple(a) for a in hex_axial(19).tolist()}) == 19
    d = np.hypot(*(p[:, None, :] - p[None, :, :]).transpose(2, 0, 1))
    assert d[np.triu_indices(19, 1)].min() == pytest.approx(D)  # nobody closer than D
    assert sorted(np.round(d[0, 1:7], 9)) == [D] * 6  # the first ring around the centre
    assert np.round(d[0, 7:], 6).min() > D and np.round(d[0, 7:], 6).max() == pytest.approx(2 * D)
    assert len(neighbours(p)) == 42  # 19 hexagons in two rings share 42 edges


@pytest.mark.parametrize("reuse", [3, 7])
def test_reuse_gives_neighbours_different_sub_bands(reuse):
    sites = build_sites(network(cells=37, reuse=reuse))
    assert set(sites.bands.tolist()) == set(range(reuse))
    assert all(sites.bands[i] != sites.bands[j] for i, j in neighbours(sites.positions_m))
    assert len(set(build_sites(network(cells=reuse, reuse=reuse)).bands.tolist())) == reuse  # a cluster: all differ


def test_per_cell_placement_puts_device_n_in_the_disc_of_site_n_mod_c():
    sites = build_sites(network(cells=7, reuse=7))
    p = place_devices(700, sites, "per_cell", np.random.default_rng(0))
    home = sites.positions_m[np.arange(700) % 7]
    assert (np.hypot(*(p - home).T) <= sites.radius_m + 1e-9).all()
    assert sites.radius_m == pytest.approx(D / math.sqrt(3))


def test_uniform_placement_covers_the_discs_evenly():
    sites = build_sites(network(cells=3, reuse=3, placement="uniform"))
    p = place_devices(30000, sites, "uniform", np.random.default_rng(1))
    d = np.hypot(*(p[:, None, :] - sites.positions_m[None, :, :]).transpose(2, 0, 1))
    assert (d.min(axis=1) <= sites.radius_m + 1e-9).all()
    # the share nearest each site is its Voronoi share of the union: the two outer sites alike
    share = np.bincount(d.argmin(axis=1), minlength=3) / len(p)
    assert abs(share[1] - share[2]) < 0.02


def test_association_by_brute_force():
    rng = np.random.default_rng(2)
    p, sites, g = rng.random((50, 2)), rng.random((4, 2)), rng.random((50, 4))
    d = np.array([[np.hypot(*(q - s)) for s in sites] for q in p])
    assert Nearest().associate(p, sites, g).tolist() == [int(np.argmin(row)) for row in d]
    assert Strongest().associate(p, sites, g).tolist() == [int(np.argmax(row)) for row in g]


def scenario(protocol: str = "sync", cells: int = 3, rounds: int = 12, **extra) -> dict:
    options = {"fedbuff": {"concurrency": 9, "buffer": 3}, "fedasync": {"concurrency": 6}, "semi_sync": {},
               "sync": {}}[protocol]
    data = {"seed": 2, "run": {"rounds": rounds, "timing_only": True},
            "devices": {"count": 24, "compute": "shifted_exponential", "delay_mean_s": 0.01},
            "channel": {"path_loss": True, "reference_gain_db": -30.0},
            "network": {"cells": cells, "reuse": 3 if cells <= 3 else 7, "inter_site_m": D},
            "link": {"model_bits": 1e6, "noise_power": 1e-12, "bandwidth_hz": 3e6},
            "protocol": {"name": protocol, **options}, "scheduler": {"name": "uniform", "m": 9}}
    for key, value in extra.items():
        data.setdefault(key, {}).update(value)
    return data


def test_every_device_is_served_by_its_nearest_site_and_its_gain_is_to_that_site(tmp_path):
    res = simulate(from_dict(scenario()), tmp_path / "run", progress=False)
    dev, sites = res.devices, np.array([c["site_m"] for c in res.summary["cells"]])
    where = dev[["x_m", "y_m"]].to_numpy()
    dist = np.hypot(*(where[:, None, :] - sites[None, :, :]).transpose(2, 0, 1))
    assert dev["cell"].tolist() == dist.argmin(axis=1).tolist()
    own = dist[np.arange(len(dev)), dev["cell"]]
    assert dev["distance_m"].to_numpy() == pytest.approx(own)
    # E|h|^2 = 2 sigma^2 = 2 for Rayleigh, times 1e-3 (d)^-3
    assert dev["mean_gain"].to_numpy() == pytest.approx(2 * 1e-3 * np.maximum(own, 1.0) ** -3.0)
    assert [c["devices"] for c in res.summary["cells"]] == np.bincount(dev["cell"], minlength=3).tolist()


def lindley(ready: np.ndarray, airtime: np.ndarray) -> np.ndarray:
    """One transmitter, first come first served: each upload starts when it is ready and the one
    before it is done (ties by the order given)."""
    start, free = np.empty(len(ready)), -math.inf
    for i in np.argsort(ready, kind="stable"):
        start[i] = max(ready[i], free)
        free = start[i] + airtime[i]
    return start


def test_a_sync_round_times_each_cell_on_its_own_sub_band(tmp_path):
    """Each cell's uploads are one TDMA queue of their own (the closed form recomputed by hand from
    their ready times and airtimes), at B / reuse and N0 / reuse; cells send at the same time."""
    res = simulate(from_dict(scenario()), tmp_path / "run", progress=False)
    up = res.updates
    b, n0 = 3e6 / 3, 1e-12 / 3
    assert up["airtime_s"].to_numpy() == pytest.approx(1e6 / (b * np.log2(1 + up["gain"] * up["power"] / n0)))
    overlap_across = False
    for _, rnd in up.groupby("version_started"):
        for _, cell in rnd.groupby("cell"):
            assert cell["tx_start_s"].to_numpy() == pytest.approx(
                lindley(cell["compute_end_s"].to_numpy(), cell["airtime_s"].to_numpy()), abs=1e-12)
        first = rnd.groupby("cell")["tx_start_s"].min()
        last = rnd.groupby("cell")["tx_end_s"].max()
        overlap_across |= len(first) > 1 and first.max() < last.min()
    assert overlap_across


@pytest.mark.parametrize("protocol", ["fedbuff", "semi_sync"])
def test_under_the_event_protocols_each_cell_has_one_transmitter(tmp_path, protocol):
    res = simulate(from_dict(scenario(protocol, rounds=40)), tmp_path / "run", progress=False)
    up = res.updates.dropna(subset=["tx_end_s"])
    most = 0
    for _, cell in up.groupby("cell"):
        s = cell.sort_values("tx_start_s")
        assert (s["tx_start_s"].to_numpy()[1:] >= s["tx_end_s"].to_numpy()[:-1] - 1e-12).all()
    # across cells several are on the air at once
    events = sorted([(t, 1) for t in up["tx_start_s"]] + [(t, -1) for t in up["tx_end_s"]])
    on = 0
    for _, step in events:
        on += step
        most = max(most, on)
    assert most > 1


def test_the_summary_gives_each_cells_uplink_utilisation(tmp_path):
    from wirelessfl.sim.records.update_log import union_length

    res = simulate(from_dict(scenario("fedbuff", rounds=30)), tmp_path / "run", progress=False)
    up, end = res.updates, res.summary["sim_time_s"]
    for row in res.summary["cells"]:
        mine = up[up["cell"] == row["cell"]]
        stop = mine["tx_end_s"].fillna(mine["lost_s"]).fillna(end).to_numpy(float)
        assert row["uploads"] == len(mine)
        assert row["uplink_utilisation"] == pytest.approx(union_length(mine["tx_start_s"].to_numpy(float),
                                                                         np.minimum(stop, end)) / end)
    assert 0 < min(r["uplink_utilisation"] for r in res.summary["cells"]) <= 1


def test_one_cell_is_todays_single_uplink(tmp_path):
    """network.cells = 1 (the default) with the other [network] options set changes nothing."""
    base = scenario(cells=1)
    base["network"] = {}
    one = simulate(from_dict(base), tmp_path / "a", progress=False)
    base["network"] = {"cells": 1, "inter_site_m": 1234.0, "placement": "uniform"}
    same = simulate(from_dict(base), tmp_path / "b", progress=False)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    assert "cells" not in one.summary and "cell" not in one.updates


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_a_run_of_several_cells_resumes_exactly(tmp_path, interrupted_and_resumed, protocol):
    data = scenario(protocol, rounds=40)
    data["run"]["checkpoint_every"] = 3
    full, resumed = interrupted_and_resumed(from_dict(data), after=14)
    assert resumed.summary["status"] == "complete" and resumed.summary["cells"] == full.summary["cells"]
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name


def test_sites_from_a_file(tmp_path):
    (tmp_path / "sites.csv").write_text("x,y\n0,0\n300,0\n")
    data = scenario(cells=2, rounds=3, network={"layout": "file", "sites_file": str(tmp_path / "sites.csv")})
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    assert [c["site_m"] for c in res.summary["cells"]] == [[0.0, 0.0], [300.0, 0.0]]


@pytest.mark.parametrize("extra, message", [
    ({"channel": {"path_loss": False}}, r"^network.cells = 3: needs channel.path_loss = true"),
    ({"network": {"cells": 7, "reuse": 3}, "link": {"access": "tdma_slotted"}},
     r"^network.cells = 7 with network.reuse = 3: cells on one sub-band interfere, which is modelled under"),
    ({"network": {"reuse": 2}}, r"^network.reuse = 2"),
    ({"link": {"access": "aircomp"}}, r"^link.access = 'aircomp' with network.cells = 3"),
    ({"link": {"access": "aloha"}}, r"^link.access = 'aloha' with network.cells = 3"),
    ({"network": {"layout": "file"}}, r"^network.layout = 'file': needs network.sites_file"),
    ({"network": {"sites_file": "x.csv"}}, r"^network.sites_file: set it exactly when network.layout = 'file'"),
    ({"network": {"cells": 0}}, r"^network.cells = 0"),
])
def test_bad_network_options_are_refused_in_one_line(extra, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(scenario(**extra))


def test_a_sites_file_with_the_wrong_count_is_refused(tmp_path):
    (tmp_path / "sites.csv").write_text("0,0\n300,0\n600,0\n")
    with pytest.raises(ConfigError, match=r"has 3 sites: must have one per cell \(network.cells = 2\)$"):
        from_dict(scenario(cells=2, network={"layout": "file", "sites_file": str(tmp_path / "sites.csv")}))


def test_reuse_bands_match_the_textbook_clusters():
    axial = hex_axial(7)
    assert sorted(reuse_bands(axial, 7).tolist()) == list(range(7))
    assert reuse_bands(axial, 1).tolist() == [0] * 7
    assert pd.Series(reuse_bands(hex_axial(3), 3)).nunique() == 3


def test_the_map_draws_every_device_in_its_cell_and_every_site(tmp_path, monkeypatch):
    from wirelessfl.experiments import network_plots

    figures = []
    monkeypatch.setattr(network_plots, "_save", lambda fig, out, name, **how: figures.append(fig))
    res = simulate(from_dict(scenario()), tmp_path / "run", progress=False)
    network_plots.plot_network({"three": res}, tmp_path)
    ax = figures[0].axes[0]
    devices, sites = (c for c in ax.collections if len(c.get_offsets()))  # the legend's markers are empty
    dev = res.devices
    assert np.allclose(devices.get_offsets(), dev[["x_m", "y_m"]].to_numpy())
    colours = matplotlib.colors.to_rgba_array([f"C{c % 10}" for c in dev["cell"]], alpha=0.75)
    assert np.allclose(devices.get_facecolors(), colours)  # each device in its cell's colour
    assert np.allclose(sites.get_offsets(), [r["site_m"] for r in res.summary["cells"]])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"cell {r['cell']}: {r['devices']} devices, uplink {100 * r['uplink_utilisation']:.0f} % busy"
                      for r in res.summary["cells"] if r["devices"]]
