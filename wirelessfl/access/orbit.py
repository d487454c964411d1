"""Uploads over satellite passes (``link.access = "orbit"``, set by a scenario's [orbits] table): each
client sends on a link of its own, only inside its contact windows, at the link budget's rate on the
orbit grid (wirelessfl.orbits.contacts). The closed form of a sync round (``schedule_devices``) and
the event uplink (:class:`PassUplink`) ask the same contact plan, so they give the same starts and
ends. Every station serves every satellite it sees at once (one beam each; no queue), as the
``dedicated`` scheme has it on the ground.

updates.csv gains ``elevation_deg``, ``range_km`` and ``doppler_hz``: the geometry, to the partner of
highest elevation, at the grid point where the upload went on the air.
"""
from __future__ import annotations

import math

import numpy as np

from ..des import ON_AIR, RANK_DEVICE, priority
from ..fields import ConfigError, NoOptions
from .base import AccessScheme, AddsUploadColumns, UplinkSchedule
from .link import Link, queue

ORBITS_MISSING = "[orbits] needs sgp4 for the satellites' orbits: pip install 'wirelessfl[orbits]'"

__all__ = ["ORBIT_COLUMNS", "OrbitAccess", "PassUplink", "contact_plan"]

ORBIT_COLUMNS = ("elevation_deg", "range_km", "doppler_hz")


def _constellation(orbits):
    from ..orbits.constellation import constellation_of

    return constellation_of(orbits)


def _duration_s(scenario) -> float:
    duration, budget = scenario.orbits.duration_s, scenario.run.time_budget_s
    if duration is None and budget is None:
        raise ConfigError("orbits.duration_s: set it or run.time_budget_s (the orbits are propagated over the "
                          "run's time, which a run that stops by rounds does not know)")
    if duration is not None and budget is not None and duration < budget:
        raise ConfigError(f"orbits.duration_s = {duration:g}: shorter than run.time_budget_s = {budget:g}; the "
                          "orbits must cover the run (leave orbits.duration_s out)")
    return float(duration if duration is not None else budget)


def contact_plan(scenario):
    """The scenario's contact plan (propagation and passes: a station with no pass is a ConfigError)."""
    from ..orbits import LinkBudget, stations
    from ..orbits.contacts import ContactPlan

    o = scenario.orbits
    budget = LinkBudget(o.frequency_hz, o.eirp_dbw, o.g_over_t_db_k, o.bandwidth_hz, o.other_losses_db)
    return ContactPlan(_constellation(o), stations(o.station_specs()), _duration_s(scenario),
                       orbit_step_s=o.orbit_step_s, min_elevation_deg=o.min_elevation_deg, clients=o.clients,
                       budget=budget, rate=o.rate, roll_off=o.roll_off, margin_db=o.margin_db, pass_end=o.pass_end,
                       isl=o.isl, isl_rate_bps=o.isl_rate_bps, isl_grazing_km=o.isl_grazing_km,
                       tx_power_w=scenario.link.p_bar, noise_w=scenario.link.noise_power,
                       edges=scenario.hierarchy.tiers == "edge")


class OrbitAccess(AccessScheme, AddsUploadColumns):
    """Uploads inside passes at the link budget's rate (see the module docstring)."""

    Options = NoOptions
    concurrent = False
    solo_uploads = True
    upload_columns = ORBIT_COLUMNS

    def __init__(self, link: Link, plan):
        super().__init__(link)
        self.plan = plan
        self._round_rows = np.zeros((0, len(ORBIT_COLUMNS)))
        self._rows: dict[int, tuple] = {}  # an event upload's geometry, by dispatch number, until its row is written

    @classmethod
    def from_scenario(cls, scenario, options) -> "OrbitAccess":
        """The contact plan of the scenario's [orbits] over the run's time."""
        return cls(Link(scenario.link), contact_plan(scenario))

    @classmethod
    def check(cls, scenario, options) -> None:
        """An [orbits] table and one cell (with edge servers: the stations, for satellite clients
        without ISL); a constellation that builds (Walker elements in
        range, a TLE file whose lines are well formed); satellite clients one device each."""
        try:
            import sgp4  # noqa: F401  (the optional extra every orbit computation needs)
        except ImportError:
            raise ConfigError(ORBITS_MISSING) from None
        o = scenario.orbits
        if o is None:
            raise ConfigError("link.access = 'orbit': needs an [orbits] table (docs/satellites.md)")
        _duration_s(scenario)
        if scenario.network.cells != 1:
            raise ConfigError(f"orbits: with network.cells = {scenario.network.cells}: the ground stations are the "
                              "sites of an [orbits] run (network.cells = 1; hierarchy.tiers = 'edge' makes each "
                              "station an edge server)")
        if scenario.hierarchy.tiers == "edge" and (o.clients != "satellites" or o.isl):
            raise ConfigError(f"hierarchy.tiers = 'edge' with orbits.clients = {o.clients!r}"
                              f"{' and orbits.isl = true' if o.isl else ''}: only ground stations serve as edges, "
                              "each for the satellites it sees most, which upload directly; use orbits.clients = "
                              "'satellites' without orbits.isl, or hierarchy.tiers = 'cloud' (satellites or ground "
                              "devices as edges are not modelled)")
        for key in ("packet_bits", "rate_bps"):
            if getattr(scenario.link, key) is not None:
                raise ConfigError(f"link.{key} with [orbits]: the rate of a pass is its link budget's "
                                  "(orbits.rate), not the link's")
        if scenario.link.errors != "none" or scenario.link.rate != "shannon":
            raise ConfigError("link.errors / link.rate with [orbits]: the rate of a pass is its link budget's "
                              "(orbits.rate = 'shannon' or 'dvbs2')")
        if scenario.link.downlink != "fixed":
            raise ConfigError(f"link.downlink = {scenario.link.downlink!r} with [orbits]: the model's way up to the "
                              "satellites is not timed over passes; use 'fixed' (link.downlink_s)")
        if scenario.channel.coherence_s is not None or scenario.devices.speed_mps:
            raise ConfigError("channel.coherence_s / devices.speed_mps with [orbits]: the channel of a pass "
                              "changes with the orbit grid (orbits.orbit_step_s)")
        from ..orbits import stations

        stations(o.station_specs())  # presets known, names distinct, coordinates in range
        count = len(_constellation(o))
        if o.clients == "satellites" and scenario.devices.count != count:
            raise ConfigError(f"devices.count = {scenario.devices.count}: with orbits.clients = 'satellites' every "
                              f"satellite is a device; the constellation has {count} (leave devices.count out)")
        if o.isl and o.tle_file is not None:
            raise ConfigError("orbits.isl = true with orbits.tle_file: links along a plane need a Walker layout")
        if o.isl and o.clients != "satellites":
            raise ConfigError("orbits.isl = true with orbits.clients = 'ground': only satellite clients relay")

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """What a scheduler prices: the airtime on the simulator's link at ``gain`` (the pass's own
        timing is ``schedule_devices``')."""
        return self.link.airtime_s(bits, gain, power)

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        raise NotImplementedError("the orbit uplink times uploads per device: schedule_devices")

    def schedule_devices(self, devices: np.ndarray, ready_s: np.ndarray, bits, deadline_s: float | None = None
                         ) -> UplinkSchedule:
        """A sync round's uploads over the passes: device i (``devices[i]``) ready at ready_s[i]."""
        k = len(devices)
        bits = np.broadcast_to(np.asarray(bits, dtype=float), (k,))
        start, end, ok = np.full(k, np.nan), np.full(k, np.nan), np.zeros(k, dtype=bool)
        on_air, attempts, rows = np.zeros(k), np.zeros(k, dtype=np.int64), np.full((k, len(ORBIT_COLUMNS)), np.nan)
        horizon = -math.inf
        for i, (n, ready, b) in enumerate(zip(devices.tolist(), ready_s.tolist(), bits.tolist())):
            up = self.plan.upload(self.plan.client_of(n), ready, b)
            if up.start_s != up.start_s:  # no window before the orbits' horizon: the round waits to the end
                horizon = max(horizon, self.plan.horizon_s)
                continue
            if deadline_s is not None and not up.start_s < deadline_s:
                continue  # its pass comes after the deadline: it sends nothing
            start[i], end[i], ok[i], on_air[i], attempts[i] = up.start_s, up.end_s, up.ok, up.on_air_s, up.passes
            rows[i] = (up.elevation_deg, up.range_km, up.doppler_hz)
            if deadline_s is not None and up.end_s > deadline_s:  # cut by the deadline
                ok[i], end[i] = False, deadline_s
                on_air[i] = min(on_air[i], deadline_s - up.start_s)
        self._round_rows = rows
        order = np.argsort(np.where(np.isnan(start), np.inf, start), kind="stable")
        finite = end[~np.isnan(end)]
        end_s = max(float(finite.max()) if finite.size else float(np.max(ready_s, initial=0.0)), horizon)
        if deadline_s is not None and not ok.all():
            end_s = deadline_s
        return UplinkSchedule(order, start, ok, end_s, tx_end=end, on_air_s=on_air, attempts=attempts)

    def round_counts(self) -> np.ndarray:
        """The last sync round's geometry, one row per upload in the order ``schedule_devices`` got them."""
        return self._round_rows

    def take_counts(self, seq: int) -> tuple:
        return self._rows.pop(seq, (math.nan,) * len(ORBIT_COLUMNS))

    def run_files(self) -> dict[str, str]:
        """passes.csv: every station-satellite contact window of the run (wirelessfl.orbits.passes_csv's
        columns: station, satellite, rise_s, set_s, max_elevation_deg, max_s; seconds from orbits.epoch)."""
        import csv
        import io
        from dataclasses import astuple, fields

        from ..orbits import Pass

        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")  # a station's name may hold a comma
        writer.writerow([f.name for f in fields(Pass)])
        writer.writerows([f"{v:.3f}" if isinstance(v, float) else v for v in astuple(p)] for p in self.plan.passes)
        return {"passes.csv": text.getvalue()}

    def event_uplink(self, host) -> "PassUplink":
        return PassUplink(host, self)


class PassUplink:
    """The event uplink over passes: an upload waits for its window, then goes on the air for the
    plan's time. Deterministic, so a resumed upload recomputes its plan from when it was ready."""

    def __init__(self, host, scheme: OrbitAccess):
        self.host, self.scheme = host, scheme

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): True if it got through, False if a pass ended on it
        (``pass_end = "lose"``). One for which no window comes before the orbits' horizon waits until
        the run stops (its row: in flight)."""
        env, plan = self.host.env, self.scheme.plan
        ready = u.compute_end_s if u.compute_end_s == u.compute_end_s else env.now
        up = plan.upload(plan.client_of(u.device), ready, u.bits)
        self.scheme._rows[u.seq] = (up.elevation_deg, up.range_km, up.doppler_hz)
        prio = priority(RANK_DEVICE, u.seq)
        if up.start_s != up.start_s:  # no window before the orbits' horizon: it waits until the run ends
            queue(self.host, u)
            yield env.event()
            return False  # (never reached: nothing triggers the event)
        if u.phase != ON_AIR:
            queue(self.host, u)  # waiting for its pass
            if up.start_s > env.now:
                yield env.at(up.start_s, prio)
            u.airtime_s = up.on_air_s  # (its gain stays the channel part's draw, as under sync)
            u.phase = ON_AIR
            self.host.start_transmission(u)
        u.attempts = up.passes
        yield env.at(up.end_s, prio)
        if up.ok:
            u.tx_end_s = up.end_s
        return up.ok

    def on_air_until(self, u, t: float) -> float:
        """The seconds on the air of an upload stopped at ``t`` (at most its plan's)."""
        return min(t - u.tx_start_s, u.airtime_s) if u.airtime_s == u.airtime_s else t - u.tx_start_s

    def state_dict(self) -> dict:
        """The geometry of uploads whose rows are not written yet (an upload over by the checkpoint
        whose update waits, e.g. for its edge's aggregation): its transmission is not run again."""
        return {"rows": [[seq, *row] for seq, row in sorted(self.scheme._rows.items())]}

    def load_state(self, state: dict) -> None:
        self.scheme._rows.update({int(seq): tuple(row) for seq, *row in state.get("rows", ())})
