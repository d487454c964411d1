"""One run from a scenario: build the parts, drive the engine, record, summarise."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import rng as rngs
from ..config import Scenario, dumps
from ..devices import make_compute
from ..scheduling.base import Decision
from ..sim.engine import Engine, EvalRule, RoundRecord, StopRule
from ..sim.records import ROUND_COLUMNS, Recorder, write_json_atomic
from ..wireless import Link, make_channel, sigma_profile

# Input shape and class count of each dataset, so timing-only runs know the model size without data.
DATASET_SHAPES = {"fashion_mnist": ((1, 28, 28), 10), "mnist": ((1, 28, 28), 10),
                  "cifar10": ((3, 32, 32), 10), "synthetic": ((60,), 10)}


@dataclass
class RunResult:
    """What a run produced: per-round rows, evaluation rows, per-device totals and a summary."""

    rounds: pd.DataFrame
    evals: pd.DataFrame
    devices: pd.DataFrame
    summary: dict
    run_dir: Path | None = None


def make_scheduler(scenario: Scenario):
    """The scheduler named in the scenario."""
    from ..scheduling.schedulers import LyapunovScheduler, UniformScheduler

    s, link, n = scenario.scheduler, scenario.link, scenario.devices.count
    if s.name == "uniform":
        return UniformScheduler(n, s.m, link.p_bar, link.p_max)
    return LyapunovScheduler(n, s.m, s.V, s.lam, link.p_bar, link.p_max,
                             power_rule=s.power_rule, solver=s.solver)


class FederatedLearner:
    """Adapts the training core (trainer + algorithm) to the engine's Learner protocol."""

    def __init__(self, scenario: Scenario):
        from ..learning import FedAvg, Trainer, load_dataset, partition

        lc = scenario.learning
        data = load_dataset(lc.dataset, lc.data_dir or None)
        parts = partition(data.y_train.numpy(), scenario.devices.count, lc.partition,
                          rng=rngs.stream(scenario.seed, "partition"),
                          samples_per_device=lc.samples_per_device, alpha=lc.alpha,
                          num_classes=data.num_classes)
        self.trainer = Trainer(data, parts, lc.model, local_steps=lc.local_steps,
                               batch_size=lc.batch_size, lr=lc.lr, root_seed=scenario.seed,
                               device=scenario.run.device, eval_train_samples=lc.eval_train_samples)
        self.algorithm = FedAvg()
        self.num_devices = scenario.devices.count

    @property
    def model_bits(self) -> int:
        return self.trainer.model_bits

    def train_round(self, selected: np.ndarray, decision: Decision, round_idx: int) -> None:
        self.algorithm.round(self.trainer, selected, decision.q, self.num_devices, round_idx)

    def evaluate(self) -> dict:
        return self.trainer.evaluate()


def model_bits_of(scenario: Scenario) -> int:
    """Upload size in bits: the scenario's link.model_bits, else 32 x the model's parameter count."""
    if scenario.link.model_bits is not None:
        return scenario.link.model_bits
    from ..learning import build_model, num_parameters

    shape, classes = DATASET_SHAPES[scenario.learning.dataset]
    return 32 * num_parameters(build_model(scenario.learning.model, shape, classes))


def simulate(scenario: Scenario, out_dir: str | Path | None = None, progress: bool = True,
             timing_only: bool | None = None) -> RunResult:
    """Run one scenario (no variants) and return its records; with ``out_dir``, also write them there.

    The run directory holds scenario.toml (the resolved scenario), rounds.csv and evals.csv (streamed
    while the run goes), devices.csv, decisions.npz and summary.json (written last; its "status" is
    "complete" only for a run that finished).
    """
    if scenario.variants:
        raise ValueError("simulate() runs one scenario; use run_variants() for a scenario with [variants]")
    timing_only = scenario.run.timing_only if timing_only is None else timing_only
    run_dir = Path(out_dir) if out_dir is not None else None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "summary.json").unlink(missing_ok=True)
        (run_dir / "scenario.toml").write_text(dumps(scenario))

    learner = None if timing_only else FederatedLearner(scenario)
    bits = scenario.link.model_bits or (learner.model_bits if learner else model_bits_of(scenario))
    n = scenario.devices.count
    rc = scenario.run
    recorder = Recorder(n, run_dir)
    bar = _ProgressBar(scenario, enabled=progress)

    def on_round(rec: RoundRecord) -> None:
        recorder.on_round(rec)
        bar.round(rec)

    def on_eval(row: dict) -> None:
        recorder.on_eval(row)
        bar.accuracy(row["accuracy"])

    engine = Engine(
        channel=make_channel(scenario.channel, n), link=Link(scenario.link),
        compute=make_compute(scenario.devices), scheduler=make_scheduler(scenario),
        model_bits=bits, num_devices=n, downlink_s=scenario.link.downlink_s,
        streams={name: rngs.stream(scenario.seed, name) for name in ("channel", "selection", "compute")},
        learner=learner,
        stop=StopRule(rc.rounds, rc.time_budget_s, rc.target_accuracy, rc.stop_at_target),
        evaluate=EvalRule(rc.eval_every_rounds, rc.eval_every_s),
        on_round=on_round, on_eval=on_eval)

    started = time.perf_counter()
    status, error = "complete", None
    try:
        engine.run()
    except BaseException as exc:  # record what happened, keep what was written, then re-raise
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        bar.close()
        sigmas = sigma_profile(scenario.channel, n)
        devices = recorder.device_table(sigmas)
        summary = summarise(scenario, recorder.rounds, recorder.evals, devices,
                            wall_time_s=time.perf_counter() - started, model_bits=bits)
        summary.update(status=status, error=error)
        recorder.close(summary, devices)
    return RunResult(rounds=pd.DataFrame(recorder.rounds, columns=ROUND_COLUMNS),
                     evals=pd.DataFrame(recorder.evals), devices=pd.DataFrame(devices),
                     summary=summary, run_dir=run_dir)


def summarise(scenario: Scenario, rounds: list[dict], evals: list[dict], devices: dict,
              *, wall_time_s: float, model_bits: int) -> dict:
    """Headline numbers of a run."""
    target = scenario.run.target_accuracy
    hit = next((e for e in evals if target is not None and e["accuracy"] >= target), None)
    n_rounds = len(rounds)
    return {
        "name": scenario.name, "seed": scenario.seed, "scheduler": scenario.scheduler.name,
        "m": scenario.scheduler.m, "num_devices": scenario.devices.count, "model_bits": model_bits,
        "rounds": n_rounds, "sim_time_s": float(rounds[-1]["t_end"]) if rounds else 0.0,
        "final_accuracy": evals[-1]["accuracy"] if evals else math.nan,
        "best_accuracy": max((e["accuracy"] for e in evals), default=math.nan),
        "target_accuracy": target,
        "time_to_target_s": hit["time_s"] if hit else math.nan,
        "rounds_to_target": hit["round"] if hit else math.nan,
        "total_comm_s": float(sum(r["comm_s"] for r in rounds)),
        "total_comp_s": float(sum(r["comp_s"] for r in rounds)),
        "total_downlink_s": float(sum(r["downlink_s"] for r in rounds)),
        "total_energy_j": float(sum(r["energy_j"] for r in rounds)),
        "mean_time_avg_power": float(np.mean(devices["time_avg_power"])),
        "mean_distinct_per_round": float(np.mean([r["num_selected"] for r in rounds])) if rounds else 0.0,
        "wall_time_s": wall_time_s,
        "wall_per_round_s": wall_time_s / n_rounds if n_rounds else math.nan,
    }


class _ProgressBar:
    """tqdm bar over rounds (or simulated seconds when only a time budget is set)."""

    def __init__(self, scenario: Scenario, enabled: bool):
        from tqdm.auto import tqdm

        rc = scenario.run
        self.by_time = rc.rounds is None
        total = rc.time_budget_s if self.by_time else rc.rounds
        fmt = ("{l_bar}{bar}| {n:.1f}/{total:.0f} simulated s [{elapsed}<{remaining}{postfix}]"
               if self.by_time else None)
        self.bar = tqdm(total=total, desc=scenario.name, unit="round", bar_format=fmt,
                        disable=not enabled, leave=False, mininterval=0.5, dynamic_ncols=True)
        self.acc = math.nan

    def round(self, rec: RoundRecord) -> None:
        self.bar.update(rec.t_end - rec.t_start if self.by_time else 1)
        if self.bar.disable:
            return
        self.bar.set_postfix(round=rec.round + 1, t=f"{rec.t_end:.1f}s", acc=f"{self.acc:.3f}", refresh=False)

    def accuracy(self, acc: float) -> None:
        self.acc = acc

    def close(self) -> None:
        self.bar.close()


def load_run(run_dir: str | Path) -> RunResult:
    """Read a run directory back (also an incomplete one: its summary then says so or is missing)."""
    import json

    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {"status": "incomplete"}

    def read(name: str) -> pd.DataFrame:
        path = run_dir / name
        return pd.read_csv(path, keep_default_na=False, na_values=[""]) if path.exists() else pd.DataFrame()

    return RunResult(rounds=read("rounds.csv"), evals=read("evals.csv"), devices=read("devices.csv"),
                     summary=summary, run_dir=run_dir)


def run_variants(scenario: Scenario, out_dir: str | Path | None = None, progress: bool = True,
                 timing_only: bool | None = None) -> dict[str, RunResult]:
    """Run every variant of a scenario (or the scenario itself) into ``out_dir/VARIANT``."""
    results = {}
    for name, member in scenario.variant_scenarios():
        sub = None if out_dir is None else Path(out_dir) / name
        results[name] = simulate(member, sub, progress=progress, timing_only=timing_only)
    if out_dir is not None:
        write_json_atomic(Path(out_dir) / "index.json", {"scenario": scenario.name, "runs": list(results)})
    return results
