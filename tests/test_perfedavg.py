"""Per-FedAvg (docs/papers/perfedavg.md): local update rules against hand-written autograd references,
FedAvg as the alpha = 0 case, personalised evaluation on each device's own data only, the paper's
partition and model, configuration and the per-step computation time."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from wirelessfl.config import ConfigError, from_dict
from wirelessfl.learning import (Dataset, FedAvg, PerFedAvg, Trainer, build_model,
                                 num_parameters, partition, perfedavg_group_counts, perfedavg_test_unit,
                                 split_by_class_counts)
from wirelessfl.learning.fairness import device_test_sets
from wirelessfl.learning.perfedavg import BATCH_STREAMS
from wirelessfl.rng import stream


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_dataset(n_train=600, n_test=300, features=6, seed=0) -> Dataset:
    g = torch.Generator().manual_seed(seed)
    return Dataset(name="tiny", x_train=torch.randn(n_train, features, generator=g),
                   y_train=torch.randint(0, 10, (n_train,), generator=g),
                   x_test=torch.randn(n_test, features, generator=g),
                   y_test=torch.randint(0, 10, (n_test,), generator=g), num_classes=10, input_shape=(features,))


@pytest.fixture(scope="module")
def tiny():
    ds = tiny_dataset()
    parts = partition(ds.y_train.numpy(), 6, "iid", rng=stream(0, "partition"), samples_per_device=100)
    return ds, parts


def make_trainer(tiny, **kw):
    ds, parts = tiny
    return Trainer(ds, parts, "mlp_80_60", **{"local_steps": 3, "batch_size": 16, "lr": 0.05, "root_seed": 3, **kw})


# ---------------------------------------------------------------------------------------------
# independent reference: an nn.Module and torch.autograd (double backward for H u)

def reference_step(trainer: Trainer, w: torch.Tensor, batches, variant: str, alpha: float, beta: float,
                   delta: float = 1e-3) -> torch.Tensor:
    """One Per-FedAvg step written out with a module, autograd.grad and create_graph=True."""
    model = build_model("mlp_80_60", trainer.dataset.input_shape, 10).double()
    params = list(model.parameters())

    def load(vec):
        torch.nn.utils.vector_to_parameters(vec, params)

    def loss_at(vec, x, y, create_graph=False):
        load(vec.detach())
        for p in params:
            p.requires_grad_(True)
        loss = F.cross_entropy(model(x.double()), y)
        return loss, params

    def grad_at(vec, x, y):
        loss, ps = loss_at(vec, x, y)
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, ps)]).detach()

    (xd, yd), (xo, yo), (xh, yh) = batches
    w = w.double()
    g = grad_at(w, xd, yd)
    u = grad_at(w - alpha * g, xo, yo)
    if variant == "fo":
        h = u
    elif variant == "hf":
        h = u - alpha * (grad_at(w + delta * u, xh, yh) - grad_at(w - delta * u, xh, yh)) / (2 * delta)
    else:  # exact: d/dw [grad f(w; D'') . stopgrad(u)]
        loss, ps = loss_at(w, xh, yh)
        grads = torch.autograd.grad(loss, ps, create_graph=True)
        dot = sum((gi.reshape(-1) * ui).sum() for gi, ui in zip(grads, torch.split(u, [p.numel() for p in ps])))
        hu = torch.cat([t.reshape(-1) for t in torch.autograd.grad(dot, ps)])
        h = u - alpha * hu
    return w - beta * h


def step_batches(trainer, device, round_idx, step):
    return [trainer.batch(trainer.minibatch_indices(device, round_idx, stream_name=BATCH_STREAMS[k])[step])
            for k in ("D", "D_prime", "D_second")]


@pytest.mark.parametrize("variant", ["fo", "hf", "exact"])
@pytest.mark.parametrize("batching", ["loop", "vmap"])
def test_local_step_matches_the_autograd_reference(tiny, variant, batching):
    trainer = make_trainer(tiny, local_steps=1, batching=batching)
    alg = PerFedAvg(variant, alpha=0.3, beta=0.05, delta=1e-2)
    deltas = alg.local_updates(trainer, [1, 4], round_idx=7)
    for j, n in enumerate([1, 4]):
        ref = reference_step(trainer, trainer.params, step_batches(trainer, n, 7, 0), variant, 0.3, 0.05, 1e-2)
        got = trainer.params.double() + deltas[j].double()
        # HF in float32 against float64: the difference quotient loses ~eps/delta of relative accuracy
        tol = 3e-4 if variant == "hf" else 2e-5
        assert torch.allclose(got, ref, rtol=0, atol=tol * ref.abs().max()), (got - ref).abs().max()


def test_hf_meta_gradient_approaches_the_exact_one_as_delta_shrinks(tiny):
    trainer = make_trainer(tiny)
    w = trainer.params + 0.3 * torch.randn(trainer.num_params, generator=torch.Generator().manual_seed(1))
    batches = step_batches(trainer, 2, 0, 0)
    alpha = 0.5  # large, so the Hessian term matters: FO is far from exact
    exact = PerFedAvg("exact", alpha).meta_gradient(trainer, w, *batches)
    # independent reference for the exact meta-gradient: (w - ref_step) / beta with beta = 1
    ref = (w.double() - reference_step(trainer, w, batches, "exact", alpha, 1.0)).float()
    assert torch.allclose(exact, ref, atol=1e-5 * ref.abs().max())
    errors = {d: float((PerFedAvg("hf", alpha, delta=d).meta_gradient(trainer, w, *batches) - exact).norm()
                       / exact.norm()) for d in (1.0, 0.3, 0.1, 0.03, 1e-2, 1e-3)}
    fo_error = float((PerFedAvg("fo", alpha).meta_gradient(trainer, w, *batches) - exact).norm() / exact.norm())
    assert fo_error > 0.1  # the Hessian term is not negligible here
    # the truncation error shrinks with delta (O(delta^2) where no ELU input changes sign inside
    # w +- delta u, O(delta) across the kinks) until float32 round-off takes over below ~1e-3
    ds = sorted(errors, reverse=True)
    assert all(errors[a] > errors[b] for a, b in zip(ds, ds[1:])), errors
    # HF approaches the exact variant as delta shrinks (docs/papers/perfedavg.md, "A local step")
    assert errors[1e-3] < 1e-3 and errors[1e-3] < fo_error / 100


@pytest.mark.parametrize("batching", ["loop", "vmap"])
@pytest.mark.parametrize("variant", ["fo", "hf", "exact"])
def test_alpha_zero_is_fedavg(tiny, batching, variant):
    fedavg, per = make_trainer(tiny, batching=batching), make_trainer(tiny, batching=batching)
    q = np.full(6, 0.5)
    fa, pa = FedAvg(), PerFedAvg(variant, alpha=0.0)
    for r, sel in enumerate([[0, 3, 5], [1, 2], [4, 0, 1]]):
        fa.round(fedavg, np.array(sel), q, 6, r)
        pa.round(per, np.array(sel), q, 6, r)
        assert torch.equal(fedavg.params, per.params)
    # and alpha > 0 changes the trajectory
    moved = make_trainer(tiny, batching=batching)
    for r, sel in enumerate([[0, 3, 5], [1, 2], [4, 0, 1]]):
        PerFedAvg(variant, alpha=0.2).round(moved, np.array(sel), q, 6, r)
    assert not torch.allclose(moved.params, per.params)


def test_aggregation_is_unbiased_under_the_schedulers_q(tiny):
    trainer = make_trainer(tiny)
    alg = PerFedAvg("fo", alpha=0.1)
    q = np.array([0.2, 0.5, 1.0, 0.25, 0.4, 0.8])
    x0 = trainer.params.clone()
    deltas = alg.local_updates(trainer, [1, 3], 0)
    alg.round(trainer, np.array([3, 1, 3]), q, 6, 0)
    expect = x0 + deltas[0] / (6 * 0.5) + deltas[1] / (6 * 0.25)
    assert torch.allclose(trainer.params, expect, atol=1e-7)


def test_batches_d_d_prime_d_second_are_distinct_reproducible_streams(tiny):
    trainer = make_trainer(tiny)
    b = {k: trainer.minibatch_indices(2, 5, stream_name=name) for k, name in BATCH_STREAMS.items()}
    assert not torch.equal(b["D"], b["D_prime"]) and not torch.equal(b["D"], b["D_second"])
    assert torch.equal(b["D_prime"], trainer.minibatch_indices(2, 5))  # FedAvg's batch
    again = make_trainer(tiny)
    assert torch.equal(b["D"], again.minibatch_indices(2, 5, stream_name=BATCH_STREAMS["D"]))
    assert set(b["D"].reshape(-1).tolist()) <= set(tiny[1][2].tolist())  # the device's own samples


# ---------------------------------------------------------------------------------------------
# personalised evaluation

def _poisoned(ds: Dataset, keep_train: np.ndarray, keep_test: np.ndarray) -> Dataset:
    """A copy whose samples outside keep_train / keep_test are NaN with shuffled labels."""
    xtr, ytr, xte, yte = ds.x_train.clone(), ds.y_train.clone(), ds.x_test.clone(), ds.y_test.clone()
    drop_tr = np.setdiff1d(np.arange(len(ytr)), keep_train)
    drop_te = np.setdiff1d(np.arange(len(yte)), keep_test)
    xtr[drop_tr], xte[drop_te] = float("nan"), float("nan")
    ytr[drop_tr], yte[drop_te] = (ytr[drop_tr] + 3) % 10, (yte[drop_te] + 3) % 10
    return Dataset(name="poisoned", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte, num_classes=10,
                   input_shape=ds.input_shape)


def test_personalised_eval_adapts_each_device_on_its_own_data_only(tiny):
    ds, parts = tiny
    tests = device_test_sets([ds.y_train.numpy()[p] for p in parts], ds.y_test.numpy(), 20, stream(0, "test_split"))
    clean = Trainer(ds, parts, "mlp_80_60", batch_size=16, root_seed=3)
    ref = clean.personalised_evaluate(tests, alpha=0.5)["personal_per_device"]
    for n in (0, 4):
        dirty = Trainer(_poisoned(ds, parts[n], tests[n]), parts, "mlp_80_60", batch_size=16, root_seed=3)
        got = dirty.personalised_evaluate(tests, alpha=0.5)["personal_per_device"]
        assert got[n] == ref[n]
    # the poisoning does reach a device whose own data are hit
    dirty = Trainer(_poisoned(ds, parts[0], tests[0]), parts, "mlp_80_60", batch_size=16, root_seed=3)
    got = dirty.personalised_evaluate(tests, alpha=0.5)["personal_per_device"]
    assert got[1] != ref[1]


def test_personalised_eval_is_one_step_of_alpha(tiny):
    ds, parts = tiny
    tests = device_test_sets([ds.y_train.numpy()[p] for p in parts], ds.y_test.numpy(), 20, stream(0, "test_split"))
    trainer = Trainer(ds, parts, "mlp_80_60", batch_size=16, root_seed=3)
    model = build_model("mlp_80_60", ds.input_shape, 10)
    torch.nn.utils.vector_to_parameters(trainer.params, model.parameters())
    with torch.no_grad():
        by_hand = [float((model(ds.x_test[t]).argmax(1) == ds.y_test[t]).float().mean()) for t in tests]
    res = trainer.personalised_evaluate(tests, alpha=0.0)  # no step: the global model on each split
    assert np.allclose(res["personal_per_device"], by_hand)
    assert res["personal_accuracy"] == pytest.approx(np.mean(by_hand))
    assert res["personal_accuracy_std"] == pytest.approx(np.std(by_hand))
    stepped = trainer.personalised_evaluate(tests, alpha=5.0)["personal_per_device"]
    assert not np.allclose(stepped, by_hand)  # a large step changes predictions
    assert trainer.personalised_evaluate(tests, alpha=0.0)["local_accuracy"] == pytest.approx(np.mean(by_hand))


# ---------------------------------------------------------------------------------------------
# partition, model

def test_group_layout_is_the_papers_table_2():
    c = perfedavg_group_counts(50, 196)
    assert c.shape == (50, 10)
    assert np.all(c[:25, :5] == 196) and np.all(c[:25, 5:] == 0)
    for j in range(5):
        rows = c[25 + 5 * j: 30 + 5 * j]
        assert np.all(rows[:, j] == 98) and np.all(rows[:, j + 5] == 392)
        assert np.all(np.delete(rows, [j, j + 5], axis=1) == 0)
    assert c.sum() == 36750 and list(c.sum(1)[[0, 49]]) == [980, 490]
    single = perfedavg_group_counts(50, 196, single_class=True)
    assert np.all((single[25:] > 0).sum(1) == 1) and np.all(single[:25] == c[:25])
    assert perfedavg_test_unit(196, 60000, 10000) == 32 and perfedavg_test_unit(68, 50000, 10000) == 14


def test_split_by_class_counts_is_disjoint_and_exact():
    labels = np.repeat(np.arange(10), 300)
    counts = perfedavg_group_counts(20, 20)
    parts = split_by_class_counts(labels, counts, np.random.default_rng(0))
    allidx = np.concatenate(parts)
    assert allidx.size == np.unique(allidx).size == counts.sum()
    for n, p in enumerate(parts):
        assert np.array_equal(np.bincount(labels[p], minlength=10), counts[n])
    with pytest.raises(ValueError, match="class 0"):
        split_by_class_counts(labels, perfedavg_group_counts(20, 40), np.random.default_rng(0))
    via_scheme = partition(labels, 20, "perfedavg_groups", rng=np.random.default_rng(0), samples_per_device=100)
    assert [len(p) for p in via_scheme] == list(counts.sum(1))


def test_mlp_80_60_has_the_papers_parameter_count():
    assert num_parameters(build_model("mlp_80_60", (1, 28, 28), 10)) == 68270
    assert num_parameters(build_model("mlp_80_60", (3, 32, 32), 10)) == 251310
    acts = [type(m).__name__ for m in build_model("mlp_80_60", (1, 28, 28), 10)]
    assert acts.count("ELU") == 2 and "ReLU" not in acts


# ---------------------------------------------------------------------------------------------
# configuration and computation time

@pytest.mark.parametrize("learning, devices, field, words", [
    ({"algorithm": "perfedavg_so"}, {}, "learning.algorithm", "'perfedavg_fo', 'perfedavg_hf', 'perfedavg_exact'"),
    ({"per_alpha": -0.1}, {}, "learning.per_alpha", ">= 0"),
    ({"algorithm": "perfedavg_fo", "per_beta": 0}, {}, "learning.per_beta", "> 0"),
    ({"algorithm": "perfedavg_hf", "per_delta": 0.0}, {}, "learning.per_delta", "> 0"),
    ({"per_beta": 0.1}, {}, "learning.per_beta", "not an option of algorithm 'fedavg' (an option of algorithm "
                                                  "'perfedavg_fo'"),
    ({"algorithm": "perfedavg_fo", "per_delta": 0.1}, {}, "learning.per_delta", "(an option of algorithm "
                                                                               "'perfedavg_hf')"),
    ({"per_adapt_on": "val"}, {}, "learning.per_adapt_on", "'train', 'test'"),
    ({"partition": "perfedavg_groups"}, {"count": 45}, "devices.count", "multiple of 10"),
    ({"partition": "perfedavg_groups", "samples_per_device": 985}, {"count": 50},
     "learning.samples_per_device", "multiple of 10"),
])
def test_bad_perfedavg_values_name_the_field(learning, devices, field, words):
    with pytest.raises(ConfigError) as err:
        from_dict({"run": {"rounds": 2}, "learning": learning, "devices": devices})
    msg = str(err.value)
    assert field in msg and words in msg and "\n" not in msg


@pytest.mark.parametrize("compute", ["constant", "cpu"])
def test_computation_time_per_round_scales_with_gradient_evaluations(compute):
    from wirelessfl.sim.run.runner import Run

    times = {}
    for alg in ("fedavg", "perfedavg_fo", "perfedavg_hf", "perfedavg_exact"):
        sc = from_dict({"run": {"rounds": 2, "timing_only": True},
                        "devices": {"count": 4, "compute": compute, "step_time_s": 0.01,
                                    **({"compute_s": 0.5} if compute == "constant" else
                                       {"cpu_hz_per_device": [1e9, 2e9, 1e9, 3e9]})},
                        "learning": {"algorithm": alg, "local_steps": 5, "batch_size": 40}})
        times[alg] = Run(sc, None, progress=False).compute.compute_times(np.arange(4))
    base = times["fedavg"] - (0.01 * 5 if compute == "constant" else 0)  # fedavg has step_time on top
    for alg, factor in (("perfedavg_fo", 2), ("perfedavg_hf", 4), ("perfedavg_exact", 4)):
        assert np.allclose(times[alg], factor * times["fedavg"]), (alg, times[alg], base)


@pytest.mark.slow
def test_end_to_end_wireless_run_records_personalised_accuracy(tmp_path):
    from wirelessfl.experiments.run import simulate

    common = {"run": {"rounds": 4, "eval_every_rounds": 2},
              "channel": {"profile": "linear", "sigma_min": 0.5, "sigma_max": 5.0},
              "devices": {"count": 20, "compute_s": 0.2},
              "scheduler": {"name": "lyapunov", "m": 4},
              "learning": {"dataset": "fashion_mnist", "model": "mlp_80_60", "partition": "perfedavg_groups",
                           "samples_per_device": 100, "local_steps": 3, "batch_size": 20, "lr": 0.05,
                           "eval_train_samples": 500}}
    res = {}
    for alg in ("fedavg", "perfedavg_hf"):
        sc = from_dict({**common, "learning": {**common["learning"], "algorithm": alg}})
        res[alg] = simulate(sc, tmp_path / alg, progress=False)
    for r in res.values():
        ev = r.evals
        assert np.all((ev["personal_accuracy"] >= 0) & (ev["personal_accuracy"] <= 1))
        assert len(ev["personal_per_device"].iloc[-1].split()) == 20
        assert "personal_accuracy" in (r.run_dir / "evals.csv").read_text().splitlines()[0]
    # the same channel and selection streams; HF's computation takes 4x FedAvg's
    fa, hf = res["fedavg"].rounds, res["perfedavg_hf"].rounds
    assert np.allclose(hf["comp_s"], 4 * fa["comp_s"])
    assert res["perfedavg_hf"].evals["personal_accuracy"].iloc[-1] != res["fedavg"].evals["personal_accuracy"].iloc[-1]


@pytest.mark.parametrize("overrides, expect", [
    ({}, False),
    ({"learning": {"algorithm": "perfedavg_fo"}}, True),
    ({"learning": {"partition": "perfedavg_groups"}, "devices": {"count": 10}}, True),
    ({"learning": {"algorithm": "perfedavg_hf"}, "run": {"rounds": 2, "personalised_eval": False}}, False),
    ({"run": {"rounds": 2, "personalised_eval": True}}, True),
])
def test_personalised_eval_default(overrides, expect):
    from wirelessfl.sim.run.build import personalised_eval

    assert personalised_eval(from_dict({"run": {"rounds": 2}, **overrides})) is expect


@pytest.mark.slow
def test_resumed_perfedavg_run_has_the_uninterrupted_records(interrupted_and_resumed):
    sc = from_dict({"run": {"rounds": 6, "eval_every_rounds": 2, "checkpoint_every": 2, "batching": "vmap"},
                    "devices": {"count": 10, "compute_s": 0.1},
                    "scheduler": {"name": "lyapunov", "m": 3},
                    "learning": {"dataset": "fashion_mnist", "model": "mlp_80_60", "partition": "perfedavg_groups",
                                 "samples_per_device": 60, "local_steps": 2, "batch_size": 10, "lr": 0.05,
                                 "algorithm": "perfedavg_hf", "per_alpha": 0.05, "eval_train_samples": 200}})
    full, resumed = interrupted_and_resumed(sc, after=3)
    assert full.evals["personal_accuracy"].notna().all()
    assert full.evals.equals(resumed.evals)
    assert full.rounds.drop(columns=["wall_s"], errors="ignore").equals(
        resumed.rounds.drop(columns=["wall_s"], errors="ignore"))
