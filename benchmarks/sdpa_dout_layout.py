"""A reproduction to report upstream, if it reproduces: does a fused attention kernel's
backward depend on the memory layout of dO, or on the layout an earlier backward with the
same q, k, v used? (#37: on an H200 the arbiter saw every layer's dq, dk, dv off by 1.0-1.2
after a backward whose dO was contiguous (B, H, T, D), while the model hands its kernel a dO
laid out as (B, T, H, D); one lead is a plan cache keyed by q/k/v but not by dO's strides.)

    python benchmarks/sdpa_dout_layout.py                 # CUDA: flash, efficient, cudnn
    python benchmarks/sdpa_dout_layout.py --device cpu    # the CPU's flash kernel (smoke)

For each kernel, the same q, k, v (laid out as the model lays them out) are run backward with
the same dO values in three layouts, in this order: the model's (B, T, H, D), contiguous
(B, H, T, D), the model's again; then contiguous first and the model's second on a second
shape (batch 2), so that no plan of the first order is shared. Each dq, dk, dv is compared with the math kernel in float64 as
a relative norm. An honest kernel shows the same ~0.003-0.005 (bf16) in every row; a row
near 1 names the kernel, the order and the layout that went wrong. Exit status 0 always: it
reports, it does not judge. Needs only torch.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

KERNELS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


def grads(qkv, dout, backend, dtype):
    leaves = [t.detach().to(dtype).requires_grad_(True) for t in qkv]
    with sdpa_kernel(backend):
        y = F.scaled_dot_product_attention(*leaves, is_causal=True)
        return torch.autograd.grad(y, leaves, dout.to(dtype))


def layouts(up):
    """The same values as (B, H, T, D) tensors in the model's and the contiguous layout."""
    model = up.transpose(1, 2).contiguous().transpose(1, 2)  # (B, T, H, D) memory
    return {"model (B,T,H,D)": model, "contiguous (B,H,T,D)": up.contiguous()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--seq", type=int, default=2048)
    args = ap.parse_args()
    dev, dtype = torch.device(args.device), getattr(torch, args.dtype)
    names = ["flash", "efficient", "cudnn"] if dev.type == "cuda" else ["flash"]
    print(f"torch {torch.__version__}, device {dev}, dtype {args.dtype}")
    for batch, order in ((1, ["model", "contiguous", "model"]), (2, ["contiguous", "model"])):
        g = torch.Generator(device="cpu").manual_seed(batch)
        shape = (batch, args.seq, args.heads, args.head_dim)  # (B, T, H, D) as the model has
        qkv = [torch.randn(shape, generator=g).to(dev).transpose(1, 2) for _ in range(3)]
        up = torch.randn(shape, generator=g).to(dev).transpose(1, 2).contiguous()
        lay = layouts(up)
        exact = grads(qkv, up.double(), KERNELS["math"], torch.float64)
        for name in names:
            for which in order:
                key = next(k for k in lay if k.startswith(which))
                try:
                    got = grads(qkv, lay[key], KERNELS[name], dtype)
                except RuntimeError as e:
                    print(f"B={batch} {name:9s} dO {key:21s} cannot run: {str(e)[:80]}")
                    break
                errs = [float((a.double() - b).norm() / b.norm()) for a, b in zip(got, exact)]
                print(
                    f"B={batch} {name:9s} dO {key:21s} "
                    + " ".join(f"{n} {e:.4f}" for n, e in zip(("dq", "dk", "dv"), errs))
                    + ("   <- WRONG" if max(errs) > 0.1 else "")
                )


if __name__ == "__main__":
    main()
