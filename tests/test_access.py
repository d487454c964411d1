"""The access scheme as a part (link.access): slotted TDMA against hand computations, its event uplink
against its closed form, the records of a slotted run, and an access scheme from the user's folder."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wirelessfl.access import ACCESS, AirComp, FDMA, OFDMA, SlottedTDMA, TDMA, Link
from wirelessfl.cli import main
from wirelessfl.config import ConfigError, LinkConfig, from_dict
from wirelessfl.experiments.run import simulate

SLOTS = {"access": "tdma_slotted", "slot_s": 0.01, "slots_per_frame": 4, "guard_s": 0.005}


def slotted(**options) -> SlottedTDMA:
    o = {"slot_s": 0.01, "slots_per_frame": 4, "guard_s": 0.005, **options}
    return SlottedTDMA(Link(LinkConfig(bandwidth_hz=1e6)), o["slot_s"], o["slots_per_frame"], o["guard_s"])


def test_slot_boundaries_by_hand():
    s = slotted()  # a frame: 5 ms of guard, then 4 slots of 10 ms (45 ms)
    assert [s.slot_start(j) for j in range(6)] == pytest.approx([0.005, 0.015, 0.025, 0.035, 0.050, 0.060])
    assert [s.next_slot(t) for t in (0.0, 0.005, 0.0051, 0.035, 0.036, 0.045, 0.0499)] == [0, 0, 1, 3, 4, 4, 4]
    assert s.slot_end(2, 3) == pytest.approx(0.06)  # slots 2, 3 and 4 (across the next frame's guard)


def test_slotted_round_by_hand():
    s = slotted()
    # A is ready at 0 and needs 3 slots, B at 12 ms and needs 2: A holds slots 0-2 (5 to 35 ms), B
    # slots 3 and 4, the second after the next frame's guard (35 to 45, 50 to 60 ms)
    got = s.schedule(np.array([0.0, 0.012]), np.array([0.03, 0.02]))
    np.testing.assert_allclose(got.tx_start, [0.005, 0.035])
    assert got.end_s == pytest.approx(0.06) and got.arrived.all() and got.order.tolist() == [0, 1]
    # a deadline at 55 ms: B started, holds the band till then, and is dropped
    cut = s.schedule(np.array([0.0, 0.012]), np.array([0.03, 0.02]), deadline_s=0.055)
    assert cut.arrived.tolist() == [True, False] and cut.end_s == 0.055


def test_slotted_airtime_is_whole_slots_of_the_shannon_airtime():
    s = slotted()
    gain, power = np.array([1.0, 0.01]), np.array([1.0, 1.0])
    bare = TDMA(s.link).airtime_s(24000.0, gain, power)
    np.testing.assert_allclose(s.airtime_s(24000.0, gain, power), np.ceil(bare / 0.01) * 0.01)
    assert s.upload_s(24000.0, 0.01, 1.0) == pytest.approx(float(np.ceil(bare[1] / 0.01) * 0.01))


def scenario(protocol: dict, link: dict, rounds=15, **run):
    return from_dict({"seed": 2, "run": {"rounds": rounds, "timing_only": True, **run},
                      "devices": {"count": 12, "compute": "shifted_exponential", "delay_mean_s": 0.3},
                      "channel": {"profile": "linear"}, "link": {"model_bits": 30000, "bandwidth_hz": 1e6, **link},
                      "protocol": protocol, "scheduler": {"name": "uniform", "m": 5}})


def test_slotted_event_uplink_gives_the_closed_form_s_records(tmp_path):
    """semi_sync waiting for every upload equals sync: here it checks SlottedUplink against the
    closed-form SlottedTDMA.schedule, round for round."""
    simulate(scenario({"name": "sync"}, SLOTS), tmp_path / "sync", progress=False)
    simulate(scenario({"name": "semi_sync"}, SLOTS), tmp_path / "semi", progress=False)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "sync" / name).read_text() == (tmp_path / "semi" / name).read_text(), name


def test_slotted_uploads_start_on_slot_boundaries_and_never_overlap(tmp_path):
    res = simulate(scenario({"name": "fedbuff", "concurrency": 5, "buffer": 2}, SLOTS, rounds=40), tmp_path / "fb",
                   progress=False)
    up = res.updates.dropna(subset=["tx_start_s"]).sort_values("tx_start_s")
    frame = 0.005 + 4 * 0.01
    within = (up.tx_start_s % frame - 0.005) / 0.01
    np.testing.assert_allclose(within, np.round(within), atol=1e-6)  # 12 digits in updates.csv
    assert ((np.round(within) >= 0) & (np.round(within) < 4)).all()
    assert (up.tx_start_s.to_numpy()[1:] >= up.tx_end_s.to_numpy()[:-1] - 1e-9).all()
    # each upload holds whole slots: its span is its slots plus the guards it crosses
    slots = np.round(up.airtime_s / 0.01)
    assert np.allclose(up.airtime_s, slots * 0.01) and (up.tx_end_s - up.tx_start_s >= up.airtime_s - 1e-9).all()


def test_an_access_scheme_from_the_user_s_folder(tmp_path):
    (tmp_path / "halfband.py").write_text(textwrap.dedent("""
        import dataclasses

        from wirelessfl.access import TDMA, Link


        class HalfBand(TDMA):
            '''TDMA on half the configured bandwidth.'''

            @classmethod
            def from_scenario(cls, scenario, options):
                cfg = dataclasses.replace(scenario.link, bandwidth_hz=scenario.link.bandwidth_hz / 2)
                return cls(Link(cfg))
        """))
    body = textwrap.dedent("""
        seed = 1
        [run]
        rounds = 6
        timing_only = true
        [devices]
        count = 8
        [link]
        access = "{access}"
        model_bits = 100000
        bandwidth_hz = 1e6
        [scheduler]
        name = "uniform"
        m = 3
        """)
    for access in ("tdma", "halfband:HalfBand"):
        (tmp_path / f"{access.split(':')[0]}.toml").write_text(body.format(access=access))
        name = access.split(":")[0]
        assert main(["run", str(tmp_path / f"{name}.toml"), "--out", str(tmp_path / "out" / name),
                     "--no-progress"]) == 0
    full, half = (pd.read_csv(tmp_path / "out" / name / name / "updates.csv") for name in ("tdma", "halfband"))
    np.testing.assert_allclose(half.airtime_s, 2 * full.airtime_s, rtol=1e-9)  # same draws, half the rate


def test_access_names_and_options_are_checked():
    assert {"tdma", "tdma_slotted", "fdma"} <= set(ACCESS.names())
    with pytest.raises(ConfigError, match="link.access = 'cdma'"):
        from_dict({"run": {"rounds": 1}, "link": {"access": "cdma"}})
    with pytest.raises(ConfigError, match="link.slot_s"):
        from_dict({"run": {"rounds": 1}, "link": {"access": "tdma_slotted", "slot_s": 0}})
    with pytest.raises(ConfigError, match="link.slot_s"):
        from_dict({"run": {"rounds": 1}, "link": {"access": "tdma", "slot_s": 0.01}})  # not a tdma option


# --- packets, errors and retransmissions (link.packet_bits, link.errors, link.max_attempts) ---------


def packet_scenario(protocol: dict, link: dict, rounds: int, m=5):
    """Every gain at the 1e-3 floor and uniform power: one SNR for every transmission."""
    return from_dict({"seed": 4, "run": {"rounds": rounds, "timing_only": True},
                      "devices": {"count": 40, "compute": "shifted_exponential", "delay_mean_s": 0.2},
                      "channel": {"sigma": 1e-6, "gain_floor": 1e-3},
                      "link": {"model_bits": 20000, "bandwidth_hz": 1e6, **link},
                      "protocol": protocol, "scheduler": {"name": "uniform", "m": m}})


PROTOCOLS = [{"name": "sync"}, {"name": "fedbuff", "concurrency": 6, "buffer": 3}]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_retransmissions_are_geometric_with_mean_one_over_one_minus_per(tmp_path, protocol):
    res = simulate(packet_scenario(protocol, {"errors": "waterfall", "waterfall_m": 0.005, "max_attempts": 100},
                                   rounds=400 if protocol["name"] == "sync" else 700), tmp_path / "r", progress=False)
    up = res.updates[res.updates.attempts > 0]
    snr = float(up.gain.iloc[0] * up.power.iloc[0] / 1.0)
    assert np.allclose(up.gain * up.power, snr)  # one SNR: every transmission fails with the same PER
    per = 1 - np.exp(-0.005 / snr)
    assert 0.2 < per < 0.6
    attempts = up.attempts.to_numpy()
    assert len(attempts) > 1500
    assert attempts.mean() == pytest.approx(1 / (1 - per), rel=0.05)
    for k in range(1, 5):  # P(k transmissions) = PER^(k-1) (1 - PER)
        assert np.mean(attempts == k) == pytest.approx(per ** (k - 1) * (1 - per), abs=0.03)
    # each transmission takes bits / capacity: the time on the air is attempts x that
    capacity = 1e6 * np.log2(1 + snr)
    done = up[up.outcome == "applied"]
    np.testing.assert_allclose(done.airtime_s, done.attempts * 20000 / capacity, rtol=1e-9)
    assert set(up.outcome) <= {"applied", "in_flight"}


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_uploads_that_exhaust_their_attempts_are_lost_and_never_aggregated(tmp_path, protocol):
    res = simulate(packet_scenario(protocol, {"errors": "waterfall", "waterfall_m": 0.01, "max_attempts": 2,
                                              "packet_bits": 10000}, rounds=150), tmp_path / "r", progress=False)
    up = res.updates
    lost, applied = up[up.outcome == "lost"], up[up.outcome == "applied"]
    assert len(lost) > 20 and len(applied) > 20
    assert lost.version_applied.isna().all() and lost.tx_end_s.isna().all()
    assert (lost.attempts >= 2).all() and (lost.attempts <= 4).all()  # two packets, two tries each
    np.testing.assert_allclose(lost.lost_s, lost.tx_start_s + lost.airtime_s, rtol=1e-9)  # gave up then
    per_version = applied.groupby("version_applied").size()
    rounds = res.rounds.set_index("round")
    assert (rounds.loc[per_version.index, "num_updates"] == per_version).all()  # only the applied count
    if protocol["name"] == "fedbuff":
        assert (per_version == 3).all()
    else:
        assert not rounds.dropped.eq("").all()  # sync rounds list the lost devices as dropped


def test_a_fixed_rate_above_the_capacity_is_an_outage_below_it_a_clean_send(tmp_path):
    lossy = simulate(packet_scenario({"name": "sync"}, {"rate_bps": 1e6, "errors": "outage", "max_attempts": 3},
                                     rounds=5), tmp_path / "a", progress=False)
    assert (lossy.updates.outcome == "lost").all() and (lossy.updates.attempts == 3).all()
    assert lossy.summary["updates_applied"] == 0  # the capacity at SNR 0.008 is about 12 kbit/s
    clean = simulate(packet_scenario({"name": "sync"}, {"rate_bps": 1e3, "errors": "outage"}, rounds=5),
                     tmp_path / "b", progress=False)
    assert (clean.updates.outcome == "applied").all()
    np.testing.assert_allclose(clean.updates.airtime_s, 20000 / 1e3)  # bits at the fixed rate


SOLO = {"dedicated": {"access": "dedicated", "subbands": 4},
        "tdma_slotted": {"access": "tdma_slotted", "slot_s": 0.004, "slots_per_frame": 5, "guard_s": 0.001}}


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
@pytest.mark.parametrize("access", sorted(SOLO))
def test_packets_on_a_sub_band_of_its_own_and_in_slots_are_retried_geometrically(tmp_path, protocol, access):
    """Packets where an upload has a channel of its own besides tdma: on a dedicated sub-band of B / 4
    (noise N0 / 4: SNR 4 g P / N0, rate (B / 4) log2(1 + SNR)), and in whole slots under slotted TDMA.
    The attempts are geometric with mean 1 / (1 - PER) at the channel's SNR, and each takes its
    bits at that rate (in whole slots)."""
    share = 4 if access == "dedicated" else 1
    m = 0.005 * share  # the same PER as tdma's test at the sub-band's SNR
    res = simulate(packet_scenario(protocol, {"errors": "waterfall", "waterfall_m": m, "max_attempts": 100,
                                              **SOLO[access]}, rounds=300 if protocol["name"] == "sync" else 500),
                   tmp_path / "r", progress=False)
    up = res.updates[res.updates.attempts > 0]
    snr = float(up.gain.iloc[0] * up.power.iloc[0]) * share
    per = 1 - np.exp(-m / snr)
    assert 0.2 < per < 0.8 and len(up) > 1000
    assert up.attempts.mean() == pytest.approx(1 / (1 - per), rel=0.06)
    one = 20000 / (1e6 / share * np.log2(1 + snr))  # one transmission's seconds
    if access == "tdma_slotted":
        one = np.ceil(one / 0.004) * 0.004  # in whole slots
    done = up[up.outcome == "applied"]
    np.testing.assert_allclose(done.airtime_s, done.attempts * one, rtol=1e-9)
    if access == "tdma_slotted":  # every upload starts on a slot boundary and they never overlap
        within = (done.tx_start_s % 0.021 - 0.001) / 0.004
        np.testing.assert_allclose(within, np.round(within), atol=1e-6)
        order = done.sort_values("tx_start_s")
        assert (order.tx_start_s.to_numpy()[1:] >= order.tx_end_s.to_numpy()[:-1] - 1e-9).all()


@pytest.mark.parametrize("access", sorted(SOLO))
def test_packets_in_slots_and_on_sub_bands_semi_sync_equals_sync(tmp_path, access):
    """The event uplinks' packets against the closed form: semi_sync waiting for every upload gives
    sync's records. At a fixed rate below every capacity nothing fails and nothing is drawn, so the
    two engines must place the same packets at the same times: 20,000 bits in packets of 8,000,
    8,000 and 4,000, each in whole slots under slotted TDMA."""
    link = {"rate_bps": 5000.0, "errors": "outage", "packet_bits": 8000, **SOLO[access]}
    simulate(packet_scenario({"name": "sync"}, link, rounds=20), tmp_path / "sync", progress=False)
    simulate(packet_scenario({"name": "semi_sync"}, link, rounds=20), tmp_path / "semi", progress=False)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):  # to rounding: the event clock adds packet by packet
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "sync" / name), pd.read_csv(tmp_path / "semi" / name),
                                      check_exact=False, rtol=1e-12)
    up = pd.read_csv(tmp_path / "sync" / "updates.csv")
    assert (up.attempts == 3).all() and (up.outcome == "applied").all()
    held = [8000 / 5000, 8000 / 5000, 4000 / 5000]
    if access == "tdma_slotted":
        held = [math.ceil(h / 0.004 - 1e-9) * 0.004 for h in held]
    np.testing.assert_allclose(up.airtime_s, sum(held), rtol=1e-9)


@pytest.mark.parametrize("protocol, share, m", [({"name": "sync"}, 5, 0.025),
                                                ({"name": "fedbuff", "concurrency": 1, "buffer": 1}, 1, 0.02)],
                         ids=["sync", "fedbuff"])
def test_packets_on_a_shared_band_are_retried_at_the_share_s_snr(tmp_path, protocol, share, m):
    """FDMA: a round's 5 devices share the band (B / 5 each, SNR 5 g P / N0) under sync; alone on it
    under fedbuff with one device in flight. The attempts are geometric with mean 1 / (1 - PER) at that
    SNR, and each takes its packet's bits at the share's capacity."""
    res = simulate(packet_scenario(protocol, {"access": "fdma", "errors": "waterfall", "waterfall_m": m,
                                              "max_attempts": 100}, rounds=400 if share > 1 else 1500),
                   tmp_path / "r", progress=False)
    up = res.updates[res.updates.attempts > 0]
    if share > 1:  # the rounds whose draws gave 5 distinct devices (uniform draws with replacement)
        up = up[up.groupby("version_started").device.transform("size") == share]
    snr = float(up.gain.iloc[0] * up.power.iloc[0]) * share
    per = 1 - np.exp(-m / snr)
    assert 0.2 < per < 0.8 and len(up) > 1000
    assert up.attempts.mean() == pytest.approx(1 / (1 - per), rel=0.06)
    done = up[up.outcome == "applied"]
    capacity = 1e6 / share * np.log2(1 + snr)
    np.testing.assert_allclose(done.airtime_s, done.attempts * 20000 / capacity, rtol=1e-9)


def test_a_fixed_rate_on_a_shared_band_fails_when_the_share_is_too_narrow(tmp_path):
    """FDMA at a fixed 4 Mbit/s: a transmission gets through when its share, (B / k) log2(1 + g P k / N0)
    with k devices on the air, carries the rate. At these SNRs a device alone does, two sharing the
    band do not: the outcome follows the share, and each transmission takes bits / rate."""
    link = {"access": "fdma", "rate_bps": 4e6, "errors": "outage", "max_attempts": 2, "noise_power": 1e-3}
    for m in (1, 2):
        up = simulate(packet_scenario({"name": "sync"}, link, rounds=5, m=m), tmp_path / f"m{m}",
                      progress=False).updates
        k = up.groupby("version_started").device.transform("size")
        share = 1e6 / k * np.log2(1 + up.gain * up.power * k / 1e-3)
        expect = np.where(share >= 4e6, "applied", "lost")
        assert (up.outcome == expect).all() and (up.attempts == np.where(share >= 4e6, 1, 2)).all()
        assert (expect == "applied").all() if m == 1 else (expect == "lost").all()
        np.testing.assert_allclose(up.airtime_s, up.attempts * 20000 / 4e6)


def test_packets_refused_where_they_are_not_modelled():
    with pytest.raises(ConfigError, match="link.rate_bps"):
        from_dict({"run": {"rounds": 1}, "link": {"errors": "outage"}})
    with pytest.raises(ConfigError, match="link.errors: .*link.access = 'aircomp'"):  # one analog sum
        from_dict({"run": {"rounds": 1}, "link": {"access": "aircomp", "errors": "waterfall"}})


# --- OFDMA (link.access = "ofdma") ------------------------------------------------------------------


def ofdma(blocks=4, allocation="equal", selective=True, seed=0) -> OFDMA:
    return OFDMA(Link(LinkConfig(bandwidth_hz=1e6, noise_power=2.0)), blocks, allocation, selective,
                 np.random.default_rng(seed))


def test_ofdma_equal_allocation_on_flat_blocks_is_fdma():
    rng = np.random.default_rng(1)
    gain, power = rng.exponential(1.0, 6), rng.uniform(0.5, 3.0, 6)
    fdma = FDMA(Link(LinkConfig(bandwidth_hz=1e6, noise_power=2.0)))
    for blocks in (1, 4, 25):  # fewer, as many and more blocks than devices
        flat = ofdma(blocks, selective=False)
        np.testing.assert_allclose(flat.rates_bps(gain, power), fdma.rates_bps(gain, power), rtol=1e-12)
        np.testing.assert_allclose(flat.airtime_s(5e4, gain, power), fdma.airtime_s(5e4, gain, power), rtol=1e-12)


def test_ofdma_equal_allocation_rate_by_hand():
    """Each of k devices holds 1/k of every block and spreads P over R/k blocks' worth of band:
    block b gives it (B / R) (1 / k) log2(1 + g e_b P k / N0)."""
    s = ofdma(blocks=3)
    gain, power = np.array([0.5, 2.0]), np.array([1.0, 4.0])
    e = np.array([[0.2, 1.0, 3.0], [1.5, 0.1, 0.7]])
    want = [sum(1e6 / 3 / 2 * math.log2(1 + gain[i] * e[i, b] * power[i] * 2 / 2.0) for b in range(3)) for i in range(2)]
    np.testing.assert_allclose(s.rates_bps(gain, power, e), want, rtol=1e-12)


def test_ofdma_greedy_allocation_by_hand():
    """Device 1 is weaker on average, so it takes its best block first (block 2); device 0 then takes
    block 0, and the blocks left go to whoever is stronger on them (1: device 0; 3: device 1)."""
    s = ofdma(blocks=4, allocation="greedy")
    gain, power = np.array([1.0, 1.0]), np.array([1.0, 1.0])
    e = np.array([[4.0, 2.0, 3.0, 0.1],
                  [0.1, 0.2, 2.5, 0.3]])
    a = s.shares(e * 4 / 2.0)
    assert a.tolist() == [[1, 1, 0, 0], [0, 0, 1, 1]]
    # each device's power over its two blocks: SNR = g e P R / (2 N0)
    want = [1e6 / 4 * (math.log2(1 + 4.0 * 4 / 4) + math.log2(1 + 2.0 * 4 / 4)),
            1e6 / 4 * (math.log2(1 + 2.5 * 4 / 4) + math.log2(1 + 0.3 * 4 / 4))]
    np.testing.assert_allclose(s.rates_bps(gain, power, e), want, rtol=1e-12)


def test_ofdma_greedy_gives_every_device_a_block_and_every_block_one_device():
    s = ofdma(blocks=10, allocation="greedy")
    rng = np.random.default_rng(3)
    for k in (1, 3, 10):
        a = s.shares(rng.exponential(1.0, (k, 10)) * rng.exponential(1.0, (k, 1)))
        assert set(np.unique(a)) <= {0.0, 1.0}
        assert (a.sum(axis=0) == 1).all() and (a.sum(axis=1) >= 1).all()
    with pytest.raises(ConfigError, match="link.resource_blocks = 10"):
        s.shares(np.ones((11, 10)))


def test_ofdma_block_fading_is_unit_mean_exponential_and_independent():
    e = ofdma(blocks=8).block_fading(50000)
    assert e.shape == (50000, 8)
    assert e.mean() == pytest.approx(1.0, abs=0.01) and e.var() == pytest.approx(1.0, abs=0.03)
    assert abs(np.corrcoef(e[:, 0], e[:, 1])[0, 1]) < 0.02


def ofdma_scenario(protocol: dict, link: dict, rounds=30, **run):
    return scenario(protocol, {"access": "ofdma", "resource_blocks": 8, **link}, rounds=rounds, **run)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_ofdma_equal_on_flat_blocks_gives_fdma_s_records(tmp_path, protocol):
    flat = simulate(ofdma_scenario(protocol, {"frequency_selective": False}), tmp_path / "o", progress=False)
    fdma = simulate(scenario(protocol, {"access": "fdma"}, rounds=30), tmp_path / "f", progress=False)
    for a, b in ((flat.updates, fdma.updates), (flat.rounds, fdma.rounds)):
        assert a.shape == b.shape
        for col in a.columns:
            if a[col].dtype.kind == "f":
                np.testing.assert_allclose(a[col], b[col], rtol=1e-9, err_msg=col)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_ofdma_greedy_beats_equal_on_selective_blocks(tmp_path, protocol):
    """With the same block factors, the greedy rule's channel-aware blocks give shorter uploads on
    average than equal time shares (rates are not comparable upload by upload: an equal share
    averages every block, greedy picks a few)."""
    equal = simulate(ofdma_scenario(protocol, {}, rounds=60), tmp_path / "e", progress=False)
    greedy = simulate(ofdma_scenario(protocol, {"allocation": "greedy"}, rounds=60), tmp_path / "g", progress=False)
    applied = greedy.updates[greedy.updates.outcome == "applied"]
    assert len(applied) > 100 and np.isfinite(applied.airtime_s).all()
    assert applied.airtime_s.mean() < 0.95 * equal.updates.airtime_s.mean()


def test_ofdma_options_are_checked():
    with pytest.raises(ConfigError, match="link.allocation = 'best'.*equal.*greedy"):
        from_dict({"run": {"rounds": 1}, "link": {"access": "ofdma", "allocation": "best"}})
    with pytest.raises(ConfigError, match="link.resource_blocks"):
        from_dict({"run": {"rounds": 1}, "link": {"access": "ofdma", "resource_blocks": 0}})
    with pytest.raises(ConfigError, match="channel.coherence_s: .*here 'ofdma'"):  # fading within an upload
        from_dict({"run": {"rounds": 1}, "channel": {"coherence_s": 0.01}, "link": {"access": "ofdma"}})


def test_ofdma_sync_run_resumed_gives_the_uninterrupted_records(tmp_path, interrupted_and_resumed):
    """The block factors' stream is part of the checkpoint: a resumed sync run draws what the
    uninterrupted one drew."""
    sc = ofdma_scenario({"name": "sync"}, {"allocation": "greedy"}, checkpoint_every=2)
    full, resumed = interrupted_and_resumed(sc, after=9)
    assert resumed.summary["status"] == "complete"
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name


# --- over-the-air aggregation (link.access = "aircomp") ---------------------------------------------


def test_aircomp_schedule_by_hand():
    s = AirComp(Link(LinkConfig(bandwidth_hz=1e6)))
    ready, air = np.array([0.1, 0.5, 0.3, 0.2]), np.array([0.05, 0.05, 0.0, 0.05])  # device 2 is silent
    got = s.schedule(ready, air)
    assert got.arrived.tolist() == [True, True, False, True] and got.order.tolist() == [0, 3, 1]
    np.testing.assert_allclose(got.tx_start, [0.5, 0.5, np.nan, 0.5])  # together, when the last is ready
    assert got.end_s == pytest.approx(0.55)
    # a deadline at 0.4: devices 0 and 3 can finish by then (ready by 0.35), device 1 cannot
    cut = s.schedule(ready, air, deadline_s=0.4)
    assert cut.arrived.tolist() == [True, False, False, True]
    np.testing.assert_allclose(cut.tx_start, [0.2, np.nan, np.nan, 0.2])
    assert cut.end_s == 0.4  # the server waited for device 1 till the deadline
    nobody = s.schedule(ready, np.zeros(4))
    assert not nobody.arrived.any() and nobody.end_s == 0.5  # the round still waits for the computations


def aircomp_scenario(link: dict, rounds=40, m=8, run=None, **more):
    return from_dict({"seed": 5, "run": {"rounds": rounds, "timing_only": True, **(run or {})},
                      "devices": {"count": 20, "compute": "shifted_exponential", "delay_mean_s": 0.3},
                      "channel": {"profile": "linear"},
                      "link": {"model_bits": 320000, "bandwidth_hz": 1e6, "p_max": 50.0, "access": "aircomp", **link},
                      "scheduler": {"name": "uniform", "m": m}, **more})


def test_aircomp_inverts_the_channel_truncates_and_sends_once_for_all(tmp_path):
    res = simulate(aircomp_scenario({"truncation_gain": 0.5}), tmp_path / "a", progress=False)
    up = res.updates
    silent, sent = up[up.outcome == "silent"], up[up.outcome == "applied"]
    assert len(silent) > 10 and len(sent) > 100 and len(silent) + len(sent) == len(up)
    assert (silent.gain < 0.5).all() and (sent.gain >= 0.5).all()
    assert (silent.energy_j == 0).all() and (silent.power == 0).all() and silent.tx_start_s.isna().all()
    rho0 = 50.0 * 0.5
    np.testing.assert_allclose(sent.power, rho0 / sent.gain, rtol=1e-9)  # all arrive at power rho0
    assert (sent.power <= 50.0 * (1 + 1e-9)).all()
    np.testing.assert_allclose(sent.airtime_s, 320000 / 32 / 1e6, rtol=1e-9)  # one parameter per symbol
    np.testing.assert_allclose(sent.energy_j, sent.power * sent.airtime_s, rtol=1e-9)
    for _, rnd in sent.groupby("version_applied"):  # one joint transmission, when the last sender is ready
        assert rnd.tx_start_s.nunique() == 1
        assert rnd.tx_start_s.iloc[0] == pytest.approx(rnd.compute_end_s.max(), abs=1e-9)


def test_aircomp_upload_time_does_not_grow_with_the_devices_tdma_s_does(tmp_path):
    def upload_phase(access, m):
        link = {"access": access, **({"truncation_gain": 1e-3} if access == "aircomp" else {})}
        res = simulate(aircomp_scenario(link, rounds=30, m=m),
                       tmp_path / f"{access}{m}", progress=False)
        up = res.updates[res.updates.outcome == "applied"]
        per_round = up.groupby("version_applied")
        return float((per_round.tx_end_s.max() - per_round.compute_end_s.max()).clip(lower=0).mean())

    assert upload_phase("aircomp", 16) == pytest.approx(upload_phase("aircomp", 2), rel=1e-9)
    assert upload_phase("tdma", 16) > 2 * upload_phase("tdma", 2)


def test_aircomp_refusals():
    with pytest.raises(ConfigError, match="link.access = 'aircomp'"):
        from_dict({"run": {"rounds": 1}, "link": {"access": "aircomp", "errors": "waterfall"}})
    with pytest.raises(ConfigError, match="link.truncation_gain"):
        from_dict({"run": {"rounds": 1}, "link": {"access": "aircomp", "truncation_gain": 0}})


def joint_transmissions(updates: pd.DataFrame) -> pd.DataFrame:
    """One row per joint transmission of the applied and silent updates: its start, end, senders,
    and the last moment one of them became ready."""
    sent = updates[updates.outcome == "applied"]
    return sent.groupby("tx_start_s").agg(end=("tx_end_s", "max"), senders=("device", "size"),
                                           last_ready=("compute_end_s", "max")).reset_index()


@pytest.mark.parametrize("protocol, group", [({"name": "fedbuff", "concurrency": 12, "buffer": 4}, 4),
                                             ({"name": "fedasync", "concurrency": 6}, 1),
                                             ({"name": "semi_sync", "first_k": 3, "late": "drop"}, 3)])
def test_aircomp_under_the_event_protocols_sends_groups_together_one_after_another(tmp_path, protocol, group):
    res = simulate(aircomp_scenario({"truncation_gain": 0.3}, rounds=30, protocol=protocol), tmp_path / "e",
                   progress=False)
    up = res.updates
    joint = joint_transmissions(up)
    length = 320000 / 32 / 1e6
    np.testing.assert_allclose(joint.end - joint.tx_start_s, length, rtol=1e-9)  # one upload's length, whoever sends
    assert (joint.senders <= group).all() and (joint.senders == group).mean() > 0.5
    # one joint transmission at a time, each starting when its last sender is ready or the previous one ends
    assert (joint.tx_start_s.iloc[1:].to_numpy() >= joint.end.iloc[:-1].to_numpy() - 1e-12).all()
    previous_end = np.concatenate([[-np.inf], joint.end.iloc[:-1].to_numpy()])
    assert (joint.tx_start_s >= np.maximum(joint.last_ready, previous_end) - 1e-12).all()
    # ... at the moment a device (a sender, or one that stayed silent) completed the group, or the
    # previous transmission ended; never later
    moments = np.concatenate([up.compute_end_s.dropna().to_numpy(), joint.end.to_numpy()])
    assert all(np.isclose(moments, start, rtol=0, atol=1e-12).any() for start in joint.tx_start_s)
    silent = up[up.outcome == "silent"]
    assert len(silent) > 0 and (silent.gain < 0.3).all() and silent.tx_start_s.isna().all()
    assert (silent.energy_j == 0).all()
    sent = up[up.outcome == "applied"]
    np.testing.assert_allclose(sent.power, 50.0 * 0.3 / sent.gain, rtol=1e-9)  # inversion at the drawn gain


def test_aircomp_under_fedbuff_resumes_mid_flight_to_identical_records(interrupted_and_resumed):
    sc = aircomp_scenario({"truncation_gain": 0.3}, rounds=20, run={"checkpoint_every": 3},
                          protocol={"name": "fedbuff", "concurrency": 12, "buffer": 4})
    full, resumed = interrupted_and_resumed(sc, after=7)
    pd.testing.assert_frame_equal(resumed.updates, full.updates)
    pd.testing.assert_frame_equal(resumed.rounds, full.rounds)


SMALL_TRAINING = {"dataset": "fashion_mnist", "model": "logreg", "samples_per_device": 60, "eval_train_samples": 200,
                  "local_steps": 3, "batch_size": 8, "lr": 0.05}


def test_aircomp_noise_reaches_the_model_and_a_resume_draws_it_again(tmp_path, interrupted_and_resumed):
    """The same rounds (same draws, same silent devices, same powers) at a receive SNR rho0 / N0 of
    2.5e7 and of 2.5e-5: the low one's noise, 4e4 times the updates' power over K^2, wrecks the
    model; the high one's leaves it learning. The noise is keyed by the aggregation, so a resumed
    run draws it again."""
    def run(noise_power, name, **run):
        sc = aircomp_scenario({"truncation_gain": 0.5, "noise_power": noise_power}, rounds=8, learning=SMALL_TRAINING,
                              run={"timing_only": False, "eval_every_rounds": 4, **run})
        return sc if name is None else simulate(sc, tmp_path / name, progress=False)

    clean, noisy = run(1e-6, "clean"), run(1e6, "noisy")
    pd.testing.assert_frame_equal(clean.updates, noisy.updates)
    assert clean.evals.accuracy.iloc[-1] > 0.5
    assert noisy.evals.accuracy.iloc[-1] < clean.evals.accuracy.iloc[-1] - 0.2
    full, resumed = interrupted_and_resumed(run(1e2, None, checkpoint_every=2), after=5)
    assert resumed.summary["status"] == "complete"
    assert (tmp_path / "full" / "evals.csv").read_text() == (tmp_path / "cut" / "evals.csv").read_text()


# --- the schedulers price airtime as the access scheme says ---------------------------------------

def brute_force_power(g, z, p_max, V, lam, bits, band, noise):
    """argmin over a fine grid of V lam bits / (band log2(1 + g P / noise)) + z P on (0, p_max]."""
    grid = np.linspace(p_max * 1e-6, p_max, 400_001)
    cost = V * lam * bits / (band * np.log2(1 + g * grid / noise)) + z * grid
    return grid[np.argmin(cost)]


def lyapunov_round(access, m=4, n=6, seed=3):
    from wirelessfl.scheduling.base import RoundState
    from wirelessfl.scheduling.schedulers import LyapunovScheduler

    rng = np.random.default_rng(seed)
    sched = LyapunovScheduler(n, m, V=50.0, lam=20.0, p_bar=1.0, p_max=100.0)
    sched.queue = rng.uniform(0.5, 3.0, n)
    gains = rng.uniform(0.02, 2.0, n)
    state = RoundState(round=0, gains=gains, model_bits=2e5, bandwidth_hz=1e6, noise_power=1.0, access=access)
    return sched, gains, sched.queue.copy(), sched.decide(state)


@pytest.mark.parametrize("scheme", ["fdma", "ofdma", "tdma", "tdma_slotted"])
def test_lyapunov_powers_are_the_brute_force_minimisers_at_the_scheme_s_share_of_the_band(scheme):
    link = Link(LinkConfig(bandwidth_hz=1e6, noise_power=1.0))
    access = {"fdma": FDMA(link), "ofdma": OFDMA(link, 8), "tdma": TDMA(link), "tdma_slotted": slotted()}[scheme]
    m = 4
    # fdma and ofdma: m devices on B / m each, noise N0 / m; slotted: the band less the guards (40 of 45 ms)
    band, noise = {"fdma": (1e6 / m, 1.0 / m), "ofdma": (1e6 / m, 1.0 / m), "tdma": (1e6, 1.0),
                   "tdma_slotted": (1e6 * 40 / 45, 1.0)}[scheme]
    sched, gains, z, decision = lyapunov_round(access, m=m)
    for n in range(gains.size):
        p = brute_force_power(gains[n], z[n], 100.0, 50.0, 20.0, 2e5, band, noise)
        assert decision.power[n] == pytest.approx(p, rel=1e-4, abs=1e-3)
    # and the selection weights b are those of that airtime
    b = 50.0 * 20.0 * 2e5 / (band * np.log2(1 + gains * decision.power / noise)) + z * decision.power
    from wirelessfl.scheduling.selection import solve_selection
    np.testing.assert_allclose(decision.q, solve_selection(50.0 / gains.size, b, m).q, rtol=1e-9)


def test_fdma_prices_airtime_higher_than_tdma_so_the_queues_cost_less_power():
    link = Link(LinkConfig(bandwidth_hz=1e6, noise_power=1.0))
    _, _, _, on_tdma = lyapunov_round(TDMA(link))
    _, _, _, on_fdma = lyapunov_round(FDMA(link))
    # a share B / m of the band makes airtime dearer, and power buys it back: more power everywhere
    assert (on_fdma.power >= on_tdma.power).all() and (on_fdma.power > on_tdma.power).any()


def test_lyapunov_under_aircomp_charges_the_inversion_s_power_and_never_picks_a_silent_device():
    link = Link(LinkConfig(bandwidth_hz=1e6, noise_power=1.0))
    air = AirComp(link, truncation_gain=0.5, p_max=100.0)
    sched, gains, z, decision = lyapunov_round(air)
    below = gains < 0.5
    assert below.any() and (~below).any()
    np.testing.assert_allclose(decision.power[~below], 50.0 / gains[~below])  # rho0 / g, rho0 = 100 x 0.5
    assert (decision.q[below] == 0).all() and (decision.q[~below] > 0).all()
    # every sender costs the same airtime (one joint upload), so b differs only by Z P
    t = 2e5 / 32 / 1e6
    from wirelessfl.scheduling.selection import solve_selection
    b = 50.0 * 20.0 * t + z[~below] * decision.power[~below]
    np.testing.assert_allclose(decision.q[~below], solve_selection(50.0 / gains.size, b, 4).q, rtol=1e-9)
    # the queues grow by the power really sent
    np.testing.assert_allclose(sched.queue, np.maximum(z + decision.power * decision.q - 1.0, 0.0))


def test_dispatch_prices_a_share_for_every_device_in_flight():
    from wirelessfl.scheduling.base import DispatchState
    from wirelessfl.scheduling.dispatch import dispatch_costs

    link = Link(LinkConfig(bandwidth_hz=1e6, noise_power=1.0))
    n = 5
    gains = np.linspace(0.1, 1.5, n)
    busy = np.array([True, True, False, False, False])
    state = DispatchState(time_s=0.0, version=3, slots=1, busy=busy, num_busy=2, available=None,
                          last_applied=np.zeros(n, dtype=int), mean_gains=gains, model_bits=2e5, bandwidth_hz=1e6,
                          noise_power=1.0, per_aggregation=1.0, interval_s=math.nan, rng=np.random.default_rng(0),
                          access=FDMA(link))
    z = np.full(n, 2.0)
    cost, power = dispatch_costs(state, z, np.full(n, 100.0), V=50.0, lam=20.0, mu=0.0)
    k = 3  # two in flight and the one to start
    for i in range(2, n):
        p = brute_force_power(gains[i], 2.0, 100.0, 50.0, 20.0, 2e5, 1e6 / k, 1.0 / k)
        assert power[i] == pytest.approx(p, rel=1e-4, abs=1e-3)
    assert np.isinf(cost[:2]).all()


# ---------------------------------------------------------------------------------------------
# dedicated sub-bands: the fixed per-device bandwidth other simulators assume


def test_dedicated_rate_is_its_own_sub_band_s_whatever_the_others_do():
    from wirelessfl.access import Dedicated

    link = Link(LinkConfig(bandwidth_hz=1e6, noise_power=2.0))
    ded = Dedicated(link, subbands=4)
    gain, power = np.array([3.0, 0.5, 8.0]), np.array([2.0, 1.0, 4.0])
    by_hand = 1e6 / 4 * np.log2(1 + gain * power * 4 / 2.0)  # B / S Hz with noise N0 / S
    np.testing.assert_allclose(ded.rates_bps(gain, power), by_hand, rtol=1e-14)
    np.testing.assert_allclose(ded.rates_bps(gain[:1], power[:1]), by_hand[:1], rtol=1e-14)  # alone: the same
    assert ded.upload_s(1e5, 3.0, 2.0) == pytest.approx(1e5 / by_hand[0], rel=1e-14)
    price = ded.pricing(1e5, k=1)
    assert (price.bandwidth_hz, price.noise_power) == (1e6 / 4, 0.5) == (ded.pricing(1e5, k=9).bandwidth_hz, 0.5)


DEDICATED = {"seed": 3, "run": {"rounds": 12, "timing_only": True},
             "devices": {"count": 8, "compute": "shifted_exponential", "delay_mean_s": 0.5},
             "link": {"access": "dedicated", "bandwidth_hz": 1e6, "model_bits": 100000},
             "scheduler": {"name": "uniform", "m": 4}}


@pytest.mark.parametrize("protocol", ["sync", "fedbuff", "semi_sync"])
def test_dedicated_uploads_never_wait_and_last_their_own_sub_band_s_airtime(tmp_path, protocol):
    """No queue, no sharing: every upload starts when its computation ends and lasts bits / its rate
    on B / N Hz, whoever else is on the air (8 devices, up to 5 at once)."""
    data = {**DEDICATED, "protocol": {"fedbuff": {"name": "fedbuff", "concurrency": 5, "buffer": 2},
                                      "semi_sync": {"name": "semi_sync", "first_k": 2}, "sync": {"name": "sync"}}[protocol]}
    simulate(from_dict(data), tmp_path / "run", progress=False)
    up = pd.read_csv(tmp_path / "run" / "updates.csv")
    sent = up[up["tx_start_s"].notna() & up["tx_end_s"].notna()]
    assert len(sent) >= 12
    np.testing.assert_allclose(sent["tx_start_s"], sent["compute_end_s"], rtol=0, atol=1e-12)
    rate = 1e6 / 8 * np.log2(1 + sent["gain"] * sent["power"] * 8 / 1.0)
    np.testing.assert_allclose(sent["airtime_s"], 1e5 / rate, rtol=1e-9)
    np.testing.assert_allclose(sent["tx_end_s"] - sent["tx_start_s"], sent["airtime_s"], rtol=1e-9)


def test_the_gantt_draws_uploads_lost_to_errors_as_lost(tmp_path, monkeypatch):
    """gantt.png: an upload whose packets all failed is red ("upload lost or dropped"), not orange."""
    import wirelessfl.experiments.plots as plots

    res = simulate(packet_scenario(PROTOCOLS[1], {"errors": "waterfall", "waterfall_m": 0.01, "max_attempts": 2,
                                                  "packet_bits": 10000}, rounds=40), tmp_path / "r", progress=False)
    drawn = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out_dir, name: drawn.setdefault(name, fig) and Path(name))
    window = (0.0, float(res.updates.dispatch_s.max()) + 1e3)  # every upload of the run
    plots.plot_gantt({"r": res}, tmp_path, window=window)
    segments = {c.get_label(): len(c.get_segments()) for c in drawn["gantt.png"].axes[0].collections}
    up = res.updates[res.updates.tx_start_s.notna()]
    assert (up.outcome == "lost").sum() > 5
    assert segments["upload lost or dropped"] == (~up.outcome.isin(["applied", "in_flight"])).sum()
    assert segments["upload"] == up.outcome.isin(["applied", "in_flight"]).sum()
