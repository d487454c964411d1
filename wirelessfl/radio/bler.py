"""Block error rates of a transport block on an AWGN channel, and the effective SINR of a block
sent over several SINRs (MIESM).

The curves come from one model for every MCS of every table (NR and LTE):

- the mutual information per coded bit of Gray-labelled square QAM under bit-interleaved coded
  modulation (BICM; Caire, Taricco and Biglieri, IEEE Trans. IT 44(3), 1998), computed with
  Gauss-Hermite quadrature on each of the constellation's two PAM dimensions (:func:`bicm_mi`);
- a transport block of code rate R on Q_m-ary QAM decodes at 50 % once the SINR is ``gap_db``
  above the SINR at which that information equals R (the code's distance from the BICM limit),
  and its BLER falls as a Gaussian in dB of spread ``spread_db`` around that point:
  BLER(gamma) = Q((gamma_dB - gamma_50,dB) / spread_db).

The spread (:data:`DEFAULT_SPREAD_DB`) and LTE's gaps per modulation (rates.LTE_GAP_DB) are a
least-squares fit to ns-3's LTE MIESM error model (Mezzavilla et al., "A lightweight and accurate
link abstraction model for the simulation of LTE networks in ns-3", ACM MSWiM 2012) on AWGN over
every uplink MCS (``python benchmarks/ns3_check.py bler``; docs/radio.md lists the fit's residual);
the default gap (:data:`DEFAULT_GAP_DB`) is NR's.

MIESM (mutual-information effective SINR mapping): the effective SINR of a block sent over SINRs
gamma_1..gamma_n (resource blocks of unequal gain) is the SINR whose BICM information is the mean of
theirs, for the block's modulation.
"""
from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["DEFAULT_GAP_DB", "DEFAULT_SPREAD_DB", "BlerCurves", "bicm_mi", "effective_snr"]

DEFAULT_GAP_DB = 1.5
"""The SINR above the BICM limit at which a transport block decodes half the time (dB). NR's (LDPC): with
DEFAULT_SPREAD_DB it puts the 10 % BLER points of the qam64 table's MCS 0 and 28 at -5.8 and 20.2 dB on
AWGN, where NR link-level results place them."""
DEFAULT_SPREAD_DB = 0.19
"""The spread in dB of the waterfall around that point: the fit to ns-3's LTE curves at 25 PRB (its
blocks' waterfalls are steeper the longer they are: 0.34 dB at 6 PRB, 0.13 at 100)."""

_GRID_DB = np.linspace(-30.0, 50.0, 401)  # 0.2 dB steps: the information is tabulated once per modulation
_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(48)


@functools.cache
def _mi_table(qm: int) -> np.ndarray:
    """BICM information per coded bit of 2^qm-QAM (Gray) at every SINR of the grid."""
    bits = qm // 2  # bits per PAM dimension
    levels = 2 ** bits
    amplitude = np.arange(levels) * 2.0 - (levels - 1)
    amplitude *= math.sqrt(3.0 / (2.0 * (levels ** 2 - 1)))  # unit mean energy of the QAM symbol
    labels = np.arange(levels) ^ (np.arange(levels) >> 1)  # Gray
    sigma = np.sqrt(0.5 / 10.0 ** (_GRID_DB / 10.0))[:, None, None, None]  # N0 / 2 per dimension, Es = 1
    # y = x + noise for every SINR, sent level x and quadrature node; the log-likelihoods of every
    # candidate level: (SINRs, levels sent, nodes, levels candidate)
    y = amplitude[None, :, None, None] + math.sqrt(2.0) * sigma * _NODES[None, None, :, None]
    ll = -((y - amplitude[None, None, None, :]) ** 2) / (2.0 * sigma ** 2)
    like = np.exp(ll - ll.max(axis=3, keepdims=True))
    total = like.sum(axis=3)
    loss = np.zeros(_GRID_DB.size)
    for b in range(bits):
        bit = (labels >> b) & 1
        same = np.where(bit[None, None, None, :] == bit[None, :, None, None], like, 0.0).sum(axis=3)
        loss += np.einsum("n,gln->g", _WEIGHTS, np.log2(total / same)) / (math.sqrt(math.pi) * levels)
    out = 1.0 - loss / bits
    return np.maximum.accumulate(np.clip(out, 0.0, 1.0))


def bicm_mi(snr, qm: int):
    """Information per coded bit (0..1) of 2^qm-QAM at linear SINR ``snr`` (interpolated in dB)."""
    snr_db = 10.0 * np.log10(np.maximum(np.asarray(snr, dtype=float), 1e-30))
    return np.interp(snr_db, _GRID_DB, _mi_table(int(qm)))


def _snr_db_of_mi(mi, qm: int):
    """The SINR in dB at which 2^qm-QAM carries ``mi`` bits per coded bit (the inverse of bicm_mi)."""
    table = _mi_table(int(qm))
    # the table is non-decreasing; where it is flat (saturated) np.interp takes the first point
    return np.interp(mi, table, _GRID_DB)


def effective_snr(snrs, qm: int, axis: int = -1):
    """MIESM: the SINR whose information equals the mean information over ``snrs`` (along ``axis``)."""
    mean = np.mean(bicm_mi(snrs, qm), axis=axis)
    return 10.0 ** (_snr_db_of_mi(mean, qm) / 10.0)


class BlerCurves:
    """The AWGN BLER of every MCS of a table (Q_m and code rate per MCS) as the module docstring
    gives it: 50 % at ``gap_db`` above the BICM limit, a Gaussian waterfall of ``spread_db``."""

    def __init__(self, qm: np.ndarray, rate: np.ndarray, gap_db=DEFAULT_GAP_DB, spread_db: float = DEFAULT_SPREAD_DB):
        self.qm, self.rate = np.asarray(qm), np.asarray(rate, dtype=float)
        self.spread_db = float(spread_db)
        # one gap for every modulation, or {Q_m: gap}
        self.gap_db = np.array([gap_db[int(q)] for q in self.qm]) if isinstance(gap_db, dict) else \
            np.full(self.qm.size, float(gap_db))
        self.limit_db = np.array([_snr_db_of_mi(r, q) for q, r in zip(self.qm, self.rate)])
        self.mid_db = self.limit_db + self.gap_db

    def bler(self, mcs, snr):
        """The BLER of ``mcs`` at linear SINR ``snr`` (broadcast)."""
        from scipy.special import erfc  # scipy only where a BLER is asked for: scenarios load without it

        snr_db = 10.0 * np.log10(np.maximum(np.asarray(snr, dtype=float), 1e-30))
        return 0.5 * erfc((snr_db - self.mid_db[mcs]) / (math.sqrt(2.0) * self.spread_db))

    def threshold_db(self, target: float) -> np.ndarray:
        """The SINR in dB at which each MCS's BLER is ``target``."""
        from scipy.special import erfcinv

        return self.mid_db + math.sqrt(2.0) * self.spread_db * erfcinv(2.0 * target)
