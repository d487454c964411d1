"""The orbital layer (wirelessfl.orbits) against skyfield and against hand computations.

skyfield is the independent reference: its EarthSatellite built from the same SGP4 record, its
ITRS frame, its WGS84 stations and its find_events. Everything runs offline (the built-in
timescale; no ephemeris file is loaded)."""
from __future__ import annotations

import ast
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sgp4")
pytest.importorskip("skyfield")

from scipy.optimize import brentq  # noqa: E402
from skyfield.api import EarthSatellite, load, wgs84  # noqa: E402
from skyfield.framelib import itrs  # noqa: E402

from wirelessfl.fields import ConfigError  # noqa: E402
from wirelessfl.orbits import (SAMPLE_TLE, DVBS2_MODCODS, Ephemeris, LinkBudget, WalkerOptions,  # noqa: E402
                               doppler_hz, dvbs2_modcod, dvbs2_rate_bps, find_passes, free_space_loss_db,
                               from_tle_file, gas_loss_db, light_time_s, look, neighbours, passes_csv,
                               propagate_ecef, route_to_station, station, walker)
from wirelessfl.orbits.constellation import MU_WGS72_KM3_S2, R_EARTH_WGS72_KM  # noqa: E402
from wirelessfl.orbits.link_budget import BOLTZMANN_DBW_HZ_K, GAS_TABLE, path_gain  # noqa: E402

TS = load.timescale(builtin=True)
EPOCH = datetime(2024, 6, 1, tzinfo=timezone.utc)
C = 299_792_458.0


def sky_time(epoch: datetime, seconds):
    return TS.utc(epoch.year, epoch.month, epoch.day, epoch.hour, epoch.minute,
                  epoch.second + epoch.microsecond * 1e-6 + np.asarray(seconds, dtype=float))


def dut1(epoch: datetime) -> float:
    return float(sky_time(epoch, 0.0).dut1)


def max_itrs_error_m(constellation, times_s) -> float:
    """The largest distance between our Earth-fixed positions and skyfield's ITRS ones (and the
    velocities, Earth rotation included, agree within 1 mm/s)."""
    ours, velocity = propagate_ecef(constellation, times_s, dut1(constellation.epoch))
    t = sky_time(constellation.epoch, times_s)
    worst = 0.0
    for i, rec in enumerate(constellation.satrecs):
        theirs, their_velocity = EarthSatellite.from_satrec(rec, TS).at(t).frame_xyz_and_velocity(itrs)
        worst = max(worst, float(np.linalg.norm(theirs.km.T - ours[i], axis=-1).max()) * 1000.0)
        assert np.linalg.norm(their_velocity.km_per_s.T - velocity[i], axis=-1).max() < 1e-6
    return worst


# ---- positions -------------------------------------------------------------------------------------

def test_walker_positions_match_skyfield_itrs_within_a_metre():
    times = np.array([0.0, 61.0, 1234.5, 3 * 3600 + 17.25, 6 * 3600.0])
    delta = walker(550.0, 53.0, 6, 4, 1, epoch=EPOCH)
    star = walker(1200.0, 87.9, 4, 3, 1, pattern="star", epoch="2024-06-01T06:30:00Z")
    assert max_itrs_error_m(delta, times) < 1.0
    assert max_itrs_error_m(star, times) < 1.0


def test_sample_tle_positions_match_skyfield_itrs_within_a_metre():
    sats = from_tle_file(SAMPLE_TLE)
    assert len(sats) == 6 and sats.names[0] == "SAMPLE-LEO-1"
    assert sats.epoch == datetime(2024, 6, 1, 12, tzinfo=timezone.utc)  # the latest element-set epoch
    assert max_itrs_error_m(sats, np.array([0.0, 900.0, 7200.0, 5 * 3600.0])) < 1.0


def test_without_ut1_the_frame_turns_by_the_documented_amount():
    """ut1_utc_s = 0 rotates the frame by DUT1 of Earth rotation: |DUT1| x omega x r_xy at most."""
    sats = walker(550.0, 53.0, 2, 2, epoch=EPOCH)
    exact, _ = propagate_ecef(sats, [0.0, 600.0], dut1(EPOCH))
    plain, _ = propagate_ecef(sats, [0.0, 600.0])
    bound = abs(dut1(EPOCH)) * 7.2921e-5 * np.hypot(exact[..., 0], exact[..., 1])
    assert np.all(np.linalg.norm(exact - plain, axis=-1) <= bound * 1.001 + 1e-9)


@pytest.mark.parametrize("step, tolerance_m", [(60.0, 0.5), (10.0, 0.05)])
def test_hermite_interpolation_error_against_direct_propagation(step, tolerance_m):
    """The documented interpolation error (ephemeris.py): 0.22 m at 60 s, 1 cm at 10 s over a day."""
    sats = walker(550.0, 53.0, 3, 3, 1, epoch=EPOCH)
    eph = Ephemeris(sats, 86400.0, step)
    t = np.arange(0.0, 86400.0, 37.3) + 0.71
    interpolated, vi = eph.at(t)
    direct, vd = propagate_ecef(sats, t)
    err = np.linalg.norm(interpolated - direct, axis=-1).max() * 1000.0
    assert err < tolerance_m
    assert np.linalg.norm(vi - vd, axis=-1).max() < 1e-3  # km/s
    with pytest.raises(ValueError, match="outside the orbit grid"):
        eph.at([86400.0 + step * 2])


# ---- geometry ----------------------------------------------------------------------------------------

def test_range_elevation_azimuth_by_hand_at_three_epochs():
    sats = walker(550.0, 53.0, 6, 4, 1, epoch=EPOCH)
    site = station("singapore")
    topos = wgs84.latlon(site.latitude_deg, site.longitude_deg, elevation_m=site.altitude_m)
    r_st = topos.itrs_xyz.km  # skyfield's WGS84 station, not ours
    phi, lam = math.radians(site.latitude_deg), math.radians(site.longitude_deg)
    up = np.array([math.cos(phi) * math.cos(lam), math.cos(phi) * math.sin(lam), math.sin(phi)])
    times = np.array([0.0, 5000.0, 40000.0])
    pos, vel = propagate_ecef(sats, times, dut1(EPOCH))
    seen = look(site, pos, vel)
    rho = pos - r_st
    assert np.allclose(seen.range_km, np.linalg.norm(rho, axis=-1), atol=1e-6)  # 1 mm
    hand = np.degrees(np.arcsin(np.einsum("stk,k->st", rho, up) / np.linalg.norm(rho, axis=-1)))
    assert np.allclose(seen.elevation_deg, hand, atol=1e-9)
    for i in (0, 7, 19):  # skyfield's topocentric altitude, azimuth and distance
        alt, az, dist = (EarthSatellite.from_satrec(sats.satrecs[i], TS) - topos).at(sky_time(EPOCH, times)).altaz()
        assert np.allclose(seen.elevation_deg[i], alt.degrees, atol=2e-5)
        assert np.allclose(seen.range_km[i], dist.km, atol=2e-3)
        assert np.allclose(np.cos(np.radians(seen.azimuth_deg[i] - az.degrees)), 1.0, atol=1e-8)


def test_doppler_is_the_range_rate_times_carrier_over_c():
    sats = walker(550.0, 53.0, 2, 2, epoch=EPOCH)
    site, fc, dt = station("hawaii"), 12e9, 0.01
    t = np.array([100.0, 2000.0, 3000.0])
    pos, vel = propagate_ecef(sats, t)
    ahead, _ = propagate_ecef(sats, t + dt)
    behind, _ = propagate_ecef(sats, t - dt)
    rate = (look(site, ahead).range_km - look(site, behind).range_km) / (2 * dt)  # km/s by finite differences
    seen = look(site, pos, vel)
    # SGP4's velocity is its theory's, not exactly the derivative of its positions: a few mm/s apart
    assert np.allclose(seen.range_rate_km_s, rate, atol=1e-5)
    assert np.allclose(seen.doppler_hz(fc), -fc * rate * 1000.0 / C, atol=0.5)
    assert np.all(np.abs(doppler_hz(seen.range_rate_km_s, fc)) < fc * 8.0e3 / C)  # |v| < 8 km/s in LEO


# ---- passes ------------------------------------------------------------------------------------------

def test_passes_match_skyfield_find_events():
    """Rise and set within 1 s of find_events (which stops at half a second) and within 10 ms of
    skyfield's altitude root; the peak elevation is skyfield's altitude at our peak time."""
    sats = walker(550.0, 53.0, 6, 4, 1, epoch=EPOCH)
    eph = Ephemeris(sats, 86400.0, 60.0, ut1_utc_s=dut1(EPOCH))
    site = station("hawaii")
    topos = wgs84.latlon(site.latitude_deg, site.longitude_deg, elevation_m=site.altitude_m)
    rows = find_passes(eph, [site], 10.0)
    t0, t1 = sky_time(EPOCH, 0.0), sky_time(EPOCH, 86400.0)
    compared, worst_events, worst_root, worst_peak = 0, 0.0, 0.0, 0.0
    for i, rec in enumerate(sats.satrecs):
        sat = EarthSatellite.from_satrec(rec, TS)
        t, events = sat.find_events(topos, t0, t1, altitude_degrees=10.0)
        seconds = (t.tt - t0.tt) * 86400.0
        mine = [p for p in rows if p.satellite == i]
        rises = np.array([p.rise_s for p in mine if p.rise_s > 0.0])
        sets = np.array([p.set_s for p in mine if p.set_s < eph.duration_s])
        assert rises.size == np.sum(events == 0) and sets.size == np.sum(events == 2)
        if rises.size:
            worst_events = max(worst_events, np.abs(rises - seconds[events == 0]).max(),
                               np.abs(sets - seconds[events == 2]).max())
            compared += rises.size + sets.size

        def altitude(s, sat=sat):
            return (sat - topos).at(sky_time(EPOCH, s)).altaz()[0].degrees

        for p in mine[:2]:
            for edge in (p.rise_s, p.set_s):
                if 0.0 < edge < eph.duration_s:
                    root = brentq(lambda s: altitude(s) - 10.0, edge - 5.0, edge + 5.0, xtol=1e-6)
                    worst_root = max(worst_root, abs(root - edge))
            worst_peak = max(worst_peak, abs(altitude(p.max_s) - p.max_elevation_deg))
            assert p.rise_s <= p.max_s <= p.set_s and p.max_elevation_deg >= 10.0
    assert compared >= 40
    assert worst_events < 1.0 and worst_root < 0.01 and worst_peak < 1e-3


def test_sample_tle_passes_match_skyfield():
    sats = from_tle_file(SAMPLE_TLE)
    eph = Ephemeris(sats, 43200.0, 30.0, ut1_utc_s=dut1(sats.epoch))
    site = station("hartebeesthoek")
    topos = wgs84.latlon(site.latitude_deg, site.longitude_deg, elevation_m=site.altitude_m)
    rows = find_passes(eph, [site], 5.0)
    t0 = sky_time(sats.epoch, 0.0)
    for i, rec in enumerate(sats.satrecs):
        t, events = EarthSatellite.from_satrec(rec, TS).find_events(topos, t0, sky_time(sats.epoch, 43200.0), 5.0)
        ours = sorted([p.rise_s for p in rows if p.satellite == i and p.rise_s > 0.0]
                      + [p.set_s for p in rows if p.satellite == i and p.set_s < eph.duration_s])
        theirs = np.sort((t.tt[events != 1] - t0.tt) * 86400.0)
        assert len(ours) == theirs.size
        assert np.all(np.abs(np.array(ours) - theirs) < 1.0)


def test_a_pass_between_two_grid_points_is_found():
    """With a coarse grid and a high mask, passes fit between grid points: found all the same."""
    sats = walker(550.0, 53.0, 6, 4, 1, epoch=EPOCH)
    fine = find_passes(Ephemeris(sats, 43200.0, 10.0), ["singapore"], 60.0)
    coarse = find_passes(Ephemeris(sats, 43200.0, 240.0), ["singapore"], 60.0)
    assert [(p.satellite) for p in fine] == [(p.satellite) for p in coarse] and len(fine) >= 3
    hidden = [p for p in coarse if math.floor(p.rise_s / 240.0) == math.floor(p.set_s / 240.0)]
    assert hidden  # at least one pass had no grid point inside
    for a, b in zip(fine, coarse):
        assert abs(a.rise_s - b.rise_s) < 0.5 and abs(a.set_s - b.set_s) < 0.5
        assert abs(a.max_elevation_deg - b.max_elevation_deg) < 0.01


def test_passes_csv_and_a_station_without_passes(tmp_path):
    sats = walker(550.0, 53.0, 4, 4, 1, epoch=EPOCH)
    eph = Ephemeris(sats, 6 * 3600.0, 30.0)
    rows = find_passes(eph, ["hawaii", {"name": "quito", "latitude_deg": -0.18, "longitude_deg": -78.47,
                                        "altitude_m": 2850.0}], 10.0)
    path = passes_csv(rows, tmp_path / "passes.csv")
    lines = path.read_text().splitlines()
    assert lines[0] == "station,satellite,rise_s,set_s,max_elevation_deg,max_s" and len(lines) == len(rows) + 1
    assert rows == sorted(rows, key=lambda p: (p.rise_s, p.station, p.satellite))
    with pytest.raises(ConfigError) as err:  # 78 N never sees a 53 deg shell above 10 deg
        find_passes(eph, ["svalbard"], 10.0)
    assert "svalbard" in str(err.value) and "\n" not in str(err.value)
    assert find_passes(eph, ["svalbard"], 10.0, require_each_station=False) == []


# ---- constellation layout and errors -----------------------------------------------------------------

def test_walker_layout_angles_by_hand():
    planes, per_plane, phasing = 5, 4, 2
    sats = walker(700.0, 60.0, planes, per_plane, phasing, epoch=EPOCH)
    total = planes * per_plane
    for k, j in ((0, 0), (1, 0), (2, 3), (4, 1)):
        rec = sats.satrecs[k * per_plane + j]
        assert math.degrees(rec.nodeo) == pytest.approx(360.0 * k / planes)
        assert math.degrees(rec.mo) == pytest.approx((360.0 * j / per_plane + 360.0 * phasing * k / total) % 360.0)
        assert math.degrees(rec.inclo) == pytest.approx(60.0) and rec.ecco == 0.0 and rec.bstar == 0.0
        assert sats.plane_and_slot(k * per_plane + j) == (k, j)
    a = R_EARTH_WGS72_KM + 700.0
    assert sats.satrecs[0].no_kozai == pytest.approx(math.sqrt(MU_WGS72_KM3_S2 / a ** 3) * 60.0)
    star = walker(700.0, 88.0, 4, 2, 1, pattern="star", epoch=EPOCH)
    assert [round(math.degrees(r.nodeo), 9) for r in star.satrecs[::2]] == [0.0, 45.0, 90.0, 135.0]
    assert len(walker(550.0, 53.0, 3, satellites=12, epoch=EPOCH)) == 12
    assert len(WalkerOptions(planes=2, per_plane=3).build()) == 6


@pytest.mark.parametrize("kwargs, words", [
    (dict(altitude_km=100.0), "altitude_km = 100"),
    (dict(altitude_km=40000.0), "GEO"),
    (dict(inclination_deg=-1.0), "[0, 180]"),
    (dict(inclination_deg=181.0), "[0, 180]"),
    (dict(phasing=4), "0..3"),
    (dict(phasing=-1), "0..3"),
    (dict(per_plane=None, satellites=10), "multiple of orbits.planes = 4"),
    (dict(satellites=12), "exactly one of per_plane and satellites"),
    (dict(pattern="rosette"), "'delta', 'star'"),
])
def test_walker_errors_are_one_line(kwargs, words):
    args = dict(altitude_km=550.0, inclination_deg=53.0, planes=4, per_plane=3, phasing=0) | kwargs
    with pytest.raises(ConfigError) as err:
        walker(args.pop("altitude_km"), args.pop("inclination_deg"), args.pop("planes"), args.pop("per_plane"),
               args.pop("phasing"), **args)
    assert words in str(err.value) and "\n" not in str(err.value)


def _fix_checksum(line: str) -> str:
    return line[:68] + str(sum(int(c) if c.isdigit() else c == "-" for c in line[:68]) % 10)


@pytest.mark.parametrize("edit, words", [
    (lambda l1, l2: (l1[:68] + str((int(l1[68]) + 1) % 10), l2), ":5: checksum"),
    (lambda l1, l2: (l1, l2[:60]), ":6: a TLE line 2 must be 69 characters"),
    (lambda l1, l2: (l1, _fix_checksum(l2[:8] + "abc.defg" + l2[16:])), ":6: the inclination (columns 9-16)"),
    (lambda l1, l2: (l1, _fix_checksum(l2[:8] + "200.0000" + l2[16:])), ":6: the inclination"),
    (lambda l1, l2: (_fix_checksum(l1[:53] + " 1x000-3" + l1[61:]), l2), ":5: the B*"),
    (lambda l1, l2: (l1, _fix_checksum(l2[:2] + "90009" + l2[7:])), ":6: catalogue number 90009 differs"),
    (lambda l1, l2: (l1, ""), ":5: TLE line 1 without its line 2"),
])
def test_malformed_tle_errors_name_the_line(tmp_path, edit, words):
    lines = SAMPLE_TLE.read_text().splitlines()
    assert lines[4].startswith("1 90001") and lines[5].startswith("2 90001")  # lines 5 and 6 of the file
    lines[4], lines[5] = edit(lines[4], lines[5])
    broken = tmp_path / "broken.tle"
    broken.write_text("\n".join(lines[:6] if not lines[5] else lines) + "\n")
    with pytest.raises(ConfigError) as err:
        from_tle_file(broken)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert str(broken) in str(err.value)


def test_option_errors_are_one_line():
    sats = walker(550.0, 53.0, 2, 2, epoch=EPOCH)
    for build in (lambda: Ephemeris(sats, 3600.0, 600.0), lambda: Ephemeris(sats, -1.0),
                  lambda: Ephemeris(sats, 60.0, ut1_utc_s=2.0), lambda: station("atlantis"),
                  lambda: from_tle_file("/nonexistent.tle"), lambda: walker(550.0, 53.0, 2, 2, epoch="June 1st"),
                  lambda: gas_loss_db(30.0, 80e9), lambda: LinkBudget(frequency_hz=0.5e9),
                  lambda: find_passes(Ephemeris(sats, 600.0), ["hawaii"], 95.0),
                  lambda: neighbours(from_tle_file(SAMPLE_TLE), 0)):
        with pytest.raises(ConfigError) as err:
            build()
        assert "\n" not in str(err.value)


# ---- link budget -------------------------------------------------------------------------------------

def test_free_space_loss_is_its_closed_form():
    d, f = 1.0e6, 12e9
    assert free_space_loss_db(d, f) == pytest.approx(20 * math.log10(4 * math.pi * d * f / C), abs=1e-12)
    assert free_space_loss_db(d, f) == pytest.approx(32.4478 + 20 * math.log10(1000.0) + 20 * math.log10(12000.0),
                                                     abs=1e-3)  # the km / MHz form
    assert free_space_loss_db(2 * d, f) - free_space_loss_db(d, f) == pytest.approx(20 * math.log10(2.0))


def test_gas_loss_table_and_elevation_mapping():
    for ghz, zenith, _ in GAS_TABLE:
        assert gas_loss_db(90.0, ghz * 1e9) == pytest.approx(zenith, rel=1e-9)
    el = np.array([2.0, 5.0, 10.0, 20.0, 45.0, 90.0])
    loss = gas_loss_db(el, 20e9)
    assert np.all(np.diff(loss) < 0)
    assert loss[3:] == pytest.approx(0.2526 / np.sin(np.radians(el[3:])), rel=3e-3)  # the flat-layer limit
    assert gas_loss_db(5.0, 22.235e9) == pytest.approx(5.7, abs=0.1)  # itur exact, the water line: 5.73 dB


def test_link_budget_by_hand():
    budget = LinkBudget(frequency_hz=12e9, eirp_dbw=36.0, g_over_t_db_k=10.0, bandwidth_hz=250e6,
                        other_losses_db=1.0)
    rng, el = 1000.0, 30.0
    cn0 = 36.0 - free_space_loss_db(1e6, 12e9) - gas_loss_db(el, 12e9) - 1.0 + 10.0 + 228.5991
    assert budget.cn0_dbhz(rng, el) == pytest.approx(cn0, abs=1e-3)
    assert BOLTZMANN_DBW_HZ_K == pytest.approx(-228.5991, abs=1e-4)
    assert budget.snr_db(rng, el) == pytest.approx(cn0 - 10 * math.log10(250e6), abs=1e-3)
    assert budget.shannon_bps(rng, el) == pytest.approx(250e6 * math.log2(1 + 10 ** (budget.snr_db(rng, el) / 10)))
    gain = path_gain(rng, el, 12e9, tx_gain_dbi=30.0, rx_gain_dbi=35.0)
    assert 10 * math.log10(gain) == pytest.approx(65.0 - free_space_loss_db(1e6, 12e9) - gas_loss_db(el, 12e9))


def test_dvbs2_modcods():
    assert len(DVBS2_MODCODS) == 28
    assert dvbs2_modcod(-3.0) is None
    assert dvbs2_modcod(1.0).name == "QPSK 1/2"
    assert dvbs2_modcod(9.0).name == "16APSK 2/3"  # 2.637 beats 8PSK 5/6 (9.35 dB) and 8PSK 3/4 (2.228)
    assert dvbs2_modcod(16.05).name == "32APSK 9/10"
    assert dvbs2_modcod(16.05, margin_db=1.0).name == "32APSK 5/6"  # 15.05 dB clears 14.28, not 15.69
    assert dvbs2_rate_bps(1.0, 100e6) == pytest.approx(0.988858 * 100e6)
    assert list(dvbs2_rate_bps(np.array([-5.0, 6.62]), 1e6)) == pytest.approx([0.0, 1.980636e6])


# ---- inter-satellite links ---------------------------------------------------------------------------

def test_plane_neighbours_light_time_and_hops():
    sats = walker(550.0, 53.0, 6, 10, 1, epoch=EPOCH)
    assert neighbours(sats, 0) == (1, 9) and neighbours(sats, 19) == (10, 18)
    eph = Ephemeris(sats, 7200.0, 30.0)
    # adjacent satellites of a circular plane: a chord of 2 a sin(pi / 10), a = 6378 + 550 km (+- J2, ellipsoid)
    chord_km = 2 * (6378.137 + 550.0) * math.sin(math.pi / 10)
    assert light_time_s(eph, 0, 1, 1000.0) == pytest.approx(chord_km * 1000.0 / C, rel=0.01)
    site = station("singapore")
    found = 0
    for t in np.arange(0.0, 7200.0, 300.0):
        for sat in (0, 25):
            route = route_to_station(sats, eph, site, sat, t, 10.0)
            pos, _ = eph.at([t])
            el = look(site, pos[:, 0]).elevation_deg
            plane = sat // 10
            slot = sat % 10
            in_view = [j for j in range(10) if el[plane * 10 + j] >= 10.0]
            if not in_view:
                assert route is None
                continue
            found += 1
            best = min(min((j - slot) % 10, (slot - j) % 10) for j in in_view)
            assert route.hops == best and route.satellites[0] == sat and el[route.gateway] >= 10.0
            assert route.latency_s == pytest.approx(route.hops * chord_km * 1000.0 / C, rel=0.02)
    assert found >= 3


# ---- speed and layering ------------------------------------------------------------------------------

def test_a_week_of_100_satellites_and_3_stations_has_its_passes():
    """Positions and passes for a week at a 30 s grid (its time: python benchmarks/orbits.py)."""
    eph = Ephemeris(walker(550.0, 53.0, 10, 10, 1, epoch=EPOCH), 7 * 86400.0, 30.0)
    rows = find_passes(eph, ["hawaii", "singapore", "hartebeesthoek"], 10.0)
    assert len(rows) > 1000


def test_the_layer_imports_no_engine_module():
    package = Path(__file__).resolve().parent.parent / "wirelessfl" / "orbits"
    banned = ("torch", "simpy", "skyfield", "wirelessfl.sim", "wirelessfl.learning", "wirelessfl.config")
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else ["." * node.level + (node.module or "")] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                resolved = "wirelessfl." + name.lstrip(".") if name.startswith("..") else name
                assert not any(resolved == b or resolved.startswith(b + ".") for b in banned), (path.name, name)
