"""The timed downlink (link.downlink = "broadcast" | "unicast", wirelessfl.access.downlink): its
times by hand from the weakest or each receiver's gain, outage and retransmissions, the waterfall's
miss rate, the records of every protocol against the gains they hold, a missed model that waits or
trains from the last one (from that older model, with its staleness), batteries paying for the
reception, refusals in one line, and an exact resume."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
import pytest

from wirelessfl.access import Downlink
from wirelessfl.config import LinkConfig, from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError

B, P, N0, BITS = 1e6, 100.0, 1.0, 1e6


def capacity(g: float) -> float:
    return B * math.log2(1 + g * P / N0)


def downlink(**link) -> Downlink:
    return Downlink(LinkConfig(bandwidth_hz=B, bs_power=P, noise_power=N0, **link))


def test_a_broadcast_goes_at_the_weakest_receivers_rate_to_all():
    d = downlink(downlink="broadcast", downlink_s=0.1).deliver(BITS, [2.0, 0.5, 1.0], np.random.default_rng(0))
    assert d.seconds == pytest.approx(np.full(3, 0.1 + BITS / capacity(0.5)))
    assert d.attempts.tolist() == [1, 1, 1] and d.received.all()


def test_unicast_sends_each_at_its_own_rate():
    d = downlink(downlink="unicast").deliver(BITS, [2.0, 0.5, 1.0], np.random.default_rng(0))
    assert d.seconds == pytest.approx([BITS / capacity(g) for g in (2.0, 0.5, 1.0)])
    assert d.received.all()


def test_an_outage_is_retried_at_the_fixed_rate_with_the_engines_gains():
    rate = capacity(1.0)  # gain 0.5 is below it, 2.0 above
    dl = downlink(downlink="broadcast", downlink_rate_bps=rate, downlink_errors="outage", downlink_max_attempts=3)
    # at the same gains the outage repeats: every transmission misses
    d = dl.deliver(BITS, [2.0, 0.5], np.random.default_rng(0))
    assert d.received.tolist() == [True, False] and d.attempts.tolist() == [1, 3]
    assert d.seconds == pytest.approx([BITS / rate, 3 * BITS / rate])
    # a fresh gain for the retransmission: the second one reaches it
    asked = []
    d = dl.deliver(BITS, [2.0, 0.5], np.random.default_rng(0), redraw=lambda i: asked.append(list(i)) or np.full(len(i), 4.0))
    assert asked == [[1]] and d.received.all() and d.attempts.tolist() == [1, 2]
    assert d.seconds == pytest.approx([BITS / rate, 2 * BITS / rate])


def test_a_broadcast_retransmission_goes_at_the_weakest_of_those_who_missed():
    dl = downlink(downlink="broadcast", downlink_errors="waterfall", waterfall_m=1.0, downlink_max_attempts=2)
    rng = np.random.default_rng(1)
    gains = np.array([0.02, 0.05, 3.0])
    first = BITS / capacity(0.02)
    d = dl.deliver(BITS, gains, rng)
    missed_first = d.attempts == 2
    if missed_first.any():
        weakest = gains[missed_first].min()
        assert d.seconds[missed_first] == pytest.approx(first + BITS / capacity(weakest))
    assert d.seconds[~missed_first] == pytest.approx(first)


def test_the_waterfall_misses_at_its_rate():
    g = 0.01  # SNR 1: miss with 1 - exp(-1)
    d = downlink(downlink="unicast", downlink_errors="waterfall").deliver(BITS, np.full(20000, g),
                                                                           np.random.default_rng(3))
    p = -math.expm1(-1.0)
    assert abs((~d.received).mean() - p) < 4 * math.sqrt(p * (1 - p) / 20000)


def test_fixed_is_the_fixed_time_for_all_and_never_misses():
    d = downlink(downlink_s=0.25, downlink_rate_bps=4e6).deliver(2e6, [0.001, 5.0], np.random.default_rng(0))
    assert d.seconds == pytest.approx([0.75, 0.75]) and d.received.all()


def scenario(protocol: str, rounds: int = 12, timing: bool = True, **link) -> dict:
    options = {"fedbuff": {"concurrency": 6, "buffer": 2}, "fedasync": {"concurrency": 6},
               "semi_sync": {}, "sync": {}}[protocol]
    return {"seed": 3, "run": {"rounds": rounds, "timing_only": timing},
            "devices": {"count": 12, "compute": "constant"},
            "link": {"model_bits": 1e6, "bandwidth_hz": B, "bs_power": P, "downlink": "broadcast",
                     "downlink_s": 0.01, **link},
            "protocol": {"name": protocol, **options}, "scheduler": {"name": "uniform", "m": 4}}


@pytest.mark.parametrize("protocol", ["sync", "semi_sync"])
def test_a_rounds_broadcast_takes_its_weakest_devices_time_and_they_compute_after_it(tmp_path, protocol):
    """Every round's devices (their gains in updates.csv are the round's) get the model after
    downlink_s + bits / B log2(1 + g_min P / N0), and compute from then on."""
    res = simulate(from_dict(scenario(protocol)), tmp_path / "run", progress=False)
    up = res.updates
    for _, rows in up.groupby("dispatch_s"):
        expected = 0.01 + BITS / capacity(rows["gain"].min())
        assert rows["downlink_s"].to_numpy() == pytest.approx(np.full(len(rows), expected), rel=1e-9)
    applied = up[up["outcome"] == "applied"]
    assert (applied["compute_end_s"] >= applied["dispatch_s"] + applied["downlink_s"] - 1e-12).all()
    rounds = res.rounds
    assert (rounds["downlink_s"] > 0.01).all()


def test_unicast_devices_start_each_when_their_own_model_arrived(tmp_path):
    res = simulate(from_dict(scenario("sync", downlink="unicast")), tmp_path / "run", progress=False)
    up = res.updates
    assert up["downlink_s"].to_numpy() == pytest.approx(0.01 + BITS / np.array([capacity(g) for g in up["gain"]]))
    comp = (up["compute_end_s"] - up["dispatch_s"] - up["downlink_s"]).to_numpy()
    assert comp == pytest.approx(np.full(len(up), comp[0]), abs=1e-9)  # constant computation after each one's own


MISSING = {"downlink_rate_bps": 4e6, "downlink_errors": "outage"}  # fails below g = 0.15: about one in seven


@pytest.mark.parametrize("protocol", ["sync", "semi_sync", "fedbuff", "fedasync"])
def test_a_device_that_missed_the_model_waits_and_sends_nothing(tmp_path, protocol):
    res = simulate(from_dict(scenario(protocol, rounds=30, **MISSING)), tmp_path / "run", progress=False)
    up = res.updates
    missed = up[up["received"] == 0]
    assert len(missed) > 0 and (missed["outcome"] == "downlink").all()
    assert missed["tx_start_s"].isna().all() and (missed["energy_j"] == 0).all()
    assert (missed["compute_energy_j"] == 0).all()
    assert missed["lost_s"].to_numpy() == pytest.approx((missed["dispatch_s"] + missed["downlink_s"]).to_numpy())
    assert res.summary["outcomes"]["downlink"] == len(missed)
    assert (up.loc[up["received"] == 1, "outcome"] != "downlink").all()


@pytest.mark.parametrize("protocol", ["semi_sync", "fedbuff"])
def test_a_stale_start_counts_the_versions_since_the_last_model_it_received(tmp_path, protocol):
    """downlink_miss = 'stale': a device that missed the model started from the version it last
    received (0 if none), read back from its own earlier rows."""
    res = simulate(from_dict(scenario(protocol, rounds=40, downlink_miss="stale", **MISSING)), tmp_path / "run",
                   progress=False)
    up = res.updates.sort_values("update")
    assert (up["outcome"] != "downlink").all()
    last: dict[int, int] = {}
    versions = up["version_started"].to_numpy()
    stale = 0
    for row in up.itertuples():
        if row.received:
            last[row.device] = row.version_started
        else:
            assert row.version_started == last.get(row.device, 0)
            stale += 1
    assert stale > 0 and versions.max() > 0


def test_a_stale_device_trains_from_the_older_model(tmp_path, monkeypatch):
    """The learner is asked for the stale devices' updates with the model of the version they
    started from (the server's params at that version), and the current model for the rest."""
    from wirelessfl.learning.learner import FederatedLearner

    models, asked = [], []  # every model the server has had; each call's start and current model
    real_local, real_apply = FederatedLearner.local_updates, FederatedLearner.apply_updates

    def local(self, devices, key, start=None):
        if not models:
            models.append(self.params)  # the initial model
        asked.append((start, self.params))
        return real_local(self, devices, key, start)

    def apply(self, *args, **kwargs):
        out = real_apply(self, *args, **kwargs)
        models.append(self.params)
        return out

    monkeypatch.setattr(FederatedLearner, "local_updates", local)
    monkeypatch.setattr(FederatedLearner, "apply_updates", apply)
    data = scenario("fedbuff", rounds=40, timing=False, downlink_miss="stale", **MISSING)
    data["learning"] = {"model": "logreg", "local_steps": 1, "batch_size": 8, "eval_train_samples": 100}
    data["run"].update(eval_every_rounds=1000, eval_at_start=False)  # the models, not their accuracy
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    up = res.updates
    stale = up[(up["received"] == 0) & (up["version_started"] > 0)]
    assert len(stale) > 0
    import torch

    olds = [(start, current) for start, current in asked if start is not None]
    assert len(olds) > 0
    for start, current in olds:  # an older model of the server's, not the current one
        assert any(torch.equal(start, m) for m in models) and not torch.equal(start, current)


def test_batteries_pay_for_each_devices_own_reception(tmp_path):
    from test_battery import battery_scenario

    data = battery_scenario("fedbuff")
    data["link"].update(downlink="unicast", bs_power=P, bandwidth_hz=B)
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    up = pd.read_csv(tmp_path / "run" / "updates.csv")
    stopped = up["lost_s"].fillna(np.inf) - up["dispatch_s"]
    rx = 0.5 * np.minimum(up["downlink_s"], stopped)
    spent = (up["energy_j"] + up["compute_energy_j"] + rx).groupby(up["device"]).sum().reindex(range(16),
                                                                                                 fill_value=0.0)
    dev = res.devices
    np.testing.assert_allclose(dev["battery_j"], 2.0 + dev["harvested_j"] - spent, atol=1e-9)
    assert up["downlink_s"].nunique() > 1  # each its own time


def test_a_run_whose_models_never_arrive_stops_in_one_line(monkeypatch):
    """No channel carries 1 Tbit/s: every dispatch misses its model, no aggregation can come, and
    the run says so instead of running forever."""
    from wirelessfl.config import limits
    from wirelessfl.sim.events.engine import EventStall

    monkeypatch.setattr(limits, "MAX_LOSSES_IN_A_ROW", 5)
    data = scenario("fedbuff", rounds=30, downlink_rate_bps=1e12, downlink_errors="outage")
    with pytest.raises(EventStall, match=r"^link.downlink: 61 tasks in a row missed the model before an aggregation "
                                         r"\(t = [0-9.e-]+ s, 0 aggregations of run.rounds = 30\): no device's channel"):
        simulate(from_dict(data), progress=False)


@pytest.mark.parametrize("link, message", [
    ({"downlink": "fixed", "downlink_errors": "waterfall"}, r"^link.downlink_errors = 'waterfall': needs link.downlink"),
    ({"downlink": "fixed", "downlink_miss": "stale"}, r"^link.downlink_miss = 'stale': needs link.downlink"),
    ({"downlink_errors": "outage"}, r"^link.downlink_errors = 'outage': needs link.downlink_rate_bps"),
    ({"downlink": "multicast"}, r"^link.downlink = 'multicast'"),
    ({"downlink_miss": "stale", "downlink_errors": "waterfall"}, r"^link.downlink_miss = 'stale': protocol.name = 'sync'"),
])
def test_bad_downlink_options_are_refused_in_one_line(link, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(scenario("sync", **link))


def test_the_cli_refuses_a_downlink_option_with_exit_code_2(tmp_path, capsys):
    from wirelessfl.cli import main

    (tmp_path / "d.toml").write_text('[link]\ndownlink = "broadcast"\ndownlink_max_attempts = 0\n')
    assert main(["run", str(tmp_path / "d.toml"), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert "link.downlink_max_attempts" in capsys.readouterr().err


@pytest.mark.parametrize("protocol, miss", [("sync", "wait"), ("fedbuff", "stale"), ("semi_sync", "wait")])
def test_a_run_with_downlink_errors_resumes_exactly(tmp_path, interrupted_and_resumed, protocol, miss):
    data = scenario(protocol, rounds=40, downlink_miss=miss, downlink_max_attempts=2,
                    **{**MISSING, "downlink_errors": "waterfall", "downlink_rate_bps": None})
    data["link"] = {k: v for k, v in data["link"].items() if v is not None}
    data["link"]["bs_power"] = 3.0  # weak enough that the waterfall misses
    data["run"]["checkpoint_every"] = 3
    full, resumed = interrupted_and_resumed(from_dict(data), after=14)
    assert resumed.summary["status"] == "complete"
    assert (full.updates["received"] == 0).any()
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name


@pytest.mark.slow
def test_kill_9_and_resume_of_a_stale_start_training_run_gives_identical_records(tmp_path):
    """FedBuff training with a failing broadcast and stale starts (the older models are in the
    checkpoint), killed with SIGKILL after a checkpoint: the resumed records are the whole run's."""
    from fakes import killed_and_resumed

    full, cut = killed_and_resumed(tmp_path, textwrap.dedent("""
        name = "kill"
        seed = 5
        [run]
        rounds = 30
        checkpoint_every = 5
        eval_every_rounds = 10
        [learning]
        local_steps = 1
        batch_size = 16
        samples_per_device = 100
        eval_train_samples = 500
        [devices]
        count = 20
        [link]
        downlink = "broadcast"
        downlink_rate_bps = 4e8
        downlink_errors = "outage"
        downlink_miss = "stale"
        [protocol]
        name = "fedbuff"
        concurrency = 8
        buffer = 2
        [scheduler]
        name = "uniform"
        """), "kill")
    up = pd.read_csv(full / "updates.csv")
    assert ((up["received"] == 0) & (up["staleness"] > 0)).any()
    for name in ("rounds.csv", "updates.csv", "devices.csv", "evals.csv"):
        assert (full / name).read_text() == (cut / name).read_text(), name


def test_the_gantt_chart_draws_each_model_s_way_down_and_the_ones_missed(tmp_path, monkeypatch):
    from wirelessfl.experiments import plots

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, out, name: figures.append(fig))
    res = simulate(from_dict(scenario("fedbuff", rounds=30, **MISSING)), tmp_path / "run", progress=False)
    plots.plot_gantt({"lossy": res}, tmp_path, window=(0.0, 1e9))
    bars = {c.get_label(): c for c in figures[0].axes[0].collections}
    assert {"downlink", "model missed", "computation", "upload"} <= bars.keys()
    up = res.updates
    missed = up[up["outcome"] == "downlink"]
    spans = np.array([seg[:, 0] for seg in bars["model missed"].get_segments()])  # (start x, end x) per bar
    assert sorted(map(tuple, spans.round(9))) == sorted(zip(missed["dispatch_s"].round(9),
                                                            (missed["dispatch_s"] + missed["downlink_s"]).round(9)))
