"""FedShuffle family (docs/papers/fedshuffle.md): the paper's quadratic experiment and the FedShuffleGen
settings."""
import numpy as np
import pytest

from wirelessfl.papers import quadratic as quad


def test_fedavg_closed_form_limit_point():
    # docs/papers/fedshuffle.md, "The quadratic experiment":
    # x~ = sum |D_i|^2 c_i / sum |D_i|^2 = (1,2,2,3,3,3)/14, ||x~ - x*||^2 = 30/1764
    p = quad.paper_problem()
    xt = quad.fedavg_limit_point(p)
    np.testing.assert_allclose(xt * 14, [1, 2, 2, 3, 3, 3])
    assert np.sum((xt - p.optimum) ** 2) == pytest.approx(30 / 1764)
    assert p.objective(xt) == pytest.approx(0.4252, abs=1e-4)
    assert p.objective(p.optimum) == pytest.approx(5 / 12)
    # the exact fixed point of E[x] at eta = 1/80 tends to x~ as eta -> 0
    fp = quad.expected_fixed_point("fedavg_rr", p, eta=1 / 80)
    assert np.sum((fp - p.optimum) ** 2) == pytest.approx(0.01689, abs=1e-5)
    fp_small = quad.expected_fixed_point("fedavg_rr", p, eta=1e-6)
    np.testing.assert_allclose(fp_small, xt, atol=1e-6)
    # FedShuffle's and FedAvgMin's fixed points are x* (up to O(eta) for FedShuffle)
    assert np.sum((quad.expected_fixed_point("fedshuffle", p, 1e-6) - p.optimum) ** 2) < 1e-12
    np.testing.assert_allclose(quad.expected_fixed_point("fedavg_min", p), p.optimum)


def test_so_fixed_point_matches_paper():
    # docs/papers/fedshuffle.md, "The quadratic experiment": expected SO contributions 7/36, 16/45, 9/20
    # with 2 of 3 uniformly
    x = quad.so_fixed_point(cohort=2)
    np.testing.assert_allclose(x, [7 / 36, 8 / 45, 8 / 45, 3 / 20, 3 / 20, 3 / 20])
    assert np.sum((x - 1 / 6) ** 2) == pytest.approx(1.85e-3, rel=1e-2)


def test_quadratic_fedavg_stalls_fedshuffle_converges():
    # Fig. 1a settings: full participation, 1 epoch, batch 1, eta = 1/80, 1000 rounds, seed 123
    avg = quad.run("fedavg_rr", seed=123)
    shuf = quad.run("fedshuffle", seed=123)
    assert avg[0] == pytest.approx(1 / 6)
    assert avg[-1] == pytest.approx(0.0169, abs=3e-4)  # paper: ~1.7e-2 plateau
    assert abs(avg[-1] - avg[500]) < 1e-3  # stalled
    assert shuf[-1] < 1e-6  # paper: ~4e-7 at round 1000
    assert shuf[500] < 2e-6  # paper: ~1e-6 by round 500
    # it sits at its exact O(eta) fixed point
    fp = quad.expected_fixed_point("fedshuffle")
    assert shuf[-1] == pytest.approx(np.sum((fp - 1 / 6) ** 2), rel=0.2)


def test_quadratic_sum_one_biased_under_sampling():
    # Fig. 1c: 2 of 3 uniformly, eta = 1/160: SO stalls near 1.85e-3, unbiased keeps going down
    so = quad.run("fedshuffle_so", eta=1 / 160, cohort=2, rounds=600, seed=124)
    ub = quad.run("fedshuffle", eta=1 / 160, cohort=2, rounds=600, seed=124)
    assert so[-100:].mean() > 5e-4
    assert ub[-100:].mean() < so[-100:].mean() / 2


# ------------------------------------------------------------------------------------------------
# FedShuffleGen: the named methods as settings of one engine

from wirelessfl.learning.fedshuffle import FEDSHUFFLE_METHODS, FedShuffleGen, make_fedshuffle_method  # noqa: E402


@pytest.mark.parametrize("name, quad_name", [
    ("fedavg_rr", "fedavg_rr"), ("fednova", "fednova_rr"), ("fedshuffle", "fedshuffle"),
    ("fedshuffle_so", "fedshuffle_so"), ("fedavg_min", "fedavg_min"),
])
def test_gen_reduces_to_named_methods_on_quadratic(name, quad_name):
    # batch 1, one epoch: tau_i = |D_i|; base lr = eta / max |D_j| (the common lr)
    p = quad.paper_problem()
    eta = 1 / 80
    gen = make_fedshuffle_method(name, p.sizes, local_epochs=1, batch_size=1, lr=eta / 3)
    ref = quad.method_setting(quad_name, p, eta, np.full(3, 2 / 3))
    everyone = np.arange(3)
    steps, lrs = gen.local_work(everyone)
    np.testing.assert_array_equal(steps, ref.steps)
    if name != "fedavg_min":  # the toy FedAvgMin takes its single step with lr eta, not eta / 3
        np.testing.assert_allclose(lrs, ref.step)
    for sel in (everyone, np.array([0, 2]), np.array([1, 2])):
        pr = np.full(3, 2 / 3)
        np.testing.assert_allclose(gen.coefficients(sel, pr), ref.coef(sel, pr))


def test_gen_parameters_of_each_method():
    sizes = np.array([10, 40, 95, 0, 200])
    B, E, lr = 16, 2, 0.05
    tau = E * np.ceil(sizes / B).astype(int)  # 2, 6, 12, 0, 26
    w = sizes / sizes.sum()
    q = np.array([0.9, 0.3, 0.5, 0.2, 0.7])
    sel = np.array([0, 1, 4])
    m = {k: make_fedshuffle_method(k, sizes, local_epochs=E, batch_size=B, lr=lr,
                                   momentum=0.9 if k == "fedshuffle_mvr" else 0.0) for k in FEDSHUFFLE_METHODS}
    np.testing.assert_array_equal(m["fedshuffle"].tau, tau)
    # local work
    np.testing.assert_array_equal(m["fedavg_rr"].local_work(sel)[0], tau[sel])
    np.testing.assert_allclose(m["fedavg_rr"].local_work(sel)[1], lr)
    np.testing.assert_array_equal(m["fedavg_min"].local_work(sel)[0], [2, 2, 2])
    np.testing.assert_array_equal(m["fedavg_mean"].local_work(sel)[0], [11, 11, 11])  # round(34 / 3)
    np.testing.assert_allclose(m["fedshuffle"].local_work(sel)[1], lr * 26 / tau[sel])
    # aggregation coefficients
    so = w[sel] / w[sel].sum()
    np.testing.assert_allclose(m["fedavg_rr"].coefficients(sel, q), so)
    np.testing.assert_allclose(m["fedshuffle"].coefficients(sel, q), w[sel] / q[sel])
    np.testing.assert_allclose(m["fedshuffle_so"].coefficients(sel, q), (w / q)[sel] / (w / q)[sel].sum())
    np.testing.assert_allclose(m["fednova"].coefficients(sel, q), so * (so @ tau[sel]) / tau[sel])
    harmonic = make_fedshuffle_method("fednova", sizes, local_epochs=E, batch_size=B, lr=lr, nova="harmonic")
    np.testing.assert_allclose(harmonic.coefficients(sel, q), so / np.sum(so / tau[sel]) / tau[sel])
    # FedShuffleMVR: FedShuffle's lr and weights, twice the gradients per step plus two full passes
    np.testing.assert_allclose(m["fedshuffle_mvr"].local_work(sel)[1], lr * 26 / tau[sel])
    np.testing.assert_allclose(m["fedshuffle_mvr"].coefficients(sel, q), w[sel] / q[sel])
    np.testing.assert_array_equal(m["fedshuffle_mvr"].work_units(sel), 2 * tau[sel] + 2 * tau[sel] // E)
    np.testing.assert_array_equal(m["fedshuffle"].work_units(sel), tau[sel])
    # server step size and repeated devices (the engine's draws with replacement count once)
    g = FedShuffleGen(sizes, local_epochs=E, batch_size=B, lr_norm="steps", server_lr=2.0)
    np.testing.assert_allclose(g.aggregation_weights(np.array([4, 0, 4]), q, 5), [2 * w[4] / q[4], 2 * w[0] / q[0], 0])


def test_objective_weights_eq31():
    # full participation, equal E: FedAvg optimises w^ ~ |D_i|^2 (docs/papers/fedshuffle.md,
    # "The FedShuffle family as algorithms"), the others w
    sizes = np.array([3, 7, 20, 50])
    w = sizes / sizes.sum()
    kw = dict(local_epochs=1, batch_size=1, lr=0.01)
    np.testing.assert_allclose(make_fedshuffle_method("fedavg_rr", sizes, **kw).objective_weights(),
                               sizes ** 2 / np.sum(sizes ** 2))
    for name in ("fedshuffle", "fednova", "fedavg_min"):
        np.testing.assert_allclose(make_fedshuffle_method(name, sizes, **kw).objective_weights(), w)
    # FedShuffle stays consistent under any sampling (expected coefficients w_i)
    q = np.array([0.1, 0.5, 0.9, 0.3])
    np.testing.assert_allclose(make_fedshuffle_method("fedshuffle", sizes, **kw).objective_weights(q), w)


def test_unbiased_aggregation_under_scheduler_sampling():
    # The engine's sampling: m draws with replacement from omega, distinct set; q = 1 - (1 - omega)^m
    # is each device's marginal inclusion probability. E[sum_S coef_i Delta_i] = sum_i w_i Delta_i.
    rng = np.random.default_rng(7)
    n, mdraws, trials = 6, 3, 6000
    sizes = np.array([5, 20, 60, 120, 300, 500])
    w = sizes / sizes.sum()
    omega = np.array([0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    q = 1 - (1 - omega) ** mdraws
    delta = rng.normal(size=n)
    target = w @ delta
    est = {}
    for name in ("fedshuffle", "fedshuffle_so", "fedavg_rr"):
        alg = make_fedshuffle_method(name, sizes, batch_size=10)
        vals = np.empty(trials)
        for t in range(trials):
            sel = rng.choice(n, size=mdraws, p=omega)
            vals[t] = alg.aggregation_weights(sel, q, n) @ delta[sel]
        est[name] = (vals.mean(), vals.std() / np.sqrt(trials))
    mean, se = est["fedshuffle"]
    assert abs(mean - target) < 4 * se
    for name in ("fedshuffle_so", "fedavg_rr"):  # sum-one is biased under partial participation
        mean, se = est[name]
        assert abs(mean - target) > 8 * se, (name, mean, target, se)


def test_gen_round_on_trainer_uses_per_device_steps_and_lrs():
    import torch

    from wirelessfl.learning import Dataset, Trainer

    g = torch.Generator().manual_seed(0)
    ds = Dataset(name="tiny", x_train=torch.randn(120, 8, generator=g), y_train=torch.randint(0, 3, (120,), generator=g),
                 x_test=torch.randn(20, 8, generator=g), y_test=torch.randint(0, 3, (20,), generator=g),
                 num_classes=3, input_shape=(8,))
    parts = [np.arange(0, 10), np.arange(10, 40), np.arange(40, 120)]  # unequal sizes
    tr = Trainer(ds, parts, "logreg", local_steps=1, batch_size=10, lr=0.1)
    alg = make_fedshuffle_method("fedshuffle", [10, 30, 80], local_epochs=2, batch_size=10, lr=0.1)
    q = np.array([0.5, 0.8, 1.0])
    x0 = tr.params.clone()
    info = alg.round(tr, np.array([2, 0, 2]), q, 3, round_idx=4)
    assert info["num_trained"] == 2 and info["local_steps"] == 2 + 16
    x1 = tr.params.clone()
    tr.params = x0
    deltas = tr.local_updates([0, 2], 4, local_steps=[2, 16], lr=[0.1 * 16 / 2, 0.1])
    expected = x0 + (10 / 120 / 0.5) * deltas[0] + (80 / 120 / 1.0) * deltas[1]
    torch.testing.assert_close(x1, expected)


# ------------------------------------------------------------------------------------------------
# unequal data and unequal work in the simulator

def test_lognormal_partition_sizes():
    from wirelessfl.learning.partition import partition

    labels = np.random.default_rng(0).integers(0, 10, 5000)
    for scheme in ("iid", "dirichlet_per_device"):
        parts = partition(labels, 40, scheme, rng=np.random.default_rng(1), samples_per_device=50, size_sigma=1.0)
        sizes = np.array([len(p) for p in parts])
        assert sizes.min() >= 1 and sizes.max() > 5 * sizes.min()
        assert 25 < sizes.mean() < 100
    iid = partition(labels, 40, "iid", rng=np.random.default_rng(1), samples_per_device=50, size_sigma=1.0)
    assert np.unique(np.concatenate(iid)).size == sum(len(p) for p in iid)  # disjoint
    # sigma = 0: the equal split, with the same draws as without the option
    a = partition(labels, 10, "dirichlet_per_device", rng=np.random.default_rng(2), samples_per_device=30)
    b = partition(labels, 10, "dirichlet_per_device", rng=np.random.default_rng(2), samples_per_device=30, size_sigma=0.0)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_compute_time_proportional_to_local_steps():
    from wirelessfl.config import from_dict
    from wirelessfl.devices import ConstantCompute, CpuCompute, WorkScaledCompute
    from wirelessfl.sim.run.runner import Run

    alg = make_fedshuffle_method("fedshuffle", [10, 40, 95, 200], local_epochs=2, batch_size=16)  # tau 2, 6, 12, 26
    devs = np.array([0, 2, 3])
    c = WorkScaledCompute(ConstantCompute(np.full(4, 0.5)), alg.work_units, ref_steps=10, step_time_s=0.1)
    np.testing.assert_allclose(c.compute_times(devs), 0.5 + 0.1 * np.array([2, 12, 26]))
    cpu = CpuCompute(np.full(4, 1e9), np.full(4, 1e6), samples_per_round=10 * 16, kappa=1e-28)
    c = WorkScaledCompute(cpu, alg.work_units, ref_steps=10)
    np.testing.assert_allclose(c.compute_times(devs), 1e6 * 16 * np.array([2, 12, 26]) / 1e9)
    np.testing.assert_allclose(c.energy_j(devs), 1e-28 * 1e18 * 1e6 * 16 * np.array([2, 12, 26]))

    s = from_dict({"run": {"rounds": 1, "timing_only": True}, "link": {"model_bits": 100},
                   "devices": {"count": 4, "compute_s": 0.5, "step_time_s": 0.01},
                   "learning": {"algorithm": "fedshuffle", "local_epochs": 2, "batch_size": 16}})
    m = Run(s, None, progress=False).compute
    m.steps_fn = alg.work_units  # the sizes a training run's data would give
    np.testing.assert_allclose(m.compute_times(devs), 0.5 + 0.01 * np.array([2, 12, 26]))
    # a timing-only run has no data: every device runs learning.local_steps (10 by default)
    np.testing.assert_allclose(Run(s, None, progress=False).compute.compute_times(devs), 0.5 + 0.01 * 10)


def test_fedshuffle_runs_in_the_simulator():
    from wirelessfl import simulate
    from wirelessfl.config import from_dict

    s = from_dict({"seed": 0, "run": {"rounds": 6, "eval_every_rounds": 3},
                   "devices": {"count": 10, "step_time_s": 0.01}, "scheduler": {"name": "uniform", "m": 5},
                   "learning": {"dataset": "synthetic", "model": "logreg", "samples_per_device": 80,
                                "synthetic_alpha": 0.5, "synthetic_beta": 0.5, "lr": 0.05,
                                "algorithm": "fedshuffle", "local_epochs": 1, "batch_size": 16}})
    res = simulate(s, progress=False)
    acc = res.evals["accuracy"].to_numpy()
    assert np.all(np.isfinite(acc)) and acc[-1] > acc[0]
    assert np.all(res.rounds["comp_s"].to_numpy() > 0)


def test_quadratic_mvr_momentum():
    # Fig. 1b: momentum 0.9 with the full MVR correction (docs/papers/fedshuffle.md, "Global momentum
    # and the local step direction"): FedAvg's plateau drops to ~1.7e-4, FedShuffleMVR reaches ~4e-9
    avg = quad.run("fedavg_rr", momentum=0.9, seed=123)
    mvr = quad.run("fedshuffle", momentum=0.9, seed=123)
    assert avg[-1] == pytest.approx(1.7e-4, rel=0.15)
    assert mvr[-1] < 1e-8
    assert mvr[-1] < quad.run("fedshuffle", seed=123)[-1] / 10  # momentum helps FedShuffle


def test_quadratic_importance_sampling():
    # Fig. 1d: 8, 1, 1 points, one client per round, coefficient w_i / p_i: IS beats uniform
    prob = quad.paper_problem((8, 1, 1))
    uni = quad.run_seeds("fedshuffle", problem=prob, eta=1 / 500, probs=np.full(3, 1 / 3)).mean(0)
    imp = quad.run_seeds("fedshuffle", problem=prob, eta=1 / 300, probs=np.array([0.8, 0.1, 0.1])).mean(0)
    assert 1e-3 < uni[-1] < 4e-3  # paper ~2e-3
    assert imp[-1] < uni[-1] / 1.5  # paper ~5e-4; here ~9e-4
    with pytest.raises(ValueError):
        quad.run("fedshuffle", probs=[0.5, 0.5, 0.5])


def test_gen_rejects_bad_settings():
    with pytest.raises(ValueError):
        FedShuffleGen([0, 0])
    with pytest.raises(ValueError):
        FedShuffleGen([3, 4], work="all")
    with pytest.raises(ValueError):
        make_fedshuffle_method("fedprox", [3, 4])
    g = make_fedshuffle_method("fedshuffle", [3, 4])
    with pytest.raises(ValueError):  # q = 0 for a selected device: no unbiased weight
        g.aggregation_weights(np.array([0]), np.array([0.0, 1.0]), 2)
    with pytest.raises(ValueError):
        g.aggregation_weights(np.array([0]), np.ones(3), 3)


def test_study_scenario_loads():
    from pathlib import Path

    from wirelessfl.config import load_scenario

    s = load_scenario(Path(__file__).resolve().parents[1] / "scenarios/studies/fedshuffle.toml")
    algs = {(v.learning.algorithm, v.learning.options.momentum) for _, v in s.variant_scenarios()}
    assert algs == {("fedavg_rr", 0), ("fedavg_min", 0), ("fednova", 0), ("fedshuffle", 0), ("fedshuffle", 0.9),
                    ("fedshuffle_mvr", 0.9)}


# --- FedShuffle in the simulator: global momentum, FedShuffleMVR, heterogeneous epochs -----------

def _tiny_trainer(model="logreg", batching="loop"):
    import torch

    from wirelessfl.learning import Dataset, Trainer

    g = torch.Generator().manual_seed(0)
    data = Dataset(name="tiny", x_train=torch.randn(120, 6, generator=g), y_train=torch.randint(0, 3, (120,), generator=g),
                   x_test=torch.randn(30, 6, generator=g), y_test=torch.randint(0, 3, (30,), generator=g),
                   num_classes=3, input_shape=(6,))
    parts = [np.arange(0, 10), np.arange(10, 40), np.arange(40, 120)]
    return Trainer(data, parts, model, batch_size=8, lr=0.1, root_seed=3, batching=batching)


def _hand_round(trainer, alg, devices, q, round_idx, x, m, x_prev):
    """One FedShuffleGen round with global momentum written out with autograd
    (docs/papers/fedshuffle.md, "Global momentum and the local step direction")."""
    import torch
    import torch.nn.functional as F

    c, a = alg.momentum, 1.0 - alg.momentum
    data_x, data_y = trainer.dataset.x_train, trainer.dataset.y_train

    def grad(params, ix):
        p = params.clone().requires_grad_(True)
        W, b = p[:18].view(3, 6), p[18:]
        F.cross_entropy(data_x[ix] @ W.T + b, data_y[ix]).backward()
        return p.grad

    steps, lrs = alg.local_work(devices, round_idx)
    rho = alg.weights[devices] / q[devices]
    deltas, u = [], []
    for n, k, lr in zip(devices, steps, lrs):
        batches = trainer.minibatch_indices(int(n), round_idx, int(k))
        y = x.clone()
        for s in range(int(k)):
            g = grad(y, batches[s])
            d = g + c * (m - grad(x, batches[s])) if alg.mvr else a * g + c * m
            y = y - float(lr) * d
        deltas.append(y - x)
        if alg.mvr:
            full = torch.from_numpy(trainer._indices[int(n)])
            u.append(grad(x, full) - c * grad(x_prev, full))
    coef = alg.server_lr * alg.coefficients(devices, q, steps)
    new_x = x + sum(float(w) * dl for w, dl in zip(coef, deltas))
    if alg.mvr:
        new_m = c * m + sum(float(r) * ui for r, ui in zip(rho, u))
    else:
        rho = rho / rho.sum() if alg.aggregation != "unbiased" else rho
        g_hat = [(-dl / (float(lr) * int(k)) - c * m) / a for dl, lr, k in zip(deltas, lrs, steps)]
        new_m = c * m + a * sum(float(r) * g for r, g in zip(rho, g_hat))
    return new_x, new_m


@pytest.mark.parametrize("method,batching", [("fedshuffle_mvr", "loop"), ("fedshuffle_mvr", "vmap"),
                                             ("fedavg_rr", "loop"), ("fedshuffle", "vmap")])
def test_global_momentum_rounds_match_an_autograd_reference(method, batching):
    import torch

    trainer = _tiny_trainer(batching=batching)
    alg = make_fedshuffle_method(method, [10, 30, 80], local_epochs=1, batch_size=8, lr=0.1, momentum=0.9)
    q = np.array([0.5, 0.8, 0.9])
    x, m, x_prev = trainer.params.clone(), torch.zeros(trainer.num_params), trainer.params.clone()
    for r, devices in enumerate([np.array([0, 2]), np.array([1, 2]), np.array([0, 1, 2])]):
        x_ref, m_ref = _hand_round(trainer, alg, devices, q, r, x, m, x_prev)
        alg.round(trainer, devices, q, 3, r)
        torch.testing.assert_close(trainer.params, x_ref, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(torch.from_numpy(alg.m), m_ref, rtol=1e-4, atol=1e-6)
        x_prev, x, m = x, x_ref, m_ref
    assert float(m.norm()) > 1e-2  # the momentum is doing something


def test_momentum_changes_the_update_and_zero_momentum_is_the_plain_method():
    import torch

    plain, moving = _tiny_trainer(), _tiny_trainer()
    q = np.ones(3)
    a = make_fedshuffle_method("fedshuffle", [10, 30, 80], batch_size=8, lr=0.1)
    b = make_fedshuffle_method("fedshuffle", [10, 30, 80], batch_size=8, lr=0.1, momentum=0.5)
    a.round(plain, np.arange(3), q, 3, 0)
    b.round(moving, np.arange(3), q, 3, 0)
    # round 0 starts from m = 0: the first direction is a g(y), so the steps are halved, not equal
    assert not torch.allclose(plain.params, moving.params)
    assert a.m is None and b.m is not None


def test_heterogeneous_epochs_are_drawn_per_round_and_device_and_scale_the_work():
    sizes = [16, 32, 64, 160]
    alg = make_fedshuffle_method("fedshuffle", sizes, local_epochs=2, batch_size=16, lr=0.1, epochs_max=5, seed=7)
    k = np.array([1, 2, 4, 10])
    draws = np.array([alg.epochs(np.arange(4), r) for r in range(400)])
    assert draws.min() == 2 and draws.max() == 5
    np.testing.assert_allclose(np.bincount(draws.ravel(), minlength=6)[2:] / draws.size, 0.25, atol=0.03)
    assert not np.all(draws[0] == draws[1:])  # redrawn every round
    # a device's draw does not depend on the cohort; the same seed gives the same draws
    assert alg.epochs([2], 9)[0] == alg.epochs([0, 1, 2, 3], 9)[2]
    again = make_fedshuffle_method("fedshuffle", sizes, local_epochs=2, batch_size=16, lr=0.1, epochs_max=5, seed=7)
    np.testing.assert_array_equal(again.epochs(np.arange(4), 11), alg.epochs(np.arange(4), 11))
    steps, lrs = alg.local_work(np.arange(4), 11)
    np.testing.assert_array_equal(steps, alg.epochs(np.arange(4), 11) * k)
    # FedShuffle normalises by the largest possible work, E_max max K = 50: lr_i tau_i is constant
    np.testing.assert_allclose(lrs * steps, 0.1 * 50)
    np.testing.assert_array_equal(alg.work_units(np.arange(4), 11), steps)


def test_mvr_and_momentum_exchange_more_vectors_on_the_air():
    from wirelessfl import simulate
    from wirelessfl.config import from_dict
    from wirelessfl.sim.run.runner import Run

    base = {"seed": 1, "run": {"rounds": 20, "timing_only": True}, "link": {"downlink_rate_bps": 1e8},
            "devices": {"count": 8}, "scheduler": {"name": "uniform", "m": 4},
            "learning": {"dataset": "synthetic", "model": "logreg", "algorithm": "fedshuffle"}}
    runs = {}
    for name, extra in {"plain": {}, "momentum": {"momentum": 0.9},
                        "mvr": {"algorithm": "fedshuffle_mvr", "momentum": 0.9}}.items():
        s = from_dict({**base, "learning": {**base["learning"], **extra}})
        alg = Run(s, None, progress=False).algorithm
        runs[name] = ((alg.upload_vectors, alg.broadcast_vectors), simulate(s, progress=False).rounds)
    assert [v for v, _ in runs.values()] == [(1, 1), (1, 2), (2, 3)]
    plain, mvr = runs["plain"][1], runs["mvr"][1]
    np.testing.assert_array_equal(plain["selected"], mvr["selected"])  # same draws: same channel, same q
    np.testing.assert_allclose(mvr["comm_s"], 2 * plain["comm_s"])  # u_i next to the delta
    np.testing.assert_allclose(mvr["downlink_s"], 3 * plain["downlink_s"])  # x_t, m, x_{t-1}
    np.testing.assert_allclose(runs["momentum"][1]["downlink_s"], 2 * plain["downlink_s"])


def test_fedshuffle_scenario_keys_are_validated():
    from wirelessfl.config import ConfigError, from_dict

    def make(**learning):
        return from_dict({"run": {"rounds": 1}, "learning": {"dataset": "synthetic", "model": "logreg", **learning}})

    with pytest.raises(ConfigError, match=r"learning.momentum = 0: fedshuffle_mvr needs"):
        make(algorithm="fedshuffle_mvr")
    with pytest.raises(ConfigError, match=r"learning.momentum: not an option of algorithm 'fedavg' \(an option of "
                                          r"algorithm 'fedavg_rr'"):
        make(algorithm="fedavg", momentum=0.9)
    with pytest.raises(ConfigError, match=r"learning.local_epochs_max = 1: must be >= learning.local_epochs = 2"):
        make(algorithm="fedshuffle", local_epochs=2, local_epochs_max=1)
    with pytest.raises(ConfigError, match=r"learning.nova_tau_eff"):
        make(algorithm="fednova", nova_tau_eff="geometric")
    with pytest.raises(ConfigError, match=r"learning.nova_tau_eff: not an option of algorithm 'fedshuffle'"):
        make(algorithm="fedshuffle", nova_tau_eff="harmonic")
    with pytest.raises(ConfigError, match=r"learning.momentum"):
        make(algorithm="fedshuffle", momentum=1.0)
    assert make(algorithm="fedshuffle_mvr", momentum=0.9, global_lr=2.0).learning.options.global_lr == 2.0


def test_mvr_resume_is_exact(interrupted_and_resumed):
    # the momentum m and x_{t-1} live in the checkpoint: a resumed run continues the same trajectory
    from wirelessfl.config import from_dict

    s = from_dict({"seed": 2, "run": {"rounds": 8, "eval_every_rounds": 2, "checkpoint_every": 2},
                   "devices": {"count": 6, "step_time_s": 0.01}, "scheduler": {"name": "lyapunov", "m": 3},
                   "learning": {"dataset": "synthetic", "model": "logreg", "samples_per_device": 40,
                                "algorithm": "fedshuffle_mvr", "momentum": 0.9, "local_epochs": 1,
                                "local_epochs_max": 3, "batch_size": 16, "lr": 0.05}})
    full, resumed = interrupted_and_resumed(s, after=5)
    import pandas as pd

    pd.testing.assert_frame_equal(resumed.rounds, full.rounds)
    pd.testing.assert_frame_equal(resumed.evals, full.evals)
    assert full.evals["train_loss"].iloc[-1] < full.evals["train_loss"].iloc[0]
