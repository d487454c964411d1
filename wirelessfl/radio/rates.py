"""The link abstraction: how many bits per second a transmission at a given SINR carries, and what
delivering an upload's bits costs on the air. A part named by ``link.rate``:

- ``shannon`` (default): B log2(1 + SINR), every upload delivered at once (today's model, exact:
  the link keeps its own Shannon code, so records do not change).
- ``nr``: 5G NR PUSCH (3GPP TS 38.214): the highest MCS whose AWGN BLER at the upload's SINR is at
  most ``bler_target``; transport blocks of Sec. 5.1.3.2 over the resource blocks the access scheme
  gives the upload, one per slot; HARQ with chase combining up to ``harq_max_tx`` transmissions.
- ``lte``: LTE PUSCH (3GPP TS 36.213): the same, with the uplink MCS table 8.6.1-1, the TBS table
  7.1.7.2.1-1, 1 ms subframes and 180 kHz resource blocks.
- a user's ``"module:Class"`` with the same members (:class:`RateModel`).

Transport blocks and HARQ (``nr``, ``lte``): an upload of l bits at MCS m over N_PRB resource blocks
is ceil(l / TBS) transport blocks. Transmission k of a block (SINRs adding under chase combining,
so k gamma after k transmissions of equal SINR) fails with probability BLER(k gamma) / BLER((k - 1)
gamma) given the k - 1 before it failed, so that a block is still in error after k transmissions
with probability BLER(k gamma). The count of blocks failing at each stage is drawn from the "harq"
stream (a binomial of the blocks still in error: the same law as one draw per block and
transmission, at a cost that does not grow with the upload). A block still in error after
``harq_max_tx`` transmissions is sent again from scratch by ARQ (``link.max_attempts`` rounds in all,
no combining across them); one still in error after those loses the upload. Each transmission takes
one slot (subframe) of the upload's resource blocks; HARQ's round trip is hidden by its parallel
processes (the upload's air is never idle).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from ..fields import ConfigError, NoOptions, option
from ..plugins import Registry
from .bler import DEFAULT_GAP_DB, DEFAULT_SPREAD_DB, BlerCurves, effective_snr
from .mcs import NR_MCS_TABLES, McsTable, nr_tbs

__all__ = ["LteRate", "NrRate", "NrOptions", "LteOptions", "RATES", "RateModel", "Sent", "ShannonRate"]


class Sent(NamedTuple):
    """An upload's bits delivered by an MCS rate: ``on_air_bits`` (the transport blocks' bits times
    their transmissions: the air it used, at the nominal rate), ``ok`` (every block decoded),
    ``mcs`` and ``transmissions`` (of transport blocks, HARQ and ARQ included)."""

    on_air_bits: float
    ok: bool
    mcs: int
    transmissions: int


class RateModel:
    """The contract of a ``link.rate`` part. Required: ``from_link`` and ``rate_bps``;
    ``send`` for a rate whose uploads can fail or be retransmitted (``delivers_at_once`` False).

    ``rate_bps(snr, bandwidth_hz)``: the nominal rate (first transmissions only) of a channel of
    ``bandwidth_hz`` at linear SINR ``snr`` (arrays broadcast) that the schedulers price and a
    sync round's closed form uses; ``send(bits, snr, bandwidth_hz, rng)``: one upload, as a
    :class:`Sent`."""

    Options: ClassVar[type | None] = None
    delivers_at_once: ClassVar[bool] = True
    """True: an upload always arrives, in bits / rate_bps seconds (Shannon); False: ``send`` decides."""

    @classmethod
    def from_link(cls, link, options) -> "RateModel":
        """Build the rate for the scenario's [link] table ``link`` (a cell's band, with several)."""
        raise NotImplementedError(f"{cls.__name__}.from_link")

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this rate."""

    def rate_bps(self, snr, bandwidth_hz: float):
        raise NotImplementedError(f"{type(self).__name__}.rate_bps")

    def send(self, bits: float, snr: float, bandwidth_hz: float, rng: np.random.Generator,
             max_rounds: int = 1) -> Sent:
        """One upload of ``bits`` at ``snr``: what it took (see :class:`Sent`; default: delivered at once)."""
        return Sent(float(bits), True, -1, 1)

    def effective_snr(self, snrs, axis: int = -1):
        """The single SINR standing for a transmission over ``snrs`` (resource blocks of unequal gain)."""
        return np.mean(snrs, axis=axis)


class ShannonRate(RateModel):
    """B log2(1 + SINR): the capacity, every upload delivered (the link's own code computes it)."""

    Options = NoOptions

    @classmethod
    def from_link(cls, link, options) -> "ShannonRate":
        return cls()

    def rate_bps(self, snr, bandwidth_hz: float):
        return bandwidth_hz * np.log1p(snr) / np.log(2.0)


@dataclass(frozen=True)
class NrOptions:
    """Options of the NR link abstraction (``link.rate = "nr"``)."""

    mcs_table: str = option("qam64", choices=tuple(NR_MCS_TABLES), doc="TS 38.214 Table 5.1.3.1-1 (qam64) or "
                            "5.1.3.1-2 (qam256)")
    bler_target: float = option(0.1, gt=0, lt=1, doc="the MCS is the highest whose first-transmission BLER is at "
                                "most this")
    harq_max_tx: int = option(4, ge=1, doc="transmissions of a transport block (chase combining) before ARQ")
    overhead: float = option(0.2, ge=0, lt=1, doc="share of a slot's resource elements lost to DMRS, PUCCH, SRS and "
                             "other control (TS 38.214 N_oh; one DMRS symbol of 14 is 7 %)")
    subcarrier_spacing_khz: int = option(30, choices=(15, 30, 60, 120), doc="numerology: slot = 1 ms / (SCS / 15)")
    bler_gap_db: float = option(DEFAULT_GAP_DB, doc="SINR above the BICM limit at which a block decodes half the time")
    bler_spread_db: float = option(DEFAULT_SPREAD_DB, gt=0, doc="spread of the BLER waterfall in dB")
    rb_adaptation: bool = option(True, doc="a power-limited device sends on fewer resource blocks where that carries "
                                 "more (its power concentrated on them); false: always on all it is given")


NR_RB_TABLE = {15: {5e6: 25, 10e6: 52, 15e6: 79, 20e6: 106, 25e6: 133, 30e6: 160, 40e6: 216, 50e6: 270},
               30: {5e6: 11, 10e6: 24, 15e6: 38, 20e6: 51, 25e6: 65, 30e6: 78, 40e6: 106, 50e6: 133, 60e6: 162,
                    80e6: 217, 100e6: 273},
               60: {10e6: 11, 15e6: 18, 20e6: 24, 25e6: 31, 30e6: 38, 40e6: 51, 50e6: 65, 60e6: 79, 80e6: 107,
                    100e6: 135},
               120: {50e6: 32, 100e6: 66, 200e6: 132, 400e6: 264}}
"""TS 38.101-1 Table 5.3.2-1 and TS 38.101-2 Table 5.3.2-1: resource blocks per channel bandwidth and SCS."""


class _McsRate(RateModel):
    """What NR and LTE share: an MCS table, its BLER curves, transport blocks per slot and HARQ."""

    delivers_at_once = False

    def __init__(self, table: McsTable, bler_target: float, harq_max_tx: int, slot_s: float, rb_hz: float,
                 cell_bandwidth_hz: float, cell_rbs: int, gap_db: float, spread_db: float, rb_adaptation: bool = True):
        self.table, self.bler_target, self.harq_max_tx = table, float(bler_target), int(harq_max_tx)
        self.rb_adaptation = bool(rb_adaptation)
        self.slot_s, self.rb_hz = float(slot_s), float(rb_hz)
        self.curves = BlerCurves(table.qm, table.rate, gap_db, spread_db)
        self.thresholds_db = self.curves.threshold_db(self.bler_target)
        # the cell's band has cell_rbs resource blocks; a share of it (FDMA, OFDMA) has its part of them
        self.rbs_per_hz = cell_rbs / cell_bandwidth_hz
        self._tbs: dict[int, np.ndarray] = {}

    def resource_blocks(self, bandwidth_hz: float) -> int:
        """The resource blocks of a channel of ``bandwidth_hz`` (the cell's band, or a share of it); a
        share of less than one block has one block for part of the slots (``time_share``)."""
        blocks = bandwidth_hz * self.rbs_per_hz
        return int(math.floor(blocks + 1e-9)) if blocks >= 1 - 1e-9 else (1 if blocks > 0 else 0)

    def time_share(self, bandwidth_hz: float) -> float:
        """The share of slots a channel of less than one resource block has its block in (1 otherwise)."""
        return min(1.0, bandwidth_hz * self.rbs_per_hz + 1e-9)

    def mcs(self, snr) -> np.ndarray:
        """The highest MCS whose BLER at ``snr`` is at most the target (-1 where none is)."""
        snr_db = 10.0 * np.log10(np.maximum(np.asarray(snr, dtype=float), 1e-30))
        return np.searchsorted(self.thresholds_db, snr_db, side="right") - 1

    def _block_bits(self, mcs: int, n_rb: int) -> int:
        """The transport block of ``mcs`` over ``n_rb`` resource blocks, in bits."""
        raise NotImplementedError

    def _sizes(self, n_rb: int) -> np.ndarray:
        """The transport block of every MCS (rows) over 1..n_rb resource blocks (columns), cached."""
        table = self._tbs.get(n_rb)
        if table is None:
            table = self._tbs[n_rb] = np.array([[self._block_bits(m, n) for n in range(1, n_rb + 1)]
                                                for m in range(len(self.table))], dtype=float)
        return table

    def allocation(self, snr, bandwidth_hz: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(MCS, resource blocks, transport block bits) of each SINR ``snr`` of a transmission over the
        whole channel of ``bandwidth_hz``: a power-limited device concentrates its power on n of the
        N blocks (SINR x N / n on each) where that carries more, as an uplink scheduler does with
        the device's power headroom; where no n reaches MCS 0's target, one block at MCS 0."""
        n_rb = self.resource_blocks(bandwidth_hz)
        snr = np.atleast_1d(np.asarray(snr, dtype=float))
        if n_rb == 0:
            zero = np.zeros(snr.shape, dtype=np.int64)
            return zero, zero, np.zeros(snr.shape)
        n = np.arange(1, n_rb + 1) if self.rb_adaptation else np.array([n_rb])
        table = self._sizes(n_rb)
        mcs = self.mcs(snr[:, None] * (n_rb / n)[None, :])  # (devices, n)
        sizes = np.where(mcs >= 0, table[np.maximum(mcs, 0), n[None, :] - 1], 0.0)
        best = np.argmax(sizes, axis=1)  # the fewest blocks among equals
        rows = np.arange(snr.size)
        size = sizes[rows, best]
        return np.maximum(mcs[rows, best], 0), n[best], np.where(size > 0, size, table[0, 0])

    def rate_bps(self, snr, bandwidth_hz: float):
        """One transport block per slot (per slot it has, below one resource block), at each SINR's allocation."""
        size = self.allocation(snr, bandwidth_hz)[2] * self.time_share(bandwidth_hz) / self.slot_s
        return size.reshape(np.shape(snr)) if np.ndim(snr) else float(size[0])

    def send(self, bits: float, snr: float, bandwidth_hz: float, rng: np.random.Generator,
             max_rounds: int = 1) -> Sent:
        """The upload's transport blocks through HARQ and ARQ (module docstring)."""
        if self.resource_blocks(bandwidth_hz) == 0:
            return Sent(math.inf, False, -1, 0)
        mcs, n, size = (a[0].item() for a in self.allocation(snr, bandwidth_hz))
        snr_rb = snr * self.resource_blocks(bandwidth_hz) / n  # the SINR on each of its blocks
        pending = max(1, math.ceil(float(bits) / size))
        residual = [1.0] + [float(self.curves.bler(mcs, k * snr_rb)) for k in range(1, self.harq_max_tx + 1)]
        fails = [residual[k] / residual[k - 1] if residual[k - 1] > 0 else 0.0 for k in range(1, len(residual))]
        transmissions = 0
        for _ in range(max_rounds):
            for p_fail in fails:
                transmissions += pending
                pending = int(rng.binomial(pending, min(p_fail, 1.0)))
                if pending == 0:
                    return Sent(float(transmissions * size), True, mcs, transmissions)
        return Sent(float(transmissions * size), False, mcs, transmissions)

    def effective_snr(self, snrs, axis: int = -1):
        """MIESM over resource blocks, at the modulation of the MCS the mean SINR would take."""
        qm = int(self.table.qm[max(int(np.max(self.mcs(np.mean(snrs)))), 0)])
        return effective_snr(snrs, qm, axis)


def _cell_rbs(table: dict, bandwidth_hz: float, rb_hz: float, utilisation: float) -> int:
    """The resource blocks of a standard channel bandwidth, else of the band at ``utilisation``."""
    for band, rbs in table.items():
        if abs(band - bandwidth_hz) < 1.0:
            return rbs
    return int(math.floor(bandwidth_hz * utilisation / rb_hz))


class NrRate(_McsRate):
    """NR PUSCH (module docstring): TS 38.214 tables, one transport block per slot of 14 symbols."""

    Options = NrOptions

    def __init__(self, bandwidth_hz: float, options: NrOptions = NrOptions()):
        scs = options.subcarrier_spacing_khz * 1e3
        rb_hz = 12 * scs
        cell_rbs = _cell_rbs(NR_RB_TABLE[options.subcarrier_spacing_khz], bandwidth_hz, rb_hz, 0.92)
        self.re_per_rb = int(round(12 * 14 * (1.0 - options.overhead)))
        super().__init__(NR_MCS_TABLES[options.mcs_table], options.bler_target, options.harq_max_tx,
                         1e-3 * 15e3 / scs, rb_hz, bandwidth_hz, cell_rbs, options.bler_gap_db, options.bler_spread_db,
                         options.rb_adaptation)

    @classmethod
    def from_link(cls, link, options: NrOptions) -> "NrRate":
        return cls(link.bandwidth_hz, options)

    @classmethod
    def check(cls, scenario, options: NrOptions) -> None:
        check_mcs_rate(scenario, f"link.rate = {scenario.link.rate!r}")
        if scenario.link.bandwidth_hz * 0.92 < 12 * options.subcarrier_spacing_khz * 1e3:
            raise ConfigError(f"link.bandwidth_hz = {scenario.link.bandwidth_hz:g}: narrower than one NR resource "
                              f"block at {options.subcarrier_spacing_khz} kHz")

    def _block_bits(self, mcs: int, n_rb: int) -> int:
        return nr_tbs(n_rb, int(self.table.qm[mcs]), float(self.table.rate[mcs]), self.re_per_rb)


@dataclass(frozen=True)
class LteOptions:
    """Options of the LTE link abstraction (``link.rate = "lte"``)."""

    bler_target: float = option(0.1, gt=0, lt=1, doc="the MCS is the highest whose first-transmission BLER is at "
                                "most this")
    harq_max_tx: int = option(4, ge=1, doc="transmissions of a transport block (chase combining) before ARQ")
    overhead: float = option(0.0, ge=0, lt=1, doc="share of the resource blocks kept for PUCCH and PRACH (the TBS "
                             "table already leaves the DMRS out)")
    bler_gap_db: float | None = option(None, doc="SINR above the BICM limit at which a block decodes half the time "
                                       "(default: per modulation, LTE_GAP_DB, fitted to ns-3's LTE error model)")
    bler_spread_db: float = option(DEFAULT_SPREAD_DB, gt=0, doc="spread of the BLER waterfall in dB")
    rb_adaptation: bool = option(True, doc="a power-limited device sends on fewer resource blocks where that carries "
                                 "more (its power concentrated on them); false: always on all it is given")
    mcs_rule: str = option("bler", choices=("bler", "piro"), doc="bler: the highest MCS meeting bler_target; piro: "
                           "ns-3's uplink rule (Piro et al. 2011, a 5e-5 bit error rate gap), for comparisons with ns-3")


LTE_GAP_DB = {2: 0.45, 4: 1.94, 6: 3.85}
"""The SINR above the BICM limit at which an LTE transport block decodes half the time, per modulation
order (QPSK, 16-QAM, 64-QAM): with DEFAULT_SPREAD_DB, the least-squares fit to ns-3's LTE MIESM curves
(turbo code, Mezzavilla et al. 2012) at their 50, 10 and 1 % points over the 24 uplink MCS whose
modulation ns-3 takes from the standard, 25 PRB: residual 0.39 dB RMS, 0.98 dB at most
(``python benchmarks/ns3_check.py bler``)."""

LTE_RB_TABLE = {1.4e6: 6, 3e6: 15, 5e6: 25, 10e6: 50, 15e6: 75, 20e6: 100}
"""TS 36.101 Table 5.6-1: resource blocks per channel bandwidth."""


class LteRate(_McsRate):
    """LTE PUSCH (module docstring): TS 36.213 Tables 8.6.1-1 and 7.1.7.2.1-1, 1 ms subframes."""

    Options = LteOptions

    def __init__(self, bandwidth_hz: float, options: LteOptions = LteOptions()):
        from .lte_tables import UL_MCS_ITBS, UL_MCS_QM

        cell_rbs = _cell_rbs(LTE_RB_TABLE, bandwidth_hz, 180e3, 0.9)
        cell_rbs = int(math.floor(cell_rbs * (1.0 - options.overhead) + 1e-9))
        self.itbs = np.asarray(UL_MCS_ITBS)
        qm = np.asarray(UL_MCS_QM)
        # the code rate an MCS runs at: its TBS (+ CRC) over the coded bits of 12 x 12 data symbols per RB pair
        rate = np.array([(self._table_bits(m, 50) + 24) / (50 * 144 * q) for m, q in enumerate(qm.tolist())])
        table = McsTable("lte_ul", [(int(q), r * 1024.0) for q, r in zip(qm.tolist(), rate.tolist())])
        gap = LTE_GAP_DB if options.bler_gap_db is None else options.bler_gap_db
        super().__init__(table, options.bler_target, options.harq_max_tx, 1e-3, 180e3, bandwidth_hz, cell_rbs,
                         gap, options.bler_spread_db, options.rb_adaptation)
        self.mcs_rule = options.mcs_rule

    def mcs(self, snr) -> np.ndarray:
        """The MCS of ``mcs_rule``: the BLER target's, or ns-3's (Piro et al.) rule (-1: none)."""
        if self.mcs_rule == "piro":
            from .lte_tables import piro_mcs

            return piro_mcs(snr)
        return super().mcs(snr)

    @classmethod
    def from_link(cls, link, options: LteOptions) -> "LteRate":
        return cls(link.bandwidth_hz, options)

    @classmethod
    def check(cls, scenario, options: LteOptions) -> None:
        check_mcs_rate(scenario, "link.rate = 'lte'")
        if scenario.link.bandwidth_hz < 1.4e6 or scenario.link.bandwidth_hz > 20e6:
            raise ConfigError(f"link.bandwidth_hz = {scenario.link.bandwidth_hz:g}: LTE carriers are 1.4 to 20 MHz")

    def _table_bits(self, mcs: int, n_rb: int) -> int:
        from .lte_tables import tbs_bits

        return int(tbs_bits(mcs, min(int(n_rb), 110)))

    def _block_bits(self, mcs: int, n_rb: int) -> int:
        return self._table_bits(mcs, n_rb)


def check_mcs_rate(scenario, field: str) -> None:
    """What an MCS rate cannot be combined with: the link's own error models and fixed rate, and
    access schemes without resource units of their own (random access, over-the-air sums)."""
    link = scenario.link
    access = scenario.part("access")
    if getattr(access, "contention", False) or getattr(access, "over_the_air", False):
        raise ConfigError(f"{field}: needs an access scheme that gives each upload resource units (tdma, "
                          f"tdma_slotted, fdma, ofdma, dedicated); link.access = {link.access!r} is not modelled "
                          "with transport blocks")
    if link.errors != "none":
        raise ConfigError(f"link.errors = {link.errors!r}: {field} draws its own transport-block errors "
                          "(BLER curves and HARQ); leave link.errors at 'none'")
    if link.rate_bps is not None:
        raise ConfigError(f"link.rate_bps = {link.rate_bps:g}: {field} chooses its MCS from the SINR; "
                          "a fixed rate is link.rate = 'shannon' with link.rate_bps")


RATES = Registry("rate", "wirelessfl.radio.rates:RateModel", {
    "shannon": "wirelessfl.radio.rates:ShannonRate",
    "nr": "wirelessfl.radio.rates:NrRate",
    "lte": "wirelessfl.radio.rates:LteRate",
})
"""Built-in link abstractions by the name ``link.rate`` gives them."""
