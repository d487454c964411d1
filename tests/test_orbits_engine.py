"""Federated learning over satellites in the engine: the [orbits] table, uploads only inside passes at the
link budget's rate, pass_end lose/resume, ISL relaying, the records, and an exact resume mid-pass."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sgp4")

from fakes import cli, killed_and_resumed  # noqa: E402
from wirelessfl.orbits import LinkBudget, stations, walker  # noqa: E402
from wirelessfl.orbits.contacts import ContactPlan  # noqa: E402

BASE = """
name = "sat"
seed = 0
[run]
time_budget_s = {budget}
timing_only = true
{run_extra}
[scheduler]
name = "uniform"
m = 4
[protocol]
name = "{protocol}"
{protocol_extra}
[link]
model_bits = {bits}
[learning]
dataset = "synthetic"
model = "logreg"
[orbits]
planes = 5
per_plane = 8
bandwidth_hz = 2e3
ground_stations = ["hawaii", "singapore"]
{orbits_extra}
"""
FEDBUFF = "[protocol.options]\nconcurrency = 8\nbuffer = 2"


def scenario(budget=86400.0, protocol="fedbuff", bits=2_000_000, run_extra="", orbits_extra=""):
    return BASE.format(budget=budget, protocol=protocol, protocol_extra=FEDBUFF if protocol == "fedbuff" else "",
                       bits=bits, run_extra=run_extra, orbits_extra=orbits_extra)


def run(tmp_path, text, name="t"):
    (tmp_path / f"{name}.toml").write_text(text)
    done = cli("run", tmp_path / f"{name}.toml", "--no-progress", "--out", tmp_path / name)
    assert done.returncode == 0, done.stderr
    return tmp_path / name / "sat"


@pytest.mark.parametrize("extra, needle", [
    ("altitude_km = 120.0", "orbits.altitude_km = 120"),
    ("altitude_km = 40000.0", "orbits.altitude_km = 40000"),
    ("satellites = 40\nplanes = 3", "orbits.planes = 3: must divide orbits.satellites = 40"),
    ("ground_stations = [\"svalbard\"]", "svalbard"),
    ("pass_end = \"keep\"", "orbits.pass_end"),
    ("duration_s = 3600.0", "orbits.duration_s = 3600: shorter than run.time_budget_s"),
])
def test_bad_orbits_are_one_line_and_exit_2(tmp_path, extra, needle):
    text = scenario(budget=3600.0) if "svalbard" in extra else scenario()
    # a key given twice in one TOML table is a parse error: replace the base's own
    for key in ("planes", "per_plane", "ground_stations"):
        if extra.startswith(key) or f"\n{key}" in extra:
            text = "\n".join(line for line in text.splitlines() if not line.startswith(f"{key} ="))
    if extra.startswith("satellites"):
        text = "\n".join(line for line in text.splitlines() if not line.startswith("per_plane"))
    text = text.replace("[orbits]", "[orbits]\n" + extra)
    (tmp_path / "bad.toml").write_text(text)
    done = cli("run", tmp_path / "bad.toml", "--no-progress", "--out", tmp_path / "out")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in done.stderr


def test_a_malformed_tle_names_its_line(tmp_path):
    good = "1 90001U 24001A   24153.00000000  .00000000  00000-0  00000-0 0  9990\n"
    (tmp_path / "bad.tle").write_text("SAT\n" + good[:30] + "X" + good[31:] + "2 90001  53.0000   0.0000 0001000"
                                      "   0.0000   0.0000 15.05000000    01\n")
    text = scenario(protocol="sync").replace("planes = 5\nper_plane = 8", f"tle_file = \"{tmp_path / 'bad.tle'}\"")
    text = text.replace("[run]", "[devices]\ncount = 1\n[run]")
    (tmp_path / "t.toml").write_text(text)
    done = cli("run", tmp_path / "t.toml", "--no-progress", "--out", tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "bad.tle:2:" in done.stderr


def test_devices_are_the_satellites(tmp_path):
    text = scenario(protocol="sync").replace("[run]", "[devices]\ncount = 7\n[run]")
    (tmp_path / "t.toml").write_text(text)
    done = cli("run", tmp_path / "t.toml", "--no-progress", "--out", tmp_path / "out")
    assert done.returncode == 2 and "devices.count = 7" in done.stderr and "has 40" in done.stderr


def _windows(passes: pd.DataFrame, sat: int) -> list[tuple[float, float]]:
    rows = passes[passes["satellite"] == sat]
    return list(zip(rows["rise_s"], rows["set_s"]))


@pytest.mark.parametrize("protocol", ["fedbuff", "sync", "semi_sync", "fedasync"])
def test_uploads_go_only_inside_passes_at_the_budgets_rate(tmp_path, protocol):
    folder = run(tmp_path, scenario(protocol=protocol))
    passes = pd.read_csv(folder / "passes.csv")
    assert list(passes.columns) == ["station", "satellite", "rise_s", "set_s", "max_elevation_deg", "max_s"]
    updates = pd.read_csv(folder / "updates.csv")
    assert list(updates.columns[-3:]) == ["elevation_deg", "range_km", "doppler_hz"]
    applied = updates[updates["outcome"] == "applied"]
    assert len(applied) >= 4
    budget = LinkBudget(8.2e9, 10.0, 20.0, 2e3, 2.0)  # the table's defaults, bandwidth as set
    for row in applied.itertuples():
        # on the air inside one pass of its own (passes.csv's times are rounded to the millisecond)
        assert any(rise - 1e-3 <= row.tx_start_s and row.tx_end_s <= end + 1e-3
                   for rise, end in _windows(passes, row.device)), row
        assert row.tx_start_s >= row.compute_end_s
        # a short upload within one grid step: bits / (B log2(1 + SNR)) at the recorded geometry
        if math.floor(row.tx_start_s / 30.0) == math.floor(row.tx_end_s / 30.0):
            rate = float(budget.shannon_bps(row.range_km, row.elevation_deg))
            assert row.airtime_s == pytest.approx(2_000_000 / rate, rel=1e-9)
        assert abs(row.doppler_hz) < 8.2e9 * 7.6e3 / 299_792_458.0  # below f v / c of a 550 km orbit
    if protocol == "sync":  # a round ends with its last upload, or at the horizon if one has no pass left
        ends = pd.read_csv(folder / "rounds.csv").set_index("round")["t_end"]
        for version, rows in updates.groupby("version_started"):
            end = 86400.0 if rows["tx_start_s"].isna().any() else rows["tx_end_s"].max()
            assert ends[version] == end


def test_other_runs_keep_their_columns(tmp_path):
    text = scenario(protocol="sync", budget=60.0).split("[orbits]")[0].replace(
        "model = \"logreg\"", "model = \"logreg\"\n[devices]\ncount = 8\n[devices.options]\ncompute_s = 1.0")
    folder = run(tmp_path, text)
    assert "elevation_deg" not in pd.read_csv(folder / "updates.csv").columns
    assert not (folder / "passes.csv").exists()


def _plan(**kw):
    sats = walker(550.0, 53.0, planes=5, per_plane=8, phasing=1, epoch="2024-06-01T00:00:00Z")
    return ContactPlan(sats, stations(["hawaii", "singapore"]), 86400.0,
                       budget=LinkBudget(8.2e9, 10.0, 20.0, 2e3, 2.0), **kw)


def test_pass_end_loses_or_resumes_the_bits_left():
    lose, resume = _plan(pass_end="lose"), _plan(pass_end="resume")
    sat = 0
    rise, end = lose.rises[sat][1], lose.sets[sat][1]
    # more bits than the whole second window carries: sum of rate x time over its grid segments
    carried = 0.0
    t = rise
    while t < end:
        k = math.floor(t / 30.0)
        seg = min((k + 1) * 30.0, end)
        carried += lose.rate_bps[sat, k] * (seg - t)
        t = seg
    bits = carried * 1.5
    lost = lose.upload(sat, rise, bits)
    assert (lost.ok, lost.start_s, lost.end_s, lost.passes) == (False, rise, end, 1)
    assert lost.on_air_s == pytest.approx(end - rise)
    kept = resume.upload(sat, rise, bits)
    assert kept.ok and kept.passes == 2 and kept.start_s == rise
    nxt_rise, nxt_set = resume.rises[sat][2], resume.sets[sat][2]
    assert nxt_rise < kept.end_s <= nxt_set
    # the rest, carried * 0.5 bits, went in the next window from its rise
    rest, t = 0.0, nxt_rise
    while t < kept.end_s:
        k = math.floor(t / 30.0)
        seg = min((k + 1) * 30.0, kept.end_s)
        rest += resume.rate_bps[sat, k] * (seg - t)
        t = seg
    assert rest == pytest.approx(carried * 0.5, rel=1e-9)
    assert kept.on_air_s == pytest.approx((end - rise) + (kept.end_s - nxt_rise))


def test_isl_hands_an_upload_to_a_satellite_in_view():
    plan = _plan(isl=True, isl_rate_bps=1e6, isl_grazing_km=20.0)
    direct = _plan()
    found = 0
    for sat in range(0, 40, 3):
        for t in np.arange(0.0, 7200.0, 1200.0):
            if plan.in_view(sat, t):
                continue
            up = plan.upload(sat, float(t), 1e4)
            if up.hops:
                found += 1
                assert up.ok and up.end_s < direct.upload(sat, float(t), 1e4).end_s
                assert up.start_s >= t + up.hops * 1e4 / 1e6  # the hops' time first
    assert found > 0


@pytest.mark.slow
def test_a_resume_in_the_middle_of_passes_gives_identical_records(tmp_path, monkeypatch):
    """The folder as a kill -9 leaves it, just after a checkpoint and just before the next, resumed:
    uploads that span passes (pass_end = "resume") go on exactly as they did (a real SIGKILL of this
    fast run may land after its end; the station-edge test sends one)."""
    from fakes import resumed_from_checkpoints
    from wirelessfl.config import load_scenario

    text = scenario(budget=604800.0, bits=20_000_000, run_extra="checkpoint_every = 4",
                    orbits_extra='pass_end = "resume"')
    (tmp_path / "k.toml").write_text(text)
    full, copies = resumed_from_checkpoints(tmp_path, monkeypatch, load_scenario(tmp_path / "k.toml"), "sat",
                                            which=(3, 12))
    updates = pd.read_csv(full / "updates.csv")
    assert (updates["attempts"] > 1).any()  # uploads that went on over several passes
    for cut in copies:
        for name in ("updates.csv", "rounds.csv", "passes.csv"):
            assert (full / name).read_bytes() == (cut / name).read_bytes(), (cut.name, name)


def test_ground_clients_upload_while_their_site_sees_a_satellite(tmp_path):
    text = scenario(protocol="sync").replace("[orbits]", "[orbits]\nclients = \"ground\"")
    text = text.replace("[run]", "[devices]\ncount = 4\n[devices.options]\ncompute_s = 300.0\n[run]")
    folder = run(tmp_path, text)
    passes = pd.read_csv(folder / "passes.csv")
    applied = pd.read_csv(folder / "updates.csv").query("outcome == 'applied'")
    assert len(applied) >= 4
    names = ["hawaii", "singapore"]
    for row in applied.itertuples():  # device n sits at station n mod 2, and sends through a satellite it sees
        mine = passes[passes["station"] == names[row.device % 2]]
        assert ((mine["rise_s"] - 1e-3 <= row.tx_start_s) & (row.tx_end_s <= mine["set_s"] + 1e-3)).any(), row


def test_the_study_compares_the_five_settings_on_the_packaged_shell():
    from wirelessfl.papers import find_recipes

    (recipe,) = find_recipes("satellites:time_to_target")
    ((key, (base, variants)),) = recipe.families("tiny", []).items()
    assert key == "satellites/time_to_target/tiny"
    o = base.orbits
    assert (o.planes, o.per_plane, o.phasing, o.altitude_km, o.inclination_deg) == (5, 8, 1, 550.0, 53.0)
    assert base.devices.count == 40 and base.learning.dataset == "fashion_mnist" and base.learning.alpha == 0.5
    assert len(o.ground_stations) == 3 and base.protocol.name == "fedbuff"
    assert variants == {"sync": {"protocol.name": "sync"}, "fedbuff": {}, "fedbuff_isl": {"orbits.isl": True},
                        "fedbuff_1gs": {"orbits.ground_stations": ["hawaii"]},
                        "fedbuff_edges": {"hierarchy.tiers": "edge", "protocol.concurrency": 7, "protocol.buffer": 3}}


def test_the_grid_dvbs2_rates_are_the_modcod_tables():
    from wirelessfl.orbits import dvbs2_rate_bps
    from wirelessfl.orbits.contacts import dvbs2_rates

    es_n0 = np.linspace(-5.0, 20.0, 251)
    for margin in (0.0, 1.5):
        assert np.array_equal(dvbs2_rates(es_n0, 16.7e6, margin), dvbs2_rate_bps(es_n0, 16.7e6, margin))
    plan = _plan(rate="dvbs2", roll_off=0.25)
    snr_db = 10 * np.log10(plan.gain)  # the plan's SNR (gain at unit power and noise)
    assert np.array_equal(plan.rate_bps[:2, :50], dvbs2_rate_bps(snr_db[:2, :50] + 10 * np.log10(1.25), 2e3 / 1.25))


def test_without_the_orbits_extra_a_scenario_with_orbits_is_one_line_naming_it(monkeypatch, capsys):
    import sys

    from wirelessfl.cli import main

    monkeypatch.setitem(sys.modules, "sgp4", None)  # as where the [orbits] extra is not installed
    assert main(["run", "satellites", "--timing-only", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'wirelessfl[orbits]'" in err[0] and "Traceback" not in err[0]
