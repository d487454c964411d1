"""An exact resume with batteries under the event protocols, from every checkpoint: rounds.csv,
devices.csv and updates.csv byte for byte against the uninterrupted run.

Batteries change who is available between two availability steps (a task that runs a battery out
or leaves it below the threshold, wirelessfl.sim.events.drain), so what a row counts depends on when it
took its copy of the availability; a resume must count what the uninterrupted run counted. The
kill is made deterministic: the run's folder is copied as a kill -9 would leave it, just after a
checkpoint is written and just before the next one is (its rounds.csv and updates.csv then run past
the checkpoint), and every copy is resumed. Each part that holds state a
checkpoint must carry is combined with the others: the protocol (FedBuff, FedAsync, semi_sync's
rounds), seven cells behind a timed backhaul with a broadcast downlink in outage whose misses train
from a stale model, Bernoulli or Poisson harvests, and training with top-k and error feedback; and
edge servers, whose engines each count their own availability (a Markov chain: batteries under edge
servers are refused)."""
from __future__ import annotations

import filecmp
import shutil

import pytest

from fakes import changed, killed_and_resumed
from wirelessfl.config import dumps, from_dict
from wirelessfl.experiments.run import resume, simulate
from wirelessfl.sim.run import runner as runner_module

FILES = ("rounds.csv", "devices.csv", "updates.csv")
ROUNDS = {"fedbuff": 16, "fedasync": 20, "semi_sync": 16}  # enough for the case that matters to come (below)

PROTOCOLS = {"fedbuff": {"name": "fedbuff", "concurrency": 6, "buffer": 3},
             "fedasync": {"name": "fedasync", "concurrency": 6},
             "semi_sync": {"name": "semi_sync"}}

CELLS = {"network": {"cells": 7, "reuse": 7, "inter_site_m": 200.0},
         "hierarchy": {"backhaul_rate_bps": 1e8, "backhaul_latency_s": 0.05},
         "channel": {"path_loss": True, "reference_gain_db": -30.0, "profile": None, "sigma_min": None,
                     "sigma_max": None},
         "link": {"noise_power": 1e-12, "downlink": "broadcast", "downlink_rate_bps": 1e7, "downlink_errors": "outage",
                  "downlink_miss": "stale", "bs_power": 1.0}}

TRAINING = {"run": {"timing_only": False, "eval_every_rounds": 100},
            "link": {"model_bits": None},
            "learning": {"dataset": "synthetic", "model": "mlp", "local_steps": 2, "samples_per_device": 60,
                         "compression": "topk", "compression_options": {"error_feedback": True}}}


def battery_run(protocol: str, rounds: int, harvest: str = "bernoulli") -> dict:
    """21 devices with the CPU computation model on batteries that run out now and then (a step
    every 5 s: several aggregations see one availability), one cell, timing only."""
    return {"seed": 0, "run": {"rounds": rounds, "timing_only": True, "checkpoint_every": 1},
            "devices": {"count": 21, "compute": "cpu", "availability": "battery", "battery_capacity_j": 2.0,
                        "availability_period_s": 5.0, "harvest": harvest, "harvest_j": 1.0, "harvest_p": 0.5,
                        "harvest_mean": 0.5},
            "channel": {"profile": "linear", "sigma_min": 0.5, "sigma_max": 2.0},
            "link": {"access": "tdma", "p_bar": 1.0, "p_max": 1.0, "model_bits": 3.3e6, "bandwidth_hz": 5e6,
                     "downlink_s": 0.5},
            "protocol": dict(PROTOCOLS[protocol]), "scheduler": {"name": "uniform", **(
                {"m": 6} if protocol == "semi_sync" else {})}}


def resumed_from_every_checkpoint(data: dict, tmp_path, monkeypatch) -> tuple[object, int, list]:
    """Run ``data`` whole (checkpointing after every aggregation), keeping a copy of its folder as a
    kill -9 leaves it just after each checkpoint and just before the next; resume every copy.
    Returns the run's result, how often a device went unavailable between two rows of one
    availability step (see ``within_a_step``), and the copies that ended with other records than the
    run, with the files that differ."""
    from wirelessfl.sim.events.drain import BatteryDrain

    real, mark = runner_module.save_checkpoint, BatteryDrain._mark
    copies, gone = [], []

    def save(path, state):
        if copies:  # the latest a kill leaves the last checkpoint: everything since flushed, not yet the next
            copies.append(shutil.copytree(path.parent, tmp_path / f"before{len(copies)}"))
        real(path, state)
        copies.append(shutil.copytree(path.parent, tmp_path / f"after{len(copies)}"))

    def marking(self, device):
        available = self.engine.available
        if available is not None and available[device] and not self.battery.available[device]:
            gone.append(self.engine.now)
        mark(self, device)

    monkeypatch.setattr(runner_module, "save_checkpoint", save)
    monkeypatch.setattr(BatteryDrain, "_mark", marking)
    full = simulate(from_dict(data), tmp_path / "full", progress=False)
    monkeypatch.setattr(runner_module, "save_checkpoint", real)
    monkeypatch.setattr(BatteryDrain, "_mark", mark)
    assert len(copies) == 2 * (data["run"]["rounds"] - 1) - 1  # a checkpoint after every aggregation but the last
    differ = []
    for copy in copies:
        assert resume(copy, progress=False).summary["status"] == "complete"
        files = [name for name in FILES if not filecmp.cmp(tmp_path / "full" / name, copy / name, shallow=False)]
        if files:
            differ.append((copy.name, files))
    return full, within_a_step(gone, full.rounds["t_end"].tolist(), data["devices"]["availability_period_s"],
                               rounds=data["protocol"]["name"] == "semi_sync"), differ


def within_a_step(gone: list, rows: list, period_s: float, rounds: bool) -> int:
    """How many of the times ``gone`` (a device went unavailable: its battery ran out, or a task left
    it below the threshold) fall after a row and before both the next row and the next availability
    step: the case where what the next row counts depends on when the availability was copied (a
    round copies it as it begins, at the row before; an aggregation of FedBuff or FedAsync at the
    first row of a step, so there the next row must be in that step too)."""
    step = [int(t // period_s) for t in rows]
    return sum(any(a < t < b and step[i] == int(t // period_s) and (rounds or step[i + 1] == step[i])
                   for i, (a, b) in enumerate(zip(rows, rows[1:]))) for t in gone)


@pytest.mark.parametrize("cells", [False, True], ids=["one_cell", "seven_cells_backhaul_stale_downlink"])
@pytest.mark.parametrize("protocol", ["fedbuff", "fedasync", "semi_sync"])
def test_batteries_resume_exactly_from_every_checkpoint(tmp_path, monkeypatch, protocol, cells):
    data = battery_run(protocol, rounds=ROUNDS[protocol])
    if cells:
        data = changed(data, {**CELLS, "devices": {"battery_capacity_j": 1.0}})
    full, gone, differ = resumed_from_every_checkpoint(data, tmp_path, monkeypatch)
    assert gone  # devices went unavailable between two rows of one step: what the rows count depends on it
    if cells:  # the parts are there: updates behind the backhaul, models missed and trained from stale ones
        up = full.updates
        assert (up["backhaul_up_s"] > 0).any() and (~up["received"].astype(bool)).any()
    assert differ == []


def test_poisson_harvests_resume_exactly_from_every_checkpoint(tmp_path, monkeypatch):
    full, gone, differ = resumed_from_every_checkpoint(battery_run("semi_sync", rounds=16, harvest="poisson"),
                                                       tmp_path, monkeypatch)
    assert gone and (full.updates["outcome"] == "battery").any()
    assert differ == []


def test_a_semi_sync_round_counts_who_its_scheduler_could_draw_from(monkeypatch):
    """A round's num_available is the availability its devices were drawn from, as the scheduler saw
    it when the round began: a battery that runs out during the round changes who is available
    from then on, not the round's count (the round kept the live array, and a resumed round its
    copy from the checkpoint)."""
    from wirelessfl.scheduling.schedulers import UniformScheduler

    seen, decide = [], UniformScheduler.decide

    def counting(self, state):
        seen.append(int(state.available.sum()))  # at the round's start, before anything runs out
        return decide(self, state)

    monkeypatch.setattr(UniformScheduler, "decide", counting)
    res = simulate(from_dict(changed(battery_run("semi_sync", rounds=40), {"run": {"checkpoint_every": None}})),
                   None, progress=False)
    assert (res.updates["outcome"] == "battery").any()
    assert res.rounds["num_available"].tolist() == seen[:40]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["fedbuff", "fedasync", "semi_sync"])
def test_training_with_top_k_and_error_feedback_resumes_exactly_from_every_checkpoint(tmp_path, monkeypatch,
                                                                                      protocol):
    """The probe's run (FedBuff) and the others: seven cells behind a timed backhaul, batteries that
    harvest, a broadcast downlink in outage with stale starts, top-k with error feedback on the
    synthetic MLP (the residuals and the stale models are the learner's state)."""
    data = changed(changed(battery_run(protocol, rounds=ROUNDS[protocol] - 4), CELLS), TRAINING)
    data["devices"].update({"battery_capacity_j": 0.5, "battery_threshold": 0.2, "harvest_j": 0.3, "rx_power_w": 0.15})
    full, gone, differ = resumed_from_every_checkpoint(data, tmp_path, monkeypatch)
    assert gone
    assert differ == []


@pytest.mark.slow
def test_semi_sync_with_batteries_resumes_exactly_after_a_sigkill(tmp_path):
    """The same, with a real kill -9 of the command line's run and ``run --resume``."""
    data = changed(battery_run("semi_sync", rounds=80), CELLS)  # seconds past its first checkpoint: killed first
    full, cut = killed_and_resumed(tmp_path, dumps(from_dict({**data, "name": "k"})), "k")
    for name in FILES:
        assert (full / name).read_bytes() == (cut / name).read_bytes(), name


@pytest.mark.parametrize("protocol, cloud", [("fedbuff", "sync"), ("fedbuff", "async"), ("semi_sync", "async")])
def test_edge_servers_with_changing_availability_resume_exactly_from_every_checkpoint(tmp_path, monkeypatch,
                                                                                       protocol, cloud):
    """Edge servers (batteries under them are refused): each edge's engine steps a Markov chain of its
    own and counts its own availability; messages on the backhaul and devices going offline in flight."""
    from test_tiers import scenario

    data = scenario(cloud=cloud, rounds=8, cells=3)
    data["run"]["checkpoint_every"] = 1
    data["protocol"] = {"name": protocol, **({"concurrency": 3, "buffer": 2} if protocol == "fedbuff" else {})}
    data["devices"].update({"p_on_to_off": 0.3, "p_off_to_on": 0.5, "availability_period_s": 0.02})
    full, _, differ = resumed_from_every_checkpoint(data, tmp_path, monkeypatch)
    assert (full.updates["outcome"] == "offline").any() and full.rounds["num_available"].nunique() > 1
    assert differ == []
