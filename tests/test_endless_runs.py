"""Runs that would never end (issue 61, item 7, and the figures and records that grew with them): each
is refused before it runs, with the estimate that says why, or stops in one line. A scenario here is
the smallest that shows it: four devices, timing only."""
from __future__ import annotations

import json

import pytest

from wirelessfl import simulate
from wirelessfl.config import ConfigError, from_dict

_SMALL = {"run": {"rounds": 3, "timing_only": True}, "devices": {"count": 4}, "link": {"model_bits": 10000}}
_FEDBUFF = {"name": "fedbuff", "concurrency": 2, "buffer": 1}
# a unicast downlink at a rate no channel carries: every transmission of the model misses
_CERTAIN_MISS = {"downlink": "unicast", "downlink_errors": "outage", "downlink_rate_bps": 1e30}


def small(**tables) -> dict:
    data = json.loads(json.dumps(_SMALL))
    for table, values in tables.items():
        data.setdefault(table, {}).update(values)
    return data


def test_the_model_s_retransmissions_are_bounded_as_an_upload_s_are():
    with pytest.raises(ConfigError) as err:
        from_dict(small(link={**_CERTAIN_MISS, "downlink_max_attempts": 10 ** 9}, protocol=_FEDBUFF))
    assert str(err.value) == ("link.downlink_max_attempts = 1,000,000,000: at most 1,000,000 transmissions of the "
                              "model to a device, as for an upload (link.max_attempts)")
    from_dict(small(link={**_CERTAIN_MISS, "downlink_max_attempts": 10 ** 6}, protocol=_FEDBUFF))  # the bound itself


def test_a_certain_miss_stops_after_as_many_transmissions_as_tasks_would_take():
    """Each of a lost task's transmissions counts toward the stall guard: 4 devices x 100 = 400 are
    allowed, so with 1,000 a task the first task that misses stops the run (before, 401 tasks of
    1,000 transmissions each: 400,000 draws)."""
    from wirelessfl.sim.events import EventStall

    data = small(link={**_CERTAIN_MISS, "downlink_max_attempts": 1000}, protocol=_FEDBUFF)
    with pytest.raises(EventStall, match=r"^link.downlink: 1,000 transmissions of tasks in a row missed the model "
                                         r"before an aggregation \(t = [0-9.e+-]+ s, 0 aggregations of run.rounds = 3\)"):
        simulate(from_dict(data), progress=False)


def test_updates_all_dropped_as_stale_stop_as_stalled(tmp_path):
    """A device that missed the model trains from its old one (downlink_miss = 'stale'); with
    max_staleness = 0 every update after the first aggregation is dropped, and no aggregation comes:
    the 401st drop in a row (4 devices x 100) stops the run."""
    from wirelessfl.sim.events import EventStall

    data = small(link={**_CERTAIN_MISS, "downlink_miss": "stale"}, protocol={**_FEDBUFF, "max_staleness": 0})
    with pytest.raises(EventStall, match=r"^protocol.max_staleness: 401 tasks in a row dropped as stale before an "
                                         r"aggregation \(t = [0-9.e+-]+ s, 1 aggregations of run.rounds = 3\)"):
        simulate(from_dict(data), tmp_path / "run", progress=False)
