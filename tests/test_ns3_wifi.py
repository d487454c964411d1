"""Our 802.11 DCF against ns-3.44's Wi-Fi (benchmarks/ns3_wifi.py) and ``link.access = "ns3_wifi"``,
which simulates a sync round's uploads in ns-3 (wirelessfl/access/ns3_wifi.py). Skipped where the
ns3 extra is not installed."""
import numpy as np
import pandas as pd
import pytest

from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.run import simulate

from fakes import benchmark

pytest.importorskip("ns", reason="ns3 extra not installed: pip install .[ns3]")

pytestmark = pytest.mark.ns3

# --- (a) the k-th delivery: ns-3 against our DCF ----------------------------------------------------


def test_the_kth_delivery_agrees_with_ns3_within_ten_percent():
    bench = benchmark("ns3_wifi")
    rows = bench.compare(stations=(1, 2, 5), runs=12, seeds=200, seed=1)
    assert [(r.n, r.k) for r in rows] == [(1, 1), (2, 1), (2, 2), (5, 1), (5, 2), (5, 3), (5, 4), (5, 5)]
    bad = [f"n={r.n} k={r.k}: {100 * r.diff:+.1f} %" for r in rows if not r.ok]
    assert not bad
    # one station: no contention, the same frames and interframe spaces on both sides (within 1 %)
    assert abs(rows[0].diff) < 0.01
    assert bench.markdown(rows).count("| yes |") == len(rows)


def test_one_frame_takes_difs_backoff_slots_and_the_1538_byte_data_frame():
    bench = benchmark("ns3_wifi")
    times = np.array([bench.ns3_wifi_uploads(1, bits=bench.MPDU_BITS, run=r)[0] for r in range(1, 21)])
    slots = (times - 34e-6 - 252e-6) / 9e-6  # AIFS (AIFSN 2) + backoff + DATA (+ nanoseconds of propagation)
    assert np.allclose(slots, np.round(slots), atol=1e-2) and slots.min() >= -0.01 and slots.max() <= 15.01


# --- (b) end to end ---------------------------------------------------------------------------------


def scenario(protocol: dict | None = None, access: str = "ns3_wifi", **run):
    # 802.11a at 54 Mb/s, 5 devices at 41.7 dB SNR (gain 1e4 x power 1.49 / noise 1), 10 frames an upload
    return from_dict({"seed": 3, "run": {"timing_only": True, "rounds": 3, **run},
                      "devices": {"count": 5, "compute": "constant", "compute_s": 0.0},
                      "channel": {"sigma": 1e-6, "gain_floor": 1e4},
                      "link": {"access": access, "wifi_standard": "80211a", "phy_rate_bps": 54e6,
                               "model_bits": 120000},
                      "protocol": protocol or {"name": "sync"}, "scheduler": {"name": "uniform", "m": 5}})


def test_sync_over_ns3_wifi_repeats_itself_and_every_upload_arrives():
    first, again = (simulate(scenario(), progress=False) for _ in range(2))
    pd.testing.assert_frame_equal(first.updates, again.updates)
    pd.testing.assert_frame_equal(first.rounds, again.rounds)
    up, rounds = first.updates, first.rounds
    assert len(rounds) == 3 and (up["outcome"] == "applied").all()
    assert (up["mpdus_acked"] == 10).all() and (up["mpdus_dropped"] == 0).all()
    assert (up["attempts"] >= 10).all() and up["attempts"].sum() > 10 * len(up)  # some collided
    np.testing.assert_allclose(up["airtime_s"], up["attempts"] * 248e-6)  # every transmission a full DATA frame
    # ten exchanges at least: AIFS + DATA each, SIFS + ACK between
    assert ((up["tx_end_s"] - up["tx_start_s"]) >= 10 * (34 + 248) * 1e-6 + 9 * 44e-6 - 1e-9).all()
    assert rounds["transmissions"].sum() == up["attempts"].sum()
    assert rounds["mpdus_acked"].sum() == 10 * len(up)


def test_sync_over_ns3_wifi_resumes_after_an_interruption_with_the_same_records(interrupted_and_resumed):
    full, resumed = interrupted_and_resumed(scenario(checkpoint_every=1), after=1)
    pd.testing.assert_frame_equal(full.rounds, resumed.rounds)
    pd.testing.assert_frame_equal(full.updates, resumed.updates)


# --- (c) one-line errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [{"name": "fedbuff", "concurrency": 2, "buffer": 1},
                                      {"name": "fedasync", "concurrency": 2}, {"name": "semi_sync"}])
def test_the_event_protocols_are_refused_in_one_line(protocol):
    with pytest.raises(ConfigError, match="link.access = 'ns3_wifi' with protocol.name") as err:
        scenario(protocol)
    assert "\n" not in str(err.value) and "protocol.name = 'sync'" in str(err.value)


def test_without_ns3_the_scheme_says_how_to_install_it(monkeypatch):
    import wirelessfl.access.ns3_wifi as ns3_wifi

    monkeypatch.setattr(ns3_wifi, "ns3_available", lambda: False)
    with pytest.raises(ConfigError) as err:
        scenario()
    assert str(err.value) == "link.access = 'ns3_wifi' needs ns-3: pip install 'wirelessfl[ns3]'"
