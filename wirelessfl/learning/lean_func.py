"""The batched path's per-device gradients without loading torch's compiler.

Nothing in a run is compiled, yet two places inside torch (2.13) import its compiler stack
(torch._dynamo, torch._inductor, sympy: about 600 modules and 1.7 s of start-up on a CPU) the first time
the batched path takes a step:

- ``torch.func.grad`` (and ``vjp``) runs its ``torch.autograd.grad`` call inside
  ``torch._dynamo.compiled_autograd._disable()``. Where compiled autograd was never loaded, that context
  only switches the C++ autograd compiler off for the call. :func:`install` makes the same switch
  directly, through ``torch._C``, for as long as nobody has imported torch._dynamo; once someone has
  (a user's ``torch.compile``), torch's own function runs again.
- Under ``vmap``, ``F.cross_entropy`` runs torch's Python decomposition of ``nll_loss``, whose
  ``torch._check`` imports sympy. :func:`cross_entropy` is the same loss in ops that vmap batches
  natively, in the decomposition's order.

Both give the same numbers bit for bit: tests/test_lean_func.py compares the batched gradients and
Hessian-vector products with torch's own transforms of ``F.cross_entropy`` on every built-in model, and
checks that a batched run imports none of those modules.
"""
from __future__ import annotations

import inspect
import sys

import torch
import torch.nn.functional as F

__all__ = ["cross_entropy", "install"]

# The private function replaced, as torch 2.x defines it; any other shape is left alone (a run then
# imports the compiler as before: a start-up cost, never other numbers).
_EXPECTED = ["outputs", "inputs", "grad_outputs", "retain_graph", "create_graph"]


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of class-index labels ``y`` under ``logits`` (batch, classes): the value and
    gradient of ``F.cross_entropy(logits, y)`` under vmap, without its decomposition's sympy import."""
    picked = -torch.gather(F.log_softmax(logits, -1), 1, y.unsqueeze(1)).squeeze(1)
    return picked.sum() / y.shape[0]


def install() -> bool:
    """Let torch.func's gradient transforms run without importing torch._dynamo (idempotent).
    Returns whether the lean version is in place."""
    from torch._functorch import eager_transforms

    current = eager_transforms._autograd_grad
    if getattr(current, "_wirelessfl_lean", False):
        return True
    switch = getattr(getattr(getattr(torch._C, "_dynamo", None), "compiled_autograd", None),
                     "set_autograd_compiler", None)
    if switch is None or list(inspect.signature(current).parameters) != _EXPECTED:
        return False

    def _autograd_grad(outputs, inputs, grad_outputs=None, retain_graph=False, create_graph=True):
        if "torch._dynamo" in sys.modules:  # compiled autograd may be on: torch's own context decides
            return current(outputs, inputs, grad_outputs, retain_graph, create_graph)
        # as torch's: outputs that do not need a gradient are dropped, unused inputs get zeros
        if grad_outputs is None:
            diff_outputs = tuple(out for out in outputs if out.requires_grad)
        else:
            kept = tuple((out, go) for out, go in zip(outputs, grad_outputs) if out.requires_grad)
            diff_outputs, grad_outputs = tuple(zip(*kept)) if kept else ((), ())
        if not diff_outputs:
            return tuple(torch.zeros_like(inp) for inp in inputs)
        prior = switch(None, False)  # what compiled_autograd._disable() sets, without its import
        try:
            grads = torch.autograd.grad(diff_outputs, inputs, grad_outputs, retain_graph=retain_graph,
                                        create_graph=create_graph, allow_unused=True)
        finally:
            switch(*prior)
        return tuple(torch.zeros_like(inp) if g is None else g for g, inp in zip(grads, inputs))

    _autograd_grad._wirelessfl_lean = True
    _autograd_grad.__wrapped__ = current  # torch's own, for whoever needs it (tests compare with it)
    eager_transforms._autograd_grad = _autograd_grad
    return True
