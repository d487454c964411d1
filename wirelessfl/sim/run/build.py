"""The parts of a run, built from its scenario: each through its registry
(``scenario.part(kind).from_scenario(scenario, options)``), the learner (training runs), the link and
access scheme, availability, the recorder and the engine of the round protocol: the closed-form rounds
of sync (wirelessfl.sim.sync.engine), the event engine (wirelessfl.sim.events.engine), or either with
edge servers and a cloud (their tiers). The runner (wirelessfl.sim.run.runner, Run._build) calls them
one after the other and wires what they return together.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ... import rng as rngs
from ...access import Downlink, check_scheme, upload_link
from ...access.base import AccessScheme, AddsUploadColumns, WritesRunFiles
from ...capabilities import lacks_of, members, provides
from ...config import ConfigError, Scenario
from ...config.limits import check_upload
from ...devices import WorkScaledCompute, build_availability
from ...fading import block_fading
from ...network import NO_BACKHAUL, Backhaul
from ...network.cells import cell_radio
from ...network.station_cells import build_run_cells
from ...wireless import Channel, PathLossChannel, moving
from ..events.engine import EventEngine
from ..events.tiers import TieredEvents
from ..protocols import event_driven, round_based
from ..records.recorder import Recorder
from ..records.update_log import RATE_COLUMNS
from ..round.parts import STREAMS, EvalRule, Parts, StopRule
from ..sync.engine import Engine
from ..sync.tiers import TieredEngine

__all__ = ["build_engine", "build_learning", "build_parts", "build_recorder", "fairness_metrics", "model_bits",
           "part_columns", "personalised_eval", "run_availability", "upload_columns", "work_scaled_compute"]


def personalised_eval(scenario: Scenario) -> bool:
    """run.personalised_eval, or by default: on for algorithms that ask for it (Per-FedAvg) and for
    partitions that do (Per-FedAvg's groups, which give every device its own test split), unless the
    dataset brings its own split (then the partition is not used)."""
    if scenario.run.personalised_eval is not None:
        return scenario.run.personalised_eval
    from ...learning.algorithms import personalised_by_default

    partitioned = not scenario.part("dataset").own_split
    return bool(personalised_by_default(scenario.part("algorithm"))
                or partitioned and scenario.part("partition").personalised_eval)


def fairness_metrics(scenario: Scenario) -> bool:
    """learning.fairness_metrics, or by default: on for schedulers that ask for it (fair selection)."""
    if scenario.learning.fairness_metrics is not None:
        return scenario.learning.fairness_metrics
    return scenario.part("scheduler").fairness_metrics


def check_capabilities(algorithm, field: str) -> None:
    """ConfigError (one line) for an algorithm that writes some members of a capability and not the
    others (``plan_round`` without ``server_round``): the engines would never call them."""
    from ...learning.algorithms import ServerRounds  # (its other capabilities have one member each)

    missing = lacks_of(algorithm, ServerRounds)
    if missing:
        have = [name for name in members(ServerRounds) if name not in missing]
        raise ConfigError(f"{field}: has {', '.join(have)} of ServerRounds but not {', '.join(missing)}; write "
                          "both (docs/extending.md) or neither")


def build_learning(scenario: Scenario, run_dir: Path | None) -> tuple:
    """(algorithm, compressor, learner): the algorithm and the compression of its uploads, and the
    training side of the run (None when it is timing only)."""
    algorithm = scenario.part("algorithm").from_scenario(scenario, scenario.options("algorithm"))
    check_capabilities(algorithm, f"learning.algorithm = {scenario.learning.algorithm!r}")
    compressor = scenario.part("compression").from_scenario(scenario, scenario.options("compression"))
    if scenario.run.timing_only:
        return algorithm, compressor, None
    from ...learning.learner import FederatedLearner

    learner = FederatedLearner(scenario, algorithm, personalised=personalised_eval(scenario),
                               fairness=fairness_metrics(scenario), run_dir=run_dir, compressor=compressor)
    return algorithm, compressor, learner


def model_bits(scenario: Scenario, algorithm, learner) -> int:
    """One model's size in bits: link.model_bits, else 32 x the model's parameters (checked, times
    the vectors an upload carries, against what the link can time)."""
    if scenario.link.model_bits is not None:
        bits = scenario.link.model_bits
    elif learner is not None:
        bits = learner.model_bits
    else:
        from ...learning.learner import model_bits_of

        bits = model_bits_of(scenario)
    from ...learning.algorithms import upload_vectors

    vectors = upload_vectors(algorithm)
    size = "link.model_bits" if scenario.link.model_bits is not None else "32 x the model's parameters"
    check_upload(scenario, bits * vectors, size if vectors == 1 else f"{vectors} x {size}")
    return bits


def work_scaled_compute(scenario: Scenario, algorithm) -> WorkScaledCompute:
    """The computation model, its times scaled by the work the algorithm asks of a device."""
    from ...learning.algorithms import compute_factor, scales_work

    base = scenario.part("compute").from_scenario(scenario, scenario.options("compute"))
    return WorkScaledCompute(base, algorithm.work_units if scales_work(algorithm) else None,
                             ref_steps=scenario.learning.local_steps, step_time_s=scenario.devices.step_time_s,
                             factor=compute_factor(algorithm))


def run_availability(scenario: Scenario, battery, channel):
    """(availability, excluded): the availability model (the batteries, where they decide it), with
    the devices that never take part removed (docs/papers/safari.md), and which those are."""
    dc, n = scenario.devices, scenario.devices.count
    availability = battery if battery is not None else build_availability(scenario)
    if not (dc.excluded or dc.excluded_count or dc.min_mean_snr_db is not None):
        return availability, np.zeros(n, dtype=bool)
    from ...participation import ExcludedAvailability, excluded_mask

    mean_snr = None
    if dc.min_mean_snr_db is not None:
        gain = channel.mean_gain()
        if gain is None:
            raise ConfigError(f"devices.min_mean_snr_db: channel.model = {scenario.channel.model!r} gives "
                              "no mean gain to compare with it")
        mean_snr = gain * scenario.link.p_bar / scenario.link.noise_power
    excluded = excluded_mask(n, dc.excluded, dc.excluded_count, rngs.stream(scenario.seed, "exclusion"),
                             mean_snr=mean_snr, min_mean_snr_db=dc.min_mean_snr_db)
    if excluded.all():
        raise ConfigError(f"devices.min_mean_snr_db = {dc.min_mean_snr_db}: with the other exclusions it leaves "
                          "no device that could ever take part")
    return ExcludedAvailability(excluded, availability), excluded


def build_parts(scenario: Scenario, protocol, *, channel, compute, scheduler, algorithm, battery, availability,
                compressor, bits: int) -> tuple[Parts, dict[str, str]]:
    """(parts, files): everything the run simulates (its cells, access scheme, downlink and backhaul
    with the parts built before), and the files of the uplink's own for the run folder (an orbit run's
    passes.csv), written as the run starts."""
    from ...learning.algorithms import broadcast_vectors, upload_vectors
    from ...learning.compression import upload_bits

    radio = cell_radio(scenario)  # the link as one cell has it (its sub-band, with several cells)
    downlink, down_bits = Downlink(radio.link), bits * broadcast_vectors(algorithm)
    cells = build_run_cells(scenario, channel)  # (an [orbits] run with edges: its ground stations)
    access = (scenario.part("access").from_scenario(scenario, scenario.options("access")) if cells is None
              else cells.accesses[0])
    check_scheme(access, f"link.access = {scenario.link.access!r}", event_driven(protocol))
    files = access.run_files() if isinstance(access, WritesRunFiles) else {}
    rc, hierarchy = scenario.run, scenario.hierarchy
    parts = Parts(channel=channel, compute=compute, scheduler=scheduler, algorithm=algorithm, access=access,
                  num_devices=scenario.devices.count,
                  upload_bits=upload_bits(compressor, bits) * upload_vectors(algorithm),
                  downlink_s=downlink.fixed_s if downlink.timed else downlink.fixed_time_s(down_bits),
                  downlink=downlink, downlink_bits=down_bits,
                  availability=availability, round_deadline_s=rc.round_deadline_s, idle_round_s=rc.idle_round_s,
                  fading=block_fading(scenario, channel, upload_link(access)), battery=battery,
                  cells=cells, backhaul=Backhaul.of(hierarchy) if hierarchy.tiers == "cloud" else NO_BACKHAUL)
    return parts, files


def part_columns(channel, access, battery=None) -> tuple:
    """(prefix, round_info) of the channel (its fading part, under path loss), the access scheme and
    the batteries where they give numbers of their own for rounds.csv (the defaults give none and are
    left out: one call less per aggregation)."""
    fading = channel.fading if isinstance(channel, PathLossChannel) else channel
    parts = tuple((prefix, part.round_info) for prefix, part, default in
                  (("channel", fading, Channel.round_info), ("access", access, AccessScheme.round_info))
                  if getattr(type(part), "round_info", default) is not default)
    return parts + ((("battery", battery.round_info),) if battery is not None else ())


def upload_columns(access) -> dict:
    """The Recorder's arguments for the uplink's own per-upload columns of updates.csv: an MCS rate's
    (mcs, harq_tx), then the access scheme's ``upload_columns`` where it AddsUploadColumns (wifi:
    collisions, frames, retries, drops), each update's read as it is written (an event protocol's: from
    the update and the scheme's ``take_counts``); none where the uplink has none (records as they were)."""
    rate, own = access.link.mcs_rate, provides(access, AddsUploadColumns)
    columns = (*(RATE_COLUMNS if rate else ()), *(access.upload_columns if own else ()))
    if not columns:
        return {}

    def counts(u) -> tuple:
        mine = access.take_counts(u.seq) if own else ()
        return ((u.mcs, u.harq_tx) if rate else ()) + tuple(mine)
    return {"upload_columns": columns, "upload_counts": counts}


def build_recorder(scenario: Scenario, run_dir: Path | None, parts: Parts, protocol, battery) -> Recorder:
    """The run's recorder, with the columns its parts add to the records (``battery``: the run's
    batteries, None without)."""
    rc, channel, cells = scenario.run, parts.channel, parts.cells
    # per-device arrays are per round decision: the dispatch protocols have none
    decisions = not event_driven(protocol) or round_based(protocol)
    return Recorder(scenario.devices.count, run_dir, keep_device_arrays=rc.record_devices and decisions,
                    downlink=parts.downlink.timed, cells=cells.serving if cells.present else None,
                    handovers=cells.present and moving(channel),
                    backhaul=parts.backhaul.timed and event_driven(protocol),
                    **upload_columns(parts.access),
                    time_budget_s=rc.time_budget_s if rc.rounds is None else None,
                    positions=channel.positions_m if moving(channel) else None,
                    p_bar=scenario.link.p_bar, part_columns=part_columns(channel, parts.access, battery))


def build_engine(scenario: Scenario, parts: Parts, protocol, learner, battery, on_update: Callable, *,
                 on_round: Callable, on_eval: Callable, on_cloud: Callable, after_round: Callable | None):
    """The engine of the run's protocol (the event engine, or sync's closed form; with edge servers,
    their tiers), reporting to the hooks given (``after_round``: None where nothing is done between
    aggregations). ``battery``: the run's batteries (None without), which event edges build their
    availability from."""
    sc, rc = scenario, scenario.run
    common = dict(streams={name: rngs.stream(sc.seed, name) for name in STREAMS},
                  stop=StopRule(rc.rounds, rc.time_budget_s, rc.target_accuracy, rc.stop_at_target),
                  evaluate=EvalRule(rc.eval_every_rounds, rc.eval_every_s, rc.eval_at_start),
                  learner=learner, on_round=on_round, on_eval=on_eval, after_round=after_round)
    if sc.hierarchy.tiers == "edge":  # an edge server per cell, each with a scheduler of its own, and a cloud
        edges = parts.cells.count  # (an [orbits] run's: its stations)
        schedulers = [sc.part("scheduler").from_scenario(sc, sc.options("scheduler")) for _ in range(edges)]
        tiers = dict(schedulers=schedulers, cloud_every=sc.hierarchy.cloud_every,
                     backhaul=Backhaul.of(sc.hierarchy), on_cloud=on_cloud)
        if event_driven(protocol):  # each edge an event engine of its own, with its own streams
            return TieredEvents(parts, lambda: sc.part("protocol").from_scenario(sc, sc.options("protocol")),
                                # (one cell: the run's own streams, so one edge is the plain run)
                                streams_of=lambda cell: {name: rngs.stream(sc.seed, name, *(
                                    (cell,) if edges > 1 else ())) for name in STREAMS},
                                synchronous=sc.hierarchy.cloud == "sync", on_update=on_update,
                                availability_period_s=sc.devices.availability_period_s,
                                availability_of=lambda: run_availability(sc, battery, parts.channel)[0],
                                **tiers, **common)
        return TieredEngine(parts, **tiers, **common)
    if event_driven(protocol):
        return EventEngine(parts, protocol, availability_period_s=sc.devices.availability_period_s,
                           on_update=on_update, **common)
    return Engine(parts, **common)
