"""Where every satellite is: SGP4 on a time grid, rotated into the Earth-fixed frame, interpolated between.

Propagation: SGP4/SDP4 (Hoots & Roehrich 1980, Spacetrack Report #3, as revised by Vallado, Crawford,
Hujsak & Kelso 2006, AIAA 2006-6753) through the ``sgp4`` package's vectorised ``SatrecArray``. It
gives positions and velocities in TEME (true equator, mean equinox), in km and km/s.

Frame: TEME -> Earth-fixed by the Greenwich mean sidereal angle of IAU-82 (AIAA 2006-6753 Appendix C,
the ``gstime`` of sgp4 and skyfield's ``theta_GMST1982``), evaluated on UT1 = UTC + ``ut1_utc_s``:

    r_ecef = R_z(theta) r_teme,     v_ecef = R_z(theta) v_teme - omega x r_ecef,   omega = d theta / dt

Polar motion (x_p, y_p, at most ~0.5 arcsec, about 15 m on the ground) is left out, as skyfield
does when its timescale has no polar-motion table: the result is its ITRS (``frame_xyz(itrs)``),
which the tests check to 1 m. UT1 - UTC (|DUT1| < 0.9 s) is one constant for the run: with the
default 0 the Earth-fixed frame is rotated by up to 0.9 s of Earth rotation (<= 0.42 km at the
equator, about 0.46 km at LEO radius), below the error of SGP4 itself from real TLEs (about 1 km
at epoch, growing a few km per day: Vallado et al. 2006). DUT1 drifts by 1-3 ms a day, i.e. about
1 m per day at LEO radius, so a constant is good for runs of days.

Grid and interpolation: positions and velocities of all satellites at t = 0, h, 2h, ... (h =
``orbit_step_s``) are computed once and kept (float64 arrays (satellites, times, 3)); between grid
points each coordinate is a cubic Hermite polynomial through the two end positions and velocities
(e.g. Burden & Faires, "Numerical Analysis", section 3.4). Its error is bounded by
h^4 / 384 max |x''''| ~ h^4 / 384 n^4 a for a circular orbit of mean motion n and radius a: at
550 km (n = 1.1e-3 rad/s) about 0.3 m for h = 60 s. Measured against direct propagation over a day
of a 550 km / 53 deg Walker constellation (every 37.3 s): max 4.3 m at h = 120 s, 0.22 m at 60 s,
2.3 cm at 30 s, 1.1 cm at 10 s. The floor of about 1 cm is SGP4's: its velocity is that of its
theory, a few mm/s away from the time derivative of its positions.
"""
from __future__ import annotations

import math
from datetime import datetime

import numpy as np
from sgp4.api import SGP4_ERRORS, SatrecArray

from ..fields import ConfigError, require_memory
from .constellation import Constellation, julian

__all__ = ["Ephemeris", "gmst82", "propagate_ecef", "teme_to_ecef"]

_JD2000 = 2451545.0
_DAY_S = 86400.0


def gmst82(jd_ut1: float | np.ndarray, fraction_ut1: float | np.ndarray = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Greenwich mean sidereal angle of IAU-82 (radians) and its rate (rad/s) at the UT1 Julian date
    ``jd_ut1 + fraction_ut1`` (split as two floats to keep precision), AIAA 2006-6753 Appendix C."""
    jd_ut1 = np.asarray(jd_ut1, dtype=float)
    fraction_ut1 = np.asarray(fraction_ut1, dtype=float)
    t = (jd_ut1 - _JD2000 + fraction_ut1) / 36525.0
    g = 67310.54841 + (8640184.812866 + (0.093104 + (-6.2e-6) * t) * t) * t
    dg = 8640184.812866 + (0.093104 * 2.0 + (-6.2e-6 * 3.0) * t) * t
    theta = (jd_ut1 % 1.0 + fraction_ut1 + g / _DAY_S % 1.0) % 1.0 * 2.0 * math.pi
    rate = (1.0 + dg / (_DAY_S * 36525.0)) * 2.0 * math.pi / _DAY_S
    return theta, rate


def teme_to_ecef(r_teme: np.ndarray, v_teme: np.ndarray, theta: np.ndarray, rate: np.ndarray):
    """Rotate TEME positions/velocities (..., times, 3) into the Earth-fixed frame (no polar motion)
    with the sidereal angle ``theta`` (times,) and its rate ``rate`` (rad/s)."""
    c, s = np.cos(theta), np.sin(theta)
    x, y = r_teme[..., 0], r_teme[..., 1]
    r = np.empty_like(r_teme)
    r[..., 0] = c * x + s * y
    r[..., 1] = -s * x + c * y
    r[..., 2] = r_teme[..., 2]
    vx, vy = v_teme[..., 0], v_teme[..., 1]
    v = np.empty_like(v_teme)
    v[..., 0] = c * vx + s * vy + rate * r[..., 1]  # - omega z x r = (omega y, -omega x, 0)
    v[..., 1] = -s * vx + c * vy - rate * r[..., 0]
    v[..., 2] = v_teme[..., 2]
    return r, v


def propagate_ecef(constellation: Constellation, times_s, ut1_utc_s: float = 0.0,
                   satellites=None) -> tuple[np.ndarray, np.ndarray]:
    """Direct SGP4 propagation (no grid): Earth-fixed positions (km) and velocities (km/s), shaped
    (satellites, times, 3), at ``times_s`` seconds from the constellation's epoch."""
    times_s = np.atleast_1d(np.asarray(times_s, dtype=float))
    chosen = range(len(constellation)) if satellites is None else np.atleast_1d(satellites)
    recs = [constellation.satrecs[i] for i in chosen]
    jd, fr = julian(constellation.epoch)
    fraction = fr + times_s / _DAY_S
    error, r, v = SatrecArray(recs).sgp4(np.full(times_s.shape, jd), fraction)
    if error.any():
        s, t = np.argwhere(error)[0]
        name = constellation.names[list(chosen)[s]]
        raise ConfigError(f"orbits: satellite {name} at t = {times_s[t]:g} s: SGP4 error {error[s, t]} "
                          f"({SGP4_ERRORS[error[s, t]]})")
    theta, rate = gmst82(np.full(times_s.shape, jd), fraction + ut1_utc_s / _DAY_S)
    return teme_to_ecef(r, v, theta, rate)


class Ephemeris:
    """Every satellite's Earth-fixed position and velocity on a grid of ``orbit_step_s`` from the
    epoch to at least ``duration_s``, with cubic Hermite interpolation between grid points.

    ``times_s`` (T,), ``position_km`` and ``velocity_km_s`` (S, T, 3) are the cached grid.
    """

    def __init__(self, constellation: Constellation, duration_s: float, orbit_step_s: float = 30.0,
                 ut1_utc_s: float = 0.0):
        for name, value, low in (("duration_s", duration_s, 0.0), ("orbit_step_s", orbit_step_s, 0.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= low:
                raise ConfigError(f"orbits.{name} = {value!r}: must be a finite number > {low:g}")
        if orbit_step_s > 300.0:
            raise ConfigError(f"orbits.orbit_step_s = {orbit_step_s:g}: must be <= 300 s (the interpolation "
                              "error grows as step^4: about 0.3 m at 60 s, 400 m at 300 s for LEO)")
        if not -0.9 <= ut1_utc_s <= 0.9:
            raise ConfigError(f"orbits.ut1_utc_s = {ut1_utc_s!r}: must be in [-0.9, 0.9] s (UT1 - UTC)")
        self.constellation = constellation
        self.epoch: datetime = constellation.epoch
        self.step_s = float(orbit_step_s)
        self.ut1_utc_s = float(ut1_utc_s)
        count = int(math.ceil(duration_s / orbit_step_s - 1e-9)) + 1
        require_memory("orbits.duration_s", duration_s, 2 * 3 * 8 * 2.5 * count * len(constellation),
                       f"an orbit grid of {len(constellation)} satellites x {count} times")
        self.times_s = np.arange(count) * self.step_s
        self.duration_s = float(self.times_s[-1])
        self.position_km, self.velocity_km_s = propagate_ecef(constellation, self.times_s, ut1_utc_s)

    def __len__(self) -> int:
        return self.position_km.shape[0]

    def _locate(self, t: np.ndarray):
        if np.any(t < -1e-9) or np.any(t > self.duration_s + 1e-9):
            bad = t[(t < -1e-9) | (t > self.duration_s + 1e-9)].flat[0]
            raise ValueError(f"t = {bad:g} s is outside the orbit grid [0, {self.duration_s:g}] s")
        k = np.clip(np.floor(t / self.step_s).astype(np.int64), 0, len(self.times_s) - 2)
        return k, t / self.step_s - k

    def state(self, satellites, times_s) -> tuple[np.ndarray, np.ndarray]:
        """Interpolated position (km) and velocity (km/s) of ``satellites[i]`` at ``times_s[i]``
        (arrays broadcast together; result shape (..., 3))."""
        sat, t = np.broadcast_arrays(np.asarray(satellites, dtype=np.int64), np.asarray(times_s, dtype=float))
        if len(self.times_s) == 1:  # a grid of one point: nothing to interpolate
            return self.position_km[sat, 0], self.velocity_km_s[sat, 0]
        k, s = self._locate(t)
        h = self.step_s
        p0, p1 = self.position_km[sat, k], self.position_km[sat, k + 1]
        v0, v1 = self.velocity_km_s[sat, k] * h, self.velocity_km_s[sat, k + 1] * h
        s = s[..., None]
        s2, s3 = s * s, s * s * s
        pos = (2 * s3 - 3 * s2 + 1) * p0 + (s3 - 2 * s2 + s) * v0 + (-2 * s3 + 3 * s2) * p1 + (s3 - s2) * v1
        vel = ((6 * s2 - 6 * s) * p0 + (3 * s2 - 4 * s + 1) * v0 + (-6 * s2 + 6 * s) * p1 + (3 * s2 - 2 * s) * v1) / h
        return pos, vel

    def at(self, times_s, satellites=None) -> tuple[np.ndarray, np.ndarray]:
        """Interpolated positions and velocities of ``satellites`` (default all) at ``times_s``,
        shaped (satellites, times, 3)."""
        sats = np.arange(len(self)) if satellites is None else np.atleast_1d(np.asarray(satellites, dtype=np.int64))
        t = np.atleast_1d(np.asarray(times_s, dtype=float))
        return self.state(sats[:, None], t[None, :])
