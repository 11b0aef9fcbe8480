"""The gradient-flow arbiter: before a run spends GPU hours, prove that every trainable
parameter learns, and that the fast attention kernels (and torch.compile) compute the same
gradients as the plain reference path.

The checks:
  * check_gradient_flow: every trainable parameter gets a finite gradient that is not all
    zeros (a stray .detach(), a hook that zeroes or poisons it). Frozen parameters are named.
  * check_exact: every trainable parameter's gradient, in float64, against a directional
    finite difference of the loss through the very same model, (L(p+hd) - L(p-hd)) / 2h
    against <grad, d> for random directions d. It catches what keeps a gradient nonzero but
    wrong: a custom autograd.Function that returns None for one use of a tied weight or for
    its input, half of a weight's rows detached, a hook that scales a gradient by 1e-12.
  * check_attention_kernels (trainer/kernels.py): each layer's fused attention gradients dq,
    dk, dv, for every fused kernel the device has (flash, efficient, cudnn on CUDA), against
    float64 per position, replayed on the model's own q, k, v and dO layouts, and judged
    against the error an honest fused kernel of the run's dtype makes (so bf16's rounding,
    ~0.5%, is not a failure and a dq scaled by 0.97 or a dv zeroed on a few positions is).
  * check_step: what the optimizer will read. The run's own step (its accumulation over
    accum micro-batches, its loss scaling, the parameters' hooks, clipping, and under
    torchrun DDP's reduction) leaves p.grad; that must equal the gradient of the same
    micro-batches' mean loss taken as one batch by torch.autograd.grad (which check_exact
    ties to finite differences), clipped by the formula, and under DDP averaged over the
    ranks by an all-reduce of our own. Single process: in float64. A post-accumulate-grad
    hook that scales .grad by 1e-12, one parameter's .grad zeroed, a wrong accumulation
    divisor or a reduction that sums instead of averaging all fail here, where autograd's
    own value (the other checks) is right.
compare_paths also compares whole-model gradients fast vs math and compiled vs eager, as a
relative norm per parameter, each judged against the error the reference path itself makes in
the run's dtype (measured against the same model one precision up, on the same inputs).

Everything here runs one forward+backward per path on a batch the caller supplies, and
restores each parameter's .grad afterwards, so the model is left exactly as it was.
With DistributedDataParallel, pass the unwrapped module (ddp.module): backward on the
wrapper would all-reduce and wait for every rank.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import torch
import torch.nn as nn

from fertility.errors import TrainingError, one_line
from fertility.trainer import kernels
from fertility.trainer.model import attention_backend

# The whole-model path comparison (compare_paths) is judged per parameter against the noise
# of the run's own precision, measured, not assumed: the reference kernel's gradient in the run's
# dtype against the same model one precision up (bf16/fp16 -> float32 with TF32 off, float32 ->
# float64), on the same sequence. Both paths share every other op of the model, so an honest
# fast path differs from the exact one by about as much as the reference does; the fused
# kernel's extra rounding (kernels.py) is a fraction of the whole model's. The error is the
# relative norm ||g_fast - g_ref|| / ||g_ref||: a dropped dq gives 1.0, a halved one 0.5; a
# max-entry ratio (what this used before) lands on one outlier entry and sat at 0.03-0.04 for
# an honest bf16 model on an H200, against a fixed 0.05. Tolerance: PATH_CALIBRATION x that
# noise + one unit of the dtype's rounding (float32: 1e-4, whose kernels and TF32 differ by a
# few units). Measured on the CPU (tiny, small cut to 2 layers, base cut to 1;
# 64-128 tokens; the CPU's flash kernel vs math): bf16 reference noise 0.002-0.013, fast path
# 0.001-0.013, every honest parameter at most 0.20 of its tolerance; float32 noise ~1e-6 (the
# floor rules, honest at most 0.012 of it). The faults hunted are >= 0.3 off.
PATH_CALIBRATION = 4.0
# Under DDP the step check runs in the run's dtype against a reference in the same dtype:
# max-normalised differences of summation order, ~1e-3 in TF32 float32 and a few bf16 units.
TOL_FP32 = 1e-2
TOL_LOW_PRECISION = 5e-2
# check_exact: honest float64 central differences (a step of 1e-3 of the parameter's rms)
# agree with autograd to ~1e-4 at 0.4b widths (truncation ~h^2, rounding ~1e-14 * L / h); a
# wrong gradient is off by ~100% (half the rows: ~70% in a random direction; 1e-12: 100%).
TOL_EXACT = 1e-2
EXACT_TOKENS = 64  # one sequence of at most this many tokens: 4 forward passes per parameter
# check_step in float64: the step's p.grad and the one-batch reference differ only in the
# order of their sums (micro-batches, then accumulation, against one batch): at most ~1e6
# terms per element, 1e6 x 1.1e-16 = 1e-10 relative, and clipping scales both by the same
# float64 coefficient. 1e-8 leaves 100x on that; the faults hunted are >= 1% off (a divisor
# off by one at accum <= 100; 1e-12: 100%; zeroed: 100%). Under DDP the step runs in the
# run's own dtype and is judged against the path tolerance (TOL_FP32 / TOL_LOW_PRECISION).
TOL_STEP = 1e-8
STEP_SEQS, STEP_TOKENS = 2, 64  # each micro-batch cut to this, so float64 fits at any size

_PREFIXES = ("_orig_mod.", "module.")  # torch.compile and DDP wrappers


@dataclass
class ArbiterReport:
    ok: bool
    checked: int
    offenders: list[tuple[str, str]] = field(default_factory=list)  # (name, none|zero|non-finite)
    # name -> (relative-norm difference, its tolerance); "compiled:<name>" for compiled vs eager
    path_diffs: dict[str, tuple[float, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # errors met while running a check
    frozen: list[str] = field(default_factory=list)  # requires_grad=False: not checked
    exact: dict[str, float] = field(default_factory=dict)  # name -> finite-difference error
    kernels: dict[str, tuple[float, float]] = field(default_factory=dict)  # (error, tolerance)
    skipped: list[str] = field(default_factory=list)  # checks that could not apply, and why
    step: StepCheck | None = None  # what the optimizer reads after the run's own step

    def exact_failures(self) -> list[tuple[str, float]]:
        named = {name for name, _ in self.offenders}
        return [(n, e) for n, e in self.exact.items() if not e <= TOL_EXACT and n not in named]

    def step_failures(self) -> list[tuple[str, float]]:
        return self.step.failures() if self.step is not None else []

    def kernel_failures(self) -> list[tuple[str, float, float]]:
        return [(n, e, t) for n, (e, t) in self.kernels.items() if not e <= t]

    def path_failures(self) -> list[tuple[str, float, float]]:
        """Diffs beyond their tolerance, leaving out parameters already named as offenders (a
        NaN gradient differs from everything; saying so twice adds nothing)."""
        named = {name for name, _ in self.offenders}
        return [
            (n, d, t)
            for n, (d, t) in self.path_diffs.items()
            if not d <= t and n.removeprefix("compiled:") not in named
        ]

    def summary(self) -> str:
        """One line naming what failed (empty when ok)."""
        parts = []
        if self.offenders:
            n = len(self.offenders)
            parts.append(
                f"{n} parameter{'s' if n != 1 else ''} got no gradient: "
                + _listing([f"{name} ({kind})" for name, kind in self.offenders])
            )
        bad = self.path_failures()
        if bad:
            n = len(bad)
            parts.append(
                f"{n} gradient{'s differ' if n != 1 else ' differs'} between "
                f"attention/compile paths beyond the reference's own noise: "
                + _listing([f"{name} ({d:.3g} > {t:.3g})" for name, d, t in bad])
            )
        wrong = self.exact_failures()
        if wrong:
            parts.append(
                f"{len(wrong)} gradient{'s' if len(wrong) != 1 else ''} disagree with "
                f"a float64 finite difference beyond {TOL_EXACT:g}: "
                + _listing([f"{name} ({e:.3g})" for name, e in wrong])
            )
        stepped = self.step_failures()
        if stepped and self.step is not None:
            parts.append(
                f"the optimizer would read other gradients than the loss's ({self.step.what}; "
                f"tol {self.step.tol:g}): " + _listing([f"{name} ({e:.3g})" for name, e in stepped])
            )
        kern = self.kernel_failures()
        if kern:
            parts.append(
                "fused attention gradients differ from the math kernel's: "
                + _listing([f"{name} ({e:.3g} > {t:.3g})" for name, e, t in kern])
            )
        parts.extend(self.notes)
        return "; ".join(parts)

    def format_text(self) -> str:
        lines = [
            f"gradient-flow arbiter: {'ok' if self.ok else 'FAILED'} "
            f"({self.checked} trainable parameters checked)"
        ]
        for name, kind in self.offenders:
            lines.append(f"  bad gradient  {name}: {kind}")
        if self.path_diffs:
            name, (d, t) = _worst_ratio(self.path_diffs)
            lines.append(
                f"  paths compared: {len(self.path_diffs)} gradients (relative norm against "
                f"the reference's noise), worst {name} {d:.3g} (tol {t:.3g})"
            )
        for name, d, t in self.path_failures():
            lines.append(f"  path mismatch {name}: {d:.3g} > {t:.3g}")
        for name, e in self.exact_failures():
            lines.append(f"  wrong gradient {name}: {e:.3g} from a float64 finite difference")
        if self.exact:
            lines.append(
                f"  exact check: {len(self.exact)} gradients against float64 finite "
                f"differences, worst {max(self.exact.values(), key=_sortable):.3g} "
                f"(tol {TOL_EXACT:g})"
            )
        if self.step is not None:
            for name, e in self.step_failures():
                lines.append(f"  wrong step    {name}: {e:.3g} from the one-batch gradient")
            lines.append(f"  {self.step.line()}: {self.step.what}")
        for name, e, t in self.kernel_failures():
            lines.append(f"  kernel mismatch {name}: {e:.3g} > {t:.3g}")
        if self.kernels:
            lines.append(
                f"  attention kernels: {len(self.kernels)} gradients (dq, dk, dv per "
                f"layer and fused kernel) against float64, worst {_worst_ratio(self.kernels)[0]} "
                f"at {max(e / t for e, t in self.kernels.values()):.2g} of its tolerance (an "
                f"honest fused kernel's noise in this dtype)"
            )
        for name in self.frozen:
            lines.append(f"  frozen (not checked) {name}")
        for why in self.skipped:
            lines.append(f"  skipped       {why}")
        for note in self.notes:
            lines.append(f"  error         {note}")
        return "\n".join(lines)

    def checks(self) -> list[str]:
        """The checks that ran (names of record()'s `checks`)."""
        done = ["gradient flow"]
        if self.exact:
            done.append("float64 finite differences")
        if self.step is not None:
            done.append("optimizer step")
        if self.kernels:
            done.append("attention kernels")
        if any(not n.startswith("compiled:") for n in self.path_diffs):
            done.append("fast vs math attention")
        if any(n.startswith("compiled:") for n in self.path_diffs):
            done.append("compiled vs eager")
        return done

    def record(self) -> dict[str, Any]:
        """What run.json keeps: what was checked, on how many parameters, the worst errors
        against their tolerances, and what could not be checked."""
        kernel = _worst_ratio(self.kernels) if self.kernels else None
        path = _worst_ratio(self.path_diffs) if self.path_diffs else None
        return {
            "ok": self.ok,
            "parameters": self.checked,
            "checks": self.checks(),
            "exact": _worst(self.exact, TOL_EXACT),
            "step": self.step.record() if self.step is not None else None,
            "paths": _ratio_record(path),
            "kernels": _ratio_record(kernel),
            "frozen": list(self.frozen),
            "skipped": list(self.skipped),
            "summary": self.summary(),
        }

    def line(self) -> str:
        """One line for the run's log: verdict, parameters, each check's worst error."""
        parts = [f"{self.checked} parameters", "gradient flow"]
        if self.exact:
            parts.append(
                f"float64 finite differences worst {max(self.exact.values(), key=_sortable):.2g} "
                f"(tol {TOL_EXACT:g})"
            )
        if self.step is not None:
            parts.append(self.step.line())
        if self.kernels:
            parts.append(f"attention kernels {len(self.kernels)} gradients")
        if self.path_diffs:
            _, (d, t) = _worst_ratio(self.path_diffs)
            paths = [c for c in self.checks() if " vs " in c and "finite" not in c]
            parts.append(f"{' and '.join(paths)} worst {d:.2g} (tol {t:.2g})")
        parts += [f"skipped: {why}" for why in self.skipped]
        return f"arbiter: {'ok' if self.ok else 'FAILED'}: " + "; ".join(parts)


@dataclass
class StepCheck:
    """check_step's result: per parameter, the largest difference between the gradient the
    optimizer would read and the reference, relative to the reference's largest entry."""

    what: str  # how the step and the reference were taken, in words
    dtype: str
    micro_batches: int
    sequences: int  # per micro-batch (cut to STEP_SEQS)
    tokens: int  # per sequence (cut to STEP_TOKENS)
    tol: float
    errors: dict[str, float] = field(default_factory=dict)
    norm_error: float = 0.0  # |norm the step measured - the reference's| / the reference's
    clipped: bool = False  # the reference's norm was over grad_clip: the step must clip

    def failures(self) -> list[tuple[str, float]]:
        """Beyond tol, worst first: one wrong gradient also moves the clipping coefficient,
        so every other parameter is then slightly off, and the culprit must lead the list."""
        bad = [(n, e) for n, e in self.errors.items() if not e <= self.tol]
        if not self.norm_error <= self.tol:
            bad.append(("gradient norm", self.norm_error))
        return sorted(bad, key=lambda ne: -_sortable(ne[1]))

    def worst(self) -> float:
        return max([*self.errors.values(), self.norm_error], key=_sortable)

    def record(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "dtype": self.dtype,
            "micro_batches": self.micro_batches,
            "sequences": self.sequences,
            "tokens": self.tokens,
            "parameters": len(self.errors),
            "worst": self.worst(),
            "norm_error": self.norm_error,
            "clipped": self.clipped,
            "tol": self.tol,
        }

    def line(self) -> str:
        clip = ", clipped" if self.clipped else ""
        return (
            f"optimizer step ({self.micro_batches} micro-batches{clip}, {self.dtype}) "
            f"worst {self.worst():.2g} (tol {self.tol:g})"
        )


def _worst(errors: dict[str, float], tol: float) -> dict[str, Any] | None:
    if not errors:
        return None
    name, e = max(errors.items(), key=lambda kv: _sortable(kv[1]))
    return {"worst": e, "parameter": name, "tol": tol}


def _worst_ratio(errors: dict[str, tuple[float, float]]) -> tuple[str, tuple[float, float]]:
    """The (name, (error, tolerance)) nearest to failing: the largest error / tolerance."""
    return max(errors.items(), key=lambda kv: _sortable(kv[1][0] / kv[1][1]))


def _ratio_record(worst: tuple[str, tuple[float, float]] | None) -> dict[str, Any] | None:
    if worst is None:
        return None
    name, (e, t) = worst
    return {"worst": e, "name": name, "tol": t, "worst_ratio_to_tol": e / t}


def _listing(items: list[str], limit: int = 8) -> str:
    more = f", and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _sortable(d: float) -> float:
    return math.inf if math.isnan(d) else d


def _clean(name: str) -> str:
    for prefix in _PREFIXES:
        while name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def _autocast(ids: torch.Tensor, amp_dtype: torch.dtype | None):
    if amp_dtype is None:
        return nullcontext()
    return torch.autocast(ids.device.type, dtype=amp_dtype)


def _loss(
    model: nn.Module, ids: torch.Tensor, targets: torch.Tensor, loss_fn: Callable | None
) -> torch.Tensor:
    """loss_fn(logits, targets), or the model's own loss (chunked, as the run computes it)."""
    return model(ids, targets) if loss_fn is None else loss_fn(model(ids), targets)


def _gradients(
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable | None,
    amp_dtype: torch.dtype | None,
) -> dict[str, torch.Tensor | None]:
    """One forward+backward; returns each trainable parameter's gradient and puts the
    parameters' previous .grad back (the caller's accumulated gradients survive)."""
    params = [(_clean(n), p) for n, p in model.named_parameters() if p.requires_grad]
    saved = [p.grad for _, p in params]
    for _, p in params:
        p.grad = None
    try:
        with _autocast(ids, amp_dtype):
            loss = _loss(model, ids, targets, loss_fn)
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


def check_gradient_flow(
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor,
    *,
    loss_fn: Callable | None = None,
    amp_dtype: torch.dtype | None = None,
) -> ArbiterReport:
    """Every parameter with requires_grad must receive a finite gradient that is not all
    zeros. Tied parameters are one parameter (named once, by their first name)."""
    grads = _gradients(model, ids, targets, loss_fn, amp_dtype)
    offenders = [(name, kind) for name, g in grads.items() if (kind := _classify(g))]
    frozen = [_clean(n) for n, p in model.named_parameters() if not p.requires_grad]
    return ArbiterReport(ok=not offenders, checked=len(grads), offenders=offenders, frozen=frozen)


def _sharded(model: nn.Module) -> bool:
    return any(hasattr(p, "full_tensor") for p in model.parameters())  # FSDP2's DTensors


@contextmanager
def _as_dtype(model: nn.Module, dtype: torch.dtype):
    """The model's own parameters in `dtype` for the duration (the same Parameter objects,
    so hooks and patched forwards that hold them still apply), then exactly as they were."""
    saved = [(p, p.data) for p in model.parameters()]
    try:
        for p, data in saved:
            p.data = data.to(dtype)
        yield
    finally:
        for p, data in saved:
            p.data = data


def check_exact(
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor,
    *,
    loss_fn: Callable | None = None,
    directions: int = 2,
    h: float = 1e-3,
    tokens: int = EXACT_TOKENS,
    seed: int = 0,
) -> dict[str, float]:
    """Per trainable parameter, the worst relative disagreement between autograd's
    directional derivative <g, d> and the central difference (L(p+hd) - L(p-hd)) / 2h, in
    float64 without autocast, on the first sequence cut to `tokens`; the step is h times the
    parameter's rms. A shared (tied) weight
    is perturbed once, so every use of it is counted. Error: |fd - ag| / max(|fd|, |ag|)."""
    ids, targets = ids[:1, :tokens], targets[:1, :tokens]
    g = torch.Generator(device="cpu").manual_seed(seed)
    out: dict[str, float] = {}
    with _as_dtype(model, torch.float64), torch.autocast(ids.device.type, enabled=False):
        params = [(_clean(n), p) for n, p in model.named_parameters() if p.requires_grad]
        loss = _loss(model, ids, targets, loss_fn)
        grads = torch.autograd.grad(loss, [p for _, p in params], allow_unused=True)
        with torch.no_grad():
            for (name, p), grad in zip(params, grads, strict=True):
                worst = 0.0
                step = h * max(float(p.pow(2).mean().sqrt()), 1e-3)
                for _ in range(directions):
                    d = torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.device)
                    p.add_(d, alpha=step)
                    up = float(_loss(model, ids, targets, loss_fn))
                    p.add_(d, alpha=-2 * step)
                    down = float(_loss(model, ids, targets, loss_fn))
                    p.add_(d, alpha=step)
                    fd = (up - down) / (2 * step)
                    ag = 0.0 if grad is None else float((grad * d).sum())
                    scale = max(abs(fd), abs(ag), 1e-12)
                    worst = max(worst, abs(fd - ag) / scale if math.isfinite(ag) else math.inf)
                out[name] = worst
    return out


def check_step(
    model: nn.Module,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    step: Callable[[list[tuple[torch.Tensor, torch.Tensor]]], torch.Tensor],
    *,
    clip: float,
    float64: bool = True,
    amp_dtype: torch.dtype | None = None,
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
    tol: float | None = None,
) -> StepCheck:
    """Run the training step `step(micro_batches)` (it backpropagates through `model`, or a
    wrapper of it, and clips; returns the gradient norm it measured) and compare every
    trainable parameter's .grad, what the optimizer reads, with the gradient of the mean loss
    over all the micro-batches as one batch (torch.autograd.grad, which fires no hook),
    averaged over ranks by `reduce` (an all-reduce mean; DDP), clipped to `clip` by torch's
    own formula (coefficient clip / (norm + 1e-6), at most 1).

    `float64`: the model's own parameters (hooks included) in float64, without autocast;
    otherwise in the run's dtype (a DDP module cannot change dtype). Every .grad is put back
    as it was."""
    params = [(_clean(n), p) for n, p in model.named_parameters() if p.requires_grad]
    saved = [p.grad for _, p in params]
    xs = torch.cat([x for x, _ in micro_batches])
    ys = torch.cat([y for _, y in micro_batches])
    dtype = "float64" if float64 else str(amp_dtype or next(model.parameters()).dtype)
    check = StepCheck(
        what=(
            f"{len(micro_batches)} micro-batches accumulated by the run's step"
            + (", reduced across ranks" if reduce is not None else "")
            + ", against one batch"
        ),
        dtype=dtype.removeprefix("torch."),
        micro_batches=len(micro_batches),
        sequences=int(micro_batches[0][0].shape[0]),
        tokens=int(micro_batches[0][0].shape[1]),
        tol=TOL_STEP if float64 else (tol if tol is not None else TOL_FP32),
    )
    for _, p in params:
        p.grad = None
    try:
        with _as_dtype(model, torch.float64) if float64 else nullcontext():
            with _autocast(xs, None if float64 else amp_dtype):
                loss = model(xs, ys)
            ref = torch.autograd.grad(loss, [p for _, p in params], allow_unused=True)
            want = [
                torch.zeros_like(p) if g is None else (reduce(g) if reduce else g.detach())
                for (_, p), g in zip(params, ref, strict=True)
            ]
            ref_norm = float(torch.stack([g.double().norm() for g in want]).norm())
            coef = min(1.0, clip / (ref_norm + 1e-6))
            check.clipped = coef < 1.0
            with torch.autocast(xs.device.type, enabled=False) if float64 else nullcontext():
                norm = float(step(micro_batches))
            check.norm_error = abs(norm - ref_norm) / max(ref_norm, 1e-30)
            if not math.isfinite(norm):
                check.norm_error = math.inf
            for (name, p), g in zip(params, want, strict=True):
                check.errors[name] = _rel_diff(p.grad, g * coef, 1e-30, torch.float64)
                p.grad = None  # before the dtype goes back
    finally:
        for (_, p), kept in zip(params, saved, strict=True):
            p.grad = kept
    return check


def _rel_diff(
    fast: torch.Tensor | None,
    ref: torch.Tensor | None,
    atol: float,
    dtype: torch.dtype = torch.float32,
) -> float:
    # check_step's measure: normalised by the reference's largest magnitude, not element by
    # element (an elementwise ratio explodes on near-zero entries and would flag rounding).
    if fast is None and ref is None:
        return 0.0  # nothing to compare; check_gradient_flow reports the missing grad
    if fast is None or ref is None:
        return math.inf
    fast, ref = fast.detach().to(dtype), ref.detach().to(dtype)
    d = ((fast - ref).abs().max() / (ref.abs().max() + atol)).item()
    return math.inf if math.isnan(d) else d


def _rel_norm(fast: torch.Tensor | None, ref: torch.Tensor | None) -> float:
    """||fast - ref|| / ||ref|| in float64: 1.0 for a dropped gradient, 0.5 for a halved one,
    and for rounding noise the typical relative error, not its largest outlier."""
    if fast is None and ref is None:
        return 0.0  # nothing to compare; check_gradient_flow reports the missing grad
    if fast is None or ref is None:
        return math.inf
    fast, ref = fast.detach().double(), ref.detach().double()
    d = float((fast - ref).norm() / ref.norm().clamp(min=1e-300))
    return math.inf if math.isnan(d) else d


def _run_dtype(model: nn.Module, ids: torch.Tensor, amp_dtype: torch.dtype | None) -> torch.dtype:
    """The precision the run computes in: its autocast dtype, else its parameters'."""
    dev = ids.device.type
    if amp_dtype is None and torch.is_autocast_enabled(dev):
        amp_dtype = torch.get_autocast_dtype(dev)
    return amp_dtype or next(model.parameters()).dtype


@contextmanager
def _one_precision_up(model: nn.Module, dtype: torch.dtype):
    """The model as the noise reference for `dtype`: parameters in float32 (float64 when the
    run is float32), TF32 off (a float32 reference must be float32); callers turn autocast
    off."""
    up = torch.float64 if dtype in (torch.float32, torch.float64) else torch.float32
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        with _as_dtype(model, up):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


def path_tolerances(
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor,
    ref: dict[str, torch.Tensor | None],
    *,
    reference: str = "math",
    loss_fn: Callable | None = None,
    amp_dtype: torch.dtype | None = None,
) -> dict[str, float]:
    """Per parameter, PATH_CALIBRATION x the reference path's own error in the run's dtype
    (`ref`, its gradients) against the same model one precision up + one unit of the dtype's
    rounding (see PATH_CALIBRATION)."""
    dtype = _run_dtype(model, ids, amp_dtype)
    floor = max(torch.finfo(dtype).eps, 1e-4)
    params = [(_clean(n), p) for n, p in model.named_parameters() if p.requires_grad]
    off = torch.autocast(ids.device.type, enabled=False)
    with _one_precision_up(model, dtype), attention_backend(reference), off:
        # autograd.grad, not backward: .grad would take the dtype of the parameters' stand-ins
        loss = _loss(model, ids, targets, loss_fn)
        grads = torch.autograd.grad(loss, [p for _, p in params], allow_unused=True)
    exact = {name: g for (name, _), g in zip(params, grads, strict=True)}
    return {
        name: PATH_CALIBRATION * _rel_norm(g, exact.get(name)) + floor for name, g in ref.items()
    }


def compare_paths(
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor,
    *,
    reference: str = "math",
    fast: str = "auto",
    compiled: bool | nn.Module = False,
    loss_fn: Callable | None = None,
    amp_dtype: torch.dtype | None = None,
    tol: float | None = None,
    noise_on: nn.Module | None = None,
) -> dict[str, tuple[float, float]]:
    """{name: (difference, tolerance)} per trainable parameter: the relative norm between
    the `fast` attention backend's gradient and the `reference` one's, on the same inputs,
    each with fresh gradients; the tolerance from path_tolerances (or `tol` for all), run on
    `noise_on` when given (an identical copy: a DDP module's parameters must keep their dtype,
    or its gradient hooks detach and the run stops all-reducing). With
    `compiled` (True: torch.compile(model); or an already compiled module wrapping the same
    parameters, to reuse its compilation) also compiled-vs-eager on the fast backend, under
    keys "compiled:<name>". On CPU "auto" may pick the same kernel as "math"; the comparison
    still runs and then simply reports ~0."""
    with attention_backend(reference):
        ref = _gradients(model, ids, targets, loss_fn, amp_dtype)
    with attention_backend(fast):
        fast_g = _gradients(model, ids, targets, loss_fn, amp_dtype)
    tols = (
        path_tolerances(
            model if noise_on is None else noise_on,
            ids,
            targets,
            ref,
            reference=reference,
            loss_fn=loss_fn,
            amp_dtype=amp_dtype,
        )
        if tol is None
        else dict.fromkeys(ref, tol)
    )
    diffs = {name: (_rel_norm(fast_g.get(name), g), tols[name]) for name, g in ref.items()}
    if compiled is not False:
        diffs.update(
            compare_compiled(
                model,
                ids,
                targets,
                tols,
                compiled=compiled,
                fast=fast,
                loss_fn=loss_fn,
                amp_dtype=amp_dtype,
                eager=fast_g,
            )
        )
    return diffs


def compare_compiled(
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor,
    tols: dict[str, float],
    *,
    compiled: Literal[True] | nn.Module = True,
    fast: str = "auto",
    loss_fn: Callable | None = None,
    amp_dtype: torch.dtype | None = None,
    eager: dict | None = None,
) -> dict[str, tuple[float, float]]:
    """{"compiled:<name>": (difference, tolerance)} of compiled against eager gradients on
    the fast backend; `tols` per parameter, as compare_paths measured them (a compiled graph
    may fuse away some of eager's roundings: a difference of that precision's noise)."""
    if eager is None:
        with attention_backend(fast):
            eager = _gradients(model, ids, targets, loss_fn, amp_dtype)
    # torch.compile of a module is a module (OptimizedModule); its stub says a bare callable
    cmodel = cast(nn.Module, torch.compile(model)) if compiled is True else compiled
    with attention_backend(fast):
        comp = _gradients(cmodel, ids, targets, loss_fn, amp_dtype)
    return {
        f"compiled:{name}": (_rel_norm(comp.get(name), g), tols[name]) for name, g in eager.items()
    }


def check_attention_kernels(
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor | None = None,
    *,
    fast: str = "auto",
    reference: str = "math",
    loss_fn: Callable | None = None,
    amp_dtype: torch.dtype | None = None,
    skipped: list[str] | None = None,
) -> dict[str, tuple[float, float]]:
    """trainer/kernels.py's check on this model: its attention calls recorded on one forward
    and backward over the first sequence (the run's own path, `fast` backend), then each
    replayed on every fused kernel `fast` stands for. {"attention[i].dq[flash]": (error,
    tolerance), ...}; kernels that cannot run these inputs are named in `skipped`."""
    x = ids[:1]
    y = (targets if targets is not None else ids.roll(-1, dims=1))[:1]
    params = [p for p in model.parameters() if p.requires_grad]

    def run_loss() -> torch.Tensor:
        with attention_backend(fast), _autocast(x, amp_dtype):
            return _loss(model, x, y, loss_fn)

    calls = kernels.record_calls(run_loss, params)
    backends = kernels.fused_backends(fast, ids.device)
    return kernels.check_calls(calls, backends=backends, reference=reference, skipped=skipped)


def run_arbiter(
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor,
    *,
    compiled: bool | nn.Module = False,
    tol: float | None = None,
    loss_fn: Callable | None = None,
    amp_dtype: torch.dtype | None = None,
    reference: str = "math",
    fast: str = "auto",
    exact_on: nn.Module | None = None,
    step: Callable[[], StepCheck] | str | None = None,
) -> ArbiterReport:
    """Every check. Raises nothing: an error inside a check becomes a note and ok=False;
    the caller decides (assert_arbiter raises). `tol`: one path tolerance for every
    parameter instead of the measured ones. `exact_on`: a copy of `model` to run the
    float64 check on, for a model inside DistributedDataParallel, whose gradient hooks a
    parameter's change of dtype would detach (the run would then stop all-reducing).
    The copy also measures the path tolerances' noise one precision up.
    `step`: runs check_step on the run's own step (the Trainer binds it); a string: why it
    cannot run, put in `skipped`, as None is ("no training step given").

    Order: the attention-kernel check runs last, so that nothing a kernel caches while it
    replays single calls can reach the whole-model comparisons (each of which also hands
    the kernels the layouts the model itself produces)."""
    try:
        report = check_gradient_flow(model, ids, targets, loss_fn=loss_fn, amp_dtype=amp_dtype)
    except Exception as e:  # noqa: BLE001 - reported, the caller decides
        n = sum(1 for p in model.parameters() if p.requires_grad)
        report = ArbiterReport(ok=False, checked=n, notes=[f"forward/backward failed: {e}"])
    sharded = _sharded(model)
    if sharded:
        report.skipped.append(
            "float64 and kernel checks: the parameters are sharded (FSDP); "
            "an unsharded run of the same model checks them"
        )
    else:
        try:
            report.exact = check_exact(
                model if exact_on is None else exact_on, ids, targets, loss_fn=loss_fn
            )
        except Exception as e:  # noqa: BLE001
            report.notes.append(f"float64 finite-difference check failed: {one_line(e)}")
    if step is None or isinstance(step, str):
        why = step or "no training step given (the Trainer gives it)"
        report.skipped.append(f"optimizer step: {why}")
    else:
        try:
            report.step = step()
        except Exception as e:  # noqa: BLE001
            report.notes.append(f"optimizer step check failed: {one_line(e)}")
    _compare(
        report, model, ids, targets, compiled, tol, loss_fn, amp_dtype, reference, fast, exact_on
    )
    if not sharded:
        try:
            report.kernels = check_attention_kernels(
                model,
                ids,
                targets,
                fast=fast,
                reference=reference,
                loss_fn=loss_fn,
                amp_dtype=amp_dtype,
                skipped=report.skipped,
            )
        except Exception as e:  # noqa: BLE001
            report.notes.append(
                f"attention kernel check ({fast} vs {reference}) failed: {one_line(e)}"
            )
    report.ok = not (
        report.offenders
        or report.path_failures()
        or report.notes
        or report.exact_failures()
        or report.step_failures()
        or report.kernel_failures()
    )
    return report


def _compare(
    report: ArbiterReport,
    model: nn.Module,
    ids: torch.Tensor,
    targets: torch.Tensor,
    compiled: bool | nn.Module,
    tol: float | None,
    loss_fn: Callable | None,
    amp_dtype: torch.dtype | None,
    reference: str,
    fast: str,
    noise_on: nn.Module | None,
) -> None:
    """The whole-model comparisons into report.path_diffs: fast vs math on one sequence (the
    math kernel keeps every layer's T x T matrices, 0.4b at 2048: ~13 GB per sequence, so not
    the whole batch), and compiled vs eager on the run's own batch shape (the run's one
    compilation), judged by the tolerances measured on that sequence."""
    if _sharded(model) and tol is None:
        # FSDP's DTensors cannot change dtype in place for a reference one precision up: the
        # fixed bounds of check_step under DDP (max-normalised, so looser than a norm)
        low = _run_dtype(model, ids, amp_dtype) in (torch.bfloat16, torch.float16)
        tol = TOL_LOW_PRECISION if low else TOL_FP32
    try:
        report.path_diffs = compare_paths(
            model,
            ids[:1],
            targets[:1],
            reference=reference,
            fast=fast,
            loss_fn=loss_fn,
            amp_dtype=amp_dtype,
            tol=tol,
            noise_on=noise_on,
        )
        if compiled is not False:
            tols = {n: t for n, (_, t) in report.path_diffs.items()}
            report.path_diffs.update(
                compare_compiled(
                    model,
                    ids,
                    targets,
                    tols,
                    compiled=compiled,
                    fast=fast,
                    loss_fn=loss_fn,
                    amp_dtype=amp_dtype,
                )
            )
    except Exception as e:  # noqa: BLE001
        report.notes.append(
            f"path comparison ({fast} vs {reference}"
            f"{', compiled' if compiled is not False else ''}) failed: "
            f"{one_line(e)}"
        )


def assert_arbiter(
    model: nn.Module, ids: torch.Tensor, targets: torch.Tensor, **kw
) -> ArbiterReport:
    """run_arbiter, raising TrainingError naming every failing parameter."""
    report = run_arbiter(model, ids, targets, **kw)
    if not report.ok:
        raise TrainingError(f"gradient-flow arbiter failed: {report.summary()}")
    return report
