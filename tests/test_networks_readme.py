"""figures/README_networks.md's "What is not here" says what the simulator lacks today: edges under the
event protocols and an asynchronous cloud run (it must not call them missing), and what it lists as
not modelled with interference is refused in one line."""
from __future__ import annotations

from pathlib import Path

import pytest

from test_edge_events import edges
from test_tiers import scenario
from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.run import simulate

SECTION = (Path(__file__).resolve().parents[1] / "figures" / "README_networks.md").read_text(
    encoding="utf-8").split("## What is not here", 1)[1].split("\n#", 1)[0]


def test_the_section_does_not_call_asynchronous_edges_missing():
    assert "Not modelled yet with interference" in SECTION.replace("\n", " ")
    assert "Asynchronous edges or cloud" not in SECTION and "TDMA only" not in SECTION


@pytest.mark.parametrize("cloud", ["sync", "async"])
def test_fedbuff_edges_run_under_either_cloud(cloud):
    res = simulate(from_dict(edges("fedbuff", cloud=cloud, rounds=2)), None, progress=False)
    assert res.summary["status"] == "complete" and res.summary["tiers"]["cloud_aggregations"] == 2


@pytest.mark.parametrize("access", ["tdma_slotted", "dedicated"])
def test_what_the_section_lists_is_refused_under_interference(access):
    assert {"tdma_slotted": "slotted TDMA", "dedicated": "dedicated sub-bands"}[access] in SECTION.replace("\n", " ")
    data = scenario(cells=7)
    data["network"]["reuse"] = 3  # cells on one sub-band: interference
    data["link"]["access"] = access
    with pytest.raises(ConfigError, match="interfere"):
        from_dict(data)
