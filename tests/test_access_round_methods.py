"""What the engines ask an access scheme about a round, as methods of the scheme (not flags the
engines read): the reports' waits before the computation, the times on the air known as an event
round begins, and a sync round's uploads in packets."""
from __future__ import annotations

import numpy as np

from wirelessfl.access import FDMA, TDMA, Link, upload_link
from wirelessfl.config import LinkConfig


def _link(**kw) -> Link:
    return Link(LinkConfig(bandwidth_hz=1e6, noise_power=1.0, **kw))


def test_reports_go_one_after_another_on_one_transmitter_and_at_once_on_a_shared_band():
    airtime = np.array([0.5, 2.0, 1.25])
    assert TDMA(_link()).report_waits(airtime).tolist() == [0.5, 2.0, 1.25]
    assert FDMA(_link()).report_waits(airtime).tolist() == [2.0]


def test_an_event_round_knows_one_transmitters_airtimes_and_leaves_a_shared_bands_to_the_band():
    gain, power = np.array([1.0, 3.0]), np.array([1.0, 1.0])
    tdma = TDMA(_link())
    # Shannon on the whole band: 1e6 bits at 1e6 log2(1 + g P / N0) bit/s
    assert np.allclose(tdma.round_airtime_s(1e6, gain, power), [1.0, 0.5])
    assert np.allclose(tdma.round_airtime_s(1e6, gain, power, lambda: np.array([0.25, 4.0])), [0.25, 4.0])
    drawn = []
    assert np.isnan(FDMA(_link()).round_airtime_s(1e6, gain, power, lambda: drawn.append(1))).all()
    assert not drawn  # nothing is drawn for a band that decides as it goes


def test_solo_packets_are_the_links_own_uploads_one_by_one():
    tdma = TDMA(_link(packet_bits=1000, errors="snr", max_attempts=3))
    gain, power = np.array([0.5, 2.0, 8.0]), np.ones(3)
    airtime, attempts, delivered, harq = tdma.send_packets(4000.0, gain, power, np.random.default_rng(7))
    rng, link = np.random.default_rng(7), upload_link(tdma)
    expected = [link.send(4000.0, g, 1.0, rng, tdma.on_air_s) for g in gain.tolist()]
    assert airtime.tolist() == [e[0] for e in expected]
    assert attempts.tolist() == [e[1] for e in expected] and delivered.tolist() == [e[2] for e in expected]
    assert harq.shape == (3, 2)
    assert (attempts >= 4).all()  # four packets each, at least one transmission apiece


def test_shared_packets_go_at_each_devices_rate_on_an_equal_share():
    fdma = FDMA(_link())  # no packet errors: one clean transmission an upload
    gain, power = np.array([1.0, 3.0]), np.ones(2)
    airtime, attempts, delivered, _ = fdma.send_packets(1e6, gain, power, np.random.default_rng(0))
    # each on half the band: 1e6 bits at 5e5 log2(1 + g P k / N0)
    assert np.allclose(airtime, 1e6 / (5e5 * np.log2(1 + gain * 2)))
    assert attempts.tolist() == [1, 1] and delivered.all()
