"""The one line a run's summary prints (``wirelessfl run``, ``resume``, ``sweep``): its rounds or
aggregations, simulated time, accuracy or what the schedule cost, the uploads by outcome, the power
against its budget and the wall time."""
from __future__ import annotations

import math

from ..sim.records.summary import POWER_TOLERANCE

__all__ = ["summary_line"]


def _busy(s: dict) -> list[str]:
    """The share of the time the uplink carried an upload (where the summary has it)."""
    share = s.get("uplink_utilisation")
    return [f"uplink busy {100 * share:.0f} %"] if isinstance(share, (int, float)) and share == share else []


def summary_line(name: str, s: dict) -> str:
    """``name``'s line from its summary ``s`` (summary.json's fields; a failed or foreign summary says so)."""
    if s.get("status") not in ("complete", None) and "rounds" not in s:  # failed before its first round
        return f"{name}: {s.get('status')}: {s.get('error')}"
    needed = ("rounds", "sim_time_s", "mean_distinct_per_round", "wall_time_s")
    if any(not isinstance(s.get(key), (int, float)) for key in needed):  # a summary.json edited or of another version
        return f"{name}: {s.get('status', 'no status')} (its summary.json lacks " \
               f"{', '.join(k for k in needed if not isinstance(s.get(k), (int, float)))})"
    # devices dispatched one by one (fedbuff, fedasync): a row is an aggregation of updates, not a round
    rounds, per = ("rounds", "devices/round") if _round_decisions(s.get("protocol", "sync")) \
        else ("aggregations", "updates/aggregation")
    tiers = s.get("tiers")
    if isinstance(tiers, dict):  # edge servers and a cloud: rows are both
        rounds, per = "cloud aggregations", "devices/edge round"
        parts = [f"{name}: {tiers['cloud_aggregations']} {rounds} of {sum(tiers['edge_rounds'])} edge rounds",
                 f"{_fixed(s['sim_time_s'], '.1f')} s simulated"]
    else:
        parts = [f"{name}: {s['rounds']} {rounds}", f"{_fixed(s['sim_time_s'], '.1f')} s simulated"]
    if isinstance(s.get("mean_snr_db"), (int, float)):  # physical units
        parts.append(f"mean SNR {_fixed(s['mean_snr_db'], '.1f')} dB")
    if math.isnan(s.get("final_accuracy", math.nan)):  # timing only: what the schedule cost
        count = max(s["rounds"], 1)
        parts += [f"{_fixed(s['mean_distinct_per_round'], '.2f')} {per}",
                  f"airtime {s['total_comm_s'] / count:.3g} s/{per.split('/')[1]}", *_busy(s),
                  _power(s), f"transmit energy {s['total_energy_j']:.3g} J"]
    else:
        failed = s.get("status") not in ("complete", None)  # its last evaluation, not what it reached
        parts.append(f"accuracy {s['final_accuracy']:.3f}" + (" before it failed" if failed else ""))
        if s.get("target_accuracy"):
            t = s["time_to_target_s"]
            parts.append(f"time to {s['target_accuracy']:g}: "
                         + ("not reached" if math.isnan(t) else f"{_fixed(t, '.1f')} s"))
        parts.append(f"{_fixed(s['mean_distinct_per_round'], '.2f')} {per}")
        if isinstance(s.get("mean_time_avg_power"), (int, float)):  # as a timing-only run says it
            parts.append(_power(s))
    outcomes = _outcomes(s)
    if outcomes:
        parts.append(outcomes)
    if s["rounds"] == 0 and s.get("status") == "complete" and s.get("rounds_to_target") != 0:  # an empty run says so
        parts.append(f"no {rounds[:-1]} within run.time_budget_s: the first uploads or computations outlast it "
                     "(updates.csv has their times)")
    parts.append(f"wall {_fixed(s['wall_time_s'], '.1f')} s")
    if s.get("status") not in ("complete", None):
        parts.append(f"{s['status']}: {s.get('error')}")
    return ", ".join(parts)


FIXED_LIMIT = 1e15
"""Beyond it (or below its inverse) a number in fixed point is digits of float noise (1e300 s: 300 of
them) or zeros, said in %g instead."""


def _fixed(value: float, spec: str) -> str:
    """``value`` in the fixed-point ``spec`` (".1f") the line uses, or compactly ("9.6e+299",
    "1e-300") where fixed point would say nothing but its noise or 0.0."""
    huge_or_tiny = abs(value) >= FIXED_LIMIT or 0 < abs(value) < 1 / FIXED_LIMIT
    return format(value, ".4g") if huge_or_tiny else format(value, spec)


def _outcomes(s: dict) -> str:
    """The uploads by outcome (updates.csv's), when any was not applied: "uploads 120 (100 applied,
    20 lost; 9 carried to a later aggregation)"; "" when every one was applied."""
    counts = {k: v for k, v in (s.get("outcomes") or {}).items() if v}
    carried = s.get("carried_uploads") or 0
    if not counts or (set(counts) == {"applied"} and not carried):
        return ""
    words = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items())
    return f"uploads {sum(counts.values())} ({words}" + (f"; {carried} carried to a later aggregation)" if carried else ")")


def _power(s: dict) -> str:
    """The time-average power against its budget, which is a long-run average: the virtual queues
    start empty, so the first rounds may spend up to p_max (the transient's length is said)."""
    physical = isinstance(s.get("mean_snr_db"), (int, float))  # powers in watts: said in dBm
    power = s["mean_time_avg_power"]
    text = f"time-average power {_dbm(power) if physical else format(power, '.3g')}"
    if s.get("p_bar") is None:
        return text
    text += f" (budget P̄ = {_dbm(s['p_bar']) if physical else format(s['p_bar'], 'g')}, a long-run average"
    settled = s.get("power_settled_round", math.nan)
    if not s.get("rounds"):  # no round ended (a run that failed in its first): nothing spent to compare
        return text + ")"
    if math.isnan(settled) and not _round_decisions(s.get("protocol", "sync")):
        return text + ")"  # devices dispatched one by one: no round decisions, no virtual queues to fill
    if math.isnan(settled) and s.get("scheduler", "lyapunov") != "lyapunov" and "power_settled_round" in s:
        return text + f"; above it to the end of these {s['rounds']} rounds)"  # a scheduler without virtual queues
    if math.isnan(settled):
        return text + ("" if "power_settled_round" not in s else
                       f"; above it to the end: the empty queues' transient outlasts these {s['rounds']} rounds)")
    return text + (")" if settled == 0 else f"; within {100 * POWER_TOLERANCE:g}% of it from round {settled:.0f})")


def _dbm(watts: float) -> str:
    """A power in watts, said in dBm."""
    return f"{10 * math.log10(watts) + 30:.1f} dBm" if watts > 0 else "0 W"


def _round_decisions(protocol: str) -> bool:
    """Whether runs of the round protocol named ``protocol`` decide per round (sync, semi_sync),
    where the Lyapunov queues start empty; True for one that cannot be loaded here."""
    from ..sim.protocols import PROTOCOLS, event_driven, round_based

    try:
        loaded = PROTOCOLS.load(protocol)
    except ValueError:  # PluginError
        return True
    return not event_driven(loaded) or round_based(loaded)
