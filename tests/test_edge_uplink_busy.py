"""summary.json's top-level uplink_utilisation with edge servers: the share of the run during which
at least one upload was on the air in any cell (the edges' rounds overlap in time, so the cells'
busy times must not be added up). Checked against a union of the uploads' intervals written here by
hand, and against each cell's own share."""
from __future__ import annotations

import math

import pytest

from test_edge_events import edges
from test_tiers import scenario
from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate


def union_by_hand(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals: merge them in order of their starts."""
    total, lo, hi = 0.0, None, None
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if hi is None or start > hi:
            total += 0.0 if hi is None else hi - lo
            lo, hi = start, end
        else:
            hi = max(hi, end)
    return total + (0.0 if hi is None else hi - lo)


@pytest.mark.parametrize("data", [scenario(rounds=3), edges("fedbuff", rounds=3)], ids=["sync_edges", "fedbuff_edges"])
def test_the_top_level_uplink_utilisation_is_the_union_of_every_cells_time_on_the_air(data):
    res = simulate(from_dict(data), None, progress=False)
    s, up = res.summary, res.updates
    end = s["sim_time_s"]
    intervals = []
    for _, row in up.iterrows():
        if math.isnan(row["tx_start_s"]):
            continue
        stop = row["tx_end_s"] if not math.isnan(row["tx_end_s"]) else row["lost_s"]
        stop = end if math.isnan(stop) else min(stop, end)
        intervals.append((row["tx_start_s"], stop))
    assert len({c for c in up["cell"]}) == 3 and len(intervals) > 10
    busy = union_by_hand(intervals)
    assert s["uplink_busy_s"] == pytest.approx(busy, rel=1e-12)
    assert s["uplink_utilisation"] == pytest.approx(busy / end, rel=1e-12)
    cells = [c["uplink_utilisation"] for c in s["cells"]]
    # at most 1, at least the busiest cell's, and less than the cells' sum where their uploads overlap
    assert max(cells) <= s["uplink_utilisation"] <= 1.0
    assert s["uplink_utilisation"] < sum(cells)
