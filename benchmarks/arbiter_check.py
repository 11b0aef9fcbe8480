"""The gradient-flow arbiter on a GPU, without pytest: an honest model of every preset must
pass, and the faults the CPU tests inject must still be caught there (#37).

    python benchmarks/arbiter_check.py                        # CUDA, bf16, every preset
    python benchmarks/arbiter_check.py --device cpu --presets tiny --seq 64   # CPU smoke

Each preset is built at full size with a 32,000-token vocabulary and checked on a (2, seq)
batch of random ids in bf16 autocast (the run's own precision on CUDA), with the run's path:
every fused kernel the device has. Then, on the first preset given, each fault is injected in
turn and must be caught by the check named beside it:
  dq x 0.97 in the fused kernels    -> attention kernels (the kernel named)
  dq dropped in the fused kernels   -> fast vs math paths
  one parameter's gradient zeroed   -> gradient flow
  the LM head's use of the tied matrix loses its gradient -> float64 finite differences
One line per check with its seconds; exit status 0 when every honest preset passed and every
fault was caught, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: checkout.py
from checkout import use_checkout  # noqa: E402

use_checkout()  # runs from a plain checkout: fertility.trainer is ./trainer

from fertility.trainer import model as M  # noqa: E402
from fertility.trainer.arbiter import ArbiterReport, run_arbiter  # noqa: E402
from fertility.trainer.model import PRESETS, Transformer, config_from_preset  # noqa: E402


class _OnGrad(torch.autograd.Function):
    """Identity forward; backward applies `fault` to the incoming gradient."""

    @staticmethod
    def forward(ctx, x, fault):  # type: ignore[override]
        ctx.fault = fault
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        return ctx.fault(g), None


@contextmanager
def fused_dq(fault: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[None]:
    """`fault` applied to dq whenever a fused kernel may run (not when pinned to math)."""
    real = F.scaled_dot_product_attention

    def sdpa(q, k, v, *args, **kw):
        fused = torch.backends.cuda.flash_sdp_enabled() or torch.backends.cuda.cudnn_sdp_enabled()
        return real(_OnGrad.apply(q, fault) if fused else q, k, v, *args, **kw)

    F.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = real


@contextmanager
def zeroed(model: Transformer) -> Iterator[None]:
    handle = model.layers[0].attn.v_proj.weight.register_hook(torch.zeros_like)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def untied_head() -> Iterator[None]:
    real = M.chunked_lm_loss
    M.chunked_lm_loss = lambda h, w, *a, **k: real(h, w.detach(), *a, **k)
    try:
        yield
    finally:
        M.chunked_lm_loss = real


def faults(model: Transformer) -> list[tuple[str, Callable, Callable[[ArbiterReport], bool]]]:
    return [
        (
            "dq x 0.97 in the fused kernels",
            lambda: fused_dq(lambda g: g * 0.97),
            lambda r: bool(r.kernel_failures()),
        ),
        (
            "dq dropped in the fused kernels",
            lambda: fused_dq(torch.zeros_like),
            lambda r: bool(r.path_failures()),
        ),
        (
            "layers.0.attn.v_proj.weight's gradient zeroed",
            lambda: zeroed(model),
            lambda r: ("layers.0.attn.v_proj.weight", "zero") in r.offenders,
        ),
        (
            "tied LM head loses its gradient",
            untied_head,
            lambda r: "tok_embeddings.weight" in dict(r.exact_failures()),
        ),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--presets", default=",".join(p for p in PRESETS if p != "tiny"))
    ap.add_argument("--seq", type=int, default=0, help="tokens per sequence (0: the preset's)")
    ap.add_argument("--vocab", type=int, default=32000)
    args = ap.parse_args()
    dev = torch.device(args.device)
    amp = torch.bfloat16 if dev.type == "cuda" else None
    ok = True
    for i, preset in enumerate(args.presets.split(",")):
        torch.manual_seed(0)
        model = Transformer(config_from_preset(preset, args.vocab)).to(dev)
        T = args.seq or model.cfg.max_seq_len
        g = torch.Generator().manual_seed(0)
        ids, targets = (torch.randint(0, args.vocab, (2, T), generator=g).to(dev) for _ in "xy")
        t0 = time.perf_counter()
        report = run_arbiter(model, ids, targets, amp_dtype=amp)
        ok &= report.ok
        print(f"{preset:5s} honest: {report.line()} ({time.perf_counter() - t0:.1f} s)")
        if not report.ok:
            print(report.format_text())
        if i:
            continue
        for name, inject, caught in faults(model):
            t0 = time.perf_counter()
            with inject():
                report = run_arbiter(model, ids, targets, amp_dtype=amp)
            hit = not report.ok and caught(report)
            ok &= hit
            print(
                f"{preset:5s} fault {name}: {'caught' if hit else 'MISSED'} "
                f"({report.summary()[:160]}) ({time.perf_counter() - t0:.1f} s)"
            )
    print(f"arbiter check: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
