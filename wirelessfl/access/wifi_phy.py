"""IEEE 802.11 PHY numbers and frame durations (numpy only): per standard its timing (slot, SIFS,
DIFS, contention windows), its PPDU format (preamble and headers, OFDM symbol, service and tail
bits), its MCS table for one spatial stream on a 20 MHz channel, and the durations of the frames of
one DCF exchange (DATA or A-MPDU, ACK or BlockAck, RTS, CTS).

Sources: IEEE Std 802.11-2020, Clause 17 (OFDM, "80211a"), Clause 19 (HT, "80211n", HT-mixed
format), Clause 21 (VHT, "80211ac"); IEEE Std 802.11ax-2021, Clause 27 (HE, "80211ax", HE SU PPDU).
Each clause's "PHY characteristics" table gives aSlotTime, aSIFSTime, aCWmin, aCWmax and (HT, VHT,
HE) aPPDUMaxTime; its PPDU format subclauses the preamble fields and the OFDM symbol; its MCS
("rate-dependent parameters") tables the data bits per symbol; its "receiver minimum input
sensitivity" table (11a: Table 17-18; HT: Table 19-23; VHT: Table 21-25; HE: Clause 27's) the
sensitivity per MCS. Clause 10 (MAC) gives DIFS (10.3.2.3.5), EIFS (10.3.2.3.7), the ACK timeout
(10.3.2.9) and the control-response rate (10.6.6.5); the EDCA defaults (AIFSN, CW of AC_BE) are
Clause 9's default EDCA parameter set table. Subclause and table numbers are those of 802.11-2020
as quoted here; check them against your copy.

================  ==========  ==========  ===========  ===========  ==================================
number            80211a      80211n      80211ac      80211ax      from
================  ==========  ==========  ===========  ===========  ==================================
aSlotTime         9 us        9 us        9 us         9 us         PHY characteristics (5 GHz, short
                                                                    slot)
aSIFSTime         16 us       16 us       16 us        16 us        PHY characteristics
DIFS              34 us       34 us       34 us        34 us        10.3.2.3.5: SIFS + 2 slots
AIFS[AC_BE]       43 us       43 us       43 us        43 us        default EDCA parameter set: AIFSN
                                                                    3, SIFS + 3 slots
aCWmin, aCWmax    15, 1023    15, 1023    15, 1023     15, 1023     PHY characteristics
preamble+headers  20 us       36 us       40 us        44 us        L-STF 8 + L-LTF 8 + L-SIG 4; HT:
                                                                    + HT-SIG 8 + HT-STF 4 + HT-LTF 4;
                                                                    VHT: + VHT-SIG-A 8 + VHT-STF 4 +
                                                                    VHT-LTF 4 + VHT-SIG-B 4; HE: +
                                                                    RL-SIG 4 + HE-SIG-A 8 + HE-STF 4
                                                                    + one HE-LTF 8 (as ns-3 times it)
OFDM symbol       4 us        4 us        4 us         13.6 us      3.2 us (HE 12.8 us) + 0.8 us GI
service, tail     16, 6 bits  16, 6       16, 6        16, 6        SERVICE field; one BCC encoder's
                                                                    tail (LDPC, without one, left out)
MAC overhead      28 bytes    30          30           30           data header 24 bytes (QoS data,
                                                                    11n on: 26) + FCS 4 (9.3.2.1)
A-MPDU limit      none        65,535 B    1,048,575 B  6,500,631 B  Maximum A-MPDU Length Exponent
                                                                    (HT, VHT capabilities); HE:
                                                                    aPSDUMaxLength
MPDUs an A-MPDU   1           64          64           256          the BlockAck window (HE: 256)
aPPDUMaxTime      --          5.484 ms    5.484 ms     5.484 ms     PHY characteristics
================  ==========  ==========  ===========  ===========  ==================================

MCS tables (one spatial stream, 20 MHz, 0.8 us guard interval): data bits per OFDM symbol N_DBPS
24 ... 216 for 11a (6 ... 54 Mb/s); HT MCS 0-7: 26 ... 260 (6.5 ... 65 Mb/s); VHT MCS 0-8: the
same and 312 (78 Mb/s; MCS 9 is not valid for one stream at 20 MHz); HE MCS 0-11 on the 242-tone
RU: 117 ... 1950 bits per 13.6 us symbol (8.6 ... 143.4 Mb/s).

Minimum SNR per MCS: the standard's receiver minimum input sensitivity for 20 MHz (11a: -82 ... -65
dBm; HT and VHT: -82 ... -64, VHT MCS 8 -59; HE: -82 ... -52) converted to an SNR against the
noise floor -174 dBm/Hz + 10 log10(20 MHz) + a 10 dB noise figure = -91.0 dBm: e.g. 54 Mb/s needs
-65 - (-91.0) = 26.0 dB. The sensitivity is where the PER reaches 10 % (1000-byte PSDUs for 11a,
4096-byte for HT, VHT and HE), so this is a conservative rate choice, not an error model.

Control frames (ACK, BlockAck, RTS, CTS) go in the non-HT (Clause 17) format, 20 us preamble and
4 us symbols, at the control rate: the highest rate of the basic rate set {6, 12, 24} Mb/s (the
mandatory OFDM rates) not above the data MCS's non-HT reference rate (10.6.6.5). For 54 Mb/s
data that is 24 Mb/s; for HE MCS 2 (QPSK 3/4, reference 18 Mb/s) 12 Mb/s, as ns-3 has it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["ACK_BYTES", "BASIC_RATES_BPS", "BLOCK_ACK_BYTES", "CTS_BYTES", "FrameExchange", "MAX_MSDU_BYTES", "Mcs",
           "NOISE_FLOOR_DBM", "RTS_BYTES", "STANDARDS", "WifiPhy", "ack_duration_s", "ack_timeout_s", "best_mcs",
           "control_duration_s", "control_rate_bps", "cts_duration_s", "data_duration_s", "eifs_s", "exchange",
           "max_mpdus", "mcs_for_rate", "phy", "ppdu_duration_s", "psdu_bytes", "rts_duration_s"]

SERVICE_BITS = 16  # Clause 17's SERVICE field (HT, VHT, HE keep it)
TAIL_BITS = 6  # the tail of one BCC encoder
LEGACY_PREAMBLE_S = 20e-6  # non-HT PPDU: L-STF 8 us + L-LTF 8 us + SIGNAL 4 us (Clause 17)
LEGACY_SYMBOL_S = 4e-6  # non-HT OFDM symbol with its 0.8 us guard interval
BASIC_RATES_BPS = (6e6, 12e6, 24e6)  # Clause 17's mandatory rates: the basic rate set assumed
LOWEST_RATE_BPS = 6e6
ACK_BYTES = 14  # 9.3.1.4 Ack: frame control, duration, RA, FCS
BLOCK_ACK_BYTES = 32  # 9.3.1.8 compressed BlockAck with a 64-bit bitmap
BLOCK_ACK_256_BYTES = 56  # the same with a 256-bit bitmap (HE, more than 64 MPDUs acknowledged)
RTS_BYTES = 20  # 9.3.1.2
CTS_BYTES = 14  # 9.3.1.3
MPDU_DELIMITER_BYTES = 4  # 9.7.1 A-MPDU subframe delimiter; each subframe but the last padded to 4 bytes
MAX_MSDU_BYTES = 2304  # the largest MSDU one MPDU carries (without A-MSDU), Clause 9
CHANNEL_HZ = 20e6
NOISE_FIGURE_DB = 10.0
NOISE_FLOOR_DBM = -174.0 + 10.0 * math.log10(CHANNEL_HZ) + NOISE_FIGURE_DB
"""The noise a 20 MHz receiver with a 10 dB noise figure sees: -91.0 dBm."""


@dataclass(frozen=True)
class Mcs:
    """One modulation and coding scheme for one spatial stream on 20 MHz: its index, data bits per
    OFDM symbol (N_DBPS), data rate, non-HT reference rate (which picks the control rate) and the
    standard's minimum receiver sensitivity (and so its minimum SNR, ``min_snr_db``)."""

    index: int
    bits_per_symbol: int
    rate_bps: float
    reference_rate_bps: float
    sensitivity_dbm: float

    @property
    def min_snr_db(self) -> float:
        """The SNR at the minimum sensitivity against a -91.0 dBm noise floor (module docstring)."""
        return self.sensitivity_dbm - NOISE_FLOOR_DBM


@dataclass(frozen=True)
class WifiPhy:
    """The numbers of one 802.11 PHY that the DCF needs (the module docstring gives the sources)."""

    name: str
    clause: str
    slot_s: float
    sifs_s: float
    cw_min: int
    cw_max: int
    preamble_s: float
    symbol_s: float
    mac_overhead_bytes: int
    mcs: tuple[Mcs, ...]
    max_ampdu_bytes: int  # 0: no aggregation (one MPDU a PPDU)
    max_psdu_bytes: int
    ba_window: int  # MPDUs one A-MPDU may carry
    max_ppdu_s: float  # aPPDUMaxTime (inf: none beyond the PSDU length)
    single_mpdu_delimited: bool  # VHT and HE send even one MPDU as an A-MPDU (with its delimiter)

    @property
    def difs_s(self) -> float:
        """DIFS = SIFS + 2 slots (10.3.2.3.5)."""
        return self.sifs_s + 2 * self.slot_s

    @property
    def aifs_be_s(self) -> float:
        """AIFS[AC_BE] = SIFS + 3 slots (the default EDCA AIFSN of best effort, 3)."""
        return self.sifs_s + 3 * self.slot_s

    @property
    def aggregates(self) -> bool:
        """Whether a PPDU may carry several MPDUs (an A-MPDU)."""
        return self.max_ampdu_bytes > 0

    @property
    def max_backoff_stage(self) -> int:
        """m: how often the contention window doubles from CWmin + 1 to CWmax + 1."""
        return int(round(math.log2((self.cw_max + 1) / (self.cw_min + 1))))

    @property
    def rates_bps(self) -> tuple[float, ...]:
        """The data rates of the MCS table."""
        return tuple(m.rate_bps for m in self.mcs)


def _table(symbol_s: float, bits_per_symbol, reference_mbps, sensitivity_dbm) -> tuple[Mcs, ...]:
    return tuple(Mcs(i, n, n / symbol_s, ref * 1e6, sens)
                 for i, (n, ref, sens) in enumerate(zip(bits_per_symbol, reference_mbps, sensitivity_dbm)))


_HT_DBPS = (26, 52, 78, 104, 156, 208, 234, 260)
_HT_REF = (6, 12, 18, 24, 36, 48, 54, 54)  # BPSK 1/2, QPSK 1/2, QPSK 3/4, 16-QAM 1/2, 3/4, 64-QAM 2/3, 3/4, 5/6
_HT_SENS = (-82, -79, -77, -74, -70, -66, -65, -64)

STANDARDS: dict[str, WifiPhy] = {
    "80211a": WifiPhy(
        "80211a", "IEEE 802.11-2020 Clause 17 (OFDM)", 9e-6, 16e-6, 15, 1023, 20e-6, 4e-6, 28,
        _table(4e-6, (24, 36, 48, 72, 96, 144, 192, 216), (6, 9, 12, 18, 24, 36, 48, 54),
               (-82, -81, -79, -77, -74, -70, -66, -65)),
        max_ampdu_bytes=0, max_psdu_bytes=4095, ba_window=1, max_ppdu_s=math.inf, single_mpdu_delimited=False),
    "80211n": WifiPhy(
        "80211n", "IEEE 802.11-2020 Clause 19 (HT, HT-mixed format)", 9e-6, 16e-6, 15, 1023, 36e-6, 4e-6, 30,
        _table(4e-6, _HT_DBPS, _HT_REF, _HT_SENS),
        max_ampdu_bytes=65_535, max_psdu_bytes=65_535, ba_window=64, max_ppdu_s=5.484e-3,
        single_mpdu_delimited=False),
    "80211ac": WifiPhy(
        "80211ac", "IEEE 802.11-2020 Clause 21 (VHT)", 9e-6, 16e-6, 15, 1023, 40e-6, 4e-6, 30,
        _table(4e-6, _HT_DBPS + (312,), _HT_REF + (54,), _HT_SENS + (-59,)),
        max_ampdu_bytes=1_048_575, max_psdu_bytes=4_692_480, ba_window=64, max_ppdu_s=5.484e-3,
        single_mpdu_delimited=True),
    "80211ax": WifiPhy(
        "80211ax", "IEEE 802.11ax-2021 Clause 27 (HE SU)", 9e-6, 16e-6, 15, 1023, 44e-6, 13.6e-6, 30,
        _table(13.6e-6, (117, 234, 351, 468, 702, 936, 1053, 1170, 1404, 1560, 1755, 1950),
               (6, 12, 18, 24, 36, 48, 54, 54, 54, 54, 54, 54),
               (-82, -79, -77, -74, -70, -66, -65, -64, -59, -57, -54, -52)),
        max_ampdu_bytes=6_500_631, max_psdu_bytes=6_500_631, ba_window=256, max_ppdu_s=5.484e-3,
        single_mpdu_delimited=True),
}
"""The four PHYs by the name ``link.wifi_standard`` gives them."""


def phy(standard: str) -> WifiPhy:
    """The PHY of ``standard`` ("80211a", "80211n", "80211ac" or "80211ax")."""
    try:
        return STANDARDS[standard]
    except KeyError:
        raise ValueError(f"unknown 802.11 standard {standard!r}; one of {', '.join(STANDARDS)}") from None


def mcs_for_rate(p: WifiPhy, rate_bps: float) -> Mcs | None:
    """The MCS of ``p`` whose data rate is ``rate_bps`` (within 0.1 %), or None."""
    for m in p.mcs:
        if abs(m.rate_bps - rate_bps) <= 1e-3 * m.rate_bps:
            return m
    return None


def best_mcs(p: WifiPhy, snr: float) -> Mcs | None:
    """The fastest MCS whose minimum SNR ``snr`` (linear) meets, or None below the slowest's."""
    if not snr > 0:
        return None
    snr_db = 10.0 * math.log10(snr)
    fit = [m for m in p.mcs if m.min_snr_db <= snr_db]
    return fit[-1] if fit else None


def control_rate_bps(mcs: Mcs) -> float:
    """The rate of the control frames answering (or protecting) a frame sent at ``mcs``: the highest
    basic rate not above its non-HT reference rate (10.6.6.5)."""
    return max(r for r in BASIC_RATES_BPS if r <= mcs.reference_rate_bps)


def _symbols(bits: int, bits_per_symbol: float) -> int:
    """OFDM symbols carrying SERVICE + ``bits`` + tail."""
    return math.ceil((SERVICE_BITS + bits + TAIL_BITS) / bits_per_symbol - 1e-9)


def control_duration_s(frame_bytes: int, rate_bps: float) -> float:
    """A non-HT PPDU of ``frame_bytes`` at ``rate_bps``: 20 us + 4 us per symbol (Clause 17's TXTIME)."""
    return LEGACY_PREAMBLE_S + LEGACY_SYMBOL_S * _symbols(8 * frame_bytes, rate_bps * LEGACY_SYMBOL_S)


def ppdu_duration_s(p: WifiPhy, psdu: int, mcs: Mcs) -> float:
    """A PPDU carrying a PSDU of ``psdu`` bytes at ``mcs``: preamble and headers + whole OFDM symbols
    of SERVICE + 8 psdu + tail bits (each clause's TXTIME; HE without its packet extension)."""
    return p.preamble_s + p.symbol_s * _symbols(8 * psdu, mcs.bits_per_symbol)


def psdu_bytes(p: WifiPhy, mpdus: int, payload_bytes: int, last_payload_bytes: int | None = None) -> int:
    """The PSDU of ``mpdus`` MPDUs of ``payload_bytes`` each (the last one ``last_payload_bytes``),
    each with the MAC header and FCS; in an A-MPDU each in a subframe: a 4-byte delimiter, and every
    subframe but the last padded to a multiple of 4 bytes (9.7.1)."""
    last = payload_bytes if last_payload_bytes is None else last_payload_bytes
    full_mpdu, last_mpdu = payload_bytes + p.mac_overhead_bytes, last + p.mac_overhead_bytes
    if mpdus == 1 and not p.single_mpdu_delimited:
        return last_mpdu
    padded = -(-(MPDU_DELIMITER_BYTES + full_mpdu) // 4) * 4
    return (mpdus - 1) * padded + MPDU_DELIMITER_BYTES + last_mpdu


def _mpdu_bytes(payload_bits: float, mpdu_bits: int) -> tuple[int, int, int]:
    """(MPDUs, bytes of a full one, bytes of the last one) carrying ``payload_bits``."""
    mpdus = max(math.ceil(payload_bits / mpdu_bits - 1e-9), 1)
    last_bits = payload_bits - (mpdus - 1) * mpdu_bits
    return mpdus, math.ceil(mpdu_bits / 8), math.ceil(last_bits / 8 - 1e-9)


def data_duration_s(p: WifiPhy, mcs: Mcs, payload_bits: float, mpdu_bits: int) -> float:
    """The DATA PPDU carrying ``payload_bits`` in MPDUs of ``mpdu_bits`` (the last one shorter)."""
    mpdus, full, last = _mpdu_bytes(payload_bits, mpdu_bits)
    return ppdu_duration_s(p, psdu_bytes(p, mpdus, full, last), mcs)


def ack_duration_s(mcs: Mcs, mpdus: int) -> float:
    """The answer to a frame of ``mpdus`` MPDUs sent at ``mcs``: an ACK for one, a compressed
    BlockAck (64-bit bitmap; 256-bit beyond 64 MPDUs) for several, at the control rate."""
    size = ACK_BYTES if mpdus == 1 else BLOCK_ACK_BYTES if mpdus <= 64 else BLOCK_ACK_256_BYTES
    return control_duration_s(size, control_rate_bps(mcs))


def rts_duration_s(mcs: Mcs) -> float:
    """An RTS protecting a frame at ``mcs`` (at the control rate)."""
    return control_duration_s(RTS_BYTES, control_rate_bps(mcs))


def cts_duration_s(mcs: Mcs) -> float:
    """The CTS answering it."""
    return control_duration_s(CTS_BYTES, control_rate_bps(mcs))


def ack_timeout_s(p: WifiPhy) -> float:
    """How long a sender waits for the ACK: SIFS + slot + the ACK's preamble and SIGNAL (20 us), as
    ns-3 sets it (10.3.2.9 gives aSIFSTime + aSlotTime + aRxPHYStartDelay). Not on the DCF's
    timeline here (see ``eifs_s``); for reference and for a sender's own accounting."""
    return p.sifs_s + p.slot_s + LEGACY_PREAMBLE_S


def eifs_s(p: WifiPhy, ifs_s: float) -> float:
    """EIFS: SIFS + an ACK at the lowest basic rate (6 Mb/s) + DIFS (or AIFS), what a station waits
    after a frame it could not decode, e.g. a collision (10.3.2.3.7)."""
    return p.sifs_s + control_duration_s(ACK_BYTES, LOWEST_RATE_BPS) + ifs_s


@lru_cache(maxsize=256)
def max_mpdus(p: WifiPhy, mcs: Mcs, mpdu_bits: int, ampdu_bytes: int | None = None) -> int:
    """The most MPDUs of ``mpdu_bits`` one PPDU at ``mcs`` carries: within the A-MPDU limit
    (``ampdu_bytes``, default the standard's), the BlockAck window and aPPDUMaxTime; 1 without
    aggregation."""
    if not p.aggregates:
        return 1
    limit = p.max_ampdu_bytes if ampdu_bytes is None else ampdu_bytes
    full = math.ceil(mpdu_bits / 8)
    best = 1
    for k in range(2, p.ba_window + 1):
        size = psdu_bytes(p, k, full)
        if size > limit or ppdu_duration_s(p, size, mcs) > p.max_ppdu_s:
            break
        best = k
    return best


@dataclass(frozen=True)
class FrameExchange:
    """One frame's exchange in the DCF: the payload it carries, its MPDUs, and the durations of its
    DATA PPDU, its ACK (or BlockAck) and, with RTS/CTS, of the RTS and CTS (0 without)."""

    payload_bits: float
    mpdus: int
    data_s: float
    ack_s: float
    rts_s: float = 0.0
    cts_s: float = 0.0

    def attempt_s(self) -> float:
        """What the sender puts on the air when its attempt collides: the RTS, or the whole DATA."""
        return self.rts_s if self.rts_s > 0 else self.data_s

    def on_air_s(self) -> float:
        """What the sender puts on the air in a successful exchange: RTS (if any) and DATA."""
        return self.rts_s + self.data_s

    def until_ack_s(self, sifs_s: float) -> float:
        """From the exchange's first bit to the ACK's last: [RTS + SIFS + CTS + SIFS] + DATA + SIFS + ACK."""
        protect = self.rts_s + sifs_s + self.cts_s + sifs_s if self.rts_s > 0 else 0.0
        return protect + self.data_s + sifs_s + self.ack_s


def exchange(p: WifiPhy, mcs: Mcs, payload_bits: float, mpdu_bits: int, rts_cts: bool) -> FrameExchange:
    """The exchange of a frame carrying ``payload_bits`` at ``mcs`` (one PPDU: an A-MPDU where the
    payload needs several MPDUs)."""
    mpdus, _, _ = _mpdu_bytes(payload_bits, mpdu_bits)
    data_s = data_duration_s(p, mcs, payload_bits, mpdu_bits)
    return FrameExchange(payload_bits, mpdus, data_s, ack_duration_s(mcs, mpdus),
                         rts_duration_s(mcs) if rts_cts else 0.0, cts_duration_s(mcs) if rts_cts else 0.0)
