"""Rules of a scenario that involve more than one field, then each part's own ``check``."""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

from ..capabilities import has_member
from ..fields import ConfigError, require_memory
from ..plugins import KINDS, registry
from .limits import check_edge_slots, check_rates, check_tier_rows


def cross_check(s) -> None:
    """Rules that involve more than one field, then each part's own ``check`` (of a scenario with
    variants: of each variant, as resolved, not of the base they override), then every variant and
    sweep value as a scenario of its own (the first rule broken is the error)."""
    _check_cell(s)
    _check_stopping(s)
    _check_model_input(s)
    _check_participation(s)
    _check_battery(s)
    if s.learning.aux_samples and s.part("dataset").own_split:
        raise ConfigError(f"learning.aux_samples: dataset {s.learning.dataset!r} brings its own split over devices, "
                          "with no shared training pool to draw an auxiliary set from; use 0")
    _check_scale(s)
    _check_device(s)
    if s.link.errors == "outage" and s.link.rate_bps is None:
        raise ConfigError("link.errors = 'outage': needs link.rate_bps (at the adaptive rate the capacity always "
                          "suffices, so nothing would fail)")
    _check_downlink(s)
    _check_network(s)
    _check_hierarchy(s)
    if s.devices.mobility != "static":
        _check_mobility(s)
    _check_upload_channel(s)
    if s.link.p_max < s.link.p_bar:
        raise ConfigError(f"link.p_max = {s.link.p_max:g}: must be >= link.p_bar = {s.link.p_bar:g}")
    if not s.variants:  # a family's base never runs: each part checks each variant as resolved (_members)
        for kind in KINDS.values():
            _check_part(s, kind)
    check_rates(s)  # options whose product would make the clock crawl (config.limits)
    _check_held_used(s, _members(s))


def _check_cell(s) -> None:
    """One sigma and one position per device; sigma_max >= sigma_min."""
    n = s.devices.count
    if s.channel.profile == "list" and len(s.channel.sigmas) != n:
        raise ConfigError(f"channel.sigmas has {len(s.channel.sigmas)} values: must have one per device "
                          f"(devices.count = {n})")
    if s.channel.profile == "linear" and s.channel.sigma_max < s.channel.sigma_min:
        raise ConfigError(f"channel.sigma_max = {s.channel.sigma_max}: must be >= channel.sigma_min")
    if s.channel.positions_m and len(s.channel.positions_m) != n:
        raise ConfigError(f"channel.positions_m has {len(s.channel.positions_m)} values: must have one per "
                          f"device (devices.count = {n})")
    for i, xy in enumerate(s.channel.positions_m):
        if len(xy) != 2:
            raise ConfigError(f"channel.positions_m[{i}] = {list(xy)!r}: must be a pair [x, y] in metres")


def _check_stopping(s) -> None:
    """The run stops (rounds or a time budget), a target it stops at, one evaluation rule."""
    if s.run.rounds is None and s.run.time_budget_s is None:
        raise ConfigError("run.rounds: set run.rounds or run.time_budget_s so the run stops")
    if s.run.stop_at_target and s.run.target_accuracy is None:
        raise ConfigError("run.stop_at_target = true: needs run.target_accuracy")
    if s.run.eval_every_rounds is not None and s.run.eval_every_s is not None:
        raise ConfigError("run.eval_every_s: set either run.eval_every_rounds or run.eval_every_s, not both")


def _check_participation(s) -> None:
    """Excluded devices exist and leave someone; an availability trace (instead of the chain) makes
    someone available."""
    n = s.devices.count
    bad = [d for d in s.devices.excluded if d >= n]
    if bad:
        raise ConfigError(f"devices.excluded = {list(s.devices.excluded)!r}: device ids must be < "
                          f"devices.count = {n}")
    if s.devices.excluded_count + len(set(s.devices.excluded)) >= n:
        raise ConfigError(f"devices.excluded_count = {s.devices.excluded_count}: with devices.excluded "
                          f"({len(set(s.devices.excluded))} devices) no device of devices.count = {n} could ever take part")
    if s.devices.availability_trace is not None:
        if s.devices.p_on_to_off > 0:
            raise ConfigError("devices.availability_trace: set either the trace or devices.p_on_to_off, not both")
        from ..traces import Trace

        on = Trace.read(s.devices.availability_trace, n, "devices.availability_trace", boolean=True).values
        if not on.any():
            raise ConfigError(f"devices.availability_trace = {s.devices.availability_trace!r}: no device is ever "
                              "available in it, so no device could ever take part")


def _members(s) -> list:
    """Every variant and every sweep value, each built (and so checked) as a scenario of its own."""
    members = []
    for vname, overrides in s.variants:
        try:
            members.append(s.member(*overrides))
        except ConfigError as exc:
            raise ConfigError(f"variants.{vname}: {exc}") from None
    for key, values in s.sweep:
        for value in values:
            try:
                members.append(s.member((key, value)))
            except ConfigError as exc:
                raise ConfigError(f"sweep.{key}: {exc}") from None
    return members


PER_DEVICE_BYTES = 1200
"""Memory a run holds for every device, whatever the parts (decisions, queues, totals, buffers of
per-device arrays): measured about 1 KB at N = 10,000 (benchmarks/scale.py), rounded up."""
PER_DEVICE_SITE_BYTES = 48
"""Memory for every device and site with several cells: each device's mean gain to every site (its
shadowing, path gain, the interferers' means; association, handover and interference read them),
measured 4.7 GB at 10,000 devices x 10,000 sites, rounded up."""
PER_ROUND_BYTES = 2000
"""Memory of one round's records kept for the result (a row of rounds.csv and its Python objects)."""


def _check_downlink(s) -> None:
    """Downlink errors, retransmissions and a stale start need a timed downlink; an outage needs a
    fixed rate; a stale start needs a protocol that trains each device from its own start model."""
    lc = s.link
    if lc.downlink == "fixed":
        for name, value, default in (("downlink_errors", lc.downlink_errors, "none"),
                                     ("downlink_max_attempts", lc.downlink_max_attempts, 1),
                                     ("downlink_miss", lc.downlink_miss, "wait")):
            if value != default:
                raise ConfigError(f"link.{name} = {value!r}: needs link.downlink = 'broadcast' or 'unicast' (under "
                                  "'fixed' the model always arrives after link.downlink_s)")
        return
    if lc.downlink_errors == "outage" and lc.downlink_rate_bps is None:
        raise ConfigError("link.downlink_errors = 'outage': needs link.downlink_rate_bps (at the adaptive rate the "
                          "capacity always suffices, so nothing would fail)")
    if lc.downlink_miss == "stale" and not s.facts.event_driven:
        raise ConfigError(f"link.downlink_miss = 'stale': protocol.name = {s.protocol.name!r} trains a round's devices "
                          "from the current model in one call; use 'wait', or an event protocol (semi_sync, fedbuff, "
                          "fedasync)")


def _check_network(s) -> None:
    """Several cells need path loss (the sites are where the devices' gains come from), sites for every
    cell, interference only where it is modelled (_check_interference), moving devices (handover)
    without edge servers or batteries, and no scheme whose uplink is not one cell's alone."""
    net = s.network
    if net.sites_file is not None and net.layout != "file":
        raise ConfigError(f"network.sites_file: set it exactly when network.layout = 'file' (it is {net.layout!r})")
    if net.layout == "file":
        if net.sites_file is None:
            raise ConfigError("network.layout = 'file': needs network.sites_file (CSV or .npy, one x, y row per site)")
        from ..traces import read_table

        sites = read_table(net.sites_file, "network.sites_file")
        if sites.ndim != 2 or sites.shape[1] != 2 or not np.isfinite(sites).all():
            raise ConfigError(f"network.sites_file = {str(net.sites_file)!r}: must hold one finite x, y row (metres) "
                              f"per site; it has shape {sites.shape}")
        count = len(sites)
        if count != net.cells:
            raise ConfigError(f"network.sites_file = {str(net.sites_file)!r} has {count} sites: must have one per cell "
                              f"(network.cells = {net.cells})")
    if net.cells == 1:
        return
    require_memory("network.cells", net.cells, 32.0 * net.cells * s.devices.count,
                   f"{net.cells} cells x {s.devices.count} devices (distances and gains to every site)")
    if not s.channel.path_loss:
        raise ConfigError(f"network.cells = {net.cells}: needs channel.path_loss = true (a device's gain comes from "
                          "its distance to the site serving it)")
    if s.channel.path_loss == "38.901":
        raise ConfigError(f"network.cells = {net.cells}: several cells use the log-distance path loss "
                          "(channel.path_loss = true); TR 38.901 (\"38.901\") is modelled for one cell")
    if net.cells > net.reuse:
        _check_interference(s)
    if s.devices.mobility != "static" and (s.hierarchy.tiers == "edge" or s.devices.availability == "battery"):
        what = "edge servers keep their cell's devices" if s.hierarchy.tiers == "edge" else \
            "batteries follow a task that a handover would move to another cell"
        raise ConfigError(f"devices.mobility = {s.devices.mobility!r} with network.cells = {net.cells}: {what}, which "
                          "handover does not do yet; use 'static'")
    access = s.part("access")
    if access.over_the_air or access.contention:
        raise ConfigError(f"link.access = {s.link.access!r} with network.cells = {net.cells}: "
                          + ("an over-the-air sum is one cell's" if access.over_the_air else
                             "random access keeps counters of the whole band")
                          + "; use tdma, tdma_slotted, fdma, ofdma or dedicated")


def _check_interference(s) -> None:
    """Cells that share a sub-band interfere: modelled for one transmitter per cell (tdma) and for
    bands shared within each cell (fdma, ofdma), with each upload sent whole at the rates the other
    cells and its fading blocks allow (no packets, no fixed rate) and without batteries (a battery
    follows a task's known time on the air)."""
    net, lc = s.network, s.link
    where = f"network.cells = {net.cells} with network.reuse = {net.reuse}"
    if not getattr(s.part("access"), "interferes", False):
        raise ConfigError(f"{where}: cells on one sub-band interfere, which is modelled under link.access = 'tdma', "
                          f"'fdma' and 'ofdma', not {lc.access!r}; use one of them, or network.reuse >= network.cells")
    if lc.packet_bits is not None or lc.rate_bps is not None or lc.errors != "none":
        raise ConfigError(f"{where}: uploads under interference go whole at the rate the other cells allow; leave "
                          "link.packet_bits, link.rate_bps and link.errors unset")
    if s.devices.availability == "battery":
        raise ConfigError(f"{where}: batteries follow a task's time on the air, which interference decides as it goes; "
                          "use devices.availability = 'chain'")


def _check_hierarchy(s) -> None:
    """Edge servers run sync rounds of an algorithm whose server keeps nothing but the model, on
    devices that are always there; the backhaul is timed under sync (for now)."""
    h, protocol = s.hierarchy, s.protocol.name
    if h.tiers == "cloud":
        if h.cloud != "sync":
            raise ConfigError(f"hierarchy.cloud = {h.cloud!r}: needs hierarchy.tiers = 'edge' (with one server in the "
                              "cloud there are no edges to wait for)")
        if h.cloud_every != 1:
            raise ConfigError(f"hierarchy.cloud_every = {h.cloud_every}: needs hierarchy.tiers = 'edge' (with one "
                              "server in the cloud every round is a cloud aggregation)")
        timed = h.backhaul_rate_bps is not None or h.backhaul_latency_s > 0
        if timed and s.facts.event_driven and s.facts.probes:
            raise ConfigError(f"hierarchy.backhaul_rate_bps / backhaul_latency_s with scheduler.name = "
                              f"{s.scheduler.name!r} under protocol.name = {protocol!r}: its reports to the cloud are "
                              "not timed over the backhaul; use protocol.name = 'sync', or another scheduler")
        return
    events = s.facts.event_driven
    if h.cloud == "async" and not events:
        raise ConfigError("hierarchy.cloud = 'async' with protocol.name = 'sync': an asynchronous cloud takes each "
                          "edge's update as it arrives, which edges on the event engine send; use protocol.name = "
                          "'semi_sync' (sync rounds at each edge), 'fedbuff' or 'fedasync'")
    if not s.facts.runs_in_tiers:
        raise ConfigError(f"hierarchy.tiers = 'edge' with learning.algorithm = {s.learning.algorithm!r}: its server "
                          "keeps state besides the model (or trains alone), which edges and a cloud would each "
                          "need their own of; use fedavg or perfedavg")
    dc = s.devices
    if dc.availability == "battery":
        raise ConfigError("hierarchy.tiers = 'edge' with devices.availability = 'battery': batteries under edge "
                          "servers are not modelled yet; use devices.availability = 'chain'")
    if (dc.p_on_to_off > 0 or dc.availability_trace is not None) and not events:
        raise ConfigError("hierarchy.tiers = 'edge' with protocol.name = 'sync': the sync edges' devices are always "
                          "available; leave devices.p_on_to_off at 0 and devices.availability_trace unset, or run the "
                          "edges on the event engine (protocol.name = 'semi_sync', 'fedbuff' or 'fedasync')")


def _check_battery(s) -> None:
    """Batteries replace the availability chain, start within their capacity, and harvest from a trace
    only when one is named; a harvest part of one's own only where there are batteries to fill."""
    dc = s.devices
    if dc.availability != "battery":
        if dc.harvest not in registry("harvest").builtins:  # it would be loaded and never asked
            raise ConfigError(f"devices.harvest = {dc.harvest!r}: energy arrives only at batteries; set "
                              "devices.availability = 'battery'")
        return
    if dc.p_on_to_off > 0 or dc.availability_trace is not None:
        raise ConfigError("devices.availability = 'battery': replaces the availability chain and trace; leave "
                          "devices.p_on_to_off at 0 and devices.availability_trace unset")
    access = s.part("access")
    if access.over_the_air or (access.contention and not has_member(access, "listening_s")):
        why = ("the devices send one analog sum together, which a battery running out mid-upload would cut for all"
               if access.over_the_air else "a device's time on the air is its slots between backoffs, decided by "
               "contention as it goes, which a battery drawn per phase of a task does not follow")
        raise ConfigError(f"devices.availability = 'battery': under link.access = {s.link.access!r} {why}; use "
                          "another access scheme")
    if dc.battery_initial_j is not None and dc.battery_initial_j > dc.battery_capacity_j:
        raise ConfigError(f"devices.battery_initial_j = {dc.battery_initial_j:g}: must be <= "
                          f"devices.battery_capacity_j = {dc.battery_capacity_j:g}")
    if (dc.harvest == "trace") != (dc.harvest_trace is not None):
        raise ConfigError("devices.harvest_trace: set it exactly when devices.harvest = 'trace'")
    if dc.harvest == "trace":
        from ..traces import Trace

        Trace.read(dc.harvest_trace, dc.count, "devices.harvest_trace", nonnegative=True)


def _check_device(s) -> None:
    """run.device names a torch device this machine has (checked at load, not at the first round)."""
    if s.run.device == "cpu" or s.run.timing_only:
        return
    import torch

    field = f"run.device = {s.run.device!r}"
    try:
        device = torch.device(s.run.device)
    except (RuntimeError, ValueError):
        raise ConfigError(f"{field}: not a torch device such as cpu, cuda or cuda:0") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(f"{field}: this machine has no CUDA device (torch {torch.__version__}); use cpu")
        if device.index is not None and device.index >= count:
            raise ConfigError(f"{field}: this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}")
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            raise ConfigError(f"{field}: this machine has no Apple MPS device; use cpu")
    elif device.type != "cpu":
        raise ConfigError(f"{field}: allowed device types are cpu, cuda and mps")


def _check_scale(s) -> None:
    """Absurd sizes are refused before anything runs, with the memory they would need."""
    n = s.devices.count
    require_memory("devices.count", n, n * PER_DEVICE_BYTES, f"a run with {n} devices")
    cells = s.network.cells
    if cells > 1:
        require_memory("network.cells", cells, n * cells * PER_DEVICE_SITE_BYTES,
                       f"the mean gains of {n:,} devices to each of {cells:,} sites")
    if not s.run.timing_only:  # every device's sample indices, at least
        spd = s.learning.samples_per_device
        require_memory("learning.samples_per_device", spd, 8.0 * n * spd, f"{n} devices x {spd:,} samples")
    cores = os.cpu_count() or 1
    if s.run.threads > 4 * cores:
        raise ConfigError(f"run.threads = {s.run.threads}: more than 4 x this machine's {cores} cores; the threads "
                          "would only contend")
    if s.run.rounds is not None:
        require_memory("run.rounds", s.run.rounds, s.run.rounds * PER_ROUND_BYTES,
                       f"keeping the records of {s.run.rounds} rounds")
    check_tier_rows(s)  # the edges' aggregations that run.rounds cloud ones imply
    check_edge_slots(s)  # every edge's scheduler over every device
    budget, deadline = s.run.time_budget_s, s.run.round_deadline_s
    if budget is not None and deadline is not None:  # no round outlasts the deadline
        implied = min(budget / deadline, s.run.rounds if s.run.rounds is not None else math.inf)
        require_memory("run.round_deadline_s", deadline, implied * PER_ROUND_BYTES,
                       f"a time budget of {budget:g} s in rounds of at most {deadline:g} s ({implied:,.0f} rounds "
                       "or more), keeping their records,")
    ch = s.channel
    if ch.path_loss is True:  # log-distance (TR 38.901's losses are bounded by its validity ranges)
        far = max([ch.cell_radius_m, ch.reference_distance_m] + [math.hypot(*xy) for xy in ch.positions_m])
        spread = 6 * ch.log_distance_shadowing_db / 10  # six standard deviations of shadowing, in decades
        try:
            decades = ch.reference_gain_db / 10 - ch.path_loss_exponent * math.log10(far / ch.reference_distance_m)
        except (OverflowError, ValueError):
            decades = -math.inf
        if not -280 < decades - spread and decades + spread < 280:
            raise ConfigError(f"channel.reference_gain_db = {ch.reference_gain_db:g}: with path_loss_exponent "
                              f"{ch.path_loss_exponent:g} and shadowing_db {ch.log_distance_shadowing_db:g} the path gain "
                              f"(10^{decades:.3g} at the cell edge) leaves the range of numbers (1e-280 to 1e280)")


def _option_names(part: type) -> set[str]:
    schema = part.Options
    return {f.name for f in dataclasses.fields(schema)} if schema is not None and dataclasses.is_dataclass(schema) \
        else set()


def _check_model_input(s) -> None:
    """The model takes inputs of the rank the dataset declares (``Model.input_ranks``,
    ``DatasetLoader.shape``): an image model on feature vectors fails here, not at the first round."""
    ranks = s.part("model").input_ranks
    shape = s.part("dataset").shape(s, s.options("dataset")) if ranks is not None else None
    if shape is None:
        return
    from ..plugins import registry

    models = registry("model")
    if len(shape[0]) in ranks:
        if s.learning.model in models.builtins:  # the built-ins' layer lists check the image's size
            try:
                s.part("model").parameter_count(tuple(shape[0]), int(shape[1]))
            except ValueError as e:
                raise ConfigError(f"learning.model = {s.learning.model!r}: "
                                  f"{str(e).removeprefix(f'model {s.learning.model!r} ')} from dataset "
                                  f"{s.learning.dataset!r}") from None
        return
    fitting = [repr(n) for n in models.builtins
               if models.load(n).input_ranks is None or len(shape[0]) in models.load(n).input_ranks]
    raise ConfigError(f"learning.model = {s.learning.model!r}: takes inputs of {' or '.join(map(str, ranks))} "
                      f"dimensions, and dataset {s.learning.dataset!r} has inputs of shape {tuple(shape[0])}; "
                      f"choose a model that takes them: {', '.join(fitting)}")


def _check_held_used(s, members: list) -> None:
    """An option held for other parts must be taken by the part of some variant or sweep value."""
    for kind in (k for k in KINDS.values() if k.owns_table):
        held = getattr(s, kind.table).held
        for key in held:
            if not any(key in _option_names(m.part(kind.name)) for m in members):
                names = sorted({m.part_name(kind.name) for m in members})
                raise ConfigError(f"{kind.table}.{key}: no run of this scenario uses it: not an option of "
                                  f"{' or '.join(repr(n) for n in names) or 'its ' + kind.name}")


def _check_part(s, kind) -> None:
    """The part's own cross-field rules (its ``check`` classmethod); other errors name its field."""
    part = s.part(kind.name)
    try:
        part.check(s, s.options(kind.name))
    except ConfigError:
        raise
    except (ValueError, TypeError, OSError) as exc:
        name = s.part_name(kind.name)
        raise ConfigError(f"{kind.field} = {name!r}: {type(exc).__name__}: {exc}".replace("\n", " ")) from None


def _check_upload_channel(s) -> None:
    """Packets are sent one device's at a time, so not over the air (AccessScheme.over_the_air); fading
    within an upload needs a channel of the upload's own (AccessScheme.solo_uploads)."""
    access = s.part("access")
    solo = access.solo_uploads
    packets = [f for f, on in (("link.packet_bits", s.link.packet_bits is not None),
                               ("link.rate_bps", s.link.rate_bps is not None),
                               ("link.errors", s.link.errors != "none")) if on]
    if packets and access.over_the_air:
        raise ConfigError(f"{packets[0]}: packets, a fixed rate and packet errors are one device's transmissions; "
                          f"under link.access = {s.link.access!r} the devices send one analog sum")
    if s.channel.coherence_s is not None or s.devices.speed_mps:
        field = "channel.coherence_s" if s.channel.coherence_s is not None else "devices.speed_mps"
        if s.link.rate != "shannon":
            raise ConfigError(f"{field}: fading within an upload is modelled at Shannon's rate; link.rate = "
                              f"{s.link.rate!r} draws an upload's transport blocks at its SINR as it starts "
                              "(docs/radio.md): use link.rate = 'shannon', or no fading within an upload")
        if not solo or s.link.packet_bits is not None or s.link.errors != "none":
            raise ConfigError(f"{field}: fading within an upload (a moving device's channel changes while it "
                              "sends) is modelled for whole uploads, at the adaptive rate or at link.rate_bps "
                              "(no packets or packet errors), where an upload has a channel of its own "
                              f"(link.access = 'tdma', 'tdma_slotted' or 'dedicated'; here {s.link.access!r})")


def _check_mobility(s) -> None:
    """Moving devices need a cell (path loss), a speed, and starting points inside the cell."""
    what = f"devices.mobility = {s.devices.mobility!r}"
    if not s.channel.path_loss:
        raise ConfigError(f"{what}: devices move in the cell and their path loss follows; set channel.path_loss = true")
    if not s.devices.speed_mps > 0:
        raise ConfigError(f"{what}: needs devices.speed_mps > 0")
    for i, xy in enumerate(s.channel.positions_m):
        if math.hypot(*xy) > s.channel.cell_radius_m:
            raise ConfigError(f"channel.positions_m[{i}] = {list(xy)!r}: outside the cell of channel.cell_radius_m = "
                              f"{s.channel.cell_radius_m:g} in which {what} moves the devices")
