"""Model zoo: small classifiers used in the papers we reproduce, and the model protocol.

A model is a part (``learning.model``, registry ``wirelessfl.learning.MODELS``): a callable, a
function or a class, called as ``model(input_shape, num_classes, **options)`` that returns a
``torch.nn.Module``. The built-ins are the functions below, named as in the scenario.

Models hold no buffers and no BatchNorm, so a model is fully described by its parameters (the
trainer keeps them as one flat vector and calls the module functionally). Its size, and so the
upload's 32 x parameters bits, is measured from a module built for the dataset's input shape
(:func:`count_parameters`).

This module imports torch only when a model is built, so that naming a model in a scenario does not.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any, Callable

from ..fields import NoOptions

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["MODEL_NAMES", "Model", "build_model", "count_parameters", "init_parameters", "model_kwargs",
           "num_parameters"]


class Model:
    """The protocol of a model part: a class (or function) called as
    ``Model(input_shape, num_classes, **options)`` that returns a ``torch.nn.Module`` mapping a batch
    of shape (B, *input_shape) to (B, num_classes) logits.

    Everything here is optional; a function gets these defaults too (wirelessfl.plugins.FunctionPart).
    """

    Options = None
    """A frozen dataclass of options (fields become keyword arguments), or None: the options
    table is passed as keyword arguments unchecked."""

    input_ranks: tuple[int, ...] | None = None
    """The ranks of input shapes the model takes (3: images (C, H, W)); None: any. Checked against
    the dataset's declared shape when the scenario is read."""

    @classmethod
    def check(cls, scenario, options) -> None:
        """Cross-field rules at load time (raise wirelessfl.config.ConfigError); default none."""

    @staticmethod
    def parameter_count(input_shape: tuple[int, ...], num_classes: int, **options) -> int | None:
        """The parameter count without building the module (the built-ins count their layers, so a
        timing-only run needs no torch); None (default): measured from the built module. It must
        equal the built module's count."""
        return None


def _sequential(layers: list[tuple]) -> nn.Module:
    """The nn.Sequential of a built-in's layers: ("conv", c_in, c_out, kernel, padding), ("linear",
    n_in, n_out), ("relu",), ("elu",), ("pool",) (max-pool 2) and ("flatten",)."""
    from torch import nn

    make = {"conv": lambda c_in, c_out, k, pad: nn.Conv2d(c_in, c_out, k, padding=pad), "linear": nn.Linear,
            "relu": nn.ReLU, "elu": nn.ELU, "pool": lambda: nn.MaxPool2d(2), "flatten": nn.Flatten}
    return nn.Sequential(*(make[kind](*args) for kind, *args in layers))


def _count(layers: list[tuple]) -> int:
    """The parameters of those layers, without torch: weights and biases of the convolutions and the
    fully connected layers."""
    total = 0
    for kind, *args in layers:
        if kind == "conv":
            c_in, c_out, k, _ = args
            total += c_out * c_in * k * k + c_out
        elif kind == "linear":
            n_in, n_out = args
            total += n_in * n_out + n_out
    return total


def _builtin(layers_of: Callable) -> Callable:
    """A built-in model from the function that lists its layers: built as their nn.Sequential, and
    counted from the same list without torch (``parameter_count``: a timing-only run sizes its upload
    without importing torch). It takes no options."""
    def model(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        return _sequential(layers_of(input_shape, num_classes))

    functools.update_wrapper(model, layers_of)
    model.parameter_count = lambda input_shape, num_classes: _count(layers_of(input_shape, num_classes))
    model.Options = NoOptions
    return model


def _takes_images(layers_of: Callable) -> Callable:
    """A built-in model for image inputs (C, H, W)."""
    model = _builtin(layers_of)
    model.input_ranks = (3,)
    return model


@_takes_images
def paper_cnn(input_shape: tuple[int, ...], num_classes: int) -> list[tuple]:
    """The CNN of docs/papers/lyapunov.md, "The experiments": conv 5x5 C->32 (same padding), ReLU,
    maxpool 2, conv 5x5 32->32 (same), ReLU, maxpool 2, fc -> 256, ReLU, fc 256 -> classes. 555,178
    parameters on (3, 32, 32) with 10 classes; 430,698 on (1, 28, 28)."""
    c, h, w = _image_shape(input_shape, "paper_cnn", min_side=4)
    return [("conv", c, 32, 5, 2), ("relu",), ("pool",), ("conv", 32, 32, 5, 2), ("relu",), ("pool",),
            ("flatten",), ("linear", 32 * (h // 4) * (w // 4), 256), ("relu",), ("linear", 256, num_classes)]


@_takes_images
def small_cnn(input_shape: tuple[int, ...], num_classes: int) -> list[tuple]:
    """conv 5x5 C->16, ReLU, pool, conv 5x5 16->32, ReLU, pool, fc -> classes (28,938 parameters on
    (1, 28, 28)): fast enough for CPU tests."""
    c, h, w = _image_shape(input_shape, "small_cnn", min_side=4)
    return [("conv", c, 16, 5, 2), ("relu",), ("pool",), ("conv", 16, 32, 5, 2), ("relu",), ("pool",),
            ("flatten",), ("linear", 32 * (h // 4) * (w // 4), num_classes)]


@_takes_images
def lenet(input_shape: tuple[int, ...], num_classes: int) -> list[tuple]:
    """LeNet-5 as in docs/papers/fair_selection.md, "Experiments and their defaults": conv 5x5 C->6 (no
    padding), ReLU, pool, conv 5x5 6->16, ReLU, pool, fc -> 120, ReLU, fc -> 84, ReLU, fc -> classes
    (44,426 parameters on (1, 28, 28); 62,006 on (3, 32, 32))."""
    c, h, w = _image_shape(input_shape, "lenet", min_side=16)
    side = lambda n: ((n - 4) // 2 - 4) // 2  # noqa: E731  two unpadded 5x5 convolutions, two pools
    return [("conv", c, 6, 5, 0), ("relu",), ("pool",), ("conv", 6, 16, 5, 0), ("relu",), ("pool",),
            ("flatten",), ("linear", 16 * side(h) * side(w), 120), ("relu",), ("linear", 120, 84), ("relu",),
            ("linear", 84, num_classes)]


@_builtin
def mlp(input_shape: tuple[int, ...], num_classes: int) -> list[tuple]:
    """flatten, fc -> 200, ReLU, fc 200 -> 200, ReLU, fc -> classes (FedAvg's "2NN")."""
    return [("flatten",), ("linear", math.prod(input_shape), 200), ("relu",), ("linear", 200, 200), ("relu",),
            ("linear", 200, num_classes)]


@_builtin
def mlp_80_60(input_shape: tuple[int, ...], num_classes: int) -> list[tuple]:
    """Per-FedAvg's MLP: flatten, fc -> 80, ELU, fc 80 -> 60, ELU, fc -> classes (68,270 parameters on
    (1, 28, 28), 251,310 on (3, 32, 32))."""
    # Per-FedAvg's model (docs/papers/perfedavg.md, "Model and defaults"): small enough that its
    # Hessian-vector products are cheap.
    return [("flatten",), ("linear", math.prod(input_shape), 80), ("elu",), ("linear", 80, 60), ("elu",),
            ("linear", 60, num_classes)]


@_builtin
def logreg(input_shape: tuple[int, ...], num_classes: int) -> list[tuple]:
    """flatten, fc -> classes (multinomial logistic regression; any input shape)."""
    return [("flatten",), ("linear", math.prod(input_shape), num_classes)]


MODEL_NAMES = ("paper_cnn", "small_cnn", "mlp", "logreg", "mlp_80_60", "lenet")
"""The built-in models (wirelessfl.learning.MODELS lists them with installed plugins)."""


def _image_shape(input_shape: tuple[int, ...], name: str, min_side: int) -> tuple[int, int, int]:
    """(C, H, W), checked: an image of at least ``min_side`` pixels a side (smaller ones leave the
    convolutions and pools no pixel for the fully connected layer)."""
    if len(input_shape) != 3:
        raise ValueError(f"model {name!r} needs an image input (C, H, W), got input_shape {tuple(input_shape)}")
    c, h, w = (int(s) for s in input_shape)
    if min(h, w) < min_side:
        raise ValueError(f"model {name!r} needs images of at least {min_side} x {min_side} pixels, got input_shape "
                         f"{tuple(input_shape)}")
    return c, h, w


def model_kwargs(options) -> dict[str, Any]:
    """A model's options as keyword arguments: the fields of an Options instance, or a dict's items."""
    if options is None:
        return {}
    if dataclasses.is_dataclass(options):
        return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    return dict(options)


def _model_part(model):
    """The callable a model name stands for (built-in names only; parts pass through)."""
    if not isinstance(model, str):
        return model
    if model not in MODEL_NAMES:
        raise ValueError(f"unknown model {model!r}; allowed: {', '.join(MODEL_NAMES)}")
    return globals()[model]


def build_model(
    model: str | Callable[..., nn.Module],
    input_shape: tuple[int, ...],
    num_classes: int,
    *,
    generator: torch.Generator | None = None,
    options=None,
) -> nn.Module:
    """Build the classifier ``model`` (a built-in name or a model part) for inputs of ``input_shape``
    (without the batch dimension), with its ``options`` (an Options instance or a dict).

    With ``generator`` the parameters are initialised from it (see :func:`init_parameters`) and
    torch's global RNG is neither read nor advanced; without it PyTorch's default init is used. A
    model with layers :func:`init_parameters` does not know keeps its own initialisation, drawn from
    torch's RNG seeded with the generator's seed (so still reproducible and with no global effect).
    """
    import torch

    part = _model_part(model)
    kwargs = model_kwargs(options)
    if generator is None:
        return _checked_module(part(tuple(input_shape), int(num_classes), **kwargs), part)
    # PyTorch's default init draws from the global RNG: build under a fork of it (its state is
    # restored after), then initialise from the generator alone. (Building on the meta device
    # instead made torch import sympy for its shape logic: 0.7 s of every run's start-up.)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(generator.initial_seed())  # draws nothing from the generator itself
        module = _checked_module(part(tuple(input_shape), int(num_classes), **kwargs), part)
    return init_parameters(module, generator) if _initialisable(module) else module


def _checked_module(module, part) -> nn.Module:
    from torch import nn

    from ..fields import ConfigError

    if not isinstance(module, nn.Module):
        name = getattr(part, "__qualname__", repr(part))
        raise TypeError(f"model {name} returned a {type(module).__name__}, not a torch.nn.Module")
    if not any(p.numel() for p in module.parameters()):
        name = f"{getattr(part, '__module__', '?')}:{getattr(part, '__qualname__', repr(part))}"
        raise ConfigError(f"learning.model = {name!r}: the module it built has no parameters to train (layers "
                          "kept in a plain list or dict are not registered: use nn.ModuleList, nn.ModuleDict or "
                          "nn.Sequential)")
    return module


def count_parameters(model, input_shape: tuple[int, ...], num_classes: int, options=None) -> int:
    """The number of parameters of ``model`` (a built-in name or a model part) built for
    ``input_shape`` and ``num_classes``: the model's own ``parameter_count`` where it gives one (the
    built-ins count their layer list, without torch), else measured from the module (built on the
    CPU, under a fork of torch's RNG). Never looked up in a table."""
    part = _model_part(model)
    counted = getattr(part, "parameter_count", None)
    if counted is not None:
        n = counted(tuple(input_shape), int(num_classes), **model_kwargs(options))
        if n is not None:
            return int(n)
    import torch

    with torch.random.fork_rng(devices=[]):
        return num_parameters(build_model(model, input_shape, num_classes, options=options))


def _initialisable(model: nn.Module) -> bool:
    """Whether :func:`init_parameters` knows every layer of ``model`` that holds parameters."""
    from torch import nn

    known = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
    return all(isinstance(m, known) or not any(True for _ in m.parameters(recurse=False)) for m in model.modules())


def init_parameters(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-initialise every Linear / Conv layer in place from ``generator``.

    Same distribution as PyTorch's default (kaiming_uniform with a = sqrt(5) for weights, which is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for biases), but drawn from an explicit
    generator in a fixed module order, so it is reproducible and touches no global state.
    """
    import torch
    from torch import nn

    with torch.no_grad():
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
    import torch

    # Draw on the CPU generator, then copy: works whatever device the parameter lives on.
    values = torch.empty(t.shape, dtype=t.dtype).uniform_(-bound, bound, generator=generator)
    t.copy_(values)


def num_parameters(model: nn.Module) -> int:
    """Number of scalar parameters of ``model`` (the d of docs/papers/lyapunov.md; ℓ = 32 d bits)."""
    return sum(p.numel() for p in model.parameters())
