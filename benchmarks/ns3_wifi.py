"""Our 802.11 DCF (``link.access = "wifi"``) against ns-3.44's Wi-Fi: n stations upload l bits each
to one AP, all starting at t = 0; the mean time until the k-th upload is delivered, k = 1..n.

ns-3 (:func:`ns3_wifi_uploads`, the simulation of ``link.access = "ns3_wifi"``:
:func:`wirelessfl.access.ns3_wifi.simulate_uploads`): n stations and an AP, ad hoc MAC with QoS
(EDCA, AC_BE, AIFSN set to 2 = DIFS, CWmin 15, CWmax 1023, TXOP limit 0), 802.11a at a fixed
54 Mb/s (``ConstantRateWifiManager``, DataMode ``OfdmRate54Mbps``, ControlMode ``OfdmRate24Mbps``;
ACKs at 24 Mb/s, ns-3's control answer rate), YANS PHY with ns-3's defaults (preamble detection
at 4 dB, NIST error model) but for the CCA energy threshold (-90 dBm), every station 40 dB above
-91 dBm at the AP (``MatrixPropagationLossModel``) and hearing the others at -85 dBm by energy
(``ns3_wifi``'s channel: deliveries within a few microseconds of those of stations that decode one
another at 40 dB), no RTS/CTS, no aggregation (802.11a), no retry limit (``FrameRetryLimit``
65,535). Each station hands its device 85 packets of 1500 bytes at t = 0: an IP packet each, 20
bytes of IP and 8 of UDP header around 1472 bytes of the upload, so l = 85 x 1472 x 8 = 1,000,960
bits; ns-3 adds LLC/SNAP (8 bytes), the QoS data header (26) and the FCS (4): a 1538-byte MPDU,
252 us at 54 Mb/s. An upload is delivered when the AP has received its last byte. Seeds:
``RngSeedManager`` seed ``--seed``, runs 1..R; each run is independent of the ones before it in the
process (the devices' random streams are assigned from 0 every time).

Ours: ``WiFi(wifi_standard="80211a", phy_rate_bps=54e6, mpdu_bits=12080, retry_limit=None)`` (the
scheme's ``schedule`` with every device ready at 0, one random stream per seed). The MPDU's bytes are
counted the same way: ``mpdu_bits`` = 8 x (1500 + 8 LLC/SNAP + 2) = 12,080, the 2 being the QoS
Control field by which ns-3's QoS data header (26 bytes) exceeds the 24 bytes ``wifi`` counts for
802.11a, so our MPDU is 1510 + 28 = 1538 bytes too; an upload is 85 x 12,080 bits. Our upload ends
with its last ACK: delivery at the AP is SIFS + ACK (16 + 28 us) earlier, subtracted.

What each side does after a collision differs (found here, see docs/radio.md, Wi-Fi, "Against ns-3"):
``wifi`` has every station wait EIFS (SIFS + ACK at 6 Mb/s + DIFS = 94 us) after the collided
frames; in ns-3 the stations that did not transmit never lock onto two frames of equal power (the
preamble detection needs 4 dB SNR; here they decode no station's frame at all), see the medium busy
by energy only and wait AIFS (34 us), while the colliders wait their ACK timeout (SIFS + slot +
20 us = 45 us) and then AIFS: 79 us. Column
"ours, ns-3's recovery" mirrors that on our DCF core (EIFS set to DIFS, the colliders' first
boundary 5 slots later), to show that it is the whole difference.

    python benchmarks/ns3_wifi.py                        # the table (also: python benchmarks/ns3_check.py wifi)
    python benchmarks/ns3_wifi.py --runs 40 --seeds 1000
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wirelessfl.access.link import Link
from wirelessfl.access.wifi import WiFi
from wirelessfl.access.wifi_dcf import Dcf
from wirelessfl.access.wifi_phy import ack_duration_s, ack_timeout_s, mcs_for_rate, phy
from wirelessfl.config.tables import LinkConfig

__all__ = ["Comparison", "compare", "markdown", "ns3_wifi_uploads", "our_uploads"]

STANDARD = "80211a"
RATE_BPS = 54e6
CONTROL_RATE_BPS = 24e6
PACKETS = 85
IP_PACKET_BYTES = 1500  # 20 IP + 8 UDP + 1472 bytes of the upload
APP_BYTES = IP_PACKET_BYTES - 28
MPDU_BITS = 8 * (IP_PACKET_BYTES + 8 + 2)  # + LLC/SNAP + QoS Control: 12,080
UPLOAD_BITS = PACKETS * MPDU_BITS
APP_BITS = PACKETS * APP_BYTES * 8  # 1,000,960
STATIONS = (1, 2, 5, 10, 20)
TOLERANCE = 0.10


def ns3_wifi_uploads(n: int, bits: float = UPLOAD_BITS, standard: str = STANDARD, phy_rate_bps: float = RATE_BPS,
                     rts_cts: bool = False, seed: int = 1, run: int = 1, *, mpdu_bits: int = MPDU_BITS,
                     retry_limit: int | None = None, interframe: str = "difs", ampdu_bytes: int | None = None,
                     snr_db: float = 40.0) -> list[float]:
    """The times (seconds) until each of n stations' uploads of ``bits`` (in MPDUs of ``mpdu_bits``,
    counted as ``wifi`` counts them) is delivered at the AP in ns-3, all starting at t = 0, sorted:
    the k-th delivery, k = 1..n. ns-3 is loaded at the first call (about 10 s); a call is
    independent of the calls before it."""
    from wirelessfl.access.ns3_wifi import Ns3Station, simulate_uploads

    mcs = mcs_for_rate(phy(standard), phy_rate_bps)
    if mcs is None:
        raise ValueError(f"phy_rate_bps = {phy_rate_bps:g} is not a rate of {standard}")
    stations = [Ns3Station(float(bits), 0.0, mcs.index, snr_db) for _ in range(n)]
    out = simulate_uploads(stations, standard, mpdu_bits=mpdu_bits, rts_cts=rts_cts, ampdu_bytes=ampdu_bytes,
                           retry_limit=retry_limit, interframe=interframe, seed=seed, run=run)
    return sorted(out.delivered_s.tolist())


class _Ns3Recovery:
    """Our DCF core with ns-3's recovery from a collision: nobody waits EIFS (the others resume DIFS
    after the busy period), the colliders ACK timeout + DIFS after their frames' end."""

    def __init__(self, scheme: WiFi):
        p = scheme.phy
        self.scheme, self.delay = scheme, int(round(ack_timeout_s(p) / p.slot_s))

    def __call__(self) -> Dcf:
        s, p = self.scheme, self.scheme.phy
        dcf = Dcf(p.slot_s, p.sifs_s, s.ifs_s, s.ifs_s, p.cw_min, p.max_backoff_stage, s.retry_limit,
                  lambda st: s.frame(st.mcs, st.bits_left), s.rng)
        step = dcf.step

        def ns3_step():
            r = step()
            if not r.success:  # frames of equal length: the busy period ends with each collider's frame
                for st in r.stations:
                    if st.key in dcf.stations:
                        st.join = self.delay
            return r

        dcf.step = ns3_step
        return dcf


def our_uploads(n: int, seeds: int, bits: float = UPLOAD_BITS, standard: str = STANDARD,
                phy_rate_bps: float = RATE_BPS, rts_cts: bool = False, *, mpdu_bits: int = MPDU_BITS,
                retry_limit: int | None = None, recovery: str = "wifi", first_seed: int = 0) -> np.ndarray:
    """(seeds, n): per seed the sorted delivery times at the AP of our ``wifi`` scheme (its last
    ACK's end less SIFS + ACK); ``recovery = "ns3"`` runs the DCF with ns-3's collision recovery."""
    p = phy(standard)
    mcs = mcs_for_rate(p, phy_rate_bps)
    ack = p.sifs_s + ack_duration_s(mcs, 1)
    out = np.empty((seeds, n))
    for row, seed in enumerate(range(first_seed, first_seed + seeds)):
        scheme = WiFi(Link(LinkConfig()), standard, phy_rate_bps=phy_rate_bps, rts_cts=rts_cts, mpdu_bits=mpdu_bits,
                      retry_limit=retry_limit, rng=np.random.default_rng(seed))
        if recovery == "ns3":
            scheme.new_dcf = _Ns3Recovery(scheme)
        airtime = scheme.airtime_s(np.full(n, float(bits)), np.ones(n), np.ones(n))
        out[row] = np.sort(scheme.schedule(np.zeros(n), airtime).tx_end) - ack
    return out


@dataclass(frozen=True)
class Comparison:
    """The mean time until the k-th of n deliveries: ns-3's over its runs, ours over our seeds
    (and with ns-3's collision recovery), each with its standard error; ``diff`` = ours / ns-3 - 1."""

    n: int
    k: int
    ns3_s: float
    ns3_se: float
    ours_s: float
    ours_se: float
    mirrored_s: float
    mirrored_se: float

    @property
    def diff(self) -> float:
        return self.ours_s / self.ns3_s - 1.0

    @property
    def mirrored_diff(self) -> float:
        return self.mirrored_s / self.ns3_s - 1.0

    @property
    def ok(self) -> bool:
        return abs(self.diff) <= TOLERANCE


def _mean_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    se = x.std(axis=0, ddof=1) / math.sqrt(x.shape[0]) if x.shape[0] > 1 else np.zeros(x.shape[1])
    return x.mean(axis=0), se


def compare(stations=STATIONS, runs: int = 20, seeds: int = 400, seed: int = 1) -> list[Comparison]:
    """Every k of every n: ns-3 over runs 1..``runs`` (RngSeedManager seed ``seed``), ours over
    ``seeds`` seeds, both recoveries."""
    rows = []
    for n in stations:
        theirs = np.array([ns3_wifi_uploads(n, seed=seed, run=r) for r in range(1, runs + 1)])
        if np.isnan(theirs).any():
            raise RuntimeError(f"n = {n}: an ns-3 upload was never delivered")
        (a, ae), (b, be), (c, ce) = (_mean_se(theirs), _mean_se(our_uploads(n, seeds)),
                                     _mean_se(our_uploads(n, seeds, recovery="ns3")))
        rows += [Comparison(n, k + 1, a[k], ae[k], b[k], be[k], c[k], ce[k]) for k in range(n)]
    return rows


def markdown(rows: list[Comparison]) -> str:
    lines = ["| n | k | ns-3 (ms) | ours (ms) | diff | ours, ns-3's recovery (ms) | diff | within 10 % |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r.n} | {r.k} | {1e3 * r.ns3_s:.2f} ± {1e3 * r.ns3_se:.2f} | {1e3 * r.ours_s:.2f} ± "
              f"{1e3 * r.ours_se:.2f} | {100 * r.diff:+.2f} % | {1e3 * r.mirrored_s:.2f} ± "
              f"{1e3 * r.mirrored_se:.2f} | {100 * r.mirrored_diff:+.2f} % | {'yes' if r.ok else 'NO'} |" for r in rows]
    return "\n".join(lines) + "\n"


def report(rows: list[Comparison], out: str | None, seconds: float, runs: int, seeds: int) -> int:
    """Print the table and a summary (and write the table to ``out``); 0 if every k is within 10 %."""
    table = markdown(rows)
    worst = max(rows, key=lambda r: abs(r.diff))
    mirrored = max(rows, key=lambda r: abs(r.mirrored_diff))
    print(table + f"\n802.11a 54 Mb/s (ACK 24 Mb/s), {PACKETS} x {IP_PACKET_BYTES}-byte packets ({APP_BITS:,} bits) "
          f"a station; ns-3: {runs} runs, ours: {seeds} seeds, ± one standard error\n"
          f"{sum(r.ok for r in rows)} of {len(rows)} within 10 %; largest |diff| {100 * abs(worst.diff):.2f} % "
          f"(n = {worst.n}, k = {worst.k}); with ns-3's recovery {100 * abs(mirrored.mirrored_diff):.2f} % "
          f"(n = {mirrored.n}, k = {mirrored.k}) ({seconds:.1f} s)")
    if out:
        Path(out).write_text(table)
    return 0 if all(r.ok for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="ns-3 runs per n (RngSeedManager runs 1..R)")
    parser.add_argument("--seeds", type=int, default=400, help="our seeds per n")
    parser.add_argument("--seed", type=int, default=1, help="ns-3's RngSeedManager seed")
    parser.add_argument("--stations", type=int, nargs="+", default=list(STATIONS), help="the values of n")
    parser.add_argument("--out", help="also write the markdown table to this file")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = compare(args.stations, args.runs, args.seeds, args.seed)
    return report(rows, args.out, time.perf_counter() - start, args.runs, args.seeds)


if __name__ == "__main__":
    sys.exit(main())
