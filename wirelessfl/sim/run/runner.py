"""One run of a scenario: build every part through its registry, drive the engine, record, summarise.

The runner is the one place that turns a scenario into objects: the parts
(``scenario.part(kind).from_scenario(scenario, options)``), the learner (training runs), the link
and access scheme, availability, the recorder and the progress bar. The round protocol picks the
engine: the closed-form rounds of sync (wirelessfl.sim.sync.engine) or the event engine
(wirelessfl.sim.events.engine). It checkpoints every ``run.checkpoint_every`` aggregations and continues
from a checkpoint.
"""
from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from ... import rng as rngs
from ...config import ConfigError, Scenario
from ...config.limits import check_upload
from ...plugins import PartError, registry
from ...battery import build_battery
from ...devices import WorkScaledCompute, build_availability
from ...access import Downlink, check_scheme
from ...network import NO_BACKHAUL, Backhaul
from ...network.cells import cell_radio
from ...network.station_cells import build_run_cells
from ..events.tiers import TieredEvents
from ..sync.tiers import TieredEngine
from ..records.cell_summary import cell_columns, cell_rows, uplink_busy_s
from ...access.base import AccessScheme, WritesRunFiles
from ...fading import block_fading
from ...scheduling.base import check_frequency_choice
from ...wireless import Channel, PathLossChannel, build_channel, channel_columns, moving, sigma_profile
from ...des.collector import paced_collector
from ...files import DamagedFile, FolderGuard, refuse_links, write_atomic
from .checkpoint import CHECKPOINT_NAME, ResumeError, save_checkpoint
from ..records.manifest import write_manifest
from ..sync.engine import Engine
from ..round.parts import STREAMS, EvalRule, Parts, StopRule
from ..records.round_record import RoundRecord
from ..events.engine import EventEngine
from .progress import ProgressBar
from ..records.recorder import Recorder
from ..records.update_log import RATE_COLUMNS
from .contract import EdgeTiers
from ...capabilities import provides
from ..records.summary import summarise

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ERROR_LOG", "Run", "RunResult", "fairness_metrics", "personalised_eval", "read_run_file"]

ERROR_LOG = "error.log"
"""Where a failed run writes the traceback of its error (summary.json names it)."""

WRITES = ("scenario.toml", "rounds.csv", "evals.csv", "updates.csv", "handovers.csv", "devices.csv", "decisions.h5",
          "passes.csv", "summary.json", "manifest.json", CHECKPOINT_NAME, ERROR_LOG)
"""The files a run (or a resume) reads back or writes in its folder: each must be a regular file
where it exists, never a link, a FIFO or a device (checked before anything is written)."""


def read_run_file(run_dir: Path | None, name: str) -> pd.DataFrame:
    """A table of a run folder (empty for no folder, or a file a run killed before its first row
    left missing or empty); DamagedFile, in one line, for one that cannot be read."""
    import pandas as pd

    from ...files import read_table

    path = run_dir / name if run_dir is not None else None
    if path is None or not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    return read_table(path)


def exited_in(exc: BaseException) -> str:
    """Who raised ``exc`` (a SystemExit): the module of the deepest frame outside this package and
    Python's own library, as "module my_parts (my_parts.py:12)"; "a part" when none is."""
    import sysconfig
    import traceback

    package = str(Path(__file__).resolve().parents[1])
    library = {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib")}
    for frame, line in reversed(list(traceback.walk_tb(exc.__traceback__))):
        name = str(Path(frame.f_code.co_filename).resolve())
        if not name.startswith(package) and not any(name.startswith(lib) for lib in library):
            return f"module {frame.f_globals.get('__name__', '?')} ({Path(name).name}:{line})"
    return "a part"


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
    (mcs, harq_tx), then the access scheme's ``upload_columns`` (wifi: collisions, frames, retries,
    drops), each update's read as it is written (an event protocol's: from the update and the scheme's
    ``take_counts``); none where the uplink has none (records as they were)."""
    rate = access.link.mcs_rate
    columns = (*(RATE_COLUMNS if rate else ()), *access.upload_columns)
    if not columns:
        return {}

    def counts(u) -> tuple:
        own = access.take_counts(u.seq) if access.upload_columns else ()
        return ((u.mcs, u.harq_tx) if rate else ()) + tuple(own)
    return {"upload_columns": columns, "upload_counts": counts}


class RunResult:
    """What a run produced: per-round (per-aggregation) rows, evaluation rows, per-device totals,
    a summary, and ``updates``: one row per dispatched device. ``rounds`` and ``updates`` given as
    None are read from the run folder's rounds.csv and updates.csv when first asked for (a run with
    a folder keeps neither in memory); a run without a folder hands them over."""

    def __init__(self, rounds: pd.DataFrame | None, evals: pd.DataFrame, devices: pd.DataFrame, summary: dict,
                 run_dir: Path | None = None, update_rows: list | None = None, update_columns: list | None = None):
        self._rounds, self.evals, self.devices, self.summary = rounds, evals, devices, summary
        self.run_dir, self.update_rows, self.update_columns = run_dir, update_rows, update_columns

    def __repr__(self) -> str:
        return f"RunResult({self.summary.get('name')!r}, status={self.summary.get('status')!r}, run_dir={self.run_dir})"

    @property
    def rounds(self) -> pd.DataFrame:
        """rounds.csv as a DataFrame (columns wirelessfl.sim.records.recorder.ROUND_COLUMNS and the parts' own)."""
        if self._rounds is None:
            self._rounds = read_run_file(self.run_dir, "rounds.csv")
        return self._rounds

    @property
    def updates(self) -> pd.DataFrame:
        """updates.csv as a DataFrame (columns wirelessfl.sim.records.recorder.UPDATE_COLUMNS, then those of a
        timed downlink and of several cells where the run has them: wirelessfl.sim.records.update_log)."""
        import pandas as pd

        from ..records.recorder import UPDATE_COLUMNS

        if self.update_rows is not None:
            return pd.DataFrame(self.update_rows, columns=self.update_columns or UPDATE_COLUMNS)
        path = self.run_dir / "updates.csv" if self.run_dir is not None else None
        if path is None or not path.exists() or path.stat().st_size == 0:
            return pd.DataFrame(columns=UPDATE_COLUMNS)
        return pd.read_csv(path, keep_default_na=False, na_values=[""])

    @property
    def decisions(self) -> dict[str, np.ndarray]:
        """decisions.h5's per-round arrays of every device (gains, omega, q, power, queue,
        available; positions when devices move), read when asked for (wirelessfl.load_decisions)."""
        if self.run_dir is None:
            raise FileNotFoundError("a run without a folder keeps no per-device arrays")
        from ..records.device_arrays import load_decisions

        return load_decisions(self.run_dir)


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


class Run:
    """One run's parts (engine, scheduler, algorithm, learner, recorder) wired together."""

    def __init__(self, scenario: Scenario, run_dir: Path | None, progress: bool):
        try:
            self._build(scenario, run_dir, progress)
        except SystemExit as exc:  # a part's sys.exit() fails the run; it does not end the program
            raise PartError(f"{exited_in(exc)} called sys.exit({exc.code!r}) while the run was built") from None

    def _build(self, scenario: Scenario, run_dir: Path | None, progress: bool) -> None:
        self.scenario, self.run_dir = scenario, run_dir
        rc, lc, dc, n = scenario.run, scenario.learning, scenario.devices, scenario.devices.count
        self.algorithm = scenario.part("algorithm").from_scenario(scenario, scenario.options("algorithm"))
        compressor = scenario.part("compression").from_scenario(scenario, scenario.options("compression"))
        self.learner = None
        if not rc.timing_only:
            from ...learning.learner import FederatedLearner

            self.learner = FederatedLearner(scenario, self.algorithm, personalised=personalised_eval(scenario),
                                            fairness=fairness_metrics(scenario), run_dir=run_dir,
                                            compressor=compressor)
        self.bits = self._model_bits()
        check_frequency_choice(scenario)  # a scheduler's CPU frequencies need a computation model that takes them
        self.scheduler = scenario.part("scheduler").from_scenario(scenario, scenario.options("scheduler"))
        # the cell (positions, per-device shadowing) is drawn once from its own stream: a resumed run
        # rebuilds it from the seed, so it is not part of the checkpoint
        self.channel = build_channel(scenario, rngs.stream(scenario.seed, "cell"))
        base = scenario.part("compute").from_scenario(scenario, scenario.options("compute"))
        from ...learning.algorithms import broadcast_vectors, compute_factor, scales_work, upload_vectors
        from ...learning.compression import upload_bits

        self.compute = WorkScaledCompute(base, self.algorithm.work_units if scales_work(self.algorithm) else None,
                                         ref_steps=lc.local_steps, step_time_s=dc.step_time_s,
                                         factor=compute_factor(self.algorithm))
        self.battery = build_battery(scenario)
        availability, self.excluded = self._availability()
        radio = cell_radio(scenario)  # the link as one cell has it (its sub-band, with several cells)
        downlink, down_bits = Downlink(radio.link), self.bits * broadcast_vectors(self.algorithm)
        self.protocol = scenario.part("protocol").from_scenario(scenario, scenario.options("protocol"))
        cells = build_run_cells(scenario, self.channel)  # (an [orbits] run with edges: its ground stations)
        access = (scenario.part("access").from_scenario(scenario, scenario.options("access")) if cells is None
                  else cells.accesses[0])
        check_scheme(access, f"link.access = {scenario.link.access!r}", self.protocol.event_driven)
        # files of the uplink's own for the run folder (an orbit run's passes.csv), written as the run starts
        self._part_files = access.run_files() if isinstance(access, WritesRunFiles) else {}
        parts = Parts(channel=self.channel, compute=self.compute, scheduler=self.scheduler, algorithm=self.algorithm,
                      access=access,
                      num_devices=n,
                      upload_bits=upload_bits(compressor, self.bits) * upload_vectors(self.algorithm),
                      downlink_s=downlink.fixed_s if downlink.timed else downlink.fixed_time_s(down_bits),
                      downlink=downlink, downlink_bits=down_bits,
                      availability=availability, round_deadline_s=rc.round_deadline_s, idle_round_s=rc.idle_round_s,
                      fading=block_fading(scenario, self.channel, access.upload_link()), battery=self.battery,
                      cells=cells, backhaul=Backhaul.of(scenario.hierarchy) if scenario.hierarchy.tiers == "cloud" else NO_BACKHAUL)
        # per-device arrays are per round decision: the dispatch protocols have none
        decisions = not self.protocol.event_driven or self.protocol.round_based
        self.recorder = Recorder(n, run_dir, keep_device_arrays=rc.record_devices and decisions, downlink=downlink.timed,
                                 cells=None if cells is None else cells.serving,
                                 handovers=cells is not None and moving(self.channel),
                                 backhaul=parts.backhaul.timed and self.protocol.event_driven,
                                 **upload_columns(access),
                                 time_budget_s=rc.time_budget_s if rc.rounds is None else None,
                                 positions=self.channel.positions_m if moving(self.channel) else None,
                                 p_bar=scenario.link.p_bar, part_columns=part_columns(self.channel, access, self.battery))
        self.resumed = False
        self.guard = None  # the run folder as it was when the run began (execute)
        self._wall_before, self._started = 0.0, time.perf_counter()  # wall time of earlier attempts (resume)
        self.bar = ProgressBar(scenario, enabled=progress)
        # with edge servers the bar counts cloud aggregations; shown or not, the bar has nothing to do
        self.bar_counts_rounds = self.bar.shown and scenario.hierarchy.tiers == "cloud"
        self.engine = self._engine(parts)
        if self.battery is not None and not self.protocol.event_driven:  # sync: a harvest step's time is its round's start
            self.battery.clock = lambda: self.engine.now
        self.recorder.edge_rounds = provides(self.engine, EdgeTiers)
        self.engine.on_handovers = self.recorder.on_handovers
        self.engine.handover_upload = scenario.network.handover_upload

    def _model_bits(self) -> int:
        """One model's size in bits: link.model_bits, else 32 x the model's parameters (checked, times
        the vectors an upload carries, against what the link can time)."""
        scenario = self.scenario
        if scenario.link.model_bits is not None:
            bits = scenario.link.model_bits
        elif self.learner is not None:
            bits = self.learner.model_bits
        else:
            from ...learning.learner import model_bits_of

            bits = model_bits_of(scenario)
        from ...learning.algorithms import upload_vectors

        vectors = upload_vectors(self.algorithm)
        size = "link.model_bits" if scenario.link.model_bits is not None else "32 x the model's parameters"
        check_upload(scenario, bits * vectors, size if vectors == 1 else f"{vectors} x {size}")
        return bits

    def _engine(self, parts: Parts):
        """The engine of the run's protocol (the event engine, or sync's closed form), reporting here."""
        sc, rc = self.scenario, self.scenario.run
        common = dict(streams={name: rngs.stream(sc.seed, name) for name in STREAMS},
                      stop=StopRule(rc.rounds, rc.time_budget_s, rc.target_accuracy, rc.stop_at_target),
                      evaluate=EvalRule(rc.eval_every_rounds, rc.eval_every_s, rc.eval_at_start),
                      learner=self.learner, on_round=self._on_round, on_eval=self._on_eval,
                      # no checkpoints, nothing to do between events after an aggregation
                      after_round=self._after_round if rc.checkpoint_every and self.run_dir is not None else None)
        if sc.hierarchy.tiers == "edge":  # an edge server per cell, each with a scheduler of its own, and a cloud
            edges = parts.cells.count if parts.cells is not None else 1  # (an [orbits] run's: its stations)
            schedulers = [sc.part("scheduler").from_scenario(sc, sc.options("scheduler")) for _ in range(edges)]
            tiers = dict(schedulers=schedulers, cloud_every=sc.hierarchy.cloud_every,
                         backhaul=Backhaul.of(sc.hierarchy), on_cloud=self._on_cloud)
            if self.protocol.event_driven:  # each edge an event engine of its own, with its own streams
                return TieredEvents(parts, lambda: sc.part("protocol").from_scenario(sc, sc.options("protocol")),
                                    # (one cell: the run's own streams, so one edge is the plain run)
                                    streams_of=lambda cell: {name: rngs.stream(sc.seed, name, *(
                                        (cell,) if edges > 1 else ())) for name in STREAMS},
                                    synchronous=sc.hierarchy.cloud == "sync", on_update=self.recorder.on_update,
                                    availability_period_s=sc.devices.availability_period_s,
                                    availability_of=lambda: self._availability()[0], **tiers, **common)
            return TieredEngine(parts, **tiers, **common)
        if self.protocol.event_driven:
            return EventEngine(parts, self.protocol, availability_period_s=sc.devices.availability_period_s,
                               on_update=self.recorder.on_update, **common)
        return Engine(parts, **common)

    def _availability(self):
        """The availability model, with the devices that never take part removed (docs/papers/safari.md)."""
        scenario, dc, n = self.scenario, self.scenario.devices, self.scenario.devices.count
        availability = self.battery if self.battery is not None else build_availability(scenario)
        if not (dc.excluded or dc.excluded_count or dc.min_mean_snr_db is not None):
            return availability, np.zeros(n, dtype=bool)
        from ...participation import ExcludedAvailability, excluded_mask

        mean_snr = None
        if dc.min_mean_snr_db is not None:
            gain = self.channel.mean_gain()
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

    def _on_round(self, rec: RoundRecord) -> None:
        self.recorder.on_round(rec)
        if self.bar_counts_rounds:
            self.bar.round(rec)

    def _on_cloud(self, row: dict) -> None:
        """A cloud aggregation of the edges' models: its row, and a step of the bar."""
        self.recorder.on_cloud(row)
        self.bar.round(SimpleNamespace(round=row["edge_round"], t_start=row["t_start"], t_end=row["t_end"]))

    def _on_eval(self, row: dict) -> None:
        self.recorder.on_eval(row)
        self.bar.accuracy(row["accuracy"])

    def _after_round(self, engine) -> None:
        every = self.scenario.run.checkpoint_every
        if every and self.run_dir is not None and engine.rounds_done % every == 0:
            self._same_folder()  # before the journals and the checkpoint are written by name in it
            save_checkpoint(self.run_dir / CHECKPOINT_NAME, self.state_dict())

    def state_dict(self) -> dict:
        """Everything needed to continue: the engine's loop, every part's state, the model, the records."""
        return {"engine": self.engine.state_dict(), "scheduler": self.scheduler.state_dict(),
                "algorithm": self.algorithm.state_dict(), "compute": self.compute.state_dict(),
                "learner": self.learner.state_dict() if self.learner is not None else None,
                "records": self.recorder.state_dict(), "scenario_sha256": self.scenario_sha256,
                # the wall time spent so far, so a resumed run's summary counts all of it
                "wall_time_s": self._wall_s()}

    def _wall_s(self) -> float:
        """Wall-clock seconds the run has taken, earlier attempts (before a resume) included."""
        return self._wall_before + time.perf_counter() - self._started

    @functools.cached_property
    def scenario_sha256(self) -> str:
        """The hash of the resolved scenario (as scenario.toml writes it): a checkpoint carries it,
        and a resume refuses one written for another scenario."""
        import hashlib

        from ...config import dumps

        return hashlib.sha256(dumps(self.scenario).encode()).hexdigest()

    def load_state(self, state: dict) -> None:
        """Continue from ``state_dict`` (call before ``execute``). Everything is checked before any
        file changes: a checkpoint that does not fit this scenario or disagrees with the records on
        disk raises ResumeError and leaves the folder as it was."""
        where = f"{self.run_dir or 'run'}: cannot resume"
        self.check_folder()  # nothing is read through a link, nor from a FIFO
        keys = ("engine", "scheduler", "algorithm", "compute", "learner", "records")
        if not isinstance(state, dict) or any(k not in state for k in keys):
            raise ResumeError(f"{where}: the checkpoint lacks {', '.join(k for k in keys if k not in (state or {}))}")
        if state.get("scenario_sha256", self.scenario_sha256) != self.scenario_sha256:
            raise ResumeError(f"{where}: the checkpoint was written for another scenario (scenario.toml was changed "
                              "since, or the checkpoint is another run's); the folder is left as it was")
        try:
            rounds_done = self.engine.rows_in_state(state["engine"])  # rounds.csv's rows the state stands for
            problem = self.recorder.check_resume(state["records"], rounds_done)
            if problem is None and (state["learner"] is None) != (self.learner is None):
                problem = "the checkpoint is of a training run and this one is timing only, or the other way round"
            if problem is None:
                self.engine.load_state(state["engine"])
                self.scheduler.load_state(state["scheduler"])
                self.algorithm.load_state(state["algorithm"])
                self.compute.load_state(state["compute"])
                if self.learner is not None:
                    self.learner.load_state(state["learner"])
        except DamagedFile as exc:  # a journal of the per-device state: it names itself
            problem = str(exc)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as exc:
            problem = f"the checkpoint does not fit this scenario ({type(exc).__name__}: {exc})"
        if problem is not None:
            raise ResumeError(f"{where}: {problem}; the folder is left as it was")
        self.recorder.load_state(state["records"])  # the first change on disk
        self._wall_before = float(state.get("wall_time_s", 0.0))
        self.resumed = True
        self.bar.bar.update(state["engine"]["now_s"] if self.bar.by_time else state["engine"]["rounds_done"])
        if self.recorder.evals:  # the accuracy the run had reached, until the next evaluation
            self.bar.acc = float(self.recorder.evals[-1]["accuracy"])

    def _same_folder(self) -> None:
        """UnsafeOutput, in one line, when the run folder was swapped (for a link, another folder)
        since the run began: nothing more is written by name in it."""
        if self.guard is not None:
            self.guard.check()

    def check_folder(self) -> None:
        """UnsafeOutput, in one line naming the path, when one of the files this run writes or reads
        back in its folder (WRITES, the per-device state's folder and journals) is a symbolic link or
        not a regular file: refused before anything is written or read, so nothing outside the
        folder changes and no read waits on a FIFO."""
        if self.run_dir is None:
            return
        refuse_links(self.run_dir, WRITES)
        if self.learner is not None:
            self.learner.trainer.device_states.check_files()

    def execute(self) -> RunResult:
        """Run to the end (or until interrupted), then write the device table and the summary."""
        self._started = time.perf_counter()
        status, error, error_log = "complete", None, None
        for name, text in self._part_files.items() if self.run_dir is not None else ():
            write_atomic(self.run_dir / name, text)
        # Float reductions depend on the thread count: fix it per run so a run gives the same
        # records serially, in a process pool or on a cluster.
        threads = None
        if self.learner is not None:
            import torch

            threads = torch.get_num_threads()
            torch.set_num_threads(self.scenario.run.threads)
        if not self.resumed:
            self.check_folder()  # before the first file is written
        if self.run_dir is not None:
            self.guard = self.recorder.files.guard = FolderGuard(self.run_dir)
        try:
            if not self.resumed:
                self.recorder.start()
            with paced_collector():  # a young collection every 20,000 allocations, not 700 (des/collector.py)
                self.engine.run()
        except BaseException as exc:  # record what happened, keep what was written, then re-raise
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            # a part's sys.exit() fails the run; it does not end the program
            failure = PartError(f"{exited_in(exc)} called sys.exit({exc.code!r}) during the run") \
                if isinstance(exc, SystemExit) else exc
            error = f"{type(failure).__name__}: {failure}"
            if status == "failed" and self.run_dir is not None:  # the whole story, beside the one line
                import traceback

                self._same_folder()

                write_atomic(self.run_dir / ERROR_LOG, traceback.format_exc())
                error_log = ERROR_LOG
            if failure is not exc:
                raise failure from None
            raise
        finally:
            if threads is not None:
                import torch

                torch.set_num_threads(threads)
            self.bar.close()
            summary, devices = self._close(self._wall_s(), status, error, error_log)
        import pandas as pd  # not before the first round: 0.3 s of start-up

        rec = self.recorder
        # a run with a folder keeps no rows: RunResult reads rounds.csv when asked
        rounds = pd.DataFrame(rec.rounds, columns=rec.files.round_columns) if rec.rounds is not None else None
        return RunResult(rounds=rounds,
                         evals=pd.DataFrame(rec.evals), devices=pd.DataFrame(devices),
                         summary=summary, run_dir=self.run_dir, update_rows=rec.updates.log.rows_in_memory(),
                         update_columns=rec.updates.log.columns)

    def _busy_s(self) -> float:
        """How long the uplink carried a model upload: the sync rounds' (recorded with their rows)
        and the event engine's (kept as uploads go on and off the air)."""
        return self.recorder.updates.stats.get("busy_s", 0.0) + self.engine.uplink_busy_s(float(self.engine.now))

    def _updates_frame(self):
        """updates.csv as written so far (in memory, or read back from the run folder)."""
        import pandas as pd

        rec = self.recorder
        rows = rec.updates.log.rows_in_memory()
        if rows is not None:
            return pd.DataFrame(rows, columns=rec.updates.log.columns)
        return pd.read_csv(self.run_dir / "updates.csv")

    def _mean_snr_db(self) -> float | None:
        """Physical units (link.tx_power_dbm, noise_figure_db): the devices' mean SNR at p_bar in dB, the
        mean over devices of 10 log10(E|h_n|^2 p_bar / N0); None otherwise (records as they were)."""
        link = self.scenario.link
        mean = self.channel.mean_gain() if link.physical else None
        if mean is None:
            return None
        return float(np.mean(10.0 * np.log10(np.maximum(np.asarray(mean) * link.p_bar / link.noise_power, 1e-300))))

    def _close(self, wall_time_s: float, status: str, error: str | None,
               error_log: str | None = None) -> tuple[dict, dict]:
        rec, sc = self.recorder, self.scenario
        extra = None
        if sc.channel.path_loss:  # moving devices: their mean distance over the records
            distance = (rec.devices.distance_sum / rec.totals.rounds if rec.positions is not None and rec.totals.rounds
                        else self.channel.path_loss.distances_m)  # no record yet: where the devices are
            extra = {"distance_m": distance, "mean_gain": self.channel.mean_gain()}
            if hasattr(self.channel.path_loss, "device_columns"):  # TR 38.901: each device's state and path loss
                extra.update(self.channel.path_loss.device_columns())
        elif sc.part_name("channel") not in registry("channel").builtins:  # a channel of one's own: what it
            # tells of its devices (the built-ins' are their sigma; kept as they are, byte for byte)
            extra = channel_columns(self.channel, sc.devices.count, f"channel.model = {sc.part_name('channel')!r}")
        if self.battery is not None:
            extra = {**(extra or {}), **self.battery.device_columns()}
        cells = self.engine.parts.cells
        if cells is not None:
            extra = {**(extra or {}), **cell_columns(cells, self.channel.positions_m(),
                                                     getattr(self.channel, "site_gain", None))}
        own = None
        if provides(self.engine, EdgeTiers):  # each device's rates over its own edge's rounds
            serving = cells.serving if cells is not None else np.zeros(sc.devices.count, dtype=np.int64)
            own = np.asarray(self.engine.edge_rounds(), dtype=np.int64)[serving]
        devices = rec.device_table(sigma_profile(sc.channel, sc.devices.count), extra, own)
        summary = summarise(sc, rec.totals, rec.evals, devices, wall_time_s=wall_time_s, model_bits=self.bits,
                            updates={**rec.updates.stats, "outcomes": rec.updates.outcomes, "busy_s": self._busy_s()},
                            sim_time_s=self.engine.now,
                            power_settled=rec.power.settled_round, mean_snr_db=self._mean_snr_db())
        summary.update(status=status, error=error)
        if cells is not None:
            rec.flush()
            updates = self._updates_frame()
            summary["cells"] = cell_rows(cells, updates, float(self.engine.now))
            if provides(self.engine, EdgeTiers):  # the edges' rounds overlap in time:
                # the union of every cell's time on the air, not the sum of the edges' (at most 1)
                end_s = summary["sim_time_s"]
                busy = uplink_busy_s(updates, end_s)
                summary.update(uplink_busy_s=busy, uplink_utilisation=busy / end_s if end_s > 0 else math.nan)
            if rec.handovers is not None:
                summary["handovers"] = rec.handovers.count
        if provides(self.engine, EdgeTiers):
            summary.update(self.engine.summary(rec.totals.sums["num_selected"]))
        if error_log is not None:
            summary["error_log"] = error_log  # the traceback, in the run folder
        # incomplete participation (docs/papers/safari.md): who could never take part, and the capacity
        # omega = share of devices that ever took part
        summary.update(excluded=[int(i) for i in np.flatnonzero(self.excluded)],
                       ever_participated=float(np.mean(rec.devices.selections > 0)),
                       label_coverage=(self.learner.label_coverage(rec.devices.selections > 0)
                                       if self.learner is not None else math.nan))
        self._same_folder()  # the summary, the device table and the manifest are written by name
        rec.close(summary, devices)
        if status == "complete" and self.run_dir is not None:  # nothing left to resume
            write_manifest(self.run_dir, sc)  # last of the records: what a read-back checks
            (self.run_dir / CHECKPOINT_NAME).unlink(missing_ok=True)
            if self.learner is not None:
                self.learner.trainer.device_states.remove_files()
        return summary, devices
