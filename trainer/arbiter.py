"""The gradient-flow arbiter: before a run spends GPU hours, prove that every trainable
parameter learns, and that the fast attention kernels (and torch.compile) compute the same
gradients as the plain reference path.

Two failure modes it exists for:
  * a parameter silently cut out of the graph (a stray .detach(), a frozen copy, a hook
    that zeroes or poisons its gradient): the loss still falls, the run looks healthy,
    and part of the model never trains. check_gradient_flow finds it.
  * a fused kernel whose backward is wrong for these shapes/dtypes (a dropped or
    mis-scaled dq, say): nonzero, finite gradients that are simply wrong, invisible to the
    first check. compare_paths finds it by redoing the step with the math attention.

Everything here runs one forward+backward per path on a batch the caller supplies, and
restores each parameter's .grad afterwards, so the model is left exactly as it was.
With DistributedDataParallel, pass the unwrapped module (ddp.module): backward on the
wrapper would all-reduce and wait for every rank.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn as nn

from fertility.errors import TrainingError, one_line
from trainer.model import attention_backend, lm_loss

# Path tolerances, on the max-normalised difference (see _rel_diff). The bugs we hunt move
# a gradient by ~100% (dropped: exactly 1.0; halved: 0.5). Honest differences are rounding:
#   float32: ~1e-6 between kernels, but up to ~1e-3 when matmuls run in TF32 (10-bit
#            mantissa), which GPU runs often enable -> 1e-2 leaves a 10x margin both ways.
#   bf16/fp16 autocast: each op rounds to 8 (bf16) mantissa bits, 2^-8 = 0.4%; a flash
#            kernel and the fp32-accumulating math path differ by a few of those -> 5e-2.
TOL_FP32 = 1e-2
TOL_LOW_PRECISION = 5e-2

_PREFIXES = ("_orig_mod.", "module.")  # torch.compile and DDP wrappers


@dataclass
class ArbiterReport:
    ok: bool
    checked: int
    offenders: list[tuple[str, str]] = field(default_factory=list)  # (name, none|zero|non-finite)
    path_diffs: dict[str, float] = field(default_factory=dict)  # name -> max relative diff
    tol: float | None = None  # the path tolerance the diffs were judged against
    notes: list[str] = field(default_factory=list)  # errors met while running a check

    def path_failures(self) -> list[tuple[str, float]]:
        """Diffs beyond tol, leaving out parameters already named as offenders (a NaN
        gradient differs from everything; saying so twice adds nothing)."""
        if self.tol is None:
            return []
        named = {name for name, _ in self.offenders}
        return [(n, d) for n, d in self.path_diffs.items()
                if not d <= self.tol and n.removeprefix("compiled:") not in named]

    def summary(self) -> str:
        """One line naming what failed (empty when ok)."""
        parts = []
        if self.offenders:
            n = len(self.offenders)
            parts.append(f"{n} parameter{'s' if n != 1 else ''} got no gradient: "
                         + _listing([f"{name} ({kind})" for name, kind in self.offenders]))
        bad = self.path_failures()
        if bad:
            n = len(bad)
            parts.append(f"{n} gradient{'s differ' if n != 1 else ' differs'} between "
                         f"attention/compile paths beyond tol {self.tol:g}: "
                         + _listing([f"{name} ({d:.3g})" for name, d in bad]))
        parts.extend(self.notes)
        return "; ".join(parts)

    def format_text(self) -> str:
        tol = "unset" if self.tol is None else f"{self.tol:g}"
        lines = [f"gradient-flow arbiter: {'ok' if self.ok else 'FAILED'} "
                 f"({self.checked} trainable parameters checked)"]
        for name, kind in self.offenders:
            lines.append(f"  bad gradient  {name}: {kind}")
        if self.path_diffs:
            worst = max(self.path_diffs.items(), key=lambda kv: _sortable(kv[1]))
            lines.append(f"  paths compared: {len(self.path_diffs)} gradients, worst "
                         f"{worst[0]} {worst[1]:.3g} (tol {tol})")
        for name, d in self.path_failures():
            lines.append(f"  path mismatch {name}: {d:.3g} > {tol}")
        for note in self.notes:
            lines.append(f"  error         {note}")
        return "\n".join(lines)


def _listing(items: list[str], limit: int = 8) -> str:
    more = f", and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _sortable(d: float) -> float:
    return math.inf if math.isnan(d) else d


def _clean(name: str) -> str:
    for prefix in _PREFIXES:
        while name.startswith(prefix):
            name = name[len(prefix):]
    return name


def _autocast(ids: torch.Tensor, amp_dtype: torch.dtype | None):
    if amp_dtype is None:
        return nullcontext()
    return torch.autocast(ids.device.type, dtype=amp_dtype)


def _gradients(model: nn.Module, ids: torch.Tensor, targets: torch.Tensor, loss_fn: Callable,
               amp_dtype: torch.dtype | None) -> dict[str, torch.Tensor | None]:
    """One forward+backward; returns each trainable parameter's gradient and puts the
    parameters' previous .grad back (the caller's accumulated gradients survive)."""
    params = [(_clean(n), p) for n, p in model.named_parameters() if p.requires_grad]
    saved = [p.grad for _, p in params]
    for _, p in params:
        p.grad = None
    try:
        with _autocast(ids, amp_dtype):
            loss = loss_fn(model(ids), targets)
        loss.backward()
        return {name: p.grad for name, p in params}
    finally:
        for (_, p), g in zip(params, saved, strict=True):
            p.grad = g


def _classify(grad: torch.Tensor | None) -> str | None:
    if grad is None:
        return "none"
    if not torch.isfinite(grad).all():
        return "non-finite"
    if not grad.any():
        return "zero"
    return None


def check_gradient_flow(model: nn.Module, ids: torch.Tensor, targets: torch.Tensor, *,
                        loss_fn: Callable = lm_loss,
                        amp_dtype: torch.dtype | None = None) -> ArbiterReport:
    """Every parameter with requires_grad must receive a finite gradient that is not all
    zeros. Tied parameters are one parameter (named once, by their first name)."""
    grads = _gradients(model, ids, targets, loss_fn, amp_dtype)
    offenders = [(name, kind) for name, g in grads.items() if (kind := _classify(g))]
    return ArbiterReport(ok=not offenders, checked=len(grads), offenders=offenders)


def _rel_diff(fast: torch.Tensor | None, ref: torch.Tensor | None, atol: float) -> float:
    # Normalised by the reference's largest magnitude, not element by element: an
    # elementwise ratio explodes on near-zero entries and would flag rounding noise.
    if fast is None and ref is None:
        return 0.0  # nothing to compare; check_gradient_flow reports the missing grad
    if fast is None or ref is None:
        return math.inf
    fast, ref = fast.detach().float(), ref.detach().float()
    d = ((fast - ref).abs().max() / (ref.abs().max() + atol)).item()
    return math.inf if math.isnan(d) else d


def compare_paths(model: nn.Module, ids: torch.Tensor, targets: torch.Tensor, *,
                  reference: str = "math", fast: str = "auto",
                  compiled: bool | nn.Module = False, atol: float = 1e-12,
                  loss_fn: Callable = lm_loss,
                  amp_dtype: torch.dtype | None = None) -> dict[str, float]:
    """Max relative gradient difference per parameter, max|g_fast - g_ref| / (max|g_ref| +
    atol), between the `fast` attention backend and the `reference` one. With `compiled`
    (True: torch.compile(model); or an already compiled module wrapping the same
    parameters, to reuse its compilation) also compiled-vs-eager on the fast backend,
    under keys "compiled:<name>". On CPU "auto" may pick the same kernel as "math"; the
    comparison still runs and then simply reports ~0."""
    with attention_backend(reference):
        ref = _gradients(model, ids, targets, loss_fn, amp_dtype)
    with attention_backend(fast):
        fast_g = _gradients(model, ids, targets, loss_fn, amp_dtype)
    diffs = {name: _rel_diff(fast_g.get(name), g, atol) for name, g in ref.items()}
    if compiled is not False:
        cmodel = torch.compile(model) if compiled is True else compiled
        with attention_backend(fast):
            comp = _gradients(cmodel, ids, targets, loss_fn, amp_dtype)
        for name, g in fast_g.items():
            diffs[f"compiled:{name}"] = _rel_diff(comp.get(name), g, atol)
    return diffs


def _default_tol(model: nn.Module, ids: torch.Tensor, amp_dtype: torch.dtype | None) -> float:
    low = (torch.bfloat16, torch.float16)
    dev = ids.device.type
    if amp_dtype is None and torch.is_autocast_enabled(dev):
        amp_dtype = torch.get_autocast_dtype(dev)
    if amp_dtype in low or any(p.dtype in low for p in model.parameters()):
        return TOL_LOW_PRECISION
    return TOL_FP32


def run_arbiter(model: nn.Module, ids: torch.Tensor, targets: torch.Tensor, *,
                compiled: bool | nn.Module = False, tol: float | None = None,
                loss_fn: Callable = lm_loss, amp_dtype: torch.dtype | None = None,
                reference: str = "math", fast: str = "auto") -> ArbiterReport:
    """Both checks. Raises nothing: an error inside a check becomes a note and ok=False;
    the caller decides (assert_arbiter raises)."""
    tol = _default_tol(model, ids, amp_dtype) if tol is None else tol
    try:
        report = check_gradient_flow(model, ids, targets, loss_fn=loss_fn, amp_dtype=amp_dtype)
    except Exception as e:  # noqa: BLE001 - reported, the caller decides
        n = sum(1 for p in model.parameters() if p.requires_grad)
        report = ArbiterReport(ok=False, checked=n, notes=[f"forward/backward failed: {e}"])
    report.tol = tol
    try:
        report.path_diffs = compare_paths(model, ids, targets, reference=reference, fast=fast,
                                          compiled=compiled, loss_fn=loss_fn,
                                          amp_dtype=amp_dtype)
    except Exception as e:  # noqa: BLE001
        report.notes.append(f"path comparison ({fast} vs {reference}"
                            f"{', compiled' if compiled is not False else ''}) failed: "
                            f"{one_line(e)}")
    report.ok = not report.offenders and not report.path_failures() and not report.notes
    return report


def assert_arbiter(model: nn.Module, ids: torch.Tensor, targets: torch.Tensor,
                   **kw) -> ArbiterReport:
    """run_arbiter, raising TrainingError naming every failing parameter."""
    report = run_arbiter(model, ids, targets, **kw)
    if not report.ok:
        raise TrainingError(f"gradient-flow arbiter failed: {report.summary()}")
    return report
