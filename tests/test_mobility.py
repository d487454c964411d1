"""Moving devices (devices.mobility): paths against hand computations and the models' laws, path
loss that follows the positions under sync and the event protocols, records and resume."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.mobility import Mobility
from wirelessfl.sim.records.device_arrays import load_decisions


def test_constant_velocity_from_the_centre_by_hand():
    m = Mobility(np.zeros((1, 2)), radius_m=10.0, speed_mps=2.0, model="constant_velocity", seed=0)
    v = m.velocity[0].copy()
    assert np.hypot(*v) == pytest.approx(2.0)
    np.testing.assert_allclose(m.positions(3.0)[0], 3.0 * v)        # straight out at 2 m/s
    np.testing.assert_allclose(m.positions(5.0)[0], 5.0 * v)        # at the wall (10 m) at t = 5 s
    np.testing.assert_allclose(m.positions(7.0)[0], 3.0 * v)        # straight back: the normal is radial
    np.testing.assert_allclose(m.positions(12.0)[0], -2.0 * v)      # through the centre and on
    np.testing.assert_allclose(m.positions(15.0)[0], -5.0 * v)      # the opposite wall, and back again
    np.testing.assert_allclose(m.positions(20.0)[0], np.zeros(2), atol=1e-9)


def test_constant_velocity_reflects_like_a_mirror_and_never_leaves_the_cell():
    start = np.array([[3.0, -4.0], [0.0, 9.9], [-7.0, 1.0]])
    m = Mobility(start, radius_m=10.0, speed_mps=3.0, model="constant_velocity", seed=5)
    far = 0.0
    for t in np.linspace(0.0, 2000.0, 20001):
        far = max(far, float(np.hypot(*m.positions(t).T).max()))
    assert far <= 10.0 * (1 + 1e-12)
    # at every wall the normal part of the velocity flips and the tangential part stays
    m = Mobility(start, radius_m=10.0, speed_mps=3.0, model="constant_velocity", seed=5)
    for _ in range(30):
        d = 1
        before = m.velocity[d].copy()
        m.positions(float(m.t1[d]) + 1e-9)
        wall, after = m.origin[d], m.velocity[d]
        n = wall / np.hypot(*wall)
        assert np.hypot(*wall) == pytest.approx(10.0)
        assert after @ n == pytest.approx(-(before @ n))
        t_dir = np.array([-n[1], n[0]])
        assert after @ t_dir == pytest.approx(before @ t_dir)


def test_random_waypoint_walks_at_its_speed_to_points_uniform_over_the_cell():
    n, radius, speed = 2000, 50.0, 1.5
    m = Mobility(np.zeros((n, 2)), radius_m=radius, speed_mps=speed, model="random_waypoint", seed=1)
    first = m.origin + m.velocity * (m.t1 - m.t0)[:, None]  # the first waypoint of every device
    r2 = (first ** 2).sum(axis=1) / radius ** 2
    # uniform over the disc: r^2 / R^2 ~ U(0, 1) and the angle ~ U(-pi, pi)
    assert abs(r2.mean() - 0.5) < 4 * math.sqrt(1 / 12 / n)
    assert r2.max() <= 1.0
    angle = np.arctan2(first[:, 1], first[:, 0])
    assert abs(angle.mean()) < 4 * math.pi / math.sqrt(3 * n)
    np.testing.assert_allclose(np.hypot(*m.velocity.T), speed)
    # between two looks a device moves at most speed x dt, exactly that within a segment
    a, b = m.positions(10.0).copy(), m.positions(10.5)
    step = np.hypot(*(b - a).T)
    assert (step <= speed * 0.5 + 1e-9).all()
    assert np.mean(np.isclose(step, speed * 0.5)) > 0.95


@pytest.mark.parametrize("model", ["constant_velocity", "random_waypoint"])
def test_a_path_is_the_same_however_often_it_is_looked_at(model):
    start = np.array([[1.0, 2.0], [-30.0, 10.0], [0.0, 0.0]])
    once = Mobility(start, 40.0, 2.0, model, seed=3).positions(500.0)
    often = Mobility(start, 40.0, 2.0, model, seed=3)
    for t in np.linspace(0.0, 500.0, 777):
        last = often.positions(t)
    np.testing.assert_allclose(last, once, rtol=0, atol=1e-9)
    other = Mobility(start, 40.0, 2.0, model, seed=4).positions(500.0)
    assert not np.allclose(other, once)
    with pytest.raises(ValueError, match="only moves forward"):
        often.positions(100.0)


def test_static_devices_stay_put():
    start = np.array([[1.0, 2.0], [3.0, 4.0]])
    m = Mobility(start, 10.0, 5.0, "static", seed=0)
    np.testing.assert_array_equal(m.positions(1e6), start)


def ones_trace(tmp_path, rows=400, n=6):
    path = tmp_path / "flat.csv"
    np.savetxt(path, np.ones((rows, n)), delimiter=",")
    return path


def moving(tmp_path, protocol=None, rounds=30, **devices):
    """Gains of exactly 1 before path loss (a trace of ones), so a gain is the path loss alone."""
    return from_dict({
        "seed": 4, "run": {"rounds": rounds, "timing_only": True},
        "channel": {"model": "trace", "trace": str(ones_trace(tmp_path)), "trace_end": "cycle", "path_loss": True,
                    "cell_radius_m": 60.0, "reference_distance_m": 1.0, "path_loss_exponent": 3.0},
        "link": {"model_bits": 200000, "bandwidth_hz": 1e6, "noise_power": 1e-7},
        "devices": {"count": 6, "compute": "constant", "compute_s": 0.5, "mobility": "random_waypoint",
                    "speed_mps": 20.0, **devices},
        "scheduler": {"name": "uniform", "m": 3}, "protocol": protocol or {"name": "sync"}})


def path_loss(xy):
    return np.maximum(np.hypot(xy[..., 0], xy[..., 1]), 1.0) ** -3.0


def test_sync_gains_follow_the_recorded_positions_and_devices_csv_has_their_mean_distance(tmp_path):
    res = simulate(moving(tmp_path), tmp_path / "run", progress=False)
    arrays = load_decisions(tmp_path / "run")
    xy = arrays["positions"]
    assert xy.shape == (30, 6, 2)
    np.testing.assert_allclose(arrays["gains"], path_loss(xy.astype(float)), rtol=2e-6)
    # they moved, at most 20 m/s x the round's length between two round starts
    starts = res.rounds["t_start"].to_numpy()
    moved = np.hypot(*(xy[1:] - xy[:-1]).transpose(2, 0, 1))
    assert (moved > 0).all()
    assert (moved <= 20.0 * np.diff(starts)[:, None] * (1 + 1e-5) + 1e-3).all()
    # the path is the model's: replayed from the seed's stream at the round starts
    start = xy[0].astype(float)
    replay = Mobility(start, 60.0, 20.0, "random_waypoint", seed=4)
    np.testing.assert_allclose(np.stack([replay.positions(t) for t in starts]), xy, atol=1e-3)
    np.testing.assert_allclose(res.devices["distance_m"], np.hypot(xy[..., 0], xy[..., 1]).mean(axis=0), rtol=1e-5)
    from wirelessfl import load_run

    np.testing.assert_array_equal(load_run(tmp_path / "run").decisions["positions"], xy)


def test_event_uploads_see_the_path_loss_of_where_the_device_is_when_it_sends(tmp_path):
    sc = moving(tmp_path, {"name": "fedasync", "concurrency": 3}, rounds=40)
    res = simulate(sc, tmp_path / "run", progress=False)
    up = res.updates.dropna(subset=["tx_start_s"]).sort_values("tx_start_s", kind="stable")
    # replay the paths: the cell's start positions come from the seed's "cell" stream
    from wirelessfl import rng
    from wirelessfl.wireless import cell_positions

    replay = Mobility(cell_positions(6, 60.0, rng.stream(4, "cell")), 60.0, 20.0, "random_waypoint", seed=4)
    expect = [path_loss(replay.positions(t)[d]) for t, d in zip(up["tx_start_s"], up["device"])]
    assert len(expect) > 30
    np.testing.assert_allclose(up["gain"].to_numpy(), expect, rtol=1e-6)


def test_a_moving_run_resumed_gives_the_uninterrupted_records(tmp_path, interrupted_and_resumed):
    sc = moving(tmp_path, rounds=25).replace("run.checkpoint_every=2")
    full, resumed = interrupted_and_resumed(sc, after=11)
    assert resumed.summary["status"] == "complete"
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
    a, b = load_decisions(tmp_path / "full"), load_decisions(tmp_path / "cut")
    np.testing.assert_array_equal(a["positions"], b["positions"])


def test_mobility_refusals(tmp_path):
    base = {"devices": {"mobility": "random_waypoint", "speed_mps": 1.0}, "channel": {"path_loss": True},
            "run": {"rounds": 1, "timing_only": True}}
    with pytest.raises(ConfigError, match="devices.mobility.*channel.path_loss = true"):
        from_dict({**base, "channel": {}})
    with pytest.raises(ConfigError, match="devices.speed_mps > 0"):
        from_dict({**base, "devices": {"mobility": "constant_velocity"}})
    with pytest.raises(ConfigError, match=r"positions_m\[1\].*outside the cell"):
        from_dict({**base, "devices": {"count": 2, **base["devices"]},
                   "channel": {"path_loss": True, "cell_radius_m": 10.0, "positions_m": [[1, 1], [20, 0]]}})
    with pytest.raises(ConfigError, match="devices.mobility.*allowed|static"):
        from_dict({**base, "devices": {"mobility": "teleport", "speed_mps": 1.0}})


def test_a_trace_refuses_moving_devices_in_one_line(tmp_path, capsys):
    from wirelessfl.cli import main

    path = tmp_path / "s.toml"
    path.write_text('[channel]\npath_loss = true\n[devices]\ncount = 3\nmobility = "constant_velocity"\n'
                    'speed_mps = 1.0\n[run]\nrounds = 2\ntiming_only = true\n')
    assert main(["trace", str(path), "--rounds", "5", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "devices.mobility" in err[0] and "static" in err[0]
    assert not (tmp_path / "t" / "gains.csv").exists()


def test_a_moving_run_with_no_aggregation_records_where_the_devices_are():
    """Before, distance_m was the mean over no records: 0 for every device."""
    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate

    sc = from_dict({"seed": 1, "run": {"time_budget_s": 30, "timing_only": True}, "channel": {"path_loss": True},
                    "devices": {"count": 10, "mobility": "random_waypoint", "speed_mps": 10},
                    "link": {"model_bits": 100_000}, "protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 2},
                    "scheduler": {"name": "uniform"}})
    res = simulate(sc, progress=False)
    assert res.summary["rounds"] == 0  # the first uploads outlast the budget at the default path loss
    distance = res.devices["distance_m"].to_numpy()
    assert (distance > 1.0).all() and (distance <= 100.0).all() and len(set(distance.round(6))) == 10
