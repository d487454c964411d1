"""Model zoo: small classifiers used in the papers we reproduce.

Models hold no buffers and no BatchNorm, so a model is fully described by its parameters (the
trainer keeps them as one flat vector and calls the module functionally).
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

__all__ = ["MODEL_NAMES", "build_model", "init_parameters", "num_parameters"]


def _paper_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    c, h, w = _image_shape(input_shape, "paper_cnn")
    return nn.Sequential(
        nn.Conv2d(c, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * (h // 4) * (w // 4), 256), nn.ReLU(),
        nn.Linear(256, num_classes),
    )


def _small_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    c, h, w = _image_shape(input_shape, "small_cnn")
    return nn.Sequential(
        nn.Conv2d(c, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * (h // 4) * (w // 4), num_classes),
    )


def _lenet(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    c, h, w = _image_shape(input_shape, "lenet")
    return nn.Sequential(
        nn.Conv2d(c, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * (((h - 4) // 2 - 4) // 2) * (((w - 4) // 2 - 4) // 2), 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, num_classes),
    )


def _mlp(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(math.prod(input_shape), 200), nn.ReLU(),
        nn.Linear(200, 200), nn.ReLU(),
        nn.Linear(200, num_classes),
    )


def _mlp_80_60(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    # Per-FedAvg's model (docs/papers/perfedavg.md, "Model and defaults"): small enough that its
    # Hessian-vector products are cheap.
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(math.prod(input_shape), 80), nn.ELU(),
        nn.Linear(80, 60), nn.ELU(),
        nn.Linear(60, num_classes),
    )


def _logreg(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


_BUILDERS: dict[str, Callable[[tuple[int, ...], int], nn.Module]] = {
    "paper_cnn": _paper_cnn,
    "small_cnn": _small_cnn,
    "mlp": _mlp,
    "logreg": _logreg,
    "mlp_80_60": _mlp_80_60,
    "lenet": _lenet,
}
MODEL_NAMES = tuple(_BUILDERS)


def _image_shape(input_shape: tuple[int, ...], name: str) -> tuple[int, int, int]:
    if len(input_shape) != 3:
        raise ValueError(f"model {name!r} needs an image input (C, H, W), got input_shape {tuple(input_shape)}")
    return tuple(int(s) for s in input_shape)  # type: ignore[return-value]


def build_model(
    name: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    *,
    generator: torch.Generator | None = None,
) -> nn.Module:
    """Build classifier ``name`` for inputs of ``input_shape`` (without the batch dimension).

    * ``"paper_cnn"``: the CNN of docs/papers/lyapunov.md, "The experiments": conv 5x5 C->32 (same
      padding), ReLU, maxpool 2, conv 5x5 32->32 (same), ReLU, maxpool 2, fc -> 256, ReLU,
      fc 256 -> classes. 555,178 parameters on (3, 32, 32) with 10 classes; 430,698 on (1, 28, 28).
    * ``"small_cnn"``: conv 5x5 C->16, ReLU, pool, conv 5x5 16->32, ReLU, pool, fc -> classes
      (28,938 parameters on (1, 28, 28)): fast enough for CPU tests.
    * ``"lenet"``: LeNet-5 as in docs/papers/fair_selection.md, "Experiments and their defaults":
      conv 5x5 C->6 (no padding), ReLU, pool, conv 5x5 6->16, ReLU, pool, fc -> 120, ReLU, fc -> 84,
      ReLU, fc -> classes (44,426 parameters on (1, 28, 28); 62,006 on (3, 32, 32)).
    * ``"mlp"``: flatten, fc -> 200, ReLU, fc 200 -> 200, ReLU, fc -> classes (FedAvg's "2NN").
    * ``"mlp_80_60"``: Per-FedAvg's MLP: flatten, fc -> 80, ELU, fc 80 -> 60, ELU, fc -> classes
      (68,270 parameters on (1, 28, 28), 251,310 on (3, 32, 32)).
    * ``"logreg"``: flatten, fc -> classes (multinomial logistic regression; any input shape).

    With ``generator`` the parameters are initialised from it (see :func:`init_parameters`) and
    torch's global RNG is neither read nor advanced; without it PyTorch's default init is used.
    """
    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODEL_NAMES)}")
    if generator is None:
        return _BUILDERS[name](tuple(input_shape), int(num_classes))
    # PyTorch's default init draws from the global RNG: build under a fork of it (its state is
    # restored after), then initialise from the generator alone. (Building on the meta device
    # instead made torch import sympy for its shape logic: 0.7 s of every run's start-up.)
    with torch.random.fork_rng(devices=[]):
        model = _BUILDERS[name](tuple(input_shape), int(num_classes))
    return init_parameters(model, generator)


@torch.no_grad()
def init_parameters(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-initialise every Linear / Conv layer in place from ``generator``.

    Same distribution as PyTorch's default (kaiming_uniform with a = sqrt(5) for weights, which is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for biases), but drawn from an explicit
    generator in a fixed module order, so it is reproducible and touches no global state.
    """
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            fan_in = module.weight[0].numel()
            bound = 1.0 / math.sqrt(fan_in)
            _uniform_(module.weight, bound, generator)
            if module.bias is not None:
                _uniform_(module.bias, bound, generator)
        elif any(True for _ in module.parameters(recurse=False)):
            raise TypeError(f"init_parameters does not know how to initialise {type(module).__name__}")
    return model


def _uniform_(t: torch.Tensor, bound: float, generator: torch.Generator) -> None:
    # Draw on the CPU generator, then copy: works whatever device the parameter lives on.
    values = torch.empty(t.shape, dtype=t.dtype).uniform_(-bound, bound, generator=generator)
    t.copy_(values)


def num_parameters(model: nn.Module) -> int:
    """Number of scalar parameters of ``model`` (the d of docs/papers/lyapunov.md; ℓ = 32 d bits)."""
    return sum(p.numel() for p in model.parameters())
