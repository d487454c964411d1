"""Ground-satellite link budget: free-space loss, gaseous absorption, EIRP and G/T to C/N0 and SNR.

    FSPL [dB]  = 20 log10(4 pi d f / c)                                    (Friis; ITU-R P.525)
    C/N0 [dBHz] = EIRP [dBW] - FSPL - A_gas(el, f) - L_other + G/T [dB/K] - 10 log10(k)
    SNR [dB]   = C/N0 - 10 log10(B)                                        (k = 1.380649e-23 J/K)

A gain for the simulator's rate models (``wirelessfl.wireless``: SNR = p |h|^2 / N) is
``path_gain`` = 10^((G_tx + G_rx - FSPL - A_gas - L_other) / 10), the power ratio from transmitter
output to receiver input; with G/T given instead of G_rx, ``equivalent_gain`` turns an SNR back
into the gain that gives it for a transmit power p and noise power N: g = SNR N / p.

Gaseous absorption (oxygen and water vapour; ITU-R P.676): the zenith attenuation A_z(f) of the
mean annual global reference atmosphere at sea level (rho = 7.5 g/m^3, P = 1013.25 hPa, T = 15 C)
and an equivalent layer height H(f) are tabulated below, from the line-by-line method of
ITU-R P.676-12 Annex 1 as computed by the ``itur`` package 0.4.0 (``gaseous_attenuation_slant_path``,
mode "exact"). H(f) is fitted so that the curved-layer path at 5 deg matches. Between table
frequencies log A_z and H are interpolated linearly; at elevation el the path through a spherical
shell of thickness H over an Earth of radius R = 6371 km scales the zenith value:

    A_gas(el, f) = A_z(f) [sqrt((R + H)^2 - (R cos el)^2) - R sin el] / H      (-> A_z / sin el high up)

Against itur's exact slant path at 301 frequencies over 1-51 GHz: within 0.5 % at elevations >= 5 deg,
2.4 % low at 2 deg and 8 % low at 1 deg (itur bends the ray by refraction near the horizon). Above
51 GHz the oxygen complex needs another method. itur is not a dependency: its "approx" mode (Annex 2)
returns 0 dB in 0.4.0, its exact mode takes about 0.1 s per call, and its wheel is 160 MB. Rain
(P.618), clouds (P.840), scintillation and a station's own height and climate are left out.

DVB-S2 (ETSI EN 302 307-1 V1.4.1, Table 13): the 28 MODCODs of the normal FECFRAME with their ideal
Es/N0 for quasi-error-free reception (PER 1e-7, AWGN) and spectral efficiencies (information bits
per channel symbol). ``dvbs2_modcod`` picks the most efficient MODCOD whose threshold (plus an
implementation margin) the SNR clears; the rate is efficiency x symbol rate, and the symbol rate
of a channel of bandwidth B with roll-off alpha is B / (1 + alpha).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..fields import ConfigError
from ..units import from_db
from .geometry import SPEED_OF_LIGHT_M_S

__all__ = ["BOLTZMANN_DBW_HZ_K", "DVBS2_MODCODS", "GAS_TABLE", "LinkBudget", "ModCod", "dvbs2_modcod",
           "dvbs2_rate_bps", "equivalent_gain", "free_space_loss_db", "gas_loss_db", "path_gain"]

BOLTZMANN_DBW_HZ_K = 10.0 * math.log10(1.380649e-23)
"""10 log10(k) = -228.60 dBW/(Hz K)."""

GAS_TABLE = (
    # frequency GHz, zenith attenuation dB, equivalent height km (itur 0.4.0, P.676-12 Annex 1, exact)
    (1, 0.0314, 7.49), (1.25, 0.0331, 7.30), (1.5, 0.0342, 7.19), (2, 0.0355, 7.06), (3, 0.0370, 6.92),
    (4, 0.0382, 6.82), (6, 0.0413, 6.60), (8, 0.0455, 6.35), (10, 0.0515, 6.05), (11, 0.0553, 5.89),
    (12, 0.0599, 5.71), (13, 0.0655, 5.53), (14, 0.0725, 5.32), (15, 0.0816, 5.10), (16, 0.0938, 4.85),
    (16.5, 0.1017, 4.71), (17, 0.1113, 4.57), (17.5, 0.1230, 4.43), (18, 0.1377, 4.28), (18.5, 0.1563, 4.14),
    (19, 0.1804, 4.00), (19.5, 0.2117, 3.89), (20, 0.2526, 3.81), (21.117, 0.3865, 3.87), (21.396, 0.4269, 3.96),
    (21.676, 0.4664, 4.08), (21.956, 0.5003, 4.22), (22.096, 0.5132, 4.28), (22.235, 0.5221, 4.31),
    (22.456, 0.5255, 4.24), (22.676, 0.5191, 4.13), (22.896, 0.5060, 4.02), (23.117, 0.4882, 3.92),
    (23.559, 0.4464, 3.78), (24, 0.4041, 3.71), (24.5, 0.3618, 3.70), (25, 0.3273, 3.74), (25.5, 0.3002, 3.80),
    (26, 0.2795, 3.89), (26.5, 0.2639, 3.98), (27, 0.2523, 4.07), (27.5, 0.2439, 4.17), (28, 0.2381, 4.25),
    (29, 0.2322, 4.42), (30, 0.2319, 4.56), (31, 0.2357, 4.68), (32, 0.2427, 4.78), (33, 0.2525, 4.88),
    (34, 0.2648, 4.97), (36, 0.2970, 5.13), (38, 0.3405, 5.29), (40, 0.3988, 5.45), (42, 0.4784, 5.62),
    (43, 0.5296, 5.71), (44, 0.5911, 5.80), (45, 0.6665, 5.89), (46, 0.7603, 5.99), (47, 0.8800, 6.09),
    (48, 1.0371, 6.19), (49, 1.2519, 6.29), (49.5, 1.3918, 6.33), (50, 1.5648, 6.36), (50.5, 1.7896, 6.40),
    (50.75, 1.9268, 6.39), (51, 2.0945, 6.46),
)
"""Zenith gaseous attenuation and equivalent height of the reference atmosphere, 1-51 GHz."""
_GAS = np.array(GAS_TABLE)
_R_EARTH_KM = 6371.0


def free_space_loss_db(distance_m, frequency_hz):
    """Free-space path loss 20 log10(4 pi d f / c) in dB (d in metres, f in Hz)."""
    d, f = np.asarray(distance_m, dtype=float), np.asarray(frequency_hz, dtype=float)
    if np.any(d <= 0) or np.any(f <= 0):
        raise ValueError("free_space_loss_db: distance and frequency must be > 0")
    return 20.0 * np.log10(4.0 * math.pi * d * f / SPEED_OF_LIGHT_M_S)


def _check_frequency(frequency_hz: float) -> float:
    ghz = float(frequency_hz) / 1e9
    if not _GAS[0, 0] <= ghz <= _GAS[-1, 0]:
        raise ConfigError(f"orbits.frequency_hz = {frequency_hz:g}: the gas-absorption table covers 1-51 GHz "
                          "(1e9 .. 51e9)")
    return ghz


def gas_loss_db(elevation_deg, frequency_hz: float):
    """Oxygen + water-vapour attenuation along the slant path (dB) at ``elevation_deg`` (clipped to
    [0, 90]) for a station at sea level in the reference atmosphere (see the module docstring)."""
    ghz = _check_frequency(frequency_hz)
    zenith = math.exp(np.interp(ghz, _GAS[:, 0], np.log(_GAS[:, 1])))
    height = float(np.interp(ghz, _GAS[:, 0], _GAS[:, 2]))
    el = np.radians(np.clip(np.asarray(elevation_deg, dtype=float), 0.0, 90.0))
    r = _R_EARTH_KM
    path = np.sqrt((r + height) ** 2 - (r * np.cos(el)) ** 2) - r * np.sin(el)
    return zenith * path / height


def path_gain(range_km, elevation_deg, frequency_hz: float, tx_gain_dbi: float = 0.0, rx_gain_dbi: float = 0.0,
              other_losses_db: float = 0.0):
    """The linear power gain from transmitter output to receiver input: antenna gains less free-space
    and gas losses and ``other_losses_db`` (pointing, polarisation, implementation)."""
    loss = (free_space_loss_db(np.asarray(range_km, dtype=float) * 1000.0, frequency_hz)
            + gas_loss_db(elevation_deg, frequency_hz) + other_losses_db)
    return from_db(tx_gain_dbi + rx_gain_dbi - loss)


def equivalent_gain(snr_linear, tx_power_w: float, noise_w: float):
    """The gain |h|^2 that gives ``snr_linear`` as p |h|^2 / N for the simulator's power and noise."""
    return np.asarray(snr_linear, dtype=float) * noise_w / tx_power_w


@dataclass(frozen=True)
class LinkBudget:
    """One direction of a ground-satellite link: carrier, EIRP, receiver G/T, bandwidth, extra losses."""

    frequency_hz: float = 12e9
    eirp_dbw: float = 36.0
    g_over_t_db_k: float = 10.0
    bandwidth_hz: float = 250e6
    other_losses_db: float = 1.0

    def __post_init__(self):
        _check_frequency(self.frequency_hz)
        if not self.bandwidth_hz > 0 or not math.isfinite(self.bandwidth_hz):
            raise ConfigError(f"orbits.bandwidth_hz = {self.bandwidth_hz!r}: must be a finite number > 0")
        for name in ("eirp_dbw", "g_over_t_db_k", "other_losses_db"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigError(f"orbits.{name} = {getattr(self, name)!r}: must be finite")

    def cn0_dbhz(self, range_km, elevation_deg):
        """Carrier to noise density C/N0 in dBHz."""
        return (self.eirp_dbw - free_space_loss_db(np.asarray(range_km, dtype=float) * 1000.0, self.frequency_hz)
                - gas_loss_db(elevation_deg, self.frequency_hz) - self.other_losses_db + self.g_over_t_db_k
                - BOLTZMANN_DBW_HZ_K)

    def snr_db(self, range_km, elevation_deg):
        """SNR over the bandwidth: C/N0 - 10 log10(B), in dB."""
        return self.cn0_dbhz(range_km, elevation_deg) - 10.0 * math.log10(self.bandwidth_hz)

    def snr(self, range_km, elevation_deg):
        """The SNR as a linear ratio (for Shannon: B log2(1 + SNR))."""
        return from_db(self.snr_db(range_km, elevation_deg))

    def shannon_bps(self, range_km, elevation_deg):
        """The Shannon capacity B log2(1 + SNR) in bit/s."""
        return self.bandwidth_hz * np.log2(1.0 + self.snr(range_km, elevation_deg))


@dataclass(frozen=True)
class ModCod:
    """A DVB-S2 modulation and coding: name, ideal Es/N0 threshold (dB), information bits per symbol."""

    name: str
    es_n0_db: float
    efficiency: float


DVBS2_MODCODS = tuple(ModCod(n, t, e) for n, t, e in (
    # ETSI EN 302 307-1 Table 13: normal FECFRAME (64800 bits), AWGN, PER 1e-7
    ("QPSK 1/4", -2.35, 0.490243), ("QPSK 1/3", -1.24, 0.656448), ("QPSK 2/5", -0.30, 0.789412),
    ("QPSK 1/2", 1.00, 0.988858), ("QPSK 3/5", 2.23, 1.188304), ("QPSK 2/3", 3.10, 1.322253),
    ("QPSK 3/4", 4.03, 1.487473), ("QPSK 4/5", 4.68, 1.587196), ("QPSK 5/6", 5.18, 1.654663),
    ("QPSK 8/9", 6.20, 1.766451), ("QPSK 9/10", 6.42, 1.788612),
    ("8PSK 3/5", 5.50, 1.779991), ("8PSK 2/3", 6.62, 1.980636), ("8PSK 3/4", 7.91, 2.228124),
    ("8PSK 5/6", 9.35, 2.478562), ("8PSK 8/9", 10.69, 2.646012), ("8PSK 9/10", 10.98, 2.679207),
    ("16APSK 2/3", 8.97, 2.637201), ("16APSK 3/4", 10.21, 2.966728), ("16APSK 4/5", 11.03, 3.165623),
    ("16APSK 5/6", 11.61, 3.300184), ("16APSK 8/9", 12.89, 3.523143), ("16APSK 9/10", 13.13, 3.567342),
    ("32APSK 3/4", 12.73, 3.703295), ("32APSK 4/5", 13.64, 3.951571), ("32APSK 5/6", 14.28, 4.119540),
    ("32APSK 8/9", 15.69, 4.397854), ("32APSK 9/10", 16.05, 4.453027),
))
"""The DVB-S2 MODCODs (ETSI EN 302 307-1 Table 13)."""


def dvbs2_modcod(es_n0_db: float, margin_db: float = 0.0) -> ModCod | None:
    """The most efficient MODCOD with threshold + ``margin_db`` <= ``es_n0_db``; None below QPSK 1/4."""
    usable = [m for m in DVBS2_MODCODS if m.es_n0_db + margin_db <= es_n0_db]
    return max(usable, key=lambda m: m.efficiency) if usable else None


def dvbs2_rate_bps(es_n0_db, symbol_rate_baud: float, margin_db: float = 0.0):
    """Information bit rate (bit/s) of the best MODCOD at each Es/N0 (0 where none closes)."""
    values = np.atleast_1d(np.asarray(es_n0_db, dtype=float))
    rates = np.array([0.0 if (m := dvbs2_modcod(v, margin_db)) is None else m.efficiency * symbol_rate_baud
                      for v in values.ravel()]).reshape(values.shape)
    return rates if np.ndim(es_n0_db) else float(rates[0])
