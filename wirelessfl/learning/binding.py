"""A module whose parameters are views of one flat vector, bound once and kept for many steps.

``torch.func.functional_call`` re-binds a module's parameters on every call: it walks the module
tree and swaps each tensor in and out again, 10 to 20 % of the MLP's step on one CPU thread. A
device's local SGD takes K steps from one vector y; binding the module once to leaves that share
y's memory, and updating y in place between steps, computes the same gradients (the same
operations, the pieces' gradients concatenated as autograd concatenates them for a split) without
that cost.
"""
from __future__ import annotations

import contextlib

import torch

__all__ = ["FlatBinding"]


class FlatBinding:
    """Binds a module's parameters to views of flat vectors laid out in the order of
    ``named_parameters()`` (the trainer's flat model). A parameter shared by several modules (tied
    weights) is bound in every one of them to the same view.
    """

    def __init__(self, model: torch.nn.Module):
        params = [p for _, p in model.named_parameters()]
        index = {id(p): i for i, p in enumerate(params)}
        self._shapes, self._numels = [p.shape for p in params], [p.numel() for p in params]
        # every place a parameter is held: (module, attribute, position in the flat vector)
        self._slots = [(mod, attr, index[id(p)])
                       for mod in model.modules(remove_duplicate=False) if hasattr(mod, "_parameters")
                       for attr, p in mod._parameters.items() if p is not None]

    @contextlib.contextmanager
    def bound(self):
        """A context in which ``bind`` may be called; the module's own parameters come back at its end."""
        kept = [mod._parameters[attr] for mod, attr, _ in self._slots]
        try:
            yield self.bind
        finally:
            for (mod, attr, _), p in zip(self._slots, kept):
                mod._parameters[attr] = p

    def bind(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Make the module's parameters leaves that share ``flat``'s memory, and return them (in the
        order of the flat vector). Changing ``flat`` in place, between a backward pass and the next
        forward pass, changes the module's parameters with it."""
        leaves = [piece.view(shape).detach().requires_grad_(True)
                  for piece, shape in zip(torch.split(flat.detach(), self._numels), self._shapes)]
        for mod, attr, i in self._slots:
            mod._parameters[attr] = leaves[i]
        return leaves

    @staticmethod
    def flat_grad(loss: torch.Tensor, leaves: list[torch.Tensor]) -> torch.Tensor:
        """The gradient of ``loss`` with respect to the bound leaves, as one flat vector (zero for a
        parameter the loss does not use): what autograd gives the flat vector through its views."""
        return torch.cat([g.reshape(-1) for g in FlatBinding.grads(loss, leaves)])

    @staticmethod
    def grads(loss: torch.Tensor, leaves: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The gradient of ``loss`` with respect to each bound leaf (zero for one it does not use)."""
        return torch.autograd.grad(loss, leaves, allow_unused=True, materialize_grads=True)
