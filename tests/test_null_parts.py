"""Optional parts that are absent are null objects the engines ask as they ask the real ones, not
None they must test for: what each answers, and that the runner hands them over."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from wirelessfl.network import NO_BACKHAUL, Backhaul


def test_no_backhaul_takes_no_time_and_adds_nothing_to_a_rounds_end():
    assert not NO_BACKHAUL.timed and Backhaul(1e6, 0.5).timed
    assert NO_BACKHAUL.transfer_s(8e6) == 0.0
    ends = np.array([3.0, 4.5])
    assert NO_BACKHAUL.forward_end_s(None, np.array([0, 1]), np.array([True, True]), ends, 1e6) == -math.inf
    # a timed one: the later site's forwarding, 2 updates of 1e6 bits at 1e6 bit/s plus 0.5 s latency
    assert Backhaul(1e6, 0.5).forward_end_s(None, np.array([0, 1]), np.array([True, True]), ends, 1e6) == 4.5 + 2.5


def test_a_hierarchy_without_backhaul_times_gets_the_null_one():
    assert Backhaul.of(SimpleNamespace(backhaul_rate_bps=None, backhaul_latency_s=0.0)) is NO_BACKHAUL
    assert Backhaul.of(SimpleNamespace(backhaul_rate_bps=None, backhaul_latency_s=0.1)) == Backhaul(None, 0.1)


def test_an_untimed_downlink_delivers_every_model_after_its_fixed_time():
    from wirelessfl.access.downlink import UNTIMED_DOWNLINK, UntimedDownlink

    assert not UNTIMED_DOWNLINK.timed
    d = UntimedDownlink(0.25).deliver(1e6, np.array([0.1, 5.0, 2.0]), np.random.default_rng(0))
    assert d.seconds.tolist() == [0.25] * 3 and d.attempts.tolist() == [1] * 3 and d.received.all()


def test_parts_never_hold_none_for_the_downlink_or_the_backhaul():
    from tests.fakes import ClientRoundsOnly, FixedChannel, SelectAll
    from wirelessfl.access import TDMA, Link
    from wirelessfl.access.downlink import UNTIMED_DOWNLINK
    from wirelessfl.config import LinkConfig
    from wirelessfl.devices import ConstantCompute
    from wirelessfl.sim.round.parts import Parts

    common = dict(channel=FixedChannel(np.ones(2)), compute=ConstantCompute(np.ones(2)), scheduler=SelectAll(2),
                  algorithm=ClientRoundsOnly(), access=TDMA(Link(LinkConfig())), num_devices=2, upload_bits=1.0)
    for parts in (Parts(**common), Parts(**common, downlink=None, backhaul=None)):  # None: the old spelling
        assert parts.downlink is UNTIMED_DOWNLINK and parts.backhaul is NO_BACKHAUL


def test_no_battery_cuts_no_task_and_empties_nobody():
    from wirelessfl.battery import NO_BATTERY

    comp, comp_j, air, power = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([0.5, 0.25]), np.ones(2)
    out = NO_BATTERY.closed_round(np.array([0, 1]), 0.1, comp, comp_j, air, power)
    assert out[0] is comp and out[1] is comp_j and out[2] is air and out[3] is None
    assert not NO_BATTERY.present and not NO_BATTERY.exhausted and NO_BATTERY.rx_power_w == 0.0
