"""Ground stations as edge servers over satellites (hierarchy.tiers = "edge" with [orbits]): the static
association (even shares by contact time, from passes.csv), uploads only inside passes over one's own station,
cloud aggregations every cloud_every edge rounds, and one-line refusals for what is not modelled."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sgp4")

from fakes import cli  # noqa: E402
from test_orbits_engine import scenario  # noqa: E402

EDGES = "[hierarchy]\ntiers = \"edge\"\ncloud_every = 2\n[orbits]"


def edge_scenario(protocol: str, budget: float = 43200.0, orbits_extra: str = "") -> str:
    return scenario(budget=budget, protocol=protocol, orbits_extra=orbits_extra).replace("[orbits]", EDGES)


def run(tmp_path, text: str, name: str):
    (tmp_path / f"{name}.toml").write_text(text)
    done = cli("run", tmp_path / f"{name}.toml", "--no-progress", "--out", tmp_path / name)
    assert done.returncode == 0, done.stderr
    return tmp_path / name / "sat"


def contact_seconds_by_hand(passes: pd.DataFrame, stations: list[str], satellites: int) -> np.ndarray:
    seconds = np.zeros((satellites, len(stations)))
    for row in passes.itertuples():
        seconds[row.satellite, stations.index(row.station)] += row.set_s - row.rise_s
    return seconds


@pytest.fixture(scope="module")
def fedbuff_run(tmp_path_factory):
    return run(tmp_path_factory.mktemp("edges"), edge_scenario("fedbuff"), "fedbuff")


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory):
    return run(tmp_path_factory.mktemp("edges"), edge_scenario("sync"), "sync")


@pytest.mark.parametrize("which", ["fedbuff_run", "sync_run"])
def test_the_stations_share_the_satellites_evenly_each_by_its_longest_contact_with_room(request, which):
    folder = request.getfixturevalue(which)
    passes, devices = pd.read_csv(folder / "passes.csv"), pd.read_csv(folder / "devices.csv")
    seconds = contact_seconds_by_hand(passes, ["hawaii", "singapore"], 40)
    assert ((seconds > 0).all(axis=1)).any()  # some satellites see both stations: the choice is not trivial
    home = devices.sort_values("device")["cell"].to_numpy()
    counts = np.bincount(home, minlength=2)
    assert counts.tolist() == [20, 20]  # ceil(40 / 2) each
    # stable, checked pair by pair: a satellite away from a station it sees longer finds that station full
    # of satellites that see it at least as long
    for s in range(40):
        for g in range(2):
            if seconds[s, g] > seconds[s, home[s]]:
                assert counts[g] == 20 and (seconds[home == g, g] >= seconds[s, g]).all(), (s, g)
    favourite = np.argmax(seconds, axis=1)
    assert (home == favourite).sum() >= 20  # most keep their favourite; the rest were dealt by the rule
    summary = json.loads((folder / "summary.json").read_text())
    assert [c["station"] for c in summary["cells"]] == ["hawaii", "singapore"]
    assert [c["devices"] for c in summary["cells"]] == counts.tolist()


def test_even_shares_by_hand_on_a_contact_table_of_three_stations():
    from wirelessfl.orbits.association import home_stations
    from wirelessfl.orbits.passes import Pass

    # 4 satellites, 3 stations, room 2 each; contact seconds (rows: satellites):
    #   a: 10  5  0     b: 9  8  0     c: 8  1  0     d: 0  0  0 (sees none)
    # dealt longest first: (a,a)=10 -> a:0, (b,a)=9 -> b:0 (station 0 now full), (b,b)=8 skip (b placed),
    # (c,a)=8 full, (a,b)=5 skip, (c,b)=1 -> c:1, then d at its first station with room by index: 1
    table = {0: (10, 5, 0), 1: (9, 8, 0), 2: (8, 1, 0), 3: (0, 0, 0)}
    names = ["x", "y", "z"]
    passes = [Pass(names[g], s, 0.0, float(t), 30.0, 0.0) for s, row in table.items() for g, t in enumerate(row) if t]
    assert home_stations(passes, 4, names).tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("which", ["fedbuff_run", "sync_run"])
def test_uploads_go_only_inside_passes_over_the_own_station(request, which):
    folder = request.getfixturevalue(which)
    passes, updates = pd.read_csv(folder / "passes.csv"), pd.read_csv(folder / "updates.csv")
    stations = ["hawaii", "singapore"]
    sent = updates.dropna(subset=["tx_start_s"])
    assert len(sent) >= 4
    waited_past_other = 0
    for u in sent.itertuples():
        own = passes[(passes.satellite == u.device) & (passes.station == stations[u.cell])]
        end = u.tx_end_s if u.tx_end_s == u.tx_end_s else u.lost_s
        inside = ((own.rise_s - 1e-3 <= u.tx_start_s) & (end <= own.set_s + 1e-3)).any()
        assert inside, (u.device, u.tx_start_s, end)
        other = passes[(passes.satellite == u.device) & (passes.station != stations[u.cell])]
        # a pass over the other station between ready and start: it waited for its own
        waited_past_other += bool(((other.set_s > u.compute_end_s + 1.0) & (other.rise_s < u.tx_start_s - 1.0)).any())
    assert waited_past_other > 0  # the restriction mattered in this run


@pytest.mark.parametrize("which", ["fedbuff_run", "sync_run"])
def test_the_cloud_aggregates_every_cloud_every_edge_rounds(request, which):
    rounds = pd.read_csv(request.getfixturevalue(which) / "rounds.csv", keep_default_na=False)
    edge, cloud = rounds[rounds.tier == "edge"], rounds[rounds.tier == "cloud"]
    assert set(edge.edge.astype(int)) == {0, 1}
    complete = 0
    for k, c in enumerate(cloud.itertuples()):
        assert int(c.edge_round) == k
        last = [edge[(edge.edge.astype(int) == e) & (edge.edge_round == 2 * (k + 1) - 1)] for e in (0, 1)]
        if all(len(x) for x in last):  # (the run's time may end a cloud period early)
            assert c.t_end == pytest.approx(max(float(x.t_end.iloc[0]) for x in last), abs=1e-6)
            complete += 1
    assert complete >= 1


@pytest.mark.parametrize("extra, needle", [
    ("clients = \"ground\"", "hierarchy.tiers = 'edge' with orbits.clients = 'ground'"),
    ("isl = true", "orbits.isl = true: only ground stations serve as edges"),
])
def test_what_stays_unmodelled_is_refused_in_one_line(tmp_path, extra, needle):
    text = edge_scenario("fedbuff", orbits_extra=extra)
    (tmp_path / "bad.toml").write_text(text)
    done = cli("run", tmp_path / "bad.toml", "--no-progress", "--out", tmp_path / "out")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in done.stderr


def test_a_twin_station_takes_its_even_share(tmp_path):
    # a twin of the first station sees every satellite exactly as long: by contact time alone it would
    # get none (ties to the lower index); with even shares each takes 20, the ties dealt to the lower
    text = edge_scenario("fedbuff").replace('ground_stations = ["hawaii", "singapore"]', 'ground_stations = ["hawaii", '
                                            '{name = "twin", latitude_deg = 19.014, longitude_deg = -155.6633, '
                                            'altitude_m = 370.0}]')
    folder = run(tmp_path, text, "twin")
    home = pd.read_csv(folder / "devices.csv").sort_values("device")["cell"].to_numpy()
    assert np.bincount(home, minlength=2).tolist() == [20, 20]
    applied = pd.read_csv(folder / "updates.csv").query("outcome == 'applied'")
    assert set(applied["cell"]) == {0, 1}  # both edges aggregate


def test_a_station_that_none_of_its_satellites_sees_is_refused_in_one_line(tmp_path):
    from wirelessfl.network import station_cells

    # fewer satellites than stations would leave a station with none; here 2 satellites, 3 stations
    text = edge_scenario("fedbuff", budget=604800.0)  # a week: every station sees both satellites
    text = text.replace("planes = 5\nper_plane = 8", "planes = 1\nper_plane = 2\nphasing = 0")
    text = text.replace('ground_stations = ["hawaii", "singapore"]', 'ground_stations = ["hawaii", "singapore", "wallops"]')
    text = text.replace("m = 4", "m = 1").replace("concurrency = 8\nbuffer = 2", "concurrency = 1\nbuffer = 1")
    (tmp_path / "bad.toml").write_text(text)
    done = cli("run", tmp_path / "bad.toml", "--no-progress", "--out", tmp_path / "out")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    # room for one satellite a station: one of the three is given none
    assert len(lines) == 1 and re.search(r"orbits\.ground_stations\[\d\] \('(hawaii|singapore|wallops)'\) with "
                                         r"hierarchy\.tiers = 'edge': none of the satellites", lines[0]), lines
    assert station_cells.__doc__ and "Traceback" not in done.stderr


@pytest.mark.slow
def test_kill_9_and_resume_of_station_edges_gives_identical_records(tmp_path):
    from fakes import killed_and_resumed

    text = edge_scenario("fedbuff", budget=604800.0, orbits_extra='pass_end = "resume"')
    full, cut = killed_and_resumed(tmp_path, text.replace("[run]", "[run]\ncheckpoint_every = 5"), "sat")
    assert (pd.read_csv(full / "rounds.csv").tier == "cloud").sum() >= 10
    for name in ("updates.csv", "rounds.csv", "passes.csv", "devices.csv"):
        assert (full / name).read_bytes() == (cut / name).read_bytes(), name


def test_the_study_s_edges_variant_runs_with_every_station_an_edge():
    from wirelessfl import simulate
    from wirelessfl.experiments.sweep import expand
    from wirelessfl.papers import find_recipes
    from wirelessfl.papers.recipes import family

    (recipe,) = find_recipes("satellites:time_to_target")
    ((_, (base, variants)),) = recipe.families("tiny", ["run.timing_only=true"]).items()
    _, members = expand(family(base, variants), seeds=1)
    (member,) = [m for m in members if m.params["variant"] == "fedbuff_edges"]
    summary = simulate(member.scenario, progress=False).summary
    assert [c["station"] for c in summary["cells"]] == [s[0] if isinstance(s, tuple) else s
                                                         for s in member.scenario.orbits.ground_stations]
    assert len(summary["cells"]) == 3 and all(c["devices"] > 0 for c in summary["cells"])
    assert sum(c["devices"] for c in summary["cells"]) == 40
    assert summary["tiers"]["cloud_aggregations"] >= 1


def test_the_up_front_row_estimate_counts_one_edge_per_station(tmp_path):
    import tomllib

    from wirelessfl.config import from_dict
    from wirelessfl.config.limits import edge_count, tier_rows

    data = tomllib.loads(edge_scenario("fedbuff").replace("time_budget_s = 43200.0", "rounds = 5"))
    data["orbits"]["duration_s"] = 43200.0
    s = from_dict(data)
    assert edge_count(s) == 2  # two stations, network.cells = 1
    assert tier_rows(s) == 5 * (1 + 2 * 2)  # each cloud aggregation: cloud_every rows of both edges and its own


@pytest.mark.slow
def test_sync_station_edges_resume_exactly_from_a_folder_as_kill_9_leaves_it(tmp_path, monkeypatch):
    from fakes import resumed_from_checkpoints
    from wirelessfl.config import load_scenario

    # one satellite a round, a checkpoint after each: the copies cut it between edge and cloud rows
    text = edge_scenario("sync", budget=604800.0, orbits_extra='pass_end = "resume"').replace("m = 4", "m = 1")
    (tmp_path / "k.toml").write_text(text.replace("[run]", "[run]\ncheckpoint_every = 1"))
    full, copies = resumed_from_checkpoints(tmp_path, monkeypatch, load_scenario(tmp_path / "k.toml"), "sat",
                                            which=(2, 7))
    assert (pd.read_csv(full / "rounds.csv").tier == "cloud").sum() >= 5
    for cut in copies:
        for name in ("updates.csv", "rounds.csv", "passes.csv", "devices.csv"):
            assert (full / name).read_bytes() == (cut / name).read_bytes(), (cut.name, name)
