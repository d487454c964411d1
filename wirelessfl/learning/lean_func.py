"""The batched path's per-device gradients without loading torch's compiler.

Nothing in a run is compiled, yet two places inside torch (2.13) import its compiler stack
(torch._dynamo, torch._inductor, sympy: about 600 modules and 1.7 s of start-up on a CPU) the first time
the batched path takes a step:

- ``torch.func.grad`` (and ``vjp``) runs its ``torch.autograd.grad`` call inside
  ``torch._dynamo.compiled_autograd._disable()``. Where compiled autograd was never loaded, that context
  only switches the C++ autograd compiler off for the call. :func:`lean_grad` makes the same switch
  directly, through ``torch._C``, for as long as nobody has imported torch._dynamo; once someone has
  (a user's ``torch.compile``), torch's own function runs again. The replacement holds only while the
  trainer's own transforms run (:func:`scoped`): a user's ``torch.func`` in the same process always
  gets torch's function.
- Under ``vmap``, ``F.cross_entropy`` runs torch's Python decomposition of ``nll_loss``, whose
  ``torch._check`` imports sympy. :func:`cross_entropy` is the same loss in ops that vmap batches
  natively, in the decomposition's order.

Both give the same numbers bit for bit: tests/test_lean_func.py compares the batched gradients and
Hessian-vector products with torch's own transforms of ``F.cross_entropy`` on every built-in model, and
checks that a batched run imports none of those modules.

The trade-off: the replacement relies on a private torch function (its shape is checked; torch is
bounded above in pyproject.toml). ``WIRELESSFL_LEAN_GRAD=0`` switches it off, at the cost of the
compiler's import (about 1.7 s once per process on a CPU) and never of other numbers.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys
from contextlib import contextmanager

import torch
import torch.nn.functional as F

__all__ = ["ENV", "cross_entropy", "enabled", "lean_grad", "scoped"]

# The private function replaced, as torch 2.x defines it; any other shape is left alone (a run then
# imports the compiler as before: a start-up cost, never other numbers).
_EXPECTED = ["outputs", "inputs", "grad_outputs", "retain_graph", "create_graph"]


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of class-index labels ``y`` under ``logits`` (batch, classes): the value and
    gradient of ``F.cross_entropy(logits, y)`` under vmap, without its decomposition's sympy import."""
    picked = -torch.gather(F.log_softmax(logits, -1), 1, y.unsqueeze(1)).squeeze(1)
    return picked.sum() / y.shape[0]


ENV = "WIRELESSFL_LEAN_GRAD"


def enabled() -> bool:
    """Whether the lean gradient is wanted: ``WIRELESSFL_LEAN_GRAD=0`` in the environment switches it
    off (torch's own function then runs, importing its compiler once: a start-up cost, the same numbers)."""
    return os.environ.get(ENV, "1").strip() != "0"


def _lean(current):
    """The lean version of torch's ``_autograd_grad`` ``current``, or None where torch's has another
    shape (a torch newer than this module knows) or is already the lean one."""
    if getattr(current, "_wirelessfl_lean", False):
        return None
    switch = getattr(getattr(getattr(torch._C, "_dynamo", None), "compiled_autograd", None),
                     "set_autograd_compiler", None)
    if switch is None or list(inspect.signature(current).parameters) != _EXPECTED:
        return None

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
    return _autograd_grad


_made = (None, None)  # (torch's function, its lean version): built once per function


@contextmanager
def lean_grad():
    """Within the body only, torch.func's gradient transforms run without importing torch._dynamo;
    torch's own function is back on exit, so a user's torch.func elsewhere in the process is untouched.
    Does nothing where :func:`enabled` is false or torch's private function has another shape."""
    global _made
    from torch._functorch import eager_transforms

    own = eager_transforms._autograd_grad
    if _made[0] is not own:
        _made = (own, _lean(own))
    lean = _made[1] if enabled() else None
    if lean is None:
        yield
        return
    eager_transforms._autograd_grad = lean
    try:
        yield
    finally:
        eager_transforms._autograd_grad = own


def scoped(fn):
    """``fn`` called inside :func:`lean_grad`."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with lean_grad():
            return fn(*args, **kwargs)
    return call
