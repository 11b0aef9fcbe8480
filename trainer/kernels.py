"""The arbiter's attention-kernel check: each fused kernel's dq, dk, dv against float64,
judged against what an honest kernel of the run's dtype gets wrong.

Like with like. The check replays each layer's attention call on the very q, k, v the model
produced (recorded on its own forward pass), with an upstream gradient dO laid out in memory
the way the model's backward hands it over (recorded too: `y.transpose(1, 2).reshape(...)`
gives a (B, T, H, D) memory order, not a contiguous (B, H, T, D) one). A kernel that caches a
plan keyed by q/k/v but not by dO's strides (cuDNN's, in some PyTorch versions) would
otherwise read one layout through the other's plan, and the check would accuse an honest
kernel, or poison the comparisons run after it. Every side gets fresh leaves.

Honest noise. The math kernel in bf16 rounds its inputs and outputs; a fused kernel also rounds
its intermediates: P before P @ V and dV = P^T dO, dS before dQ = dS K and dK = dS^T Q
(FlashAttention-2's algorithm; cuDNN and the memory-efficient kernel round at the same points).
So the math kernel's own error understates an honest fused kernel's (measured on the CPU's
flash kernel in bf16: 0.0049-0.0051 relative against the math kernel's 0.0032-0.0042). The
tolerance is CALIBRATION x the larger of the two reference errors, each against float64:
  * the math kernel in the run's dtype;
  * `emulated_fused_grads`: the exact algorithm in float64, rounded to the run's dtype at the
    fused kernel's rounding points, i.e. what an honest fused kernel gets wrong.
plus a floor of one unit of the dtype's rounding (1e-4 for float32, whose kernels differ by a
few units of their own error and by more under load).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from fertility.errors import TrainingError
from fertility.trainer.model import attention_backend

# An honest fused kernel's per-position error spreads around the emulation's (the rounding
# points are the same, the order of the fp32 sums is not): 4x leaves room for that spread and
# still catches a dq scaled by 0.97 or a dv zeroed on an eighth of the positions (tested).
CALIBRATION = 4.0
# What fast="auto" means for this check: every fused kernel the device has, each checked and
# named, since "auto" picks among them by shape and dtype and a run may meet any of them.
FUSED: dict[str, tuple[str, ...]] = {"cuda": ("flash", "efficient", "cudnn"), "cpu": ("flash",)}


@dataclass
class AttentionCall:
    """One scaled_dot_product_attention call as the model made it."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    args: tuple
    kw: dict
    dout_stride: tuple[int, ...] | None = None  # the gradient's layout the model handed back


def record_calls(
    run_loss: Callable[[], torch.Tensor], params: Sequence[torch.Tensor]
) -> list[AttentionCall]:
    """Run `run_loss()` (the model's forward on the run's own path) and its backward to
    `params` (torch.autograd.grad: no .grad is touched), recording each attention call's
    inputs (detached, strides kept) and the strides of the upstream gradient it received."""
    real = F.scaled_dot_product_attention
    calls: list[AttentionCall] = []

    def record(
        query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, **kw: Any
    ) -> torch.Tensor:  # named as F's own: it stands in for it
        call = AttentionCall(query.detach(), key.detach(), value.detach(), args, dict(kw))
        calls.append(call)
        y = real(query, key, value, *args, **kw)
        if y.requires_grad:

            def keep(g: torch.Tensor, call: AttentionCall = call) -> None:
                call.dout_stride = tuple(g.stride())

            y.register_hook(keep)
        return y

    F.scaled_dot_product_attention = record
    try:
        loss = run_loss()
    finally:
        F.scaled_dot_product_attention = real
    if params and loss.requires_grad:
        torch.autograd.grad(loss, list(params), allow_unused=True)
    return calls


def _layout(t: torch.Tensor, stride: tuple[int, ...] | None, like: torch.Tensor) -> torch.Tensor:
    """`t` copied into memory laid out as `stride` (the model's dO), else as `like`."""
    if stride is None:
        return torch.empty_like(like).copy_(t)
    return torch.empty_strided(t.shape, stride, dtype=like.dtype, device=like.device).copy_(t)


def kernel_grads(
    call: AttentionCall, up: torch.Tensor, backend: str, dtype: torch.dtype
) -> list[torch.Tensor]:
    """dq, dk, dv of one call replayed on `backend` in `dtype`: fresh leaves, dO laid out as
    the model's. The kernel is the one F holds now (a test may stand a fake one in)."""
    sdpa: Callable[..., torch.Tensor] = F.scaled_dot_product_attention
    leaves = [t.detach().to(dtype).requires_grad_(True) for t in (call.q, call.k, call.v)]
    with attention_backend(backend):
        y = sdpa(*leaves, *call.args, **call.kw)
        dout = _layout(up.to(dtype), call.dout_stride, y)
        return list(torch.autograd.grad(y, leaves, dout))


def emulated_fused_grads(
    call: AttentionCall, up: torch.Tensor, dtype: torch.dtype
) -> list[torch.Tensor] | None:
    """dq, dk, dv (float64) of exact attention rounded to `dtype` where a fused kernel rounds
    (module docstring); None for a call it does not model (a mask, GQA, dropout)."""
    if call.args or set(call.kw) - {"is_causal", "scale"} or call.q.shape != call.k.shape:
        return None

    def r(x: torch.Tensor) -> torch.Tensor:
        return x.to(dtype).to(torch.float64)

    q, k, v = (t.to(dtype).to(torch.float64) for t in (call.q, call.k, call.v))
    do = r(up)
    scale = call.kw.get("scale") or 1 / math.sqrt(q.shape[-1])
    s = (q @ k.transpose(-2, -1)) * scale  # fp32 accumulation: exact next to dtype's rounding
    if call.kw.get("is_causal"):
        T = s.shape[-1]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=s.device).triu(1), -math.inf)
    p = torch.softmax(s, dim=-1)
    pr = r(p)  # P rounded before the P @ V and P^T @ dO matmuls
    o = r(pr @ v)  # the kernel's output, in dtype
    dv = pr.transpose(-2, -1) @ do
    dp = do @ v.transpose(-2, -1)
    ds = r(p * (dp - (do * o).sum(-1, keepdim=True)))  # dS rounded before its two matmuls
    dq, dk = (ds @ k) * scale, (ds.transpose(-2, -1) @ q) * scale
    return [r(dq), r(dk), r(dv)]


def position_stats(g: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(worst per-position relative error, worst per-position scale bias |1 - <g,r>/<r,r>|)
    of a [B, H, T, D] gradient against its float64 reference, positions with a reference
    of (near) zero left out: dq at position 0 is exactly zero under a causal mask."""
    g, ref = g.double().transpose(1, 2).flatten(2), ref.transpose(1, 2).flatten(2)  # B,T,HD
    g, ref = g.reshape(-1, g.shape[-1]), ref.reshape(-1, ref.shape[-1])
    rr = (ref * ref).sum(-1)
    keep = rr > 1e-12 * rr.max()
    if not keep.any():
        return 0.0, 0.0
    err = ((g - ref).norm(dim=-1)[keep] / rr[keep].sqrt()).max()
    bias = (1 - (g * ref).sum(-1)[keep] / rr[keep]).abs().max()
    return float(err), float(bias)


def fused_backends(fast: str, device: torch.device) -> tuple[str, ...]:
    """The kernels the check replays: `fast` itself, or for "auto" every fused one."""
    return FUSED.get(device.type, ("auto",)) if fast == "auto" else (fast,)


def check_calls(
    calls: list[AttentionCall],
    *,
    backends: tuple[str, ...],
    reference: str = "math",
    seed: int = 0,
    skipped: list[str] | None = None,
) -> dict[str, tuple[float, float]]:
    """{"attention[i].dq[backend]": (error, tolerance), ...} for every recorded call and fused
    backend: error is the worst per-position relative error or scale bias against float64,
    tolerance CALIBRATION x the honest noise (module docstring) + the dtype's floor. A backend
    that cannot run these inputs is named in `skipped`, once. One layer's T x T matrices exist
    at a time."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    out: dict[str, tuple[float, float]] = {}
    unusable: dict[str, str] = {}
    for i, call in enumerate(calls):
        dtype = call.q.dtype
        up = torch.randn(call.q.shape[:-1] + call.v.shape[-1:], generator=g, dtype=torch.float64)
        up = up.to(call.q.device)
        exact = kernel_grads(call, up, reference, torch.float64)
        honest = [kernel_grads(call, up, reference, dtype)]
        emulated = emulated_fused_grads(call, up, dtype)
        if emulated is not None:
            honest.append(emulated)
        floor = max(torch.finfo(dtype).eps, 1e-4)
        noise = [
            [max(s) for s in zip(*(position_stats(h[j], exact[j]) for h in honest), strict=True)]
            for j in range(3)
        ]
        for backend in backends:
            if backend in unusable:
                continue
            try:
                fast = kernel_grads(call, up, backend, dtype)
            except TrainingError as e:
                unusable[backend] = str(e)
                continue
            for j, name in enumerate(("dq", "dk", "dv")):
                seen = position_stats(fast[j], exact[j])
                ratios = [(s, CALIBRATION * n + floor) for s, n in zip(seen, noise[j])]
                out[f"attention[{i}].{name}[{backend}]"] = max(ratios, key=lambda st: st[0] / st[1])
    if skipped is not None:
        skipped += [f"attention kernel {b}: {why}" for b, why in unusable.items()]
    return out
