"""Uplink interference between cells on one sub-band (wirelessfl.network.interference): the SINR of a
two-cell case and a joint TDMA round by hand, the closed form and the event uplink on the same draws,
each cell's SINR loss, refusals in one line, and an exact resume; on shared bands (FDMA, OFDMA) the
rates by hand, OFDMA's per-block interference by hand, FDMA as OFDMA's flat equal case, and a joint
round against TDMA's where each cell has one device."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate
from wirelessfl.fields import ConfigError
from wirelessfl.access import FDMA, OFDMA
from wirelessfl.access.link import Link
from wirelessfl.network.interference import LossMeter, joint_shared, joint_tdma, shared_band_rates, sinr_rates

B, N0 = 1e6, 1e-3


def test_the_sinr_of_two_cells_on_one_band_by_hand():
    cells, bands = np.array([0, 1]), np.array([0, 0])
    power, gains = np.array([1.0, 2.0]), np.array([0.5, 0.25])
    cross = np.array([[0.5, 0.01], [0.02, 0.25]])  # device 0 -> sites 0, 1; device 1 -> sites 0, 1
    rates, loss = sinr_rates(cells, bands, power, gains, cross, B, N0)
    sinr0 = 1.0 * 0.5 / (N0 + 2.0 * 0.02)  # device 1 heard at site 0
    sinr1 = 2.0 * 0.25 / (N0 + 1.0 * 0.01)  # device 0 heard at site 1
    assert rates == pytest.approx([B * math.log2(1 + sinr0), B * math.log2(1 + sinr1)])
    assert loss == pytest.approx([10 * math.log10((0.5 / N0) / sinr0), 10 * math.log10((0.5 / N0) / sinr1)])
    # on different sub-bands nobody hears anybody
    rates, loss = sinr_rates(cells, np.array([0, 1]), power, gains, cross, B, N0)
    assert rates == pytest.approx([B * math.log2(1 + 0.5 / N0), B * math.log2(1 + 0.5 / N0)]) and (loss == 0).all()


def test_a_joint_round_by_hand():
    """Two cells, one device each, both ready at 0: together at their SINR rates until the faster
    is done, then the other alone at its SNR rate."""
    cells, bands = np.array([0, 1]), np.array([0, 0])
    power, gains = np.array([1.0, 1.0]), np.array([1.0, 0.1])
    cross = np.array([[1.0, 0.05], [0.05, 0.1]])
    bits = 2e6
    meter = LossMeter(2)
    s = joint_tdma(cells, bands, np.zeros(2), np.full(2, bits), power, gains, cross, B, N0, None, meter)
    r_together, loss = sinr_rates(cells, bands, power, gains, cross, B, N0)
    t1 = bits / r_together.max()
    fast, slow = int(np.argmax(r_together)), int(np.argmin(r_together))
    r_alone = B * math.log2(1 + power[slow] * gains[slow] / N0)
    t2 = t1 + (bits - r_together[slow] * t1) / r_alone
    assert s.tx_start.tolist() == [0.0, 0.0] and s.arrived.all()
    assert s.tx_end[fast] == pytest.approx(t1) and s.tx_end[slow] == pytest.approx(t2) and s.end_s == pytest.approx(t2)
    assert s.on_air_s == pytest.approx(s.tx_end - s.tx_start)
    assert meter.air_s == pytest.approx([t1 if fast == 0 else t2, t2 if fast == 0 else t1])
    assert meter.loss_db_s[fast] == pytest.approx(loss[fast] * t1)
    assert meter.loss_db_s[slow] == pytest.approx(loss[slow] * t1)  # alone after t1: no loss


def test_a_deadline_cuts_a_joint_round():
    cells, bands = np.array([0, 0, 1]), np.array([0, 0])
    # devices 0 and 2 together (SINR 1 / (N0 + 0.01)) for 1 Mbit, 0.153 s; then device 1 alone (SNR 1000)
    # would need 0.100 s more: the deadline at 0.25 s cuts it on the air
    together = B * math.log2(1 + 1 / (N0 + 0.01))
    s = joint_tdma(cells, bands, np.array([0.0, 0.0, 0.0]), np.full(3, 1e6), np.ones(3), np.ones(3),
                   np.full((3, 2), 0.01), B, N0, 0.25)
    assert s.end_s == 0.25 and s.arrived.tolist() == [True, False, True]
    assert s.tx_start[1] == pytest.approx(1e6 / together) and s.tx_end[[0, 2]] == pytest.approx([1e6 / together] * 2)
    assert s.on_air_s[1] == pytest.approx(0.25 - 1e6 / together)  # cut on the air


def scenario(protocol: str = "sync", reuse: int = 1, rounds: int = 12, **extra) -> dict:
    options = {"fedbuff": {"concurrency": 10, "buffer": 3}, "semi_sync": {}, "sync": {}}[protocol]
    data = {"seed": 2, "run": {"rounds": rounds, "timing_only": True},
            "devices": {"count": 28, "compute": "shifted_exponential", "delay_mean_s": 0.01},
            "channel": {"path_loss": True, "reference_gain_db": -30.0},
            "network": {"cells": 7, "reuse": reuse, "inter_site_m": 200.0},
            "link": {"model_bits": 1e6, "noise_power": 1e-12},
            "protocol": {"name": protocol, **options}, "scheduler": {"name": "uniform", "m": 10}}
    for key, value in extra.items():
        data.setdefault(key, {}).update(value)
    return data


def test_the_closed_form_and_the_event_uplink_agree_on_the_same_draws(tmp_path):
    """Without random cross fading the interferers' gains are their mean path gains: a sync round in
    closed form and a semi_sync round on the event uplink time the same uploads alike."""
    runs = {p: simulate(from_dict(scenario(p, network={"interference_fading": "none"})), tmp_path / p,
                        progress=False).updates for p in ("sync", "semi_sync")}
    a, b = (runs[p].sort_values(["version_started", "device"]).reset_index(drop=True) for p in runs)
    assert a["device"].tolist() == b["device"].tolist()
    for column in ("tx_start_s", "tx_end_s", "airtime_s"):
        assert a[column].to_numpy() == pytest.approx(b[column].to_numpy(), rel=1e-9, abs=1e-12), column


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_cells_on_one_band_lose_to_interference_and_a_cell_alone_does_not(tmp_path, protocol):
    res = simulate(from_dict(scenario(protocol, reuse=3)), tmp_path / "run", progress=False)
    rows = res.summary["cells"]
    alone = [r for r in rows if sum(o["band"] == r["band"] for o in rows) == 1]
    shared = [r for r in rows if r not in alone]
    assert alone and all(r["sinr_loss_db"] == 0.0 for r in alone)
    assert all(r["sinr_loss_db"] > 0 for r in shared if r["uploads"] > 0)
    # an upload alone on its band would take bits / (B log2(1 + SNR)); with interferers longer
    up = res.updates.dropna(subset=["tx_end_s"])
    b, n0 = 22e6 / 3, 1e-12 / 3  # reuse 3: a third of the band and of the noise
    alone_s = 1e6 / (b * np.log2(1 + up["gain"] * up["power"] / n0))
    assert (up["airtime_s"].to_numpy() >= alone_s.to_numpy() * (1 - 1e-9)).all()
    assert (up["airtime_s"].to_numpy() > alone_s.to_numpy() * 1.01).any()


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_a_run_with_interference_resumes_exactly(tmp_path, interrupted_and_resumed, protocol):
    data = scenario(protocol, rounds=30)
    data["run"]["checkpoint_every"] = 3
    full, resumed = interrupted_and_resumed(from_dict(data), after=11)
    assert resumed.summary["cells"] == full.summary["cells"]
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name


@pytest.mark.parametrize("extra, message", [
    ({"link": {"access": "dedicated"}}, r"^network.cells = 7 with network.reuse = 1: cells on one sub-band interfere, "
                                        r"which is modelled under link.access = 'tdma', 'fdma' and 'ofdma', not "
                                        r"'dedicated'"),
    ({"link": {"packet_bits": 100000}}, r"^network.cells = 7 with network.reuse = 1: uploads under interference"),
    ({"devices": {"availability": "battery", "compute": "cpu", "delay_mean_s": None}}, r"^network.cells = 7 with network.reuse = 1: batteries"),
    ({"network": {"interference_fading": "nakagami"}}, r"^network.interference_fading = 'nakagami'"),
])
def test_what_interference_does_not_model_yet_is_refused_in_one_line(extra, message):
    from fakes import changed

    with pytest.raises(ConfigError, match=message):
        from_dict(changed(scenario(), extra))


def band(scheme: str, **options):
    link = Link(SimpleNamespace(bandwidth_hz=B, noise_power=N0, packet_bits=None, rate_bps=None, errors="none",
                                waterfall_m=1.0, max_attempts=1))
    return FDMA(link) if scheme == "fdma" else OFDMA(link, **options)


def test_fdma_cells_on_one_band_by_hand():
    """Cell 0 shares its band among two devices, cell 1 has one: each hears the other cell's power
    spread over the band, SINR = g P k / (N0 + sum P_m g_m,c)."""
    cells, bands = np.array([0, 0, 1]), np.array([0, 0])
    power, gains = np.array([1.0, 2.0, 1.5]), np.array([0.5, 0.25, 0.4])
    cross = np.array([[0.5, 0.01], [0.25, 0.03], [0.02, 0.4]])
    rates, loss = shared_band_rates(cells, bands, [band("fdma")] * 2, np.arange(3), power, gains, cross, None)
    i0 = 1.5 * 0.02  # device 2 heard at site 0
    i1 = 1.0 * 0.01 + 2.0 * 0.03  # devices 0 and 1 heard at site 1
    assert rates == pytest.approx([B / 2 * math.log2(1 + 0.5 * 2 / (N0 + i0)),
                                   B / 2 * math.log2(1 + 0.5 * 2 / (N0 + i0)),
                                   B * math.log2(1 + 0.6 / (N0 + i1))])
    assert loss == pytest.approx([10 * math.log10(1 + i0 / N0)] * 2 + [10 * math.log10(1 + i1 / N0)])


def test_ofdma_interference_is_per_resource_block_by_hand():
    """Two blocks. Cell 1's two devices each hold one whole block (greedy), so cell 0's device, which
    holds both, hears device 2 on one block and device 3 on the other."""
    cells, bands = np.array([0, 1, 1]), np.array([0, 0])
    power, gains = np.array([1.0, 1.0, 1.0]), np.array([0.5, 0.4, 0.4])
    fading = np.array([[1.0, 2.0], [2.0, 1.0], [1.0, 3.0]])  # device 1 is best on block 0, device 2 on block 1
    cross = np.array([[0.5, 0.001], [0.02, 0.4], [0.05, 0.4]])
    scheme = band("ofdma", resource_blocks=2, allocation="greedy")
    rates, _ = shared_band_rates(cells, bands, [scheme] * 2, np.arange(3), power, gains, cross, fading)
    heard = [1.0 * 0.02, 1.0 * 0.05]  # block 0: device 1 (all its power there), block 1: device 2
    # device 0 holds both blocks: half its power on each, N0 / 2 of noise per block
    mine = sum(B / 2 * math.log2(1 + 0.5 * fading[0, b] * 0.5 / (N0 / 2 + heard[b])) for b in range(2))
    assert rates[0] == pytest.approx(mine)
    # device 1 on block 0 hears device 0's half power there
    assert rates[1] == pytest.approx(B / 2 * math.log2(1 + 0.4 * 2.0 * 1.0 / (N0 / 2 + 0.5 * 0.001)))


def test_fdma_is_ofdmas_flat_equal_case_under_interference():
    rng = np.random.default_rng(0)
    cells, bands = np.array([0, 0, 1, 2, 2, 2]), np.array([0, 0, 1])
    power, gains, cross = rng.uniform(0.5, 2, 6), rng.uniform(0.1, 1, 6), rng.uniform(0, 0.1, (6, 3))
    fdma, _ = shared_band_rates(cells, bands, [band("fdma")] * 3, np.arange(6), power, gains, cross, None)
    flat = band("ofdma", resource_blocks=5, frequency_selective=False)
    ofdma, _ = shared_band_rates(cells, bands, [flat] * 3, np.arange(6), power, gains, cross, None)
    assert ofdma == pytest.approx(fdma, rel=1e-12)


def test_a_joint_fdma_round_of_one_device_per_cell_is_tdmas():
    cells, bands = np.array([0, 1, 2]), np.array([0, 0, 0])
    power, gains = np.array([1.0, 1.0, 2.0]), np.array([1.0, 0.1, 0.3])
    cross = np.array([[1.0, 0.05, 0.01], [0.05, 0.1, 0.02], [0.03, 0.01, 0.3]])
    ready, bits = np.array([0.0, 0.5, 0.2]), np.full(3, 2e6)
    tdma = joint_tdma(cells, bands, ready, bits, power, gains, cross, B, N0, None)
    fdma = joint_shared(cells, bands, [band("fdma")] * 3, ready, bits, power, gains, cross, None, None)
    assert fdma.tx_start == pytest.approx(tdma.tx_start) and fdma.tx_end == pytest.approx(tdma.tx_end, rel=1e-12)
    assert fdma.end_s == pytest.approx(tdma.end_s) and fdma.arrived.all()


def test_a_joint_fdma_round_without_interferers_is_fdmas_closed_form():
    """On separate bands every device sends from when it is ready on B / k of its cell, k fixed for
    the round, for bits / rate."""
    cells, bands = np.array([0, 0, 1, 0]), np.array([0, 1])
    power, gains = np.array([1.0, 2.0, 1.0, 0.5]), np.array([0.5, 0.2, 0.3, 0.9])
    ready, bits = np.array([0.3, 0.0, 0.1, 0.2]), np.full(4, 1e6)
    s = joint_shared(cells, bands, [band("fdma")] * 2, ready, bits, power, gains, np.full((4, 2), 0.1), None, None)
    alone = np.empty(4)
    alone[[0, 1, 3]] = 1e6 / band("fdma").rates_bps(gains[[0, 1, 3]], power[[0, 1, 3]])
    alone[2] = 1e6 / band("fdma").rates_bps(gains[[2]], power[[2]])[0]
    assert s.tx_start.tolist() == ready.tolist() and s.tx_end == pytest.approx(ready + alone, rel=1e-12)


@pytest.mark.parametrize("protocol", ["sync", "fedbuff", "semi_sync"])
def test_fdma_and_flat_equal_ofdma_runs_with_interference_agree(protocol):
    runs = [simulate(from_dict(scenario(protocol, reuse=3, link=link)), None, progress=False).updates
            for link in ({"access": "fdma"}, {"access": "ofdma", "frequency_selective": False})]
    assert runs[0]["device"].tolist() == runs[1]["device"].tolist()
    assert runs[0]["tx_end_s"].to_numpy() == pytest.approx(runs[1]["tx_end_s"].to_numpy(), rel=1e-12, nan_ok=True)


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_shared_band_cells_lose_to_interference_and_a_cell_alone_does_not(protocol):
    res = simulate(from_dict(scenario(protocol, reuse=3, link={"access": "ofdma"})), None, progress=False)
    rows = res.summary["cells"]
    alone = [r for r in rows if sum(o["band"] == r["band"] for o in rows) == 1]
    assert alone and all(r["sinr_loss_db"] == 0.0 for r in alone)
    assert all(r["sinr_loss_db"] > 0 for r in rows if r not in alone and r["uploads"] > 0)


@pytest.mark.parametrize("access", ["fdma", "ofdma"])
def test_a_shared_band_run_with_interference_resumes_exactly(tmp_path, interrupted_and_resumed, access):
    data = scenario("fedbuff", rounds=30, link={"access": access})
    data["run"]["checkpoint_every"] = 3
    full, resumed = interrupted_and_resumed(from_dict(data), after=11)
    assert resumed.summary["cells"] == full.summary["cells"]
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name


def test_each_cells_ofdma_draws_its_own_block_factors():
    from wirelessfl.network import build_cells
    from wirelessfl.wireless import build_channel

    sc = from_dict(scenario(reuse=3, link={"access": "ofdma"}))
    cells = build_cells(sc, build_channel(sc, np.random.default_rng(0)))
    draws = [access.block_fading(4) for access in cells.accesses]
    assert all(not np.array_equal(draws[0], d) for d in draws[1:])


def block_fading_of(coherence_s: float):
    from wirelessfl.fading import BlockFading

    return BlockFading(coherence_s, 0.0, np.ones(4), np.zeros(4), B, N0)


def test_an_upload_alone_under_interference_follows_its_fading_blocks_by_hand():
    """One upload on the band (nobody to interfere): it ends when the bits sent at each block's
    capacity add up, as BlockFading.upload_s draws and counts them from the same stream."""
    from wirelessfl.network.interference import UploadBlocks

    fading = block_fading_of(0.01)
    blocks = UploadBlocks(fading, np.random.default_rng(5))
    s = joint_tdma(np.array([0]), np.array([0, 0]), np.array([0.2]), np.array([3e5]), np.ones(1), np.array([1e-3]),
                   np.zeros((1, 2)), B, N0, None, blocks=blocks, devices=np.array([2]))
    alone = fading.upload_s(3e5, 1e-3, 1.0, 2, np.random.default_rng(5))
    assert alone > 0.01  # several blocks
    assert s.tx_end[0] == pytest.approx(0.2 + alone, rel=1e-12)


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_blocks_longer_than_any_upload_change_nothing(protocol):
    """Fading within uploads whose coherence outlasts every upload: each upload keeps its first gain."""
    runs = [simulate(from_dict(scenario(protocol, reuse=3, **extra)), None, progress=False).updates
            for extra in ({}, {"channel": {"coherence_s": 1e6}})]
    for column in ("tx_start_s", "tx_end_s", "gain"):
        assert np.array_equal(runs[0][column].to_numpy(), runs[1][column].to_numpy(), equal_nan=True), column


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_fading_within_interfering_uploads_changes_their_times_and_resumes_exactly(tmp_path, interrupted_and_resumed,
                                                                                   protocol):
    data = scenario(protocol, rounds=30, channel={"coherence_s": 0.002})
    data["run"]["checkpoint_every"] = 3
    full, resumed = interrupted_and_resumed(from_dict(data), after=11)
    for name in ("rounds.csv", "updates.csv", "devices.csv"):
        assert (tmp_path / "full" / name).read_text() == (tmp_path / "cut" / name).read_text(), name
    flat = simulate(from_dict(scenario(protocol, rounds=30)), None, progress=False).updates
    assert full.updates["tx_end_s"].tolist() != flat["tx_end_s"].tolist()
    assert (full.updates["airtime_s"].dropna() > 0.002).any()  # uploads spanning several blocks
