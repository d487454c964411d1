"""Wi-Fi in ns-3 (``link.access = "ns3_wifi"``): each sync round's uploads simulated packet by
packet in ns-3.44 (the optional extra ``pip install 'wirelessfl[ns3]'``), the reference for our own
DCF (``link.access = "wifi"``, :mod:`wirelessfl.access.wifi`), with the same options.

One ns-3 simulation per round (:func:`simulate_uploads`): an access point and one station per
device of the round, 802.11 on one 20 MHz channel at 5 GHz (channel 36), ns-3's own MAC (EDCA:
its QosTxop, backoff, ACK timeout, EIFS, retries, BlockAck agreements, A-MPDU aggregation) and PHY
(YANS: preamble detection, interference, its error-rate models):

- Ad hoc MAC (``AdhocWifiMac``) with QoS on: the "AP" is the node every station sends to; no
  beacons and no association, so an upload can start at its device's ready time. Every frame goes
  in AC_BE with AIFSN 2 (``interframe = "difs"``, the DCF's DIFS) or 3 (``"aifs_be"``), CWmin 15,
  CWmax 1023, TXOP limit 0. (EDCA and not the non-QoS DCF because its backoff count is the one our
  DCF uses: a counter also drops at the slot boundary that ends the AIFS; ns-3's non-QoS Txop counts
  one slot fewer each time the medium goes busy.)
- Rates: ``ConstantRateWifiManager`` per station, DataMode the device's MCS, chosen as ``wifi``
  chooses it (``phy_rate_bps``, or the fastest its SNR g P / N0 supports), ControlMode (RTS) the
  highest basic rate not above the MCS's non-HT reference rate; ACKs and CTSs at ns-3's control
  answer rate (the same rule). Long guard interval (800 ns) for HT, VHT and HE.
- Frames: an upload of l bits is ceil(l / mpdu_bits) packets handed to the station's
  ``WifiNetDevice::Send``, the last one shorter, each sized so that its MPDU on the air has the
  bytes ``wifi`` gives it (ceil(mpdu_bits / 8) + the standard's MAC header and FCS): the packet is
  ceil(mpdu_bits / 8) - 8 bytes (ns-3 adds LLC/SNAP, 8) and, for 802.11a, 2 bytes fewer (ns-3's QoS
  data header is 26 bytes where ``wifi`` counts 802.11a's 24). An upload is delivered when the AP
  has received all of its bytes (``tx_end``: the end of the last DATA PPDU's reception, before its
  ACK; ``wifi`` ends an upload with the ACK, SIFS + ACK later). ``retry_limit`` is the MAC's
  ``FrameRetryLimit`` (none: 65,535, ns-3's most); a packet dropped at the limit is handed to the
  device again (``wifi``'s rule: the upload still arrives whole); A-MPDU limit ``ampdu_bytes``
  (default the standard's), BlockAck window 64 (HE 256); RTS/CTS threshold 0 with ``rts_cts``.
- Channel: ``MatrixPropagationLossModel``. Each station's loss to the AP (both ways) is set so
  that ns-3 receives it (16.02 dBm sent) at the power its SNR g P / N0 (``link.noise_power``, at
  most 100 dB) gives over the noise floor ``wifi``'s MCS table assumes (-91.0 dBm,
  wirelessfl.access.wifi_phy): a device at the edge of an MCS arrives at that MCS's minimum
  sensitivity in dBm (ns-3's own noise floor is -93.97 dBm: 7 dB noise figure). So channel errors,
  which ``wifi`` leaves out, are ns-3's error model's, and a collision may be captured by the
  stronger frame. Stations hear one another at -85 dBm, by energy only: below the preamble
  detection's minimum RSSI (-82 dBm), above the CCA energy-detection threshold, lowered from -62
  to -90 dBm on every PHY. One collision domain (every station defers to every other), and the
  same timeline as stations that decode one another's frames (a DATA frame's NAV ends with the
  ACK, which every station decodes; two colliding frames of equal power are not decoded either,
  no EIFS; checked to the microsecond), for about a fifth less CPU: a round of 20 stations x 1 Mbit
  (0.75 s simulated) takes about 0.7 s of CPU, 5 stations 0.09 s (docs/radio.md, Wi-Fi, "Against ns-3").
- Seeds: ns-3's ``RngSeedManager`` seed 1 and a run number per round drawn from the run's own
  random stream ``"ns3_wifi"`` (kept in ``state_dict``: a resumed run repeats its rounds); the
  devices' random streams are assigned from 0 in every round (``WifiHelper::AssignStreams``), so a
  round depends on its run number alone, not on the rounds before it in the process.

Sync rounds only: the event protocols (fedbuff, fedasync, and semi_sync, whose rounds run on the
event engine's uplink) are refused. ns-3 is imported once per process, at the first round.
"""
from __future__ import annotations

import contextlib
import os
import sys

import importlib.util
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..fields import ConfigError
from .base import UplinkSchedule
from .link import Link
from .wifi import WiFi, WifiOptions
from .wifi_phy import BASIC_RATES_BPS, NOISE_FLOOR_DBM, STANDARDS, WifiPhy, control_rate_bps

__all__ = ["NS3_MISSING", "Ns3Station", "Ns3Uploads", "Ns3WiFi", "ns3_available", "packet_sizes",
           "simulate_uploads"]

NS3_MISSING = "link.access = 'ns3_wifi' needs ns-3: pip install 'wirelessfl[ns3]'"
TX_POWER_DBM = 16.0206  # ns-3's WifiPhy TxPowerStart/End default
MAX_SNR_DB = 100.0
STATION_RX_DBM = -85.0
"""The power at which the stations hear one another: energy, not frames (module docstring)."""
CCA_ED_DBM = -90.0
"""The CCA energy-detection threshold of every PHY (ns-3's default: -62 dBm)."""
LLC_SNAP_BYTES = 8
NS3_QOS_HEADER_EXTRA = 2  # ns-3's QoS data header (26 bytes) beyond 802.11a's 24
UNLIMITED_RETRIES = 65535  # WifiMac::FrameRetryLimit's largest value
HORIZON_FACTOR = 1000.0
"""Without a deadline a round's simulation stops at this many times its collision-free airtime
(+ 1 s): a device whose frames never get through (an MCS its SNR does not support) stays undelivered."""

_NS3_STANDARD = {"80211a": "WIFI_STANDARD_80211a", "80211n": "WIFI_STANDARD_80211n",
                 "80211ac": "WIFI_STANDARD_80211ac", "80211ax": "WIFI_STANDARD_80211ax"}
_MODE_PREFIX = {"80211n": "HtMcs", "80211ac": "VhtMcs", "80211ax": "HeMcs"}
_MAX_AMPDU = {"80211a": 0, "80211n": 65_535, "80211ac": 1_048_575, "80211ax": 6_500_631}


def ns3_available() -> bool:
    """Whether ns-3's Python bindings (the ``ns`` package) are installed."""
    return importlib.util.find_spec("ns") is not None


def data_mode(standard: str, mcs_index: int) -> str:
    """ns-3's WifiMode name of MCS ``mcs_index`` of ``standard`` (one stream, 20 MHz)."""
    p = STANDARDS[standard]
    if standard == "80211a":
        return f"OfdmRate{p.mcs[mcs_index].rate_bps / 1e6:g}Mbps"
    return f"{_MODE_PREFIX[standard]}{mcs_index}"


def control_mode(p: WifiPhy, mcs_index: int) -> str:
    """ns-3's name of the control rate (RTS) for a frame at MCS ``mcs_index``."""
    rate = control_rate_bps(p.mcs[mcs_index])
    assert rate in BASIC_RATES_BPS
    return f"OfdmRate{rate / 1e6:g}Mbps"


def packet_sizes(p: WifiPhy, bits: float, mpdu_bits: int) -> tuple[int, int, int]:
    """(packets, bytes of a full one, bytes of the last one) handed to ns-3's device for an upload
    of ``bits``: each MPDU on the air as long as ``wifi``'s (module docstring)."""
    less = LLC_SNAP_BYTES + (NS3_QOS_HEADER_EXTRA if p.name == "80211a" else 0)
    packets = max(math.ceil(bits / mpdu_bits - 1e-9), 1)
    last_bits = bits - (packets - 1) * mpdu_bits
    full, last = math.ceil(mpdu_bits / 8), math.ceil(last_bits / 8 - 1e-9)
    return packets, max(full - less, 1), max(last - less, 1)


@dataclass(frozen=True)
class Ns3Station:
    """One upload of a round: its bits, when it starts (seconds, on the round's clock), its MCS
    index and its SNR at the AP in dB."""

    bits: float
    start_s: float
    mcs: int
    snr_db: float


@dataclass
class Ns3Uploads:
    """What ns-3 did with a round's uploads, one entry per station: when its last byte reached the
    AP (nan: never, or not by the stop), its time on the air and transmissions (up to the stop),
    its MPDUs acknowledged (by ACK or BlockAck, as the station learnt it before the stop) and
    dropped at the retry limit (and sent again)."""

    delivered_s: np.ndarray
    on_air_s: np.ndarray
    attempts: np.ndarray
    acked: np.ndarray
    dropped: np.ndarray


_CPP = r"""
namespace wirelessfl_ns3wifi {
using namespace ns3;

// one round's stations (index 0 .. n-1); the AP is the sink
std::vector<double> need, got, done, air;
std::vector<long> tx, acked, drops;
std::map<Mac48Address, int> station_of;
std::vector<Ptr<NetDevice>> devices;
Address sink;
double cut = 1e300;
int left = 0;

void Reset(int n, double cutS) {
  need.assign(n, 0.0); got.assign(n, 0.0); done.assign(n, -1.0); air.assign(n, 0.0);
  tx.assign(n, 0); acked.assign(n, 0); drops.assign(n, 0);
  station_of.clear(); devices.clear(); left = 0; cut = cutS;
}

bool Receive(Ptr<NetDevice>, Ptr<const Packet> p, uint16_t, const Address& from) {
  auto it = station_of.find(Mac48Address::ConvertFrom(from));
  if (it == station_of.end()) return true;
  int i = it->second;
  got[i] += p->GetSize();
  if (done[i] < 0 && got[i] >= need[i] - 0.5) {
    done[i] = Simulator::Now().GetSeconds();
    if (--left == 0) Simulator::Stop(MilliSeconds(1));  // its ACK (or BlockAck) too
  }
  return true;
}

void State(int i, Time start, Time duration, WifiPhyState state) {
  if (state != WifiPhyState::TX) return;
  double s = start.GetSeconds();
  if (s >= cut) return;
  air[i] += std::min(duration.GetSeconds(), cut - s);
  tx[i]++;
}

void Acked(int i, Ptr<const WifiMpdu>) { acked[i]++; }

void Dropped(int i, WifiMacDropReason reason, Ptr<const WifiMpdu> mpdu) {
  if (reason != WIFI_MAC_DROP_REACHED_RETRY_LIMIT || done[i] >= 0) return;
  drops[i]++;  // the same bytes again, as a new packet at the queue's tail
  devices[i]->Send(Create<Packet>(mpdu->GetPacket()->GetSize() - 8), sink, 0x0800);
}

void SendAll(int i, uint32_t count, uint32_t full, uint32_t last) {
  for (uint32_t k = 0; k + 1 < count; k++) devices[i]->Send(Create<Packet>(full), sink, 0x0800);
  devices[i]->Send(Create<Packet>(last), sink, 0x0800);
}

void Configure(Ptr<NetDevice> device, uint32_t aifsn, uint32_t retryLimit, uint32_t maxAmpdu,
               std::string dataMode, std::string controlMode, bool rtsCts, bool he) {
  auto dev = DynamicCast<WifiNetDevice>(device);
  auto mac = dev->GetMac();
  mac->SetAttribute("FrameRetryLimit", UintegerValue(retryLimit));
  mac->SetAttribute("BE_MaxAmpduSize", UintegerValue(maxAmpdu));
  mac->GetQosTxop(AC_BE)->SetAifsn(static_cast<uint8_t>(aifsn));
  auto manager = dev->GetRemoteStationManager();
  manager->SetAttribute("DataMode", StringValue(dataMode));
  manager->SetAttribute("ControlMode", StringValue(controlMode));
  if (rtsCts) manager->SetAttribute("RtsCtsThreshold", UintegerValue(0));
  if (he) dev->GetHeConfiguration()->SetGuardInterval(NanoSeconds(800));
}

void AddSink(Ptr<NetDevice> ap) {
  sink = ap->GetAddress();
  ap->SetReceiveCallback(MakeCallback(&Receive));
}

void AddStation(int i, Ptr<NetDevice> device, double needBytes, double startS, uint32_t count, uint32_t full,
                uint32_t last) {
  auto dev = DynamicCast<WifiNetDevice>(device);
  devices.push_back(device);
  need[i] = needBytes;
  left++;
  station_of[Mac48Address::ConvertFrom(device->GetAddress())] = i;
  dev->GetPhy()->GetState()->TraceConnectWithoutContext("State", MakeBoundCallback(&State, i));
  auto mac = dev->GetMac();
  mac->TraceConnectWithoutContext("DroppedMpdu", MakeBoundCallback(&Dropped, i));
  mac->TraceConnectWithoutContext("AckedMpdu", MakeBoundCallback(&Acked, i));
  Simulator::Schedule(Seconds(startS), &SendAll, i, count, full, last);
}

void SetLoss(Ptr<MatrixPropagationLossModel> model, Ptr<Node> a, Ptr<Node> b, double loss) {
  model->SetLoss(a->GetObject<MobilityModel>(), b->GetObject<MobilityModel>(), loss, true);
}
}  // namespace wirelessfl_ns3wifi
"""

_NS = None


@contextlib.contextmanager
def _quiet_native_stderr():
    """File descriptor 2 to /dev/null for a while: cppyy prints harmless "Failed to materialize symbols"
    lines from C++ as ns-3 loads, which would fill a user's terminal (a Python error still raises)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _ns():
    """ns-3 and the C++ helpers above, loaded once per process."""
    global _NS
    if _NS is None:
        with _quiet_native_stderr():
            from ns import ns

            if not hasattr(ns.cppyy.gbl, "wirelessfl_ns3wifi"):
                ns.cppyy.cppdef(_CPP)
        _NS = ns
    return _NS


def _loss_db(rx_dbm: float) -> float:
    """The path loss at which ns-3 receives ``rx_dbm``."""
    return TX_POWER_DBM - rx_dbm


def rx_dbm(snr_db: float) -> float:
    """The power (dBm) at which ns-3 receives a device of SNR ``snr_db``: over ``wifi``'s noise floor."""
    return NOISE_FLOOR_DBM + min(float(snr_db), MAX_SNR_DB)


def simulate_uploads(stations: Sequence[Ns3Station], standard: str = "80211a", *, mpdu_bits: int = 12000,
                     rts_cts: bool = False, ampdu_bytes: int | None = None, retry_limit: int | None = 7,
                     interframe: str = "difs", seed: int = 1, run: int = 1,
                     stop_s: float | None = None) -> Ns3Uploads:
    """One ns-3 simulation of ``stations``' uploads to one AP (the module docstring says how), from
    t = 0 until every upload is delivered or ``stop_s``; ns-3's RngSeedManager seed and run."""
    ns = _ns()
    cpp = ns.cppyy.gbl.wirelessfl_ns3wifi
    p = STANDARDS[standard]
    n = len(stations)
    out = Ns3Uploads(np.full(n, np.nan), np.zeros(n), *(np.zeros(n, dtype=np.int64) for _ in range(3)))
    if n == 0:
        return out
    ns.RngSeedManager.SetSeed(int(seed))
    ns.RngSeedManager.SetRun(int(run))
    ns.Config.SetDefault("ns3::WifiMacQueue::MaxSize", ns.QueueSizeValue(ns.QueueSize("1000000p")))
    ns.Config.SetDefault("ns3::WifiMacQueue::MaxDelay", ns.TimeValue(ns.Seconds(1e6)))
    try:
        nodes = ns.NodeContainer()
        nodes.Create(n + 1)
        mobility = ns.MobilityHelper()
        positions = ns.CreateObject[ns.ListPositionAllocator]()
        positions.Add(ns.Vector(0.0, 0.0, 0.0))
        for i in range(n):  # 5 m around the AP: propagation delays of nanoseconds
            angle = 2.0 * math.pi * i / n
            positions.Add(ns.Vector(5.0 * math.cos(angle), 5.0 * math.sin(angle), 0.0))
        mobility.SetPositionAllocator(positions)
        mobility.Install(nodes)
        loss = ns.CreateObject[ns.MatrixPropagationLossModel]()
        loss.SetDefaultLoss(_loss_db(STATION_RX_DBM))
        for i, s in enumerate(stations):
            cpp.SetLoss(loss, nodes.Get(0), nodes.Get(i + 1), _loss_db(rx_dbm(s.snr_db)))
        channel = ns.CreateObject[ns.YansWifiChannel]()
        channel.SetPropagationLossModel(loss)
        channel.SetPropagationDelayModel(ns.CreateObject[ns.ConstantSpeedPropagationDelayModel]())
        phy = ns.YansWifiPhyHelper()
        phy.SetChannel(channel)
        phy.Set("ChannelSettings", ns.StringValue("{36, 20, BAND_5GHZ, 0}"))
        phy.Set("CcaEdThreshold", ns.DoubleValue(CCA_ED_DBM))
        wifi = ns.WifiHelper()
        wifi.SetStandard(getattr(ns, _NS3_STANDARD[standard]))
        wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager")
        mac = ns.WifiMacHelper()
        mac.SetType("ns3::AdhocWifiMac", "QosSupported", ns.BooleanValue(True))
        devices = wifi.Install(phy, mac, nodes)
        wifi.AssignStreams(devices, 0)
        aifsn = 2 if interframe == "difs" else 3
        retries = UNLIMITED_RETRIES if retry_limit is None else int(retry_limit)
        max_ampdu = 0 if not p.aggregates else int(ampdu_bytes if ampdu_bytes is not None else _MAX_AMPDU[standard])
        top = max(s.mcs for s in stations)
        cpp.Configure(devices.Get(0), aifsn, retries, max_ampdu, data_mode(standard, top), control_mode(p, top),
                      False, standard == "80211ax")
        cpp.Reset(n, math.inf if stop_s is None else float(stop_s))
        cpp.AddSink(devices.Get(0))
        for i, s in enumerate(stations):
            dev = devices.Get(i + 1)
            cpp.Configure(dev, aifsn, retries, max_ampdu, data_mode(standard, s.mcs), control_mode(p, s.mcs),
                          bool(rts_cts), standard == "80211ax")
            count, full, last = packet_sizes(p, s.bits, mpdu_bits)
            cpp.AddStation(i, dev, float((count - 1) * full + last), float(s.start_s), count, full, last)
        if stop_s is not None:
            ns.Simulator.Stop(ns.Seconds(float(stop_s)))
        ns.Simulator.Run()
        done = np.array(list(cpp.done), dtype=float)
        out.delivered_s = np.where(done >= 0, done, np.nan)
        out.on_air_s = np.array(list(cpp.air), dtype=float)
        for name, source in (("attempts", cpp.tx), ("acked", cpp.acked), ("dropped", cpp.drops)):
            setattr(out, name, np.array(list(source), dtype=np.int64))
    finally:
        ns.Simulator.Destroy()
    return out


class Ns3WiFi(WiFi):
    """``link.access = "ns3_wifi"``: a sync round's uploads simulated in ns-3 (module docstring),
    with the options of ``wifi``. ``airtime_s`` is ``wifi``'s (an upload's collision-free time on
    the air), remembered with the device's bits, MCS and SNR; :meth:`schedule` hands them to one
    ns-3 simulation per round. rounds.csv gets per round the stations' ``transmissions`` and their
    MPDUs acknowledged and dropped at the retry limit (``mpdus_acked``, ``mpdus_dropped``)."""

    Options = WifiOptions
    upload_columns = ("mpdus_acked", "mpdus_dropped")  # updates.csv, per upload

    def __init__(self, link: Link, wifi_standard: str = "80211ac", phy_rate_bps: float | None = None,
                 rts_cts: bool = False, ampdu_bytes: int | None = None, mpdu_bits: int = 12000,
                 retry_limit: int | None = 7, interframe: str = "difs", rng: np.random.Generator | None = None,
                 ns3_rng: np.random.Generator | None = None):
        super().__init__(link, wifi_standard, phy_rate_bps, rts_cts, ampdu_bytes, mpdu_bits, retry_limit, interframe,
                         rng)
        self.interframe = interframe
        self.ns3_rng = ns3_rng if ns3_rng is not None else np.random.default_rng(0)
        self._snr: dict[float, float] = {}  # airtime_s -> SNR (dB) of the last device given it
        self._last: tuple[np.ndarray, np.ndarray] | None = None  # the last airtime_s call: airtimes, SNRs (dB)
        self._ns3_row = dict.fromkeys(("transmissions", "mpdus_acked", "mpdus_dropped"), 0)
        self._counts = np.zeros((0, 2), dtype=np.int64)
        self.rounds = 0

    @classmethod
    def from_scenario(cls, scenario, options: WifiOptions) -> "Ns3WiFi":
        """The options as given; ns-3's run numbers from the "ns3_wifi" stream."""
        from ..rng import stream

        return cls(Link(scenario.link), options.wifi_standard, options.phy_rate_bps, options.rts_cts,
                   options.ampdu_bytes, options.mpdu_bits, options.retry_limit, options.interframe,
                   stream(scenario.seed, "wifi"), stream(scenario.seed, "ns3_wifi"))

    @classmethod
    def check(cls, scenario, options: WifiOptions) -> None:
        """``wifi``'s checks; ns-3 installed; sync rounds only (one line each)."""
        if scenario.facts.event_driven:
            raise ConfigError(f"link.access = 'ns3_wifi' with protocol.name = {scenario.protocol.name!r}: ns-3 "
                              "simulates a sync round's uploads at once, not the event engine's uplink (fedbuff, "
                              "fedasync, semi_sync); use protocol.name = 'sync', or link.access = 'wifi'")
        WiFi.check(scenario, options)
        if not ns3_available():
            raise ConfigError(NS3_MISSING)

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """``wifi``'s, remembered with each device's SNR g P / N0 too (for ns-3's path loss): by
        position for the round's :meth:`schedule`, and by value (the last device given it)."""
        out = super().airtime_s(bits, gain, power)
        with np.errstate(divide="ignore", invalid="ignore"):
            snr = 10.0 * np.log10(np.asarray(gain, dtype=float) * np.asarray(power, dtype=float)
                                  / self.link.noise_power)
        snr = np.broadcast_to(np.nan_to_num(snr, nan=-np.inf), out.shape).astype(float)
        if len(self._snr) > 65536:
            self._snr.clear()
        self._snr.update((a, s) for a, s in zip(out.tolist(), snr.tolist()) if math.isfinite(a))
        self._last = (out.copy(), snr)
        return out

    def _snrs_db(self, airtime: np.ndarray) -> np.ndarray:
        """Each upload's SNR (dB): from the airtime_s call that gave ``airtime``, else by value
        (the largest ns-3 takes where unknown)."""
        if self._last is not None and self._last[0].shape == airtime.shape and np.array_equal(self._last[0], airtime):
            return self._last[1]
        return np.array([self._snr.get(a, MAX_SNR_DB) for a in airtime.tolist()], dtype=float)

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        """The round's uplink in ns-3: device i's upload (recovered from ``airtime_s[i]`` as ``wifi``
        recovers it) starts at ready_s[i]; tx_end is when its last byte reached the AP. Under a
        deadline the simulation stops there: an upload arrived if delivered by then, nothing starts
        after it, time on the air is counted up to it."""
        k = ready_s.size
        ready = np.asarray(ready_s, dtype=float)
        airtime = np.asarray(airtime_s, dtype=float)
        tx_start, tx_end = np.full(k, np.nan), np.full(k, np.nan)
        on_air, attempts, arrived = np.zeros(k), np.zeros(k, dtype=np.int64), np.zeros(k, dtype=bool)
        counts = np.zeros((k, 2), dtype=np.int64)
        run = int(self.ns3_rng.integers(1, 2 ** 62))
        self.rounds += 1
        snrs = self._snrs_db(airtime)
        joining, stations = [], []
        for i in range(k):
            upload = self._upload_of(float(airtime[i]))
            if upload is None:
                continue
            bits, mcs = upload
            if not bits > 0:
                tx_start[i] = tx_end[i] = ready[i]
                arrived[i] = True
            elif deadline_s is None or ready[i] < deadline_s:
                joining.append(i)
                stations.append((bits, mcs, float(snrs[i])))
        gave_up = -math.inf  # when ns-3 stopped short of a delivery (the deadline, or the horizon)
        if joining:
            t0 = float(ready[joining].min())
            free = sum(float(airtime[i]) for i in joining)
            stop = (deadline_s - t0) if deadline_s is not None else \
                float(ready[joining].max()) - t0 + HORIZON_FACTOR * free + 1.0
            result = simulate_uploads([Ns3Station(b, float(ready[i]) - t0, m, s) for i, (b, m, s) in
                                       zip(joining, stations)], self.phy.name, mpdu_bits=self.mpdu_bits,
                                      rts_cts=self.rts_cts, ampdu_bytes=self.ampdu_bytes,
                                      retry_limit=self.retry_limit, interframe=self.interframe, seed=1, run=run,
                                      stop_s=stop)
            idx = np.array(joining)
            tx_start[idx] = ready[idx]
            delivered = result.delivered_s + t0
            ok = np.isfinite(delivered) & ((delivered <= deadline_s) if deadline_s is not None else True)
            arrived[idx] = ok
            tx_end[idx] = np.where(ok, delivered, np.nan)
            on_air[idx], attempts[idx] = result.on_air_s, result.attempts
            counts[idx, 0], counts[idx, 1] = result.acked, result.dropped
            if not ok.all():
                gave_up = t0 + stop
            row = self._ns3_row
            row["transmissions"] += int(result.attempts.sum())
            row["mpdus_acked"] += int(result.acked.sum())
            row["mpdus_dropped"] += int(result.dropped.sum())
        self._counts = counts
        started = np.flatnonzero(~np.isnan(tx_start))
        order = started[np.argsort(tx_start[started], kind="stable")]
        if deadline_s is not None and not arrived[started].all():
            end = float(deadline_s)
        else:
            end = max(float(np.nanmax(tx_end)) if np.isfinite(tx_end).any() else -math.inf, gave_up)
        return UplinkSchedule(order, tx_start, arrived, end, tx_end, on_air_s=on_air, attempts=attempts)

    def event_uplink(self, host):
        raise ConfigError("link.access = 'ns3_wifi': sync rounds only (the event protocols are refused)")

    def round_counts(self) -> np.ndarray:
        """The last round's MPDUs acknowledged and dropped per upload, in the order ``schedule`` got them."""
        return self._counts

    def take_counts(self, seq: int) -> tuple:
        return (0, 0)

    def round_info(self) -> dict[str, float]:
        """Per round: the stations' transmissions, their MPDUs acknowledged and dropped at the retry
        limit (columns transmissions, mpdus_acked, mpdus_dropped)."""
        out, self._ns3_row = dict(self._ns3_row), dict.fromkeys(self._ns3_row, 0)
        return out

    def state_dict(self) -> dict[str, Any]:
        """``wifi``'s, with the run-number stream and the tallies not yet in a row."""
        return {**super().state_dict(), "ns3_rng": self.ns3_rng.bit_generator.state, "ns3_row": dict(self._ns3_row),
                "ns3_rounds": self.rounds, "ns3_counts": self._counts.copy()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore them."""
        super().load_state(state)
        self.ns3_rng.bit_generator.state = state["ns3_rng"]
        self._ns3_row = {k: int(v) for k, v in state["ns3_row"].items()}
        self.rounds = int(state["ns3_rounds"])
        self._counts = np.asarray(state["ns3_counts"], dtype=np.int64).reshape(-1, 2)
