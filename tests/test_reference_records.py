"""Records pinned before the extension seams: every built-in scheduler, algorithm, channel and
computation model, run small, must give the records it gave when these files were written.

The records under tests/data/reference_records/ were written by ``python tests/test_reference_records.py``
at the commit that added them, before the refactor that moved the built-ins behind the plugin
registries. Columns that existed then must keep their values (discrete columns exactly, numbers of
timing-only runs to 1e-9 relative, numbers of training runs to 1e-6: float32 reductions differ in the
last bits between CPUs, and a scheduler's objective of losses carries them; evaluation numbers to
3e-5, after Per-FedAvg's second-order steps); columns added since are not compared. Since the seams, SAFARI's server round times are options
of the algorithm (learning.server_compute_s, learning.server_step_s; they were devices.*).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

HERE = Path(__file__).parent
DATA = HERE / "data" / "reference_records"

_SMALL = {"learning.dataset": "fashion_mnist", "learning.model": "logreg", "learning.samples_per_device": 60,
          "learning.eval_train_samples": 200, "learning.local_steps": 3, "learning.batch_size": 8,
          "learning.lr": 0.05, "run.eval_every_rounds": 2}

# name -> (dotted settings, training?)
CASES: dict[str, tuple[dict, bool]] = {
    "lyapunov_fedavg": ({"devices.count": 12, "channel.profile": "linear", "scheduler.m": 4, "scheduler.V": 100.0,
                         "scheduler.lam": 100.0, "run.rounds": 6, "devices.compute_s": 0.5, **_SMALL}, True),
    "uniform_fdma_deadline": ({"devices.count": 12, "scheduler.name": "uniform", "scheduler.m": 5, "link.access": "fdma",
                               "devices.compute": "shifted_exponential", "devices.delay_mean_s": 0.5,
                               "run.round_deadline_s": 1.2, "run.rounds": 6, **_SMALL}, True),
    "uniform_without_replacement": ({"devices.count": 10, "scheduler.name": "uniform", "scheduler.m": 3,
                                     "scheduler.sampling": "without_replacement", "run.rounds": 5,
                                     "devices.p_on_to_off": 0.3, "devices.p_off_to_on": 0.5, **_SMALL}, True),
    "lyapunov_manifold_paper_rule": ({"devices.count": 10, "scheduler.solver": "manifold",
                                      "scheduler.power_rule": "paper", "scheduler.m": 3, "run.rounds": 6,
                                      "run.timing_only": True, "link.model_bits": 100000,
                                      "channel.profile": "linear"}, False),
    "gauss_markov_pathloss_cpu": ({"devices.count": 10, "channel.model": "gauss_markov", "channel.rho": 0.7,
                                   "channel.path_loss": True, "channel.shadowing_db": 4.0,
                                   "channel.reference_gain_db": 40.0, "devices.compute": "cpu",
                                   "devices.cpu_hz": 2e9, "devices.excluded_count": 2, "run.rounds": 8,
                                   "run.timing_only": True, "link.model_bits": 200000}, False),
    "rician_step_time": ({"devices.count": 10, "channel.model": "rician", "channel.rician_k": 3.0,
                          "devices.step_time_s": 0.05, "devices.min_mean_snr_db": -5.0,
                          "channel.profile": "linear", "run.rounds": 5, **_SMALL}, True),
    "random_fair": ({"devices.count": 10, "scheduler.name": "random", "scheduler.kappa": 3, "run.rounds": 5,
                     **_SMALL}, True),
    "power_of_choice": ({"devices.count": 10, "scheduler.name": "power_of_choice", "scheduler.kappa": 3,
                         "scheduler.poc_candidates": 6, "run.rounds": 5, **_SMALL}, True),
    "divfl": ({"devices.count": 10, "scheduler.name": "divfl", "scheduler.kappa": 3, "run.rounds": 5,
               "learning.model": "mlp", **{k: v for k, v in _SMALL.items() if k != "learning.model"}}, True),
    "subtrunc_oracle": ({"devices.count": 10, "scheduler.name": "subtrunc", "scheduler.kappa": 3,
                         "scheduler.fair_freshness": "all_every_round", "scheduler.fair_greedy": "naive",
                         "scheduler.fair_lambda": 2.0, "run.rounds": 4, **_SMALL}, True),
    "unionfl_projected": ({"devices.count": 10, "scheduler.name": "unionfl", "scheduler.kappa": 3,
                           "scheduler.fair_mu": 0.5, "scheduler.fair_window": 2, "scheduler.fair_projection_dim": 8,
                           "learning.aggregation": "data_size", "run.rounds": 5, **_SMALL}, True),
    "safari_server_rounds": ({"devices.count": 10, "learning.algorithm": "safari", "learning.safari_q": 0.5,
                              "learning.aux_samples": 40, "learning.server_steps": 2,
                              "learning.server_compute_s": 0.3, "learning.server_step_s": 0.1,
                              "learning.server_round_is_slot": True, "run.rounds": 8, **_SMALL}, True),
    "safari_timing_only": ({"devices.count": 10, "learning.algorithm": "safari", "learning.safari_q": 0.6,
                            "learning.server_compute_s": 0.2, "run.rounds": 10, "run.timing_only": True,
                            "link.model_bits": 50000}, False),
    "fedshuffle_mvr_cpu": ({"devices.count": 8, "learning.algorithm": "fedshuffle_mvr", "learning.momentum": 0.9,
                            "learning.size_sigma": 0.8, "devices.compute": "cpu", "devices.step_time_s": 0.01,
                            "scheduler.m": 3, "run.rounds": 4, **_SMALL, "learning.samples_per_device": 30}, True),
    "fednova_epochs": ({"devices.count": 8, "learning.algorithm": "fednova", "learning.local_epochs_max": 2,
                        "learning.size_sigma": 0.5, "learning.nova_tau_eff": "harmonic", "scheduler.m": 3,
                        "devices.step_time_s": 0.02, "run.rounds": 4, **_SMALL,
                        "learning.samples_per_device": 30}, True),
    "fedavg_min_momentum": ({"devices.count": 8, "learning.algorithm": "fedavg_min", "learning.momentum": 0.5,
                             "learning.size_sigma": 0.5, "scheduler.m": 3, "run.rounds": 4, **_SMALL,
                             "learning.samples_per_device": 30}, True),
    "perfedavg_hf_groups": ({"devices.count": 10, "learning.algorithm": "perfedavg_hf", "learning.per_alpha": 0.02,
                             "learning.partition": "perfedavg_groups", "learning.samples_per_device": 50,
                             "devices.compute_s": 0.2, "scheduler.m": 3, "run.rounds": 4,
                             **{k: v for k, v in _SMALL.items() if k != "learning.samples_per_device"}}, True),
    "perfedavg_fo_timing": ({"devices.count": 10, "learning.algorithm": "perfedavg_fo", "devices.compute_s": 0.4,
                             "devices.step_time_s": 0.01, "run.rounds": 5, "run.timing_only": True,
                             "link.model_bits": 50000}, False),
    "fedavg_personalised_fairness": ({"devices.count": 10, "run.personalised_eval": True,
                                      "learning.fairness_metrics": True, "learning.alpha": 0.3, "run.rounds": 4,
                                      **_SMALL}, True),
}

DISCRETE = {"round", "num_selected", "selected", "upload_order", "num_available", "num_arrived", "dropped",
            "server_round", "device", "selections", "personal_per_device"}
SUMMARY_SKIP = {"wall_time_s", "wall_per_round_s"}
FAIR = {"random", "power_of_choice", "divfl", "subtrunc", "unionfl"}
"""Schedulers without draws: before the seams their summary's "m" was the unused default 10, now null."""


def scenario_of(name: str):
    from wirelessfl.config import from_dict

    settings, _ = CASES[name]
    data: dict = {"name": name, "seed": 3}
    for key, value in settings.items():
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return from_dict(data)


def write(out: Path) -> None:
    """Write every case's records under ``out`` (run with the code whose records are to be pinned)."""
    from wirelessfl import simulate

    for name in CASES:
        run_dir = out / name
        simulate(scenario_of(name), run_dir, progress=False)
        for extra in ("decisions.npz", "decisions.h5", "scenario.toml", "checkpoint.pt"):
            (run_dir / extra).unlink(missing_ok=True)
        print(f"wrote {run_dir}")


def _numeric(column: pd.Series) -> pd.Series:
    """A column of numbers with "nan" cells (read as text) as floats; any other column as it is."""
    if pd.api.types.is_numeric_dtype(column):
        return column
    as_float = pd.to_numeric(column, errors="coerce")
    return as_float if (as_float.isna() == (column.astype(str) == "nan")).all() else column


def _same(name: str, ref: pd.DataFrame, got: pd.DataFrame, tol: float) -> None:
    assert len(got) == len(ref), f"{name}: {len(got)} rows, reference {len(ref)}"
    for col in ref.columns:
        assert col in got.columns, f"{name}: column {col} is gone"
        a, b = _numeric(ref[col]), _numeric(got[col])
        if col in DISCRETE or not (pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b)):
            assert a.astype(str).tolist() == b.astype(str).tolist(), f"{name}.{col}"
        else:
            np.testing.assert_allclose(b.to_numpy(float), a.to_numpy(float), rtol=tol, atol=1e-12,
                                       err_msg=f"{name}.{col}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_records_equal_the_records_made_before_the_seams(name, tmp_path, one_torch_thread):
    from wirelessfl import simulate

    res = simulate(scenario_of(name), tmp_path / name, progress=False)
    ref_dir = DATA / name
    read = lambda d, f: pd.read_csv(d / f, keep_default_na=False, na_values=[""])  # noqa: E731
    # numbers fed by training (fair selection's objective of losses, SAFARI's) carry float32 reductions
    tol = 1e-6 if CASES[name][1] else 1e-9
    _same(f"{name}/rounds", read(ref_dir, "rounds.csv"), read(tmp_path / name, "rounds.csv"), tol)
    _same(f"{name}/devices", read(ref_dir, "devices.csv"), read(tmp_path / name, "devices.csv"), tol)
    # 3e-5: perfedavg_hf_groups' third train loss differs by 1.03e-5 relative on an Intel Xeon (AVX-512)
    _same(f"{name}/evals", read(ref_dir, "evals.csv"), read(tmp_path / name, "evals.csv"), 3e-5)
    ref = json.loads((ref_dir / "summary.json").read_text())
    for key, value in ref.items():
        if key in SUMMARY_SKIP or (key == "m" and ref["scheduler"] in FAIR):
            continue
        got = res.summary[key]
        if isinstance(value, float) and not (isinstance(got, float) and math.isnan(got) and math.isnan(value)):
            assert got == pytest.approx(value, rel=1e-6, abs=1e-12), f"{name}: summary {key}"
        elif not isinstance(value, float):
            assert got == value, f"{name}: summary {key}"
    assert CASES[name][1] == (not res.evals.empty)


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(HERE.parent))
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA)
