"""ns-3's LTE uplink (LENA, ns-3.44) at a set SINR: the reference for our ``link.rate = "lte"``.

What ns-3 does on its uplink, read from the ns-3.44 sources (``src/lte/model``, line numbers of the
ns-3.44 tag) and checked by the simulations below:

- **UL CQI.** The eNB measures the SINR per RB on the SRS (whole band, every
  ``LteEnbRrc::SrsPeriodicity`` = 40 ms; ``FfMacScheduler::UlCqiFilter`` = SRS_UL_CQI,
  ff-mac-scheduler.cc:47) and hands it to the scheduler in S11.3 fixed point, *truncated toward
  zero* to 1/8 dB (``LteFfConverter::double2fpS11dot3``, lte-common.cc:135; lte-enb-phy.cc:1008).
  Until the first SRS arrives the UE is granted MCS 0.
- **MCS choice** (PF and RR alike: pf-ff-mac-scheduler.cc:1621-1658, rr-ff-mac-scheduler.cc:
  1399-1427): the *lowest* SINR over the allocated RBs -> s = log2(1 + SINR / Gamma), Gamma =
  -ln(5 BER) / 1.5 with BER = 5e-5 hard-coded (Gamma = 5.53 = 7.43 dB; Piro's rule, "WILD ACK: same
  as DL") -> CQI = the highest whose ``SpectralEfficiencyForCqi`` is < s (lte-amc.cc:38, :479) ->
  MCS = the highest whose ``SpectralEfficiencyForMcs`` (lte-amc.cc:85, R1-081483's *downlink*
  efficiencies) is <= the CQI's (lte-amc.cc:493). Only the even MCS 0, 2, ..., 28 (CQI 1..15) ever
  occur; CQI 0 (SINR below -2.18 dB) means *no grant at all*, goodput 0. ``LteAmc::AmcModel``
  (MiErrorModel by default) concerns the downlink CQI only. :func:`ns3_ul_mcs` replicates the rule.
- **TBS.** ``LteAmc::GetUlTbSizeFromMcs``: TS 36.213 Table 8.6.1-1 (``McsToItbsUl``, lte-amc.cc:105,
  exact) and Table 7.1.7.2.1-1 (lte-amc.cc:118; the standard's but for I_TBS 6 / N_PRB 1 = 88, not
  328): :mod:`wirelessfl.radio.lte_tables`. That many bits per 1 ms TTI on the granted RBs; ns-3
  models no resource elements at all, so no DMRS/SRS/PUCCH overhead is added or removed. (The TBS
  table is not tied to an RE count; in the standard a PUSCH PRB pair has 12 x 12 = 144 data REs,
  the 2 DMRS symbols left out, 132 in a subframe whose last symbol carries SRS; that sets the code
  rate of an MCS, which ns-3's error model takes from its own ECR table instead.) In time the PUSCH
  signal lasts 13 of the 14 symbols (``UL_DATA_DURATION`` = 1 ms - 71429 ns - 1 ns,
  lte-ue-phy.cc:48), the last being the SRS's in every subframe; it changes no bit count.
- **Error model.** ``LteMiErrorModel::GetTbDecodificationStats`` (lte-mi-error-model.cc:1118), called
  by ``LteSpectrumPhy::EndRxData`` (lte-spectrum-phy.cc:977) and then a uniform draw (:983): MIESM,
  the mean over the allocated RBs of the per-RB mutual information of the modulation (table
  look-up, :896-978); code-block segmentation per TS 36.212 5.1.2 (Z = 6144, :1154); each code
  block's BLER 0.5 (1 - erf((MI - b) / (sqrt(2) c))) with (b, c) fitted per effective code rate
  and code-block size (:1023); TB error = 1 - prod(1 - CB errors). Modulation and ECR per MCS come
  from the *downlink* MCS table (QPSK 0..9, 16-QAM 10..16, 64-QAM 17..28; ``McsEcrTable``), also
  for PUSCH: UL MCS 10 (QPSK) is judged as 16-QAM, UL MCS 17..20 (16-QAM) as 64-QAM.
  :func:`ns3_lte_bler` calls it directly.
- **HARQ** (``HarqEnabled`` = true). A NACKed TB is resent on the same RBs at the same MCS ahead of
  new data; the scheduler drops the process at a NACK for a TB already sent 4 times (status ``>= 3``
  retransmissions, pf:1410, rr:1205): *at most 4 transmissions*. ns-3's own AMC leaves the first
  transmission's BLER at 0 (below), so the system simulation never retransmits; HARQ is exercised
  through ``ns3_lte_bler(..., transmission=k)`` instead, which replays the combining of
  ``EndRxData`` and ``LteHarqPhy`` on the error model directly. Combining (lte-mi-error-model.cc:
  1130-1146): MI_eff = code-bit-weighted *mean* MI of all transmissions, R_eff = info bits / total
  code bits (TB / ECR per transmission), then the BLER curve of the closest lower ECR (:1256-1285)
  among few (16-QAM: 0.075, 0.1, 0.15, 0.3; 64-QAM: 0.1075, 0.143, 0.215, 0.43, 0.45, 0.5), hence
  coarse gains: the 2nd transmissions of MCS 17..22 all decode at one SINR (table; the MI is the
  same, R_eff 0.215..0.3 all take the 0.215 curve). ``LteHarqPhy`` keeps 3 past transmissions
  (lte-harq-phy.cc:162) and counts bits in ``uint16_t``: once k transmissions exceed 65535 code bits
  (k x TB / ECR) the sum wraps and the combined BLER curve jumps (at 25 PRB the 4th
  transmission of MCS 18 reaches BLER 10 % at -1.7 dB, of MCS 24 at -6.0 dB, against 2.4 and 5.0 dB
  for the 3rd: ``ns3_lte_sinr_at_bler(..., transmission=k)``).
- **RBs.** One UE gets every UL RB of the cell every TTI (PF/RR share the band equally among UEs
  with a non-empty BSR, at least 3 RBs each). *No RBs are kept for PUCCH or PRACH*: PUCCH is a
  null-bandwidth signal (lte-ue-phy.cc:1264-1274).
- **Power.** Without UL power control (``LteUePhy::EnableUplinkPowerControl`` = false; it is on by
  default) the UE sends ``LteUePhy::TxPower`` (10 dBm) spread evenly over the RBs it is granted:
  PSD = P / (N_RB x 180 kHz) (lte-spectrum-value-helper.cc:355); the SRS likewise over the whole
  band. Noise: -174 dBm/Hz + ``LteEnbPhy::NoiseFigure`` (5 dB) (:386). SINR = P - 10 log10(N_RB x
  180 kHz) - PL + 174 - NF on every RB (no fading, no interference here).
- **Traffic.** RLC SM (``LteEnbRrc::EpsBearerToRlcMapping`` = RlcSmAlways, the default) reports an
  80000-byte queue after every TX opportunity and the UE MAC sends a BSR every TTI: a full buffer
  (seen: ``tti_share`` = 1, a TB in every TTI).

Consequence for our rate model: ns-3's uplink AMC is far more conservative than a BLER-10 % target
(it grants an MCS 4.4 to 6.0 dB above the SINR where that MCS reaches BLER 10 %, where its BLER is
0 to double precision: ``python benchmarks/ns3_lte.py``), so on a static channel its goodput is
TBS(MCS_ns3(SINR), N_RB) x 1000 / s, error-free, and HARQ never acts. Matching ns-3's *goodput*
means choosing the MCS by :func:`ns3_ul_mcs`, not by a BLER target; matching its *error model*
means fitting our BLER curves to :func:`ns3_lte_bler`.

Functions (ns-3 is imported only when one is called)::

    ns3_lte_uplink(sinr_db, bandwidth_prb=25, seconds=2.0, seed=1) -> dict   # a system simulation
    ns3_lte_uplink_sweep(sinrs_db, ...) -> list[dict]                        # several, one ns-3 process
    ns3_lte_bler(sinr_db, mcs, n_prb=25, transmission=1) -> float           # ns-3's MIESM (+ HARQ)
    ns3_lte_sinr_at_bler(mcs, n_prb=25, bler=0.1, transmission=1) -> float
    ns3_ul_mcs(sinr_db) -> int | None                                       # ns-3's UL MCS rule, no ns-3

Command line (about 25 s; the ns-3 import alone takes about 8 s)::

    python benchmarks/ns3_lte.py                       # goodput vs SINR -5..25 dB, SINR at BLER 10 %
    python benchmarks/ns3_lte.py --seconds 5 --prb 50
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

__all__ = ["ns3_lte_uplink", "ns3_lte_uplink_sweep", "ns3_lte_bler", "ns3_lte_sinr_at_bler", "ns3_ul_mcs",
           "path_loss_for_sinr", "UE_TX_POWER_DBM", "ENB_NOISE_FIGURE_DB"]

UE_TX_POWER_DBM = 10.0
"""ns-3's ``LteUePhy::TxPower`` default (dBm), kept: with a fixed path loss only the SINR matters."""
ENB_NOISE_FIGURE_DB = 5.0
"""ns-3's ``LteEnbPhy::NoiseFigure`` default (dB)."""
THERMAL_NOISE_DBM_HZ = -174.0
RB_HZ = 180e3
UL_EARFCN = 18100
"""ns-3's ``LteEnbNetDevice::UlEarfcn`` default (band 1); it only places the spectrum model."""

SINR_NUDGE_DB = 1e-6
"""Added to the SINR a simulation aims at: ns-3 computes 9.99999999999997 dB for a set 10 dB, which
its S11.3 quantizer truncates to 9.875 dB, one step lower than :func:`ns3_ul_mcs` of 10 dB."""

# ns-3's uplink AMC (lte-amc.cc:38, :85; the schedulers' Piro rule), replicated for ns3_ul_mcs
NS3_CQI_EFFICIENCY = (0.0, 0.15, 0.23, 0.38, 0.6, 0.88, 1.18, 1.48, 1.91, 2.41, 2.73, 3.32, 3.9, 4.52, 5.12, 5.55)
NS3_MCS_EFFICIENCY = (0.15, 0.19, 0.23, 0.31, 0.38, 0.49, 0.6, 0.74, 0.88, 1.03, 1.18, 1.33, 1.48, 1.7, 1.91, 2.16,
                      2.41, 2.57, 2.73, 3.03, 3.32, 3.61, 3.9, 4.21, 4.52, 4.82, 5.12, 5.33, 5.55)
PIRO_GAMMA = -math.log(5.0 * 0.00005) / 1.5
"""SINR gap of the schedulers' rule s = log2(1 + SINR / Gamma) (BER 5e-5): 5.53, i.e. 7.43 dB."""


def ns3_ul_mcs(sinr_db: float) -> int | None:
    """The uplink MCS ns-3's PF/RR schedulers grant a UE whose SRS SINR is ``sinr_db`` on every RB
    (the rule in the module docstring), or None where its CQI is 0 and it gets no grant."""
    fixed = int(min(max(sinr_db, -4096.0), 4095.88) * 8) / 8.0  # S11.3, truncated toward zero
    s = math.log2(1.0 + 10.0 ** (fixed / 10.0) / PIRO_GAMMA)
    cqi = 0
    while cqi < 15 and NS3_CQI_EFFICIENCY[cqi + 1] < s:
        cqi += 1
    if cqi == 0:
        return None
    mcs = 0
    while mcs < 28 and NS3_MCS_EFFICIENCY[mcs + 1] <= NS3_CQI_EFFICIENCY[cqi]:
        mcs += 1
    return mcs


def ns3_ul_mcs_threshold_db(mcs: int) -> float | None:
    """The SINR above which ns-3 grants ``mcs`` or higher (before the 1/8 dB truncation), or None
    for an MCS it never grants (the odd ones)."""
    for cqi in range(1, 16):
        se = NS3_CQI_EFFICIENCY[cqi]
        m = max(k for k in range(29) if k == 0 or NS3_MCS_EFFICIENCY[k] <= se)
        if m == mcs:
            return 10.0 * math.log10(PIRO_GAMMA * (2.0 ** se - 1.0))
    return None


def path_loss_for_sinr(sinr_db: float, n_prb: int, tx_power_dbm: float = UE_TX_POWER_DBM,
                       noise_figure_db: float = ENB_NOISE_FIGURE_DB) -> float:
    """The path loss (dB) at which a UE sending ``tx_power_dbm`` over ``n_prb`` RBs reaches
    ``sinr_db`` on each of them at the eNB (no interference)."""
    return tx_power_dbm - 10.0 * math.log10(n_prb * RB_HZ) - THERMAL_NOISE_DBM_HZ - noise_figure_db - sinr_db


# C++ helpers: trace sinks that accumulate into globals (no Python callbacks in the event loop),
# and a direct call of ns-3's error model.
_CPP = r"""
#include "ns3/lte-module.h"

namespace wirelessfl_ns3_lte
{
struct Tb { long t; int mcs; int size; int rv; int ndi; int ok; };
std::vector<Tb> tbs;                          // UlPhyReception: every TB the eNB decoded
std::vector<std::pair<long, double>> srs;     // ReportUeSinr: SRS SINR (linear mean over RBs)
std::vector<std::pair<long, double>> pusch;   // PUSCH SINR (linear mean over the allocated RBs)
std::vector<std::pair<long, int>> rbs;        // ReportUlPhyResourceBlocks: RBs of each UE transmission

void OnUlRx(ns3::PhyReceptionStatParameters p)
{
    tbs.push_back({(long)p.m_timestamp, (int)p.m_mcs, (int)p.m_size, (int)p.m_rv, (int)p.m_ndi,
                   (int)p.m_correctness});
}

void OnSrs(uint16_t, uint16_t, double sinr, uint8_t)
{
    srs.push_back({ns3::Simulator::Now().GetMilliSeconds(), sinr});
}

void OnRbs(uint16_t, const std::vector<int>& used)
{
    rbs.push_back({ns3::Simulator::Now().GetMilliSeconds(), (int)used.size()});
}

void OnPuschSinr(const ns3::SpectrumValue& sinr)
{
    double sum = 0.0;
    int n = 0;
    for (auto it = sinr.ConstValuesBegin(); it != sinr.ConstValuesEnd(); ++it)
    {
        if (*it > 0.0) { sum += *it; ++n; }  // RBs the UE does not send on have no signal
    }
    if (n > 0) { pusch.push_back({ns3::Simulator::Now().GetMilliSeconds(), sum / n}); }
}

void Hook(ns3::Ptr<ns3::NetDevice> enb, ns3::Ptr<ns3::NetDevice> ue)
{
    tbs.clear(); srs.clear(); pusch.clear(); rbs.clear();
    auto enbPhy = ns3::DynamicCast<ns3::LteEnbNetDevice>(enb)->GetPhy();
    auto ulPhy = enbPhy->GetUlSpectrumPhy();
    ulPhy->TraceConnectWithoutContext("UlPhyReception", ns3::MakeCallback(&OnUlRx));
    enbPhy->TraceConnectWithoutContext("ReportUeSinr", ns3::MakeCallback(&OnSrs));
    auto processor = ns3::Create<ns3::LteChunkProcessor>();
    processor->AddCallback(ns3::MakeCallback(&OnPuschSinr));
    ulPhy->AddDataSinrChunkProcessor(processor);
    ns3::DynamicCast<ns3::LteUeNetDevice>(ue)->GetPhy()->TraceConnectWithoutContext(
        "ReportUlPhyResourceBlocks", ns3::MakeCallback(&OnRbs));
}

std::string DefaultOf(const std::string& tidName, const std::string& attribute)
{
    ns3::TypeId::AttributeInformation info;
    ns3::TypeId::LookupByName(tidName).LookupAttributeByName(attribute, &info);
    return info.initialValue->SerializeToString(info.checker);
}

// lte-spectrum-phy.cc's EffectiveCodingRate (= lte-mi-error-model.cc's McsEcrTable), file-static there
const double kEffectiveCodingRate[29] = {
    0.08, 0.1, 0.11, 0.15, 0.19, 0.24, 0.3, 0.37, 0.44, 0.51, 0.3, 0.33, 0.37, 0.42, 0.48,
    0.54, 0.6, 0.43, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.89, 0.92};

// The error rate of the transmission-th transmission of an uplink TB (all before it failed), every
// transmission on nPrb RBs at sinrLinear: the history is kept as EndRxData and LteHarqPhy keep it
// (uint16_t bit counts included).
double TbBler(double sinrLinear, int mcs, int nPrb, int earfcn, int transmission)
{
    ns3::Ptr<ns3::SpectrumModel> model = ns3::LteSpectrumValueHelper::GetSpectrumModel(earfcn, nPrb);
    ns3::SpectrumValue sinr(model);
    sinr = sinrLinear;  // flat: the same SINR on every RB (AWGN)
    std::vector<int> map;
    for (int i = 0; i < nPrb; ++i) { map.push_back(i); }
    ns3::Ptr<ns3::LteAmc> amc = ns3::CreateObject<ns3::LteAmc>();
    // EndRxData passes the TB size in bytes, as the scheduler sized it (GetUlTbSizeFromMcs / 8)
    uint16_t bytes = amc->GetUlTbSizeFromMcs(mcs, nPrb) / 8;
    ns3::HarqProcessInfoList_t history;
    double tbler = 1.0;
    for (int k = 1; k <= transmission; ++k)
    {
        ns3::TbStats_t stats = ns3::LteMiErrorModel::GetTbDecodificationStats(sinr, map, bytes, mcs, history);
        tbler = stats.tbler;
        ns3::HarqProcessInfoElement_t element;  // LteHarqPhy::UpdateUlHarqProcessStatus
        element.m_mi = stats.mi;
        element.m_infoBits = bytes * 8;
        element.m_codeBits = (uint16_t)(bytes / kEffectiveCodingRate[mcs]) * 8;
        if (history.size() < 3) { history.push_back(element); }
    }
    return tbler;
}
}  // namespace wirelessfl_ns3_lte
"""


def _ns():
    """ns-3's bindings with our C++ helpers (defined once per process)."""
    from ns import ns  # the optional extra; cppyy's "Failed to materialize symbols" lines are harmless

    if not hasattr(ns.cppyy.gbl, "wirelessfl_ns3_lte"):
        ns.cppyy.cppdef(_CPP)
    return ns


# ----------------------------------------------------------------------------------------------
# ns-3's error model, called directly


def ns3_lte_bler(sinr_db: float, mcs: int, n_prb: int = 25, transmission: int = 1) -> float:
    """ns-3's TB error rate (``LteMiErrorModel::GetTbDecodificationStats``) of an uplink TB of MCS
    ``mcs`` on ``n_prb`` RBs, all at ``sinr_db`` (AWGN). ``transmission`` 1 is the first
    transmission; 2..4 the error rate of that HARQ retransmission given that all before it, at the
    same SINR, failed (ns-3 draws each transmission independently with this rate). The TB size is
    ns-3's ``GetUlTbSizeFromMcs(mcs, n_prb)``; modulation and ECR are ns-3's per MCS (the downlink
    table: module docstring). Touches no simulator state."""
    if not 0 <= mcs <= 28 or not 1 <= n_prb <= 110 or not 1 <= transmission <= 4:
        raise ValueError(f"mcs must be 0..28, n_prb 1..110 and transmission 1..4, got {mcs}, {n_prb}, "
                         f"{transmission}")
    ns = _ns()
    return float(ns.cppyy.gbl.wirelessfl_ns3_lte.TbBler(10.0 ** (sinr_db / 10.0), int(mcs), int(n_prb), UL_EARFCN,
                                                        int(transmission)))


def ns3_lte_sinr_at_bler(mcs: int, n_prb: int = 25, bler: float = 0.1, transmission: int = 1, lo: float = -30.0,
                         hi: float = 40.0, tol_db: float = 1e-3) -> float:
    """The SINR (dB) at which :func:`ns3_lte_bler` falls to ``bler`` (bisection: the BLER is
    non-increasing in the SINR, a step function at ns-3's MI-table resolution); -inf where it is
    below ``bler`` already at ``lo`` (a HARQ retransmission whose bit counts wrap: module docstring)."""
    if ns3_lte_bler(hi, mcs, n_prb, transmission) > bler:
        raise ValueError(f"BLER {bler} is not reached by {hi} dB for MCS {mcs}")
    if ns3_lte_bler(lo, mcs, n_prb, transmission) <= bler:
        return -math.inf
    while hi - lo > tol_db:
        mid = 0.5 * (lo + hi)
        if ns3_lte_bler(mid, mcs, n_prb, transmission) > bler:
            lo = mid
        else:
            hi = mid
    return hi


# ----------------------------------------------------------------------------------------------
# the system simulation

_DEFAULTS = (  # (type, attribute, value) set for a run; the process's previous defaults come back after
    ("ns3::LteUePhy", "EnableUplinkPowerControl", "false"),
    ("ns3::LteUePhy", "TxPower", None),                   # UE_TX_POWER_DBM
    ("ns3::LteEnbPhy", "NoiseFigure", None),              # ENB_NOISE_FIGURE_DB
    ("ns3::LteEnbNetDevice", "UlBandwidth", None),        # bandwidth_prb
    ("ns3::LteEnbNetDevice", "DlBandwidth", None),
    ("ns3::LteEnbRrc", "EpsBearerToRlcMapping", "RlcSmAlways"),  # full buffer (ns-3's default, pinned)
    ("ns3::LteSpectrumPhy", "DataErrorModelEnabled", "true"),
    # the DL control channel is not under test: no lost UL grants at the DL SINR our UL SINR implies
    ("ns3::LteSpectrumPhy", "CtrlErrorModelEnabled", "false"),
    ("ns3::FixedRssLossModel", "Rss", None),               # -path loss
)


def _simulate(sinr_db: float, bandwidth_prb: int, seconds: float, seed: int, warmup: float, scheduler: str) -> dict:
    """One LENA simulation in this process (it ends with ``Simulator::Destroy()``, which disposes of
    every ns-3 node of the process: see :func:`ns3_lte_uplink`)."""
    started = time.perf_counter()
    ns = _ns()
    helpers = ns.cppyy.gbl.wirelessfl_ns3_lte
    # SINR_NUDGE_DB keeps ns-3's floating-point SINR from landing a hair below a step of its 1/8 dB
    # CQI quantizer
    path_loss = path_loss_for_sinr(sinr_db + SINR_NUDGE_DB, bandwidth_prb)
    values = {"TxPower": repr(UE_TX_POWER_DBM), "NoiseFigure": repr(ENB_NOISE_FIGURE_DB),
              "UlBandwidth": str(bandwidth_prb), "DlBandwidth": str(bandwidth_prb), "Rss": repr(-path_loss)}
    saved = []
    for tid, attribute, value in _DEFAULTS:
        path = f"{tid}::{attribute}"
        saved.append((path, str(helpers.DefaultOf(tid, attribute))))
        ns.Config.SetDefault(path, ns.StringValue(value if value is not None else values[attribute]))
    try:
        ns.RngSeedManager.SetSeed(seed)
        ns.RngSeedManager.SetRun(1)
        lte = ns.CreateObject[ns.LteHelper]()
        lte.SetAttribute("PathlossModel", ns.StringValue("ns3::FixedRssLossModel"))
        lte.SetSchedulerType(scheduler)
        enb_nodes, ue_nodes = ns.NodeContainer(), ns.NodeContainer()
        enb_nodes.Create(1)
        ue_nodes.Create(1)
        mobility = ns.MobilityHelper()
        mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel")
        mobility.Install(enb_nodes)
        mobility.Install(ue_nodes)
        # apart: the spectrum channel applies no propagation loss between nodes at one position
        ue_nodes.Get(0).GetObject[ns.MobilityModel]().SetPosition(ns.Vector(100.0, 0.0, 0.0))
        enb_devs = lte.InstallEnbDevice(enb_nodes)
        ue_devs = lte.InstallUeDevice(ue_nodes)
        lte.AssignStreams(enb_devs, 0)
        lte.AssignStreams(ue_devs, 100)
        lte.Attach(ue_devs, enb_devs.Get(0))
        lte.ActivateDataRadioBearer(ue_devs, ns.EpsBearer(ns.EpsBearer.NGBR_VIDEO_TCP_DEFAULT))
        helpers.Hook(enb_devs.Get(0), ue_devs.Get(0))
        ns.Simulator.Stop(ns.Seconds(seconds))
        ns.Simulator.Run()
        tbs = [(x.t, x.mcs, x.size, x.rv, x.ndi, x.ok) for x in helpers.tbs]
        srs = [x.second for x in helpers.srs if x.first >= warmup * 1e3]
        pusch = [x.second for x in helpers.pusch if x.first >= warmup * 1e3]
        rbs = [x.second for x in helpers.rbs if x.first >= warmup * 1e3]
        ns.Simulator.Destroy()
    finally:
        for path, value in saved:
            ns.Config.SetDefault(path, ns.StringValue(value))
    return _summary(sinr_db, bandwidth_prb, seconds, warmup, tbs, srs, pusch, rbs, path_loss,
                    time.perf_counter() - started)


def _db(linear: list) -> float | None:
    return 10.0 * math.log10(sum(linear) / len(linear)) if linear else None


def _summary(sinr_db, n_cell, seconds, warmup, tbs, srs, pusch, rbs, path_loss, wall) -> dict:
    span = seconds - warmup
    tbs = [t for t in tbs if t[0] >= warmup * 1e3]
    new = [t for t in tbs if t[4] == 1]
    ok = [t for t in tbs if t[5]]
    mcs = Counter(t[1] for t in new).most_common(1)
    n_prb = Counter(rbs).most_common(1)
    ttis = int(round(span * 1e3))
    return {
        "sinr_db_set": sinr_db,
        "sinr_db_measured": _db(pusch),  # PUSCH SINR the error model saw, mean over TTIs and RBs
        "sinr_db_srs": _db(srs),         # the SRS SINR the scheduler's CQI came from
        "goodput_bps": sum(8 * t[2] for t in ok) / span,  # correctly received TB bits (MAC PDUs)
        "tb_per_s": len(tbs) / span,     # TBs received (first transmissions and retransmissions)
        "tb_ok_per_s": len(ok) / span,
        "mcs": mcs[0][0] if mcs else None,  # most common MCS of first transmissions
        "mcs_expected": ns3_ul_mcs(sinr_db + SINR_NUDGE_DB),  # ns3_ul_mcs of the SINR aimed at
        "bler_first_tx": sum(1 for t in new if not t[5]) / len(new) if new else None,
        "harq_retx_share": sum(1 for t in tbs if t[4] == 0) / len(tbs) if tbs else None,
        "harq_drops_per_s": sum(1 for t in tbs if not t[5] and t[3] >= 3) / span,  # failed 4th transmissions
        "max_transmissions": 1 + max((t[3] for t in tbs), default=-1),
        "n_prb": n_prb[0][0] if n_prb else 0,  # most common RBs per UE transmission
        "n_prb_cell": n_cell,
        "tti_share": min(1.0, len(tbs) / ttis),  # TTIs with a PUSCH TB: 1 = saturated full buffer
        "path_loss_db": path_loss,
        "seconds": seconds,
        "warmup_s": warmup,
        "wall_s": wall,
    }


def _options(bandwidth_prb: int, seconds: float, seed: int, warmup: float, scheduler: str) -> dict:
    if not 0 <= warmup < seconds:
        raise ValueError(f"need 0 <= warmup < seconds, got warmup {warmup}, seconds {seconds}")
    if bandwidth_prb not in (6, 15, 25, 50, 75, 100):
        raise ValueError(f"bandwidth_prb must be an LTE bandwidth ns-3 knows (6, 15, 25, 50, 75 or 100 RBs), "
                         f"got {bandwidth_prb}")
    return dict(bandwidth_prb=int(bandwidth_prb), seconds=float(seconds), seed=int(seed), warmup=float(warmup),
                scheduler=str(scheduler))


def ns3_lte_uplink_sweep(sinrs_db, bandwidth_prb: int = 25, seconds: float = 2.0, seed: int = 1, *,
                         warmup: float = 0.1, scheduler: str = "ns3::PfFfMacScheduler",
                         in_process: bool = False) -> list[dict]:
    """:func:`ns3_lte_uplink` at each SINR of ``sinrs_db``, all in one child process (one ns-3
    import, about 8 s, then well under a second per 2 s of simulated time)."""
    options = _options(bandwidth_prb, seconds, seed, warmup, scheduler)
    sinrs = [float(s) for s in sinrs_db]
    if in_process:
        return [_simulate(s, **options) for s in sinrs]
    with tempfile.TemporaryDirectory(prefix="ns3_lte_") as folder:
        request, answer = os.path.join(folder, "request.json"), os.path.join(folder, "answer.json")
        with open(request, "w") as f:
            json.dump({"sinrs_db": sinrs, "options": options}, f)
        # ns-3 writes nothing here (the stats go to C++ globals), but any stray file lands in folder
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", request, answer],
                              cwd=folder, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(answer):
            lines = [line for line in (done.stdout + done.stderr).splitlines() if "materialize" not in line]
            raise RuntimeError("the ns-3 LTE worker failed:\n" + "\n".join(lines[-30:]))
        with open(answer) as f:
            return json.load(f)


def ns3_lte_uplink(sinr_db: float, bandwidth_prb: int = 25, seconds: float = 2.0, seed: int = 1, *,
                   warmup: float = 0.1, scheduler: str = "ns3::PfFfMacScheduler",
                   in_process: bool = False) -> dict:
    """ns-3's LTE uplink goodput at a set SINR: one eNB, one UE with a full buffer (RLC SM), LENA
    without EPC, no fading, no interference, ideal RRC; ns-3's own SRS-based AMC, MIESM error model
    and UL HARQ (module docstring).

    The UE sends ``UE_TX_POWER_DBM`` (UL power control off) over the ``bandwidth_prb`` RBs it is
    granted, and a ``FixedRssLossModel`` sets the path loss (:func:`path_loss_for_sinr`) so that
    its SINR at the eNB is ``sinr_db`` on every RB; the SINR ns-3 computed is read back from its
    PUSCH SINR chunks (``sinr_db_measured``) and from the SRS report (``sinr_db_srs``).

    Runs in a child process unless ``in_process``: a simulation ends with ``Simulator::Destroy()``,
    which disposes of every ns-3 node of the process, and sets ns-3 attribute defaults (restored
    afterwards). Returns a dict: sinr_db_set, sinr_db_measured, sinr_db_srs, goodput_bps (correctly
    received TB bits per second after ``warmup`` seconds), tb_per_s, tb_ok_per_s, mcs (the most
    common of first transmissions), mcs_expected (:func:`ns3_ul_mcs`), bler_first_tx,
    harq_retx_share (retransmissions among received TBs), harq_drops_per_s, max_transmissions,
    n_prb (the most common RBs per UE transmission), n_prb_cell, tti_share (TTIs carrying a TB),
    path_loss_db, seconds, warmup_s, wall_s. Values with nothing to measure are None.
    """
    return ns3_lte_uplink_sweep([sinr_db], bandwidth_prb, seconds, seed, warmup=warmup, scheduler=scheduler,
                                in_process=in_process)[0]


# ----------------------------------------------------------------------------------------------
# command line


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def goodput_table(rows: list[dict]) -> str:
    """The simulations' rows; the last column is the TBS of the MCS and RBs seen, 1000 TBs a second."""
    from wirelessfl.radio.lte_tables import tbs_bits

    lines = ["| SINR set (dB) | PUSCH SINR (dB) | SRS SINR (dB) | MCS | rule | RBs | TB/s | BLER 1st tx "
             "| retx share | goodput (Mb/s) | TBS x 1000 (Mb/s) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        ideal = tbs_bits(r["mcs"], r["n_prb"], ns3=True) * 1e-3 if r["mcs"] is not None and r["n_prb"] else 0.0
        cells = (f"{r['sinr_db_set']:g}", _fmt(r["sinr_db_measured"], ".2f"), _fmt(r["sinr_db_srs"], ".2f"),
                 _fmt(r["mcs"], "d"), _fmt(r["mcs_expected"], "d"), str(r["n_prb"]), f"{r['tb_per_s']:.0f}",
                 _fmt(r["bler_first_tx"], ".4f"), _fmt(r["harq_retx_share"], ".4f"), f"{r['goodput_bps'] / 1e6:.3f}",
                 f"{ideal:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bler_table(n_prb: int = 25) -> str:
    """SINR at BLER 10 % per uplink MCS from ns-3's error model, beside where ns-3's AMC grants it."""
    from wirelessfl.radio.lte_tables import UL_MCS_ITBS, UL_MCS_QM, tbs_bits

    lines = [f"| MCS | Q_m 36.213 | Q_m ns-3 | I_TBS | TBS ({n_prb} PRB) | SINR @ BLER 10 % (dB) | 2nd tx (dB) "
             "| ns-3 grants it above (dB) | margin (dB) | BLER there |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mcs in range(29):
        ns3_qm = 2 if mcs <= 9 else 4 if mcs <= 16 else 6  # the error model's (MI_QPSK_MAX_ID, MI_16QAM_MAX_ID)
        first, second = (ns3_lte_sinr_at_bler(mcs, n_prb, 0.1, k) for k in (1, 2))
        grant = ns3_ul_mcs_threshold_db(mcs)
        there = ns3_lte_bler(grant, mcs, n_prb) if grant is not None else None
        lines.append(f"| {mcs} | {UL_MCS_QM[mcs]} | {ns3_qm} | {UL_MCS_ITBS[mcs]} | {tbs_bits(mcs, n_prb, ns3=True)} "
                     f"| {first:.2f} | {second:.2f} | {_fmt(grant, '.2f')} "
                     f"| {_fmt(None if grant is None else grant - first, '.2f')} | {_fmt(there, '.1e')} |")
    return "\n".join(lines)


def _worker(request: str, answer: str) -> int:
    with open(request) as f:
        job = json.load(f)
    rows = [_simulate(s, **job["options"]) for s in job["sinrs_db"]]
    with open(answer, "w") as f:
        json.dump(rows, f)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated seconds per SINR (default 2)")
    parser.add_argument("--warmup", type=float, default=0.1, help="seconds left out at the start (default 0.1)")
    parser.add_argument("--prb", type=int, default=25, help="cell bandwidth in RBs (default 25, 5 MHz)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scheduler", default="ns3::PfFfMacScheduler")
    parser.add_argument("--sinr", type=float, nargs="*", help="SINRs in dB (default -5 to 25 in 2 dB steps)")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(*args.worker)
    sinrs = args.sinr if args.sinr else [float(s) for s in range(-5, 26, 2)]
    started = time.perf_counter()
    rows = ns3_lte_uplink_sweep(sinrs, args.prb, args.seconds, args.seed, warmup=args.warmup,
                                scheduler=args.scheduler)
    simulated = time.perf_counter() - started
    print(f"ns-3 LTE uplink, {args.prb} PRB, {args.seconds:g} s per point ({args.warmup:g} s warm-up), "
          f"{args.scheduler}, UE {UE_TX_POWER_DBM:g} dBm, eNB NF {ENB_NOISE_FIGURE_DB:g} dB\n")
    print(goodput_table(rows))
    print(f"\n{len(rows)} simulations in {simulated:.1f} s (one child process, its ns-3 import included)\n")
    started = time.perf_counter()
    print(f"ns-3's MIESM error model (LteMiErrorModel), AWGN, {args.prb} PRB: first transmission, and the 2nd "
          "with the 1st failed at the same SINR\n")
    print(bler_table(args.prb))
    print(f"\nBLER table in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
