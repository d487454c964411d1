"""Model zoo: parameter counts, input shapes, deterministic init without global RNG use."""
from __future__ import annotations

import re

import pytest
import torch

from wirelessfl.learning.models import MODEL_NAMES, build_model, num_parameters


def test_paper_cnn_parameter_count():
    model = build_model("paper_cnn", (3, 32, 32), 10)
    assert num_parameters(model) == 555_178  # docs/papers/lyapunov.md, "The experiments"
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_models_on_28x28(name):
    model = build_model(name, (1, 28, 28), 10)
    assert model(torch.randn(3, 1, 28, 28)).shape == (3, 10)
    assert not list(model.buffers())  # the trainer relies on parameters describing the model fully


def test_paper_cnn_adapts_to_28x28():
    # fc input 32 * 7 * 7 instead of 32 * 8 * 8: 555,178 - (2048 - 1568) * 256 - (3 - 1) * 32 * 25
    assert num_parameters(build_model("paper_cnn", (1, 28, 28), 10)) == 555_178 - 480 * 256 - 2 * 800


@pytest.mark.parametrize("name", ["mlp", "logreg"])
def test_flat_input_models(name):
    assert build_model(name, (60,), 10)(torch.randn(4, 60)).shape == (4, 10)


def test_image_model_rejects_flat_input():
    with pytest.raises(ValueError, match="image input"):
        build_model("small_cnn", (60,), 10)


@pytest.mark.parametrize("name, side", [("paper_cnn", 4), ("small_cnn", 4), ("lenet", 16)])
def test_an_image_model_takes_images_down_to_its_smallest_side_and_names_it_below(name, side):
    # the smallest side leaves one pixel for the fully connected layer; one less leaves none
    for shape in [(1, side, side), (2, side + 3, side)]:
        assert build_model(name, shape, 10)(torch.randn(3, *shape)).shape == (3, 10)
    for shape in [(1, side - 1, side - 1), (1, 40, side - 1)]:
        with pytest.raises(ValueError, match=re.escape(f"model '{name}' needs images of at least {side} x {side} "
                                                       f"pixels, got input_shape {shape}")):
            build_model(name, shape, 10)


def test_unknown_model():
    with pytest.raises(ValueError, match="paper_cnn, small_cnn, mlp, logreg"):
        build_model("resnet18", (3, 32, 32), 10)


def test_generator_init_is_deterministic_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    a = build_model("small_cnn", (1, 28, 28), 10, generator=torch.Generator().manual_seed(3))
    b = build_model("small_cnn", (1, 28, 28), 10, generator=torch.Generator().manual_seed(3))
    c = build_model("small_cnn", (1, 28, 28), 10, generator=torch.Generator().manual_seed(4))
    assert torch.equal(torch.random.get_rng_state(), state)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb)
        assert not torch.equal(pa, pc)
    # Same distribution as PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    w = a[0].weight.detach()
    assert float(w.abs().max()) <= 1 / 25**0.5 and float(w.std()) > 0.5 / 25**0.5 / 3**0.5


# (model, dataset) -> parameters, as the table that timing-only runs read before the counts were measured
_PINNED_COUNTS = {
    ("paper_cnn", "fashion_mnist"): 430698, ("paper_cnn", "mnist"): 430698, ("paper_cnn", "cifar10"): 555178,
    ("small_cnn", "fashion_mnist"): 28938, ("small_cnn", "mnist"): 28938, ("small_cnn", "cifar10"): 34538,
    ("mlp", "fashion_mnist"): 199210, ("mlp", "mnist"): 199210, ("mlp", "cifar10"): 656810,
    ("mlp", "synthetic"): 54410,
    ("logreg", "fashion_mnist"): 7850, ("logreg", "mnist"): 7850, ("logreg", "cifar10"): 30730,
    ("logreg", "synthetic"): 610,
    ("mlp_80_60", "fashion_mnist"): 68270, ("mlp_80_60", "mnist"): 68270, ("mlp_80_60", "cifar10"): 251310,
    ("mlp_80_60", "synthetic"): 10350,
    ("lenet", "fashion_mnist"): 44426, ("lenet", "mnist"): 44426, ("lenet", "cifar10"): 62006,
}


def test_timing_only_model_bits_are_measured_without_loading_the_data(tmp_path):
    """Timing-only runs size the upload from the model built for the dataset's declared shape: the
    same bits as before, and no data is read (the data folder is empty)."""
    from wirelessfl.config import from_dict
    from wirelessfl.learning.learner import model_bits_of

    for (model, dataset), count in _PINNED_COUNTS.items():
        scenario = from_dict({"run": {"rounds": 1, "timing_only": True},
                              "learning": {"model": model, "dataset": dataset, "data_dir": str(tmp_path)}})
        assert model_bits_of(scenario) == 32 * count, (model, dataset)


def test_parameter_count_is_measured_from_the_module():
    """count_parameters builds the module and counts it: sum(p.numel()) of the module, for a built-in
    and for a model part with options."""
    from torch import nn

    from wirelessfl.learning.models import count_parameters

    def wide(input_shape, num_classes, hidden=7):
        return nn.Sequential(nn.Flatten(), nn.Linear(input_shape[0], hidden), nn.Linear(hidden, num_classes))

    for model, options in (("lenet", None), (wide, {"hidden": 13})):
        built = build_model(model, (1, 28, 28) if model == "lenet" else (5,), 3, options=options)
        expect = sum(p.numel() for p in built.parameters())
        assert count_parameters(model, (1, 28, 28) if model == "lenet" else (5,), 3, options) == expect
    assert count_parameters(wide, (5,), 3, {"hidden": 13}) == 5 * 13 + 13 + 13 * 3 + 3


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_a_built_in_s_layer_count_equals_its_built_module_s(name):
    """The built-ins count their layer list without torch (parameter_count); the count must be the
    module's sum(p.numel()) for any input shape and class count."""
    from wirelessfl.learning.models import _model_part

    images = name in ("paper_cnn", "small_cnn", "lenet")
    for shape in ([(1, 28, 28), (3, 32, 32), (2, 20, 24)] if images else [(60,), (1, 28, 28), (3, 32, 32)]):
        for classes in (10, 7):
            built = build_model(name, shape, classes)
            assert _model_part(name).parameter_count(shape, classes) == sum(p.numel() for p in built.parameters())


def test_a_timing_only_run_of_a_built_in_model_imports_no_torch(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from wirelessfl.config import from_dict; from wirelessfl.experiments.run import simulate\n"
            "r = simulate(from_dict({'run': {'rounds': 3, 'timing_only': True}, 'learning': {'model': 'paper_cnn'}}),"
            " None, progress=False)\n"
            "print(r.summary['model_bits'], 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path).stdout.split()
    assert out == [str(32 * 430698), "False"]


def test_model_of_unknown_layers_keeps_its_own_seeded_init():
    """A model with layers init_parameters does not know (LayerNorm) is built reproducibly from the
    generator's seed, and leaves torch's global RNG alone."""
    from torch import nn

    def normed(input_shape, num_classes):
        return nn.Sequential(nn.Linear(input_shape[0], 4), nn.LayerNorm(4), nn.Linear(4, num_classes))

    state = torch.random.get_rng_state()
    a = build_model(normed, (3,), 2, generator=torch.Generator().manual_seed(5))
    b = build_model(normed, (3,), 2, generator=torch.Generator().manual_seed(5))
    c = build_model(normed, (3,), 2, generator=torch.Generator().manual_seed(6))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a[0].weight, b[0].weight) and not torch.equal(a[0].weight, c[0].weight)
