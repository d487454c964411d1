"""Channel, device and access models beyond i.i.d. Rayleigh + TDMA: each against its closed form.

Gauss-Markov and Rician fading, path loss with shadowing, FDMA airtimes, CPU computation energy,
shifted-exponential delays, Markov availability, round deadlines, the downlink rate, checkpoints with
models that have memory, and validation of the new scenario fields.
"""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from wirelessfl.config import ConfigError, LinkConfig, from_dict
from wirelessfl.devices import ConstantCompute, CpuCompute, MarkovAvailability, ShiftedExponentialCompute
from wirelessfl.experiments.run import load_run, simulate
from wirelessfl.sim.round.parts import EvalRule, StopRule
from wirelessfl.wireless import FDMA, TDMA, GaussMarkovFading, Link, RicianFading, build_channel, cell_positions
from wirelessfl.access import Downlink
from wirelessfl import load_decisions

from fakes import FixedChannel, RecordingLearner, SelectAll, make_engine


def channel_of(n, rng, **channel):
    """The channel a scenario with these [channel] settings and n devices builds."""
    channel = {k: [list(v) for v in val] if k == "positions_m" else val for k, val in channel.items()}
    return build_channel(from_dict({"run": {"rounds": 1}, "devices": {"count": n}, "channel": channel}), rng)

# --- fading ------------------------------------------------------------------------------------


def test_gauss_markov_marginal_is_rayleigh_and_lag1_correlation_is_rho():
    sigmas, rho, rounds = np.array([0.5, 2.0]), 0.8, 40000
    ch = GaussMarkovFading(sigmas, rho, gain_floor=0.0)
    rng = np.random.default_rng(7)
    h = np.empty((rounds, 2), dtype=complex)
    g = np.empty((rounds, 2))
    for t in range(rounds):
        g[t] = ch.draw(rng)
        h[t] = ch.h
    assert np.allclose(g, np.abs(h) ** 2)
    # |h|^2 ~ Exp(mean 2 sigma^2) in every round (stationary start); samples 10 rounds apart are
    # nearly independent (correlation of |h|^2 is rho^20 = 0.01), so a KS test applies to them
    assert np.allclose(g.mean(0), 2 * sigmas ** 2, rtol=0.06)
    for n, s in enumerate(sigmas):
        assert stats.kstest(g[::10, n], stats.expon(scale=2 * s ** 2).cdf).pvalue > 1e-3
    # E[h_t conj(h_{t-1})] / E|h|^2 = rho, and the lag-2 correlation is rho^2
    for lag, want in ((1, rho), (2, rho ** 2)):
        corr = (h[lag:] * np.conj(h[:-lag])).sum(0) / (np.abs(h) ** 2).sum(0)
        assert np.allclose(corr.real, want, atol=0.02) and np.allclose(corr.imag, 0.0, atol=0.02)


def test_gauss_markov_rho_zero_is_iid_and_rho_one_is_frozen():
    rng = np.random.default_rng(0)
    frozen = GaussMarkovFading(np.ones(3), 1.0, 0.0)
    first = frozen.draw(rng)
    assert all(np.array_equal(frozen.draw(rng), first) for _ in range(5))
    iid = GaussMarkovFading(np.ones(1), 0.0, 0.0)
    g = np.array([iid.draw(rng)[0] for _ in range(20000)])
    assert abs(np.corrcoef(g[1:], g[:-1])[0, 1]) < 0.03


@pytest.mark.parametrize("k", [0.0, 3.0])
def test_rician_mean_power_k_factor_and_rice_law(k):
    sigma = 1.5
    omega = 2 * sigma ** 2
    ch = RicianFading(np.full(40000, sigma), k, gain_floor=0.0)  # many devices, one round: i.i.d.
    g = ch.draw(np.random.default_rng(3))
    assert g.mean() == pytest.approx(omega, rel=0.02)
    # Var|h|^2 / (E|h|^2)^2 = (2K+1)/(K+1)^2, decreasing in K: it pins K
    assert g.var() / g.mean() ** 2 == pytest.approx((2 * k + 1) / (k + 1) ** 2, rel=0.04)
    nu, s = np.sqrt(k / (k + 1) * omega), np.sqrt(omega / (2 * (k + 1)))
    assert stats.kstest(np.sqrt(g), stats.rice(b=nu / s, scale=s).cdf).pvalue > 1e-3


# --- path loss ---------------------------------------------------------------------------------


def test_path_loss_mean_gain_at_a_distance_matches_the_formula():
    d, d0, exponent, ref_db, shadow_db, sigma = 40.0, 2.0, 3.5, -30.0, 6.0, 0.8
    n = 20000
    positions = tuple((d * np.cos(a), d * np.sin(a)) for a in np.linspace(0, 6, n))
    cfg = dict(sigma=sigma, gain_floor=0.0, path_loss=True, positions_m=positions,
               reference_distance_m=d0, reference_gain_db=ref_db, path_loss_exponent=exponent,
               shadowing_db=shadow_db)
    lognormal_mean = np.exp(0.5 * (shadow_db * np.log(10) / 10) ** 2)
    formula = 10 ** (ref_db / 10) * (d / d0) ** -exponent * lognormal_mean * 2 * sigma ** 2
    for shadowing in ("per_device", "per_round"):
        ch = channel_of(n, np.random.default_rng(1), **cfg, shadowing=shadowing)
        rng = np.random.default_rng(2)
        g = np.concatenate([ch.draw(rng) for _ in range(10)])
        assert g.mean() == pytest.approx(formula, rel=0.05)
        assert ch.mean_gain().mean() == pytest.approx(formula, rel=0.05 if shadowing == "per_device" else 1e-12)
    # without shadowing the large-scale gain is exactly the distance law; closer than d0 counts as d0
    ch = channel_of(2, np.random.default_rng(0), gain_floor=0.0, path_loss=True, positions_m=((d, 0.0), (0.5, 0.0)),
                    reference_distance_m=d0, reference_gain_db=ref_db, path_loss_exponent=exponent)
    assert ch.path_loss.scale(None) == pytest.approx(10 ** (ref_db / 10) * np.array([(d / d0) ** -exponent, 1.0]))


def test_drawn_positions_are_uniform_in_the_disc():
    xy = cell_positions(20000, 250.0, np.random.default_rng(4))
    r = np.hypot(xy[:, 0], xy[:, 1])
    assert r.max() <= 250.0
    assert stats.kstest(r, lambda x: (np.clip(x, 0, 250) / 250) ** 2).pvalue > 1e-3  # P(d <= x) = (x/R)^2
    # the same seed places the same cell
    a = channel_of(5, np.random.default_rng(9), path_loss=True, shadowing_db=4.0)
    b = channel_of(5, np.random.default_rng(9), path_loss=True, shadowing_db=4.0)
    assert np.array_equal(a.path_loss.positions_m, b.path_loss.positions_m)
    assert np.array_equal(a.path_loss.mean_scale(), b.path_loss.mean_scale())


# --- engine helpers ----------------------------------------------------------------------------


def run_engine(gains, compute, *, access="tdma", rounds=1, downlink_s=0.0, deadline=None, power=1.0,
               learner=None):
    """B = 1 Hz, N0 = 1, 6 bits: alone on the band, gain 1 -> 6 s, 3 -> 3 s, 7 -> 2 s at P = 1."""
    n = len(gains)
    link = Link(LinkConfig(bandwidth_hz=1.0, noise_power=1.0))
    if not hasattr(compute, "compute_times"):
        compute = ConstantCompute(np.asarray(compute, dtype=float))
    records = []
    eng = make_engine(channel=FixedChannel(gains), link=link, access=(FDMA if access == "fdma" else TDMA)(link),
                 compute=compute, scheduler=SelectAll(n, power), model_bits=6.0, num_devices=n,
                 streams={k: np.random.default_rng(i) for i, k in enumerate(("channel", "selection", "compute"))},
                 downlink_s=downlink_s, learner=learner, stop=StopRule(rounds=rounds),
                 evaluate=EvalRule(every_rounds=1), on_round=records.append, round_deadline_s=deadline)
    eng.run()
    return records


# --- access ------------------------------------------------------------------------------------


def test_fdma_round_time_matches_its_closed_form_with_equal_computation():
    gains, bits, k = np.array([1.0, 3.0, 7.0]), 6.0, 3
    # each device on B/k = 1/3 Hz with noise N0/k: rate = (B/k) log2(1 + g P k / N0)
    airtime = bits / ((1.0 / k) * np.log2(1 + gains * 1.0 * k / 1.0))
    records = run_engine(gains, [2.5] * 3, access="fdma", rounds=2, downlink_s=0.5)
    for i, rec in enumerate(records):
        assert rec.airtime_s == pytest.approx(airtime)
        assert rec.t_end - rec.t_start == pytest.approx(0.5 + 2.5 + airtime.max())
        assert rec.t_start == pytest.approx(i * (3.0 + airtime.max()))
        assert rec.energy_j == pytest.approx(1.0 * airtime)  # P x airtime
    tdma = run_engine(gains, [2.5] * 3, access="tdma", downlink_s=0.5)[0]
    assert tdma.t_end == pytest.approx(0.5 + 2.5 + 6 + 3 + 2)


def test_fdma_devices_transmit_as_soon_as_they_finish_computing():
    gains = np.array([1.0, 3.0, 7.0])
    comp = np.array([10.0, 1.0, 0.0])
    airtime = 6.0 / ((1 / 3) * np.log2(1 + 3 * gains))
    rec = run_engine(gains, comp, access="fdma")[0]
    assert rec.t_end == pytest.approx((comp + airtime).max())
    assert list(rec.upload_order) == [2, 1, 0]


# --- devices -----------------------------------------------------------------------------------


def test_energy_is_transmit_power_times_airtime_plus_kappa_f2_cycles():
    f, c, samples, kappa = np.array([1e9, 2e9, 5e8]), np.array([1e4, 2e4, 3e4]), 320, 1e-28
    compute = CpuCompute(f, c, samples, kappa)
    rec = run_engine([1.0, 3.0, 7.0], compute, power=2.0)[0]
    assert compute.compute_times(np.arange(3)) == pytest.approx(c * samples / f)
    assert rec.compute_energy_j == pytest.approx(kappa * f ** 2 * c * samples)
    airtime = 6.0 / np.log2(1 + np.array([1.0, 3.0, 7.0]) * 2.0)
    assert rec.energy_j == pytest.approx(2.0 * airtime)
    # the cpu model takes samples per round = local steps x batch size from the scenario
    sc = from_dict({"run": {"rounds": 1}, "devices": {"count": 2, "compute": "cpu", "cpu_hz": 2e9,
                                                       "cycles_per_sample_per_device": [1e6, 3e6]},
                    "learning": {"local_steps": 10, "batch_size": 32}})
    model = sc.part("compute").from_scenario(sc, sc.options("compute"))
    assert model.compute_times(np.arange(2)) == pytest.approx([0.16, 0.48])


def test_run_records_energy_per_device_and_in_the_summary(tmp_path):
    s = from_dict({"seed": 1, "run": {"rounds": 40, "timing_only": True},
                   "devices": {"count": 8, "compute": "cpu", "cpu_hz_per_device": [1e9 * (i + 1) for i in range(8)],
                               "cycles_per_sample": 1e5, "kappa": 1e-27},
                   "learning": {"local_steps": 5, "batch_size": 16},
                   "link": {"model_bits": 100000, "bandwidth_hz": 1e6}, "scheduler": {"name": "uniform", "m": 3}})
    res = simulate(s, tmp_path / "run", progress=False)
    dev = pd.read_csv(tmp_path / "run" / "devices.csv")
    f = 1e9 * (np.arange(8) + 1)
    assert dev["compute_energy_j"].to_numpy() == pytest.approx(dev["selections"] * 1e-27 * f ** 2 * 1e5 * 80)
    assert dev["transmit_energy_j"].sum() == pytest.approx(res.rounds["energy_j"].sum())
    assert res.summary["total_compute_energy_j"] == pytest.approx(dev["compute_energy_j"].sum())
    assert res.summary["max_device_energy_j"] == pytest.approx(
        (dev["transmit_energy_j"] + dev["compute_energy_j"]).max())
    # round time = max over the selected of c S / f + TDMA queueing: never shorter than the slowest
    slowest = res.rounds["selected"].map(lambda ids: max(1e5 * 80 / f[int(i)] for i in ids.split()))
    assert (res.rounds["t_end"] - res.rounds["t_start"] >= slowest - 1e-12).all()


def test_shifted_exponential_delays():
    model = ShiftedExponentialCompute(0.5, 2.0)
    t = model.compute_times(np.arange(50000), np.random.default_rng(0))
    assert t.min() >= 0.5 and t.mean() == pytest.approx(2.5, rel=0.02)
    assert stats.kstest(t - 0.5, stats.expon(scale=2.0).cdf).pvalue > 1e-3


def test_availability_long_run_fraction_is_the_stationary_probability():
    a, b = 0.2, 0.05
    chain = MarkovAvailability(50, a, b)
    rng = np.random.default_rng(5)
    on = np.array([chain.step(rng) for _ in range(5000)])
    assert chain.stationary_on == pytest.approx(b / (a + b))
    assert on.mean() == pytest.approx(b / (a + b), abs=0.01)
    assert on[0].mean() == pytest.approx(0.2, abs=0.15)  # stationary start, not all on
    prev, nxt = on[:-1], on[1:]
    assert (~nxt[prev]).mean() == pytest.approx(a, abs=0.01)
    assert nxt[~prev].mean() == pytest.approx(b, abs=0.005)


@pytest.mark.parametrize("scheduler", ["uniform", "lyapunov"])
def test_unavailable_devices_are_never_selected(tmp_path, scheduler):
    s = from_dict({"seed": 2, "run": {"rounds": 150, "timing_only": True}, "channel": {"profile": "linear"},
                   "devices": {"count": 20, "p_on_to_off": 0.3, "p_off_to_on": 0.2},
                   "link": {"model_bits": 100000}, "scheduler": {"name": scheduler, "m": 5}})
    res = simulate(s, tmp_path / "run", progress=False)
    avail = load_decisions(tmp_path / "run")["available"].astype(bool)
    omega = load_decisions(tmp_path / "run")["omega"]
    assert (omega[~avail] == 0).all()
    for t, ids in enumerate(res.rounds["selected"]):
        chosen = [int(i) for i in str(ids).split()]
        assert avail[t, chosen].all()
    assert (res.rounds["num_available"] == avail.sum(1)).all()
    assert avail.mean() == pytest.approx(0.2 / 0.5, abs=0.05)
    assert pd.read_csv(tmp_path / "run" / "devices.csv")["available_rate"].mean() == pytest.approx(avail.mean())


# --- deadlines ---------------------------------------------------------------------------------


def _deadline_run(deadline, rounds=2, access="tdma"):
    learner = RecordingLearner()
    compute = CpuCompute(np.array([1.0, 1.0, 1.0]), np.array([0.0, 1.0, 10.0]), 1, 1.0)  # energy f^2 c = c
    recs = run_engine([1.0, 3.0, 7.0], compute, access=access, deadline=deadline, rounds=rounds, learner=learner)
    return recs, learner


def test_deadline_drops_late_uploads():
    recs, learner = _deadline_run(9.0)
    for i, rec in enumerate(recs):
        assert rec.t_start == pytest.approx(9.0 * i) and rec.t_end - rec.t_start == pytest.approx(9.0)
        assert list(rec.arrived) == [True, True, False]  # an upload ending exactly at the deadline arrives
        assert rec.energy_j == pytest.approx([6.0, 3.0, 0.0])
        assert rec.compute_energy_j == pytest.approx([0.0, 1.0, 9.0])  # 9 of the 10 cycles were done
    assert learner.trained == [[0, 1], [0, 1]]
    # a deadline in the middle of an upload: it is dropped, its energy is what it spent on the air,
    # and the transmitter is free for the next round (which repeats the first exactly)
    recs, learner = _deadline_run(8.0)
    for rec in recs:
        assert rec.t_end - rec.t_start == pytest.approx(8.0)
        assert list(rec.arrived) == [True, False, False] and rec.energy_j == pytest.approx([6.0, 2.0, 0.0])
        assert list(rec.upload_order) == [0, 1]
    assert learner.trained == [[0], [0]]
    # all in before the deadline: the round ends when the last upload does
    recs, _ = _deadline_run(100.0, rounds=1)
    assert recs[0].t_end == pytest.approx(12.0) and recs[0].arrived.all()


def test_deadline_with_fdma_and_in_a_run(tmp_path):
    recs, learner = _deadline_run(11.0, rounds=1, access="fdma")
    airtime = 6.0 / ((1 / 3) * np.log2(1 + 3 * np.array([1.0, 3.0, 7.0])))  # 9, 5.42, 4.04
    assert list(recs[0].arrived) == list(np.array([0.0, 1.0, 10.0]) + airtime <= 11.0)
    assert recs[0].t_end == pytest.approx(11.0)
    s = from_dict({"seed": 4, "run": {"rounds": 60, "timing_only": True, "round_deadline_s": 1.5},
                   "devices": {"count": 15, "compute": "shifted_exponential", "delay_shift_s": 0.2,
                               "delay_mean_s": 0.5}, "link": {"model_bits": 200000, "bandwidth_hz": 1e6},
                   "scheduler": {"name": "uniform", "m": 6}})
    res = simulate(s, tmp_path / "run", progress=False)
    r = res.rounds
    assert ((r["t_end"] - r["t_start"]) <= 1.5 + 1e-9).all()
    dropped = r["dropped"].fillna("").astype(str).map(lambda x: len(x.split()))
    assert (r["num_arrived"] + dropped == r["num_selected"]).all() and dropped.sum() > 0
    assert res.summary["dropped_uploads"] == dropped.sum()
    assert pd.read_csv(tmp_path / "run" / "devices.csv")["dropped"].sum() == dropped.sum()


# --- downlink ----------------------------------------------------------------------------------


def test_downlink_time_adds_bits_over_rate_to_the_fixed_part():
    assert Downlink(LinkConfig(downlink_s=0.25, downlink_rate_bps=4e6)).fixed_time_s(2e6) == pytest.approx(0.75)
    assert Downlink(LinkConfig(downlink_s=0.25)).fixed_time_s(2e6) == pytest.approx(0.25)
    s = from_dict({"run": {"rounds": 3, "timing_only": True}, "devices": {"count": 4},
                   "link": {"model_bits": 1000000, "downlink_rate_bps": 2e6}, "scheduler": {"m": 2}})
    assert simulate(s, progress=False).rounds["downlink_s"].to_numpy() == pytest.approx(np.full(3, 0.5))


# --- checkpoints -------------------------------------------------------------------------------


def test_resume_is_exact_with_gauss_markov_availability_and_random_delays(interrupted_and_resumed, tmp_path):
    s = from_dict({"seed": 5, "run": {"rounds": 20, "timing_only": True, "checkpoint_every": 5,
                                      "round_deadline_s": 3.0},
                   "channel": {"model": "gauss_markov", "rho": 0.95, "profile": "linear", "path_loss": True,
                               "shadowing_db": 4.0, "shadowing": "per_round", "cell_radius_m": 50.0},
                   "devices": {"count": 12, "compute": "shifted_exponential", "delay_mean_s": 0.8,
                               "p_on_to_off": 0.2, "p_off_to_on": 0.4},
                   "link": {"model_bits": 100000, "bandwidth_hz": 1e6, "access": "fdma"},
                   "scheduler": {"name": "lyapunov", "m": 4}})
    full, resumed = interrupted_and_resumed(s)
    pd.testing.assert_frame_equal(resumed.rounds, full.rounds)
    pd.testing.assert_frame_equal(resumed.devices, full.devices)
    again = load_run(tmp_path / "cut")
    pd.testing.assert_frame_equal(again.rounds, load_run(tmp_path / "full").rounds)
    for key in ("gains", "available", "omega"):
        assert np.array_equal(load_decisions(tmp_path / "cut")[key],
                              load_decisions(tmp_path / "full")[key])


# --- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize("section, key, value, field", [
    ("channel", "model", "nakagami", "channel.model"),
    ("channel", "rho", 1.2, "channel.rho"),  # an option of gauss_markov, not of rayleigh
    ("channel", "rician_k", -1.0, "channel.rician_k"),
    ("channel", "shadowing", "always", "channel.shadowing"),
    ("channel", "shadowing_db", -3.0, "channel.shadowing_db"),
    ("channel", "path_loss_exponent", 0.0, "channel.path_loss_exponent"),
    ("channel", "cell_radius_m", 0.0, "channel.cell_radius_m"),
    ("channel", "positions_m", [[1.0, 2.0]], "channel.positions_m"),
    ("channel", "positions_m", [[1.0, 2.0, 3.0], [0.0, 1.0]], "channel.positions_m[0]"),
    ("channel", "positions_m", [[1.0, "x"], [0.0, 1.0]], "channel.positions_m[0][1]"),
    ("devices", "compute", "gpu", "devices.compute"),
    ("devices", "cpu_hz", 0.0, "devices.cpu_hz"),
    ("devices", "cpu_hz_per_device", [1e9], "devices.cpu_hz_per_device"),
    ("devices", "cycles_per_sample_per_device", [1.0, -1.0], "devices.cycles_per_sample_per_device"),
    ("devices", "kappa", -1e-28, "devices.kappa"),
    ("devices", "delay_mean_s", 0.0, "devices.delay_mean_s"),
    ("devices", "p_on_to_off", 1.5, "devices.p_on_to_off"),
    ("devices", "p_off_to_on", 0.0, "devices.p_off_to_on"),
    ("link", "access", "cdma", "link.access"),
    ("link", "downlink_rate_bps", 0, "link.downlink_rate_bps"),
    ("run", "round_deadline_s", -1.0, "run.round_deadline_s"),
])
def test_bad_values_of_the_new_fields_name_the_field(section, key, value, field):
    data = {"run": {"rounds": 1}, "devices": {"count": 2}}
    data.setdefault(section, {})[key] = value
    with pytest.raises(ConfigError) as err:
        from_dict(data)
    assert str(err.value).startswith(field)
    part = OWNER.get(key)
    if part is not None:  # an option of another part than the default: named as such, then range-checked
        assert "not an option of" in str(err.value) and repr(part[1]) in str(err.value)
        data[section][part[0]] = part[1]
        with pytest.raises(ConfigError) as err:
            from_dict(data)
        assert str(err.value).startswith(field) and "must" in str(err.value)


OWNER = {"rho": ("model", "gauss_markov"), "rician_k": ("model", "rician"), "cpu_hz": ("compute", "cpu"),
         "cpu_hz_per_device": ("compute", "cpu"), "cycles_per_sample_per_device": ("compute", "cpu"),
         "kappa": ("compute", "cpu"), "delay_mean_s": ("compute", "shifted_exponential")}


# --- plots -------------------------------------------------------------------------------------


def test_energy_and_round_time_plots_through_the_cli(tmp_path):
    from wirelessfl.cli import main

    base = {"seed": 0, "run": {"rounds": 30, "timing_only": True},
            "channel": {"path_loss": True, "reference_gain_db": 20.0, "cell_radius_m": 30.0},
            "devices": {"count": 6, "compute": "cpu", "cpu_hz_per_device": [1e9, 2e9, 3e9, 1e9, 2e9, 3e9],
                        "cycles_per_sample": 1e4},
            "link": {"model_bits": 100000, "bandwidth_hz": 1e6}, "scheduler": {"name": "uniform", "m": 3}}
    for access in ("tdma", "fdma"):
        data = {**base, "link": {**base["link"], "access": access}}
        simulate(from_dict(data), tmp_path / "runs" / access, progress=False)
    assert main(["plot", str(tmp_path / "runs" / "tdma"), str(tmp_path / "runs" / "fdma"), "--round-times",
                 "--out", str(tmp_path / "rt.png")]) == 0
    assert (tmp_path / "rt.png").stat().st_size > 0
    assert main(["plot", str(tmp_path / "runs"), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "energy.png").stat().st_size > 0
    dev = pd.read_csv(tmp_path / "runs" / "tdma" / "devices.csv")
    assert {"distance_m", "mean_gain", "transmit_energy_j", "compute_energy_j"} <= set(dev.columns)


def test_the_no_overlap_formula_is_drawn_for_schemes_that_declare_unshared_uploads():
    """Whether plot_round_times draws the formula is the access scheme's own declaration
    (``concurrent``), not its name: TDMA and its slotted form, dedicated sub-bands; not a shared band."""
    from wirelessfl.experiments.plots import no_overlap_applies
    from wirelessfl.sim.run.result import RunResult

    def run(**summary):
        return RunResult(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), summary)

    assert [no_overlap_applies(run(access=a)) for a in ("tdma", "tdma_slotted", "dedicated")] == [True] * 3
    assert [no_overlap_applies(run(access=a)) for a in ("fdma", "ofdma", "aircomp")] == [False] * 3
    assert no_overlap_applies(run()) and not no_overlap_applies(run(access="elsewhere:Scheme"))


# --- the uplink schedule against an event simulation of the same queue -------------------------


def simpy_uplink(ready, airtime, deadline, concurrent):
    """The round's uploads as an event simulation: one SimPy process per device, a one-slot
    resource for TDMA, interrupts at the deadline. Returns (order, tx_start, arrived, end)."""
    import simpy

    env = simpy.Environment()
    band = None if concurrent else simpy.Resource(env, capacity=1)
    k = len(ready)
    order, tx_start, arrived = [], np.full(k, np.nan), np.zeros(k, dtype=bool)

    def device(i):
        try:
            yield env.timeout(ready[i])
            if band is None:
                order.append(i)
                tx_start[i] = env.now
                yield env.timeout(airtime[i])
            else:
                with band.request() as slot:
                    yield slot
                    order.append(i)
                    tx_start[i] = env.now
                    yield env.timeout(airtime[i])
            arrived[i] = True
        except simpy.Interrupt:
            pass

    def round_():
        procs = [env.process(device(i)) for i in range(k)]
        everything = env.all_of(procs)
        if deadline is None:
            yield everything
            return
        yield everything | env.timeout(deadline)
        if not everything.triggered:
            yield env.timeout(0)
            for proc in procs:
                if proc.is_alive:
                    proc.interrupt("deadline")

    env.run(until=env.process(round_()))
    return np.array(order, dtype=np.int64), tx_start, arrived, env.now


@pytest.mark.parametrize("access", [TDMA, FDMA])
def test_uplink_schedule_equals_an_event_simulation_of_the_queue(access):
    rng = np.random.default_rng(11)
    scheme = access(Link(LinkConfig()))
    for trial in range(400):
        k = int(rng.integers(0, 9))
        # coarse values make ties in readiness, and uploads that end exactly at the deadline
        ready = rng.integers(0, 6, k) * 0.5 if trial % 2 else rng.exponential(1.0, k)
        airtime = rng.integers(0, 4, k) * 0.5 if trial % 3 else rng.exponential(0.5, k)
        deadline = None if trial % 4 == 0 else float(rng.integers(1, 12)) * 0.5
        order, tx_start, arrived, end = simpy_uplink(ready, airtime, deadline, scheme.concurrent)
        got = scheme.schedule(ready, airtime, deadline)
        # an upload that would start exactly at the deadline starts (or, with no airtime, even
        # arrives) in the event simulation depending on the order of simultaneous events; the
        # schedule never starts it
        same = tx_start != deadline
        assert got.arrived[same].tolist() == arrived[same].tolist()
        assert np.array_equal(got.tx_start[same], tx_start[same], equal_nan=True)
        assert [i for i in got.order if same[i]] == [i for i in order if same[i]]
        assert (got.end_s if k else 0.0) == end


@pytest.mark.parametrize("compute", [{"compute": "constant", "compute_s": 0.3},
                                     {"compute": "shifted_exponential", "delay_mean_s": 0.4, "delay_shift_s": 0.1},
                                     {"compute": "cpu"}])
def test_one_device_s_computation_time_is_the_number_its_array_draw_gives(compute):
    """ComputeModel.compute_time (the event protocols' dispatch of one device) draws what
    compute_times draws for that device alone, from the same stream position, for every built-in."""
    from wirelessfl.devices import WorkScaledCompute

    scenario = from_dict({"seed": 3, "run": {"rounds": 1}, "devices": {"count": 7, **compute}})
    base = scenario.part("compute").from_scenario(scenario, scenario.options("compute"))
    model = WorkScaledCompute(base, None, 10)  # as the runner wraps it when no work scales
    assert not hasattr(WorkScaledCompute(base, None, 10, factor=2.0), "compute_time")  # scaled: the arrays'
    for device, key in ((0, 0), (4, 3), (6, 11)):
        a, b = np.random.default_rng(device), np.random.default_rng(device)
        one = model.compute_time(device, a, key)
        assert type(one) is float and one > 0
        assert one == model.compute_times(np.array([device]), b, round_idx=key)[0]
        assert a.random() == b.random()  # the stream moved alike
