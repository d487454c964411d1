"""CPU frequency as a decision (docs/energy.md, "CPU frequency"): the cpu model at a chosen frequency,
the Lyapunov scheduler's per-device minimiser against brute force, its energy queue, the pipeline
using the decision's frequency, refusals, records and an exact resume."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar

from wirelessfl.capabilities import provides
from wirelessfl.config import from_dict
from wirelessfl.devices import ConstantCompute, CpuCompute, FrequencyScaled, WorkScaledCompute
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError
from wirelessfl.scheduling import ChoosesFrequency, LyapunovScheduler, UniformScheduler
from wirelessfl.scheduling.base import RoundState
from wirelessfl.scheduling.selection import solve_checked


def cpu(n=5, cycles=1e7, steps=32, kappa=1e-28, f_min=2e8, f_max=2e9, cpu_hz=1e9):
    return CpuCompute(np.full(n, cpu_hz), np.full(n, cycles), steps, kappa, f_min=f_min, f_max=f_max)


def lyapunov(model, n=5, V=100.0, lam_f=1e-4, e_bar=0.05, **kw):
    return LyapunovScheduler(n, 2, V, 100.0, 0.1, 1.0, frequency_model=model, lam_f=lam_f, e_bar=e_bar, **kw)


def state(n=5, seed=0, available=None):
    gains = np.random.default_rng(seed).exponential(1.0, n)
    return RoundState(round=0, gains=gains, model_bits=1e5, bandwidth_hz=1e6, noise_power=1e-3,
                      available=available, rng=np.random.default_rng(seed))


def test_capabilities_are_declared():
    assert provides(CpuCompute, FrequencyScaled) and not provides(ConstantCompute, FrequencyScaled)
    assert provides(LyapunovScheduler, ChoosesFrequency) and not provides(UniformScheduler, ChoosesFrequency)
    assert WorkScaledCompute(cpu(), None, 1).frequency_scaled
    assert not WorkScaledCompute(ConstantCompute(np.ones(5)), None, 1).frequency_scaled


def test_time_and_energy_at_a_given_frequency_by_hand():
    model = cpu(n=3, cycles=2e7, steps=10, kappa=1e-28)  # C = 2e8 cycles a round
    devices, f = np.array([0, 2]), np.array([5e8, 2e9])
    assert np.allclose(model.times_at(devices, f), [2e8 / 5e8, 2e8 / 2e9], rtol=1e-15)  # 0.4 s, 0.1 s
    assert np.allclose(model.energy_at(devices, f), [1e-28 * 2e8 * 25e16, 1e-28 * 2e8 * 4e18], rtol=1e-15)
    lo, hi = model.frequency_bounds()
    assert (lo == 2e8).all() and (hi == 2e9).all()
    plain = CpuCompute(np.array([1e9, 3e9]), np.full(2, 1e7), 10, 1e-28)  # no bounds: the own cpu_hz
    assert (plain.frequency_bounds()[0] == [1e9, 3e9]).all() and (plain.frequency_bounds()[1] == [1e9, 3e9]).all()
    # scaled like compute_times for an algorithm giving twice the work
    scaled = WorkScaledCompute(model, lambda d, r: np.full(len(d), 4), ref_steps=2)
    times, energy = scaled.at_frequency(devices, f)
    assert np.allclose(times, 2 * model.times_at(devices, f)) and np.allclose(energy, 2 * model.energy_at(devices, f))


def cost(f, V, lam_f, C, Y, kappa):
    return V * lam_f * C / f + Y * kappa * C * f ** 2


def test_the_minimiser_agrees_with_brute_force():
    rng = np.random.default_rng(7)
    worst_grid, worst_scipy, clipped = 0.0, 0.0, {"low": 0, "high": 0, "inside": 0, "zero": 0}
    for trial in range(300):
        n = 4
        f_min = rng.uniform(1e8, 1e9, n)
        f_max = f_min * rng.uniform(1.0, 10.0, n)
        kappa = 10 ** rng.uniform(-29, -27)
        model = CpuCompute(np.full(n, 1e9), 10 ** rng.uniform(6, 8, n), 32, kappa, f_min=f_min, f_max=f_max)
        V, lam_f = 10 ** rng.uniform(0, 3), 10 ** rng.uniform(-7, -2)
        sched = lyapunov(model, n=n, V=V, lam_f=lam_f)
        y = 10 ** rng.uniform(-3, 3, n)
        y[trial % n] = 0.0 if trial % 5 == 0 else y[trial % n]
        f = sched.frequencies(y)
        C = model.cycles
        for i in range(n):
            grid = np.linspace(f_min[i], f_max[i], 20001)
            values = cost(grid, V, lam_f, C[i], y[i], kappa)
            best = values.min()
            mine = cost(f[i], V, lam_f, C[i], y[i], kappa)
            assert f_min[i] <= f[i] <= f_max[i]
            assert mine <= best * (1 + 1e-12)  # never worse than the grid's best
            worst_grid = max(worst_grid, (best - mine) / best)
            if y[i] == 0:
                clipped["zero"] += 1
                assert f[i] == f_max[i]
                continue
            res = minimize_scalar(lambda x: cost(x, V, lam_f, C[i], y[i], kappa), bounds=(f_min[i], f_max[i]),
                                  method="bounded", options={"xatol": 1e-6 * f_min[i]})
            assert mine <= res.fun * (1 + 1e-12)
            worst_scipy = max(worst_scipy, abs(f[i] - res.x) / f[i])
            clipped["low" if f[i] == f_min[i] else "high" if f[i] == f_max[i] else "inside"] += 1
    assert worst_scipy < 1e-4
    assert all(count > 20 for count in clipped.values()), clipped  # every case met: clipped both ways, inside, Y = 0
    print(f"brute force: grid best minus ours, relative, at most {worst_grid:.2e}; |f - scipy| / f at most "
          f"{worst_scipy:.2e}; cases {clipped}")


def test_b_and_both_queues_by_hand_over_a_few_rounds():
    model = cpu(n=3)
    plain = LyapunovScheduler(3, 2, 100.0, 100.0, 0.1, 1.0)
    sched = lyapunov(model, n=3, e_bar=np.array([0.01, 0.05, 0.1]))
    C, kappa = model.cycles, model.kappa
    y = np.zeros(3)
    for r in range(4):
        st = state(3, seed=r)
        expected_f = np.where(y > 0, np.clip(np.cbrt(100.0 * 1e-4 / (2 * kappa * np.where(y > 0, y, 1))), 2e8, 2e9), 2e9)
        plain.queue = sched.queue.copy()
        power, b_power = plain.costs(st, plain.queue)
        d = sched.decide(st)
        assert np.allclose(d.frequency, expected_f, rtol=1e-12)
        assert np.allclose(d.power, power)
        b = b_power + 100.0 * 1e-4 * C / expected_f + y * kappa * C * expected_f ** 2
        # omega solves the selection problem with this b: rebuild it and compare
        res = solve_checked(100.0 / 3, b, 2, "exact")
        assert np.allclose(d.omega, res.omega, atol=1e-9)
        assert d.info["energy_queue_mean"] == pytest.approx(y.mean())  # the Y the round was decided with
        assert d.info["expected_compute_energy_j"] == pytest.approx((d.q * kappa * C * expected_f ** 2).sum())
        y = np.maximum(y + d.q * kappa * C * expected_f ** 2 - np.array([0.01, 0.05, 0.1]), 0.0)
        assert np.allclose(sched.energy_queue, y, rtol=1e-12, atol=0)
    assert (y > 0).any()  # the queues acted


def test_unavailable_devices_keep_their_energy_queue_and_state_round_trips():
    model = cpu(n=4)
    sched = lyapunov(model, n=4)
    sched.energy_queue = np.array([1.0, 2.0, 3.0, 4.0])
    sched.decide(state(4, available=np.array([True, False, True, False])))
    assert sched.energy_queue[1] == 2.0 and sched.energy_queue[3] == 4.0
    saved = sched.state_dict()
    other = lyapunov(model, n=4)
    other.load_state(saved)
    assert np.array_equal(other.energy_queue, sched.energy_queue)
    assert "energy_queue" not in LyapunovScheduler(4, 2, 100.0, 100.0, 0.1, 1.0).state_dict()  # off: as before


def scenario(**over):
    tables = {"seed": 3, "run": {"rounds": 200, "timing_only": True},
              "devices": {"count": 10, "compute": "cpu", "f_min_hz": 2e8, "f_max_hz": 2e9},
              "link": {"model_bits": 100000},
              "scheduler": {"name": "lyapunov", "m": 3, "choose_frequency": True, "lam_f": 1e-4, "e_bar_j": 0.05}}
    for key, value in over.items():
        tables[key] = {**tables.get(key, {}), **value}
    return from_dict(tables)


def test_a_sync_run_keeps_frequencies_in_bounds_and_energy_near_its_budget():
    rounds = simulate(scenario(), progress=False).rounds
    f = rounds.frequency_mean_hz.to_numpy()
    assert f[0] == 2e9  # Y = 0 at the start: f_max
    assert ((f >= 2e8) & (f <= 2e9)).all() and f[-100:].max() < 1.5e9  # the queues brought it down
    assert rounds.energy_queue_mean.iloc[-1] > 0
    per_device = rounds.compute_energy_j.to_numpy()[-100:].mean() / 10  # energy spent, per device and round
    expected = rounds.expected_compute_energy_j.to_numpy()[-100:].mean() / 10
    assert expected == pytest.approx(0.05, rel=0.05) and per_device == pytest.approx(0.05, rel=0.2)
    off = simulate(scenario(scheduler={"choose_frequency": False}), progress=False).rounds
    assert off.compute_energy_j.mean() / 10 > 1.5 * 0.05  # at cpu_hz: over the budget, which nothing enforces


def test_a_round_computes_at_the_decision_frequency():
    sc = scenario(run={"rounds": 3})
    result = simulate(sc, progress=False)
    rounds = result.rounds
    # round 0: Y = 0, every device at f_max: C / f_max and kappa C f_max^2 per selected device
    C = 1e7 * sc.learning.local_steps * sc.learning.batch_size
    k = rounds.num_selected.iloc[0]
    assert rounds.comp_s.iloc[0] == pytest.approx(C / 2e9, rel=1e-12)
    assert rounds.compute_energy_j.iloc[0] == pytest.approx(k * 1e-28 * C * 4e18, rel=1e-9)


def test_refusals_are_one_line():
    with pytest.raises(ConfigError, match=r"^scheduler.name = 'lyapunov' chooses CPU frequencies, which "
                                          r"devices.compute = 'constant' cannot run at"):
        from_dict({"run": {"rounds": 2, "timing_only": True}, "devices": {"count": 10, "compute": "constant"},
                   "scheduler": {"name": "lyapunov", "choose_frequency": True}})
    with pytest.raises(ConfigError, match=r"^devices.f_min_hz: device 0's lowest frequency"):
        scenario(devices={"f_min_hz": 3e9})



class FixedFrequency(UniformScheduler):
    """A user's scheduler: uniform selection, device n at (n + 1) x 1e8 Hz (for the tests below)."""

    @classmethod
    def chooses_frequency(cls, options) -> bool:
        return True

    def decide(self, state):
        decision = super().decide(state)
        decision.frequency = (np.arange(self.num_devices) + 1) * 1e8
        return decision


def test_a_user_scheduler_frequency_gives_each_device_its_time_and_energy_by_hand():
    sc = from_dict({"seed": 3, "run": {"rounds": 5, "timing_only": True}, "link": {"model_bits": 100000},
                    "devices": {"count": 10, "compute": "cpu", "f_min_hz": 1e8, "f_max_hz": 1e9},
                    "scheduler": {"name": "test_cpu_frequency:FixedFrequency", "m": 3}})
    rounds = simulate(sc, progress=False).rounds
    C = 1e7 * sc.learning.local_steps * sc.learning.batch_size
    for _, row in rounds.iterrows():
        selected = np.array([int(d) for d in str(row.selected).split()])
        f = (selected + 1) * 1e8
        assert row.comp_s == pytest.approx((C / f).max(), rel=1e-12)  # the slowest selected device
        assert row.compute_energy_j == pytest.approx((1e-28 * C * f ** 2).sum(), rel=1e-9)
    with pytest.raises(ConfigError, match=r"^scheduler.name = 'test_cpu_frequency:FixedFrequency' chooses CPU "
                                          r"frequencies, which devices.compute = 'constant' cannot run at"):
        simulate(from_dict({"run": {"rounds": 2, "timing_only": True}, "devices": {"count": 10},
                            "scheduler": {"name": "test_cpu_frequency:FixedFrequency", "m": 3}}), progress=False)


def test_a_run_choosing_frequencies_resumes_exactly(interrupted_and_resumed):
    sc = scenario(run={"rounds": 30, "checkpoint_every": 3})
    full, resumed = interrupted_and_resumed(sc, after=12)
    pd.testing.assert_frame_equal(full.rounds.reset_index(drop=True), resumed.rounds.reset_index(drop=True))
    assert full.rounds.energy_queue_mean.iloc[12:].gt(0).any()


def _cpu_scenario(**devices):
    return from_dict({"run": {"rounds": 2, "timing_only": True}, "scheduler": {"name": "uniform", "m": 2},
                      "learning": {"local_steps": 2, "batch_size": 5},
                      "devices": {"count": 3, "compute": "cpu", **devices}})


def test_per_device_kappa_and_bounds_from_lists_and_from_a_file(tmp_path):
    from wirelessfl.devices import COMPUTE

    lists = _cpu_scenario(kappa_per_device=[1e-28, 2e-28, 0.0], f_min_hz_per_device=[1e8, 2e8, 3e8],
                          f_max_hz_per_device=[1e9, 2e9, 3e9], cycles_per_sample=1e6)
    (tmp_path / "cpus.csv").write_text("# one row per device\ncpu_hz,kappa,f_max_hz\n1e9,1e-28,1e9\n"
                                       "2e9,2e-28,2e9\n5e8,0,3e9\n")
    filed = _cpu_scenario(profile_file=str(tmp_path / "cpus.csv"), cycles_per_sample=1e6)
    for sc, hz in ((lists, [1e9, 1e9, 1e9]), (filed, [1e9, 2e9, 5e8])):
        model = COMPUTE.load("cpu").from_scenario(sc, sc.options("compute"))
        everyone = np.arange(3)
        cycles = 1e6 * 2 * 5  # c x local steps x batch
        np.testing.assert_allclose(model.compute_times(everyone), cycles / np.array(hz))
        np.testing.assert_allclose(model.energy_j(everyone), np.array([1e-28, 2e-28, 0.0]) * np.array(hz) ** 2 * cycles)
        assert model.frequency_bounds()[1].tolist() == [1e9, 2e9, 3e9]
    assert COMPUTE.load("cpu").from_scenario(lists, lists.options("compute")).frequency_bounds()[0].tolist() == \
        [1e8, 2e8, 3e8]


@pytest.mark.parametrize("text, devices, message", [
    ("kappa\n1e-28\n1e-28\n", {}, r"has 2 rows: must have one per device \(devices.count = 3\)"),
    ("speed\n1\n1\n1\n", {}, r"columns \['speed'\]: each must be one of cpu_hz, cycles_per_sample, kappa"),
    ("cpu_hz\n1e9\n-1\n1e9\n", {}, r"column cpu_hz must hold finite numbers > 0"),
    ("kappa\n1e-28\n1e-28\n1e-28\n", {"kappa_per_device": [1e-28] * 3},
     r"^devices.kappa_per_device: also a column of devices.profile_file; keep one$"),
])
def test_a_bad_profile_file_is_refused_in_one_line(tmp_path, text, devices, message):
    (tmp_path / "p.csv").write_text(text)
    with pytest.raises(ConfigError, match=message):
        _cpu_scenario(profile_file=str(tmp_path / "p.csv"), **devices)


# --- the frequency with each dispatch (fedbuff, fedasync) ------------------------------------------


def test_the_dispatch_rule_s_energy_queue_by_hand():
    """Y_n <- max(Y_n + e_n - e_bar, 0) at every aggregation, e_n the energy kappa C f^2 of the device's
    dispatches in that slot; f from Y as in the round rule."""
    from wirelessfl.scheduling.base import DispatchState

    model = cpu(n=4)
    sched = lyapunov(model, n=4, e_bar=0.05)
    rng = np.random.default_rng(0)

    def state(version, busy=()):
        mask = np.zeros(4, dtype=bool)
        mask[list(busy)] = True
        return DispatchState(time_s=0.0, version=version, slots=1, busy=mask, num_busy=int(mask.sum()), available=None,
                             last_applied=np.zeros(4, dtype=np.int64), mean_gains=np.array([1.0, 2.0, 3.0, 4.0]),
                             model_bits=1e5, bandwidth_hz=1e6, noise_power=1.0, per_aggregation=1,
                             interval_s=1.0, rng=rng)

    first = sched.dispatch(state(0))
    assert first.frequency.tolist() == [2e9]  # Y = 0: f_max
    energy = 1e-28 * 1e7 * 32 * 4e18  # kappa C f^2 at 2 GHz
    second = sched.dispatch(state(1, busy=first.devices.tolist()))  # one aggregation later
    y = np.maximum(np.where(np.arange(4) == first.devices[0], energy, 0.0) - 0.05, 0.0)
    np.testing.assert_allclose(sched.energy_queue, y)
    f = second.frequency[0]
    expected = sched.frequencies(y)[second.devices[0]]
    assert f == expected and 2e8 <= f <= 2e9


@pytest.mark.parametrize("protocol", [{"name": "fedbuff", "concurrency": 4, "buffer": 2},
                                      {"name": "fedasync", "concurrency": 4}])
def test_each_dispatch_computes_at_its_frequency_and_the_budget_holds(tmp_path, protocol):
    data = {"seed": 1, "run": {"rounds": 400, "timing_only": True}, "link": {"model_bits": 100000},
            "devices": {"count": 10, "compute": "cpu", "cpu_hz": 1e9, "f_min_hz": 2e8, "f_max_hz": 2e9},
            "learning": {"local_steps": 10, "batch_size": 32}, "protocol": protocol,
            "scheduler": {"name": "lyapunov", "choose_frequency": True, "lam_f": 1e-4, "e_bar_j": 0.05}}
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    up = pd.read_csv(tmp_path / "run" / "updates.csv")
    cycles = 1e7 * 10 * 32
    f = cycles / (up["compute_end_s"] - up["dispatch_s"])  # each update's time at its frequency: C / f
    assert ((f > 2e8 * (1 - 1e-9)) & (f < 2e9 * (1 + 1e-9))).all() and f.nunique() > 10
    done = up["outcome"] != "in_flight"
    np.testing.assert_allclose(up.loc[done, "compute_energy_j"], 1e-28 * cycles * f[done] ** 2, rtol=1e-9)
    per_slot = up["compute_energy_j"].sum() / 10 / res.summary["rounds"]  # per device and aggregation
    assert per_slot == pytest.approx(0.05, rel=0.1)
    assert res.rounds["energy_queue_mean"].iloc[-1] > 0


def test_a_fedbuff_run_choosing_frequencies_resumes_exactly(tmp_path, interrupted_and_resumed):
    data = {"seed": 2, "run": {"rounds": 60, "timing_only": True, "checkpoint_every": 7},
            "link": {"model_bits": 100000},
            "devices": {"count": 10, "compute": "cpu", "cpu_hz": 1e9, "f_min_hz": 2e8, "f_max_hz": 2e9},
            "protocol": {"name": "fedbuff", "concurrency": 4, "buffer": 2},
            "scheduler": {"name": "lyapunov", "choose_frequency": True, "e_bar_j": 0.05}}
    full, resumed = interrupted_and_resumed(from_dict(data), after=25)
    assert resumed.summary["status"] == "complete"
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
