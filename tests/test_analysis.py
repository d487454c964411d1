"""Analysis functions against hand-made curves."""
import math

import numpy as np
import pandas as pd
import pytest

from wirelessfl.experiments.analysis import (average_curves, best_setting_table, mean_time_to_target,
                                             on_grid, rolling_mean, shift_by_compute, speedup,
                                             time_to_target)


def test_on_grid_is_linear_and_nan_past_the_end():
    grid = np.array([0.0, 0.5, 1.0, 2.5, 4.0])
    out = on_grid([0.0, 1.0, 3.0], [0.0, 0.2, 0.6], grid)
    assert out[:4] == pytest.approx([0.0, 0.1, 0.2, 0.5])
    assert math.isnan(out[4])


def test_average_over_runs_keeps_common_support():
    grid = np.array([0.0, 1.0, 2.0])
    avg = average_curves([np.array([0.0, 0.2, np.nan]), np.array([0.2, 0.4, 0.6])], grid)
    assert list(avg["time_s"]) == [0.0, 1.0]
    assert avg["mean"].tolist() == pytest.approx([0.1, 0.3])
    assert avg["std"].tolist() == pytest.approx([0.1, 0.1])
    assert avg["min"].tolist() == pytest.approx([0.0, 0.2])


def test_time_to_target_interpolates_the_crossing():
    assert time_to_target([0, 10, 20], [0.1, 0.5, 0.9], 0.7) == pytest.approx(15.0)
    assert time_to_target([0, 10, 20], [0.8, 0.5, 0.9], 0.7) == 0.0
    assert math.isnan(time_to_target([0, 10], [0.1, 0.2], 0.7))
    assert speedup(100.0, 20.0) == 5.0


def test_rolling_mean_trails():
    assert rolling_mean(np.array([1.0, 3.0, 5.0]), 2).tolist() == [1.0, 2.0, 4.0]


def test_compute_shift_and_mean_time_to_target():
    evals = pd.DataFrame({"round": [0, 1, 2, 3], "time_s": [0.0, 1.0, 2.0, 3.0],
                          "accuracy": [0.0, 0.3, 0.6, 0.9]})
    assert shift_by_compute(evals, 2.0).tolist() == [0.0, 3.0, 6.0, 9.0]
    # accuracy 0.6 at round 2: 2 s of airtime plus 2 rounds x 2 s of computation
    assert mean_time_to_target([evals], 0.6, compute_s=2.0) == pytest.approx(6.0, abs=0.01)
    other = evals.assign(accuracy=[0.0, 0.1, 0.2, 0.9])  # mean curve: 0, .2, .4, .9 -> 0.6 at 2.4 s
    assert mean_time_to_target([evals, other], 0.6) == pytest.approx(2.4, abs=0.01)


def test_best_setting_ranges_merge_and_split_at_midpoints():
    comps = [0.0, 1.0, 2.0, 3.0]
    rows = []
    for c in comps:
        rows.append({"compute_s": c, "setting": "m=1", "time_to_target_s": 10 + 10 * c})
        rows.append({"compute_s": c, "setting": "m=10", "time_to_target_s": 25 + 2 * c})
    table = best_setting_table(pd.DataFrame(rows))
    # m=1 best at 0 and 1 (10, 20 vs 25, 27); m=10 best from 2 on (29 vs 30)
    assert table["setting"].tolist() == ["m=1", "m=10"]
    assert table["from_s"].tolist() == [0.0, 1.5]
    assert table["to_s"].tolist() == [1.5, math.inf]
