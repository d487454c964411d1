"""Model zoo: parameter counts, input shapes, deterministic init without global RNG use."""
from __future__ import annotations

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


def test_parameter_counts_without_torch_are_the_models_own():
    from wirelessfl.learning import build_model, num_parameters
    from wirelessfl.learning.sizes import PARAMETERS

    shapes = {"fashion_mnist": (1, 28, 28), "mnist": (1, 28, 28), "cifar10": (3, 32, 32), "synthetic": (60,)}
    for (model, dataset), count in PARAMETERS.items():
        assert num_parameters(build_model(model, shapes[dataset], 10)) == count, (model, dataset)
    assert len(PARAMETERS) == 21  # every model on every dataset it accepts
