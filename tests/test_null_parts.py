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
