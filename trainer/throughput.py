"""Throughput sentinel: tokens/s and model-FLOPs utilisation (MFU) from the wall clock, and a
loud warning when a GPU run sits far below its peak.

Why a sentinel: a pretraining run can be numerically fine and still ~30x too slow (fp32
matmuls, an eager backward, the math attention kernel, a starved data loader). The run the
project's benchmark compares against reported its backward pass at ~3% of the GPU's peak;
at that rate a 0.4B x 2B-token run costs days instead of hours. MFU makes that visible from
the first log line instead of the invoice.
"""

from __future__ import annotations

import math
import platform
import re
import sys
import time
from collections.abc import Callable

import torch

from fertility.trainer.model import ModelConfig

# Dense (non-sparse) bf16 tensor-core peaks with fp32 accumulation, per device, from the
# vendor datasheets. Datasheets quote the 2:4-sparsity figure first; dense is half of it.
PEAK_BF16_FLOPS: dict[str, float] = {
    "H100 SXM": 989.4e12,  # NVIDIA H100 Tensor Core GPU datasheet: 1,979 TFLOPS sparse
    "H100 PCIe": 756.5e12,  # same datasheet, H100 PCIe column: 1,513 sparse
    "H100 NVL": 835.5e12,  # same datasheet, H100 NVL column: 1,671 sparse
    "GH200": 989.4e12,  # NVIDIA GH200 Grace Hopper Superchip datasheet: 1,979 sparse
    "H200 SXM": 989.4e12,  # NVIDIA H200 Tensor Core GPU datasheet: 1,979 sparse
    "H200 NVL": 835.5e12,  # same datasheet, H200 NVL column: 1,671 sparse
    "B200": 2250e12,  # NVIDIA HGX B200 datasheet: 4.5 PFLOPS sparse per GPU
    "A100": 312e12,  # NVIDIA A100 Tensor Core GPU datasheet: 312 dense / 624 sparse (40/80GB)
    "A10": 125e12,  # NVIDIA A10 Tensor Core GPU datasheet: 125 dense / 250 sparse
    # No A10G entry: it is AWS's variant with no NVIDIA datasheet; measure it instead
    # (measure_matmul_peak) rather than trust a number passed around online.
    "L4": 121e12,  # NVIDIA L4 Tensor Core GPU datasheet: 242 sparse
    "L40S": 362.05e12,  # NVIDIA L40S datasheet: 733 sparse
    "L40": 181.05e12,  # NVIDIA L40 datasheet: 362.1 sparse
    "RTX 4090": 165.2e12,  # NVIDIA Ada Lovelace architecture whitepaper: fp32 accumulate
    "MI300X": 1307.4e12,  # AMD Instinct MI300X accelerator datasheet: 2614.9 sparse
    "MI325X": 1307.4e12,  # AMD Instinct MI325X accelerator datasheet
    "MI250X": 383e12,  # AMD Instinct MI250X accelerator datasheet (no sparsity figure)
}

# Device names as torch.cuda.get_device_name reports them ("NVIDIA H100 80GB HBM3",
# "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X"); first match wins.
_NAME_PATTERNS: list[tuple[str, str]] = [
    (r"GH200", "GH200"),
    (r"H200.*NVL", "H200 NVL"),
    (r"H200", "H200 SXM"),
    (r"H100.*NVL", "H100 NVL"),
    (r"H100.*PCIE", "H100 PCIe"),
    (r"H100", "H100 SXM"),
    (r"B200", "B200"),
    (r"A100", "A100"),
    (r"\bA10\b", "A10"),
    (r"L40S", "L40S"),
    (r"\bL40\b", "L40"),
    (r"\bL4\b", "L4"),
    (r"RTX 4090", "RTX 4090"),
    (r"MI300X", "MI300X"),
    (r"MI325X", "MI325X"),
    (r"MI250X", "MI250X"),
]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def peak_for_name(name: str) -> tuple[str, float] | None:
    """(table key, dense bf16 peak) for a device name, or None when it is not in the table."""
    upper = name.upper()
    for pattern, key in _NAME_PATTERNS:
        if re.search(pattern, upper):
            return key, PEAK_BF16_FLOPS[key]
    return None


def detect_peak_flops(
    device: torch.device | str, warn: Callable[[str], None] = _stderr
) -> tuple[str, float | None]:
    """(device name, dense bf16 peak FLOP/s or None). None for a CPU, and for a GPU missing
    from PEAK_BF16_FLOPS (with a message saying how to get a number)."""
    device = torch.device(device)
    if device.type != "cuda":
        return f"cpu ({platform.processor() or platform.machine() or 'unknown'})", None
    name = torch.cuda.get_device_name(device)
    hit = peak_for_name(name)
    if hit is None:
        warn(
            f"throughput: no dense bf16 peak known for {name!r}; MFU is not reported "
            f"(add it to trainer.throughput.PEAK_BF16_FLOPS or measure_matmul_peak)"
        )
        return name, None
    return name, hit[1]


def matmul_params(cfg: ModelConfig) -> int:
    """Weights that take part in a matmul per token: every projection, plus the LM head
    once (also when tied: the embedding lookup is a gather, no FLOPs)."""
    hd = cfg.head_dim
    attn = cfg.d_model * hd * (2 * cfg.n_heads + 2 * cfg.resolved_n_kv_heads)  # q, o + k, v
    mlp = 3 * cfg.d_model * cfg.resolved_d_ff
    return cfg.n_layers * (attn + mlp) + cfg.d_model * cfg.vocab_size


def flops_per_token(cfg: ModelConfig, seq_len: int, *, with_attention: bool = True) -> float:
    """Training FLOPs per token, PaLM's convention (Chowdhery et al. 2022, appendix B):
    6*N (2 forward + 4 backward per matmul weight) + 12*L*d*T for the attention scores and
    the weighted sum. The causal mask is NOT halved: the convention counts the full T x T
    product, as PaLM and nanoGPT do, so MFU figures stay comparable with theirs."""
    flops = 6.0 * matmul_params(cfg)
    if with_attention:
        flops += 12.0 * cfg.n_layers * cfg.n_heads * cfg.head_dim * seq_len
    return flops


class ThroughputMeter:
    """Call step(tokens) once per optimizer step. Rates come from time.perf_counter between
    calls (after a CUDA synchronize, so queued kernels are counted), never from step
    counters. The first `warmup_steps` intervals (compilation, allocator warm-up) are left
    out of the running average that the warning looks at."""

    def __init__(
        self,
        cfg: ModelConfig,
        seq_len: int,
        device: torch.device | str,
        warn_below: float = 0.10,
        warn: Callable[[str], None] = _stderr,
        *,
        peak_flops: float | None = None,
        warn_every: int = 100,
        warmup_steps: int = 3,
        sync: bool = True,
    ):
        self.flops_per_token = flops_per_token(cfg, seq_len)
        self.device = torch.device(device)
        self.warn_below, self.warn, self.warn_every = warn_below, warn, warn_every
        self.warmup_steps = warmup_steps
        self.sync = sync and self.device.type == "cuda"
        if peak_flops is None:
            self.device_name, peak_flops = detect_peak_flops(self.device, warn)
        else:
            self.device_name = str(self.device)
        self.peak_flops = peak_flops
        self.steps = 0
        self._steady_tokens, self._steady_s = 0, 0.0
        self._start = self._last = time.perf_counter()

    def step(self, tokens: int) -> dict:
        if self.sync:
            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        dt, self._last = now - self._last, now
        self.steps += 1
        rate = tokens / dt if dt > 0 else math.inf
        if self.steps > self.warmup_steps:
            self._steady_tokens += tokens
            self._steady_s += dt
        avg = self._steady_tokens / self._steady_s if self._steady_s > 0 else None
        out = {
            "tokens_per_s": rate,
            "mfu": self._mfu(rate),
            "elapsed_s": now - self._start,
            "avg_tokens_per_s": avg,
            "avg_mfu": self._mfu(avg),
        }
        since_warmup = self.steps - self.warmup_steps
        if (
            out["avg_mfu"] is not None
            and out["avg_mfu"] < self.warn_below
            and since_warmup > 0
            and (since_warmup - 1) % self.warn_every == 0
        ):
            self.warn(self._warning(out["avg_mfu"]))
        return out

    def _mfu(self, rate: float | None) -> float | None:
        if rate is None or self.peak_flops is None:
            return None
        return rate * self.flops_per_token / self.peak_flops

    def _warning(self, mfu: float) -> str:
        assert self.peak_flops is not None, "an MFU is only computed against a known peak"
        return (
            f"WARNING throughput: MFU {mfu:.1%} is below {self.warn_below:.0%} of "
            f"{self.device_name}'s dense bf16 peak ({self.peak_flops / 1e12:.0f} TFLOP/s). "
            f"The reference run lost its budget this way (backward pass at ~3% of peak). "
            f"Check: bf16 autocast on, torch.compile on, the fused attention kernel taken "
            f"(run the arbiter), a batch large enough to fill the GPU, a data loader that "
            f"keeps up."
        )


def measure_matmul_peak(
    device: torch.device | str,
    dtype: torch.dtype = torch.bfloat16,
    n: int = 8192,
    *,
    min_time_s: float = 0.5,
) -> float:
    """Achieved FLOP/s of a dense n x n x n matmul: the practical ceiling MFU can be read
    against (datasheet peaks assume boost clocks that power limits rarely allow)."""
    device = torch.device(device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    c = torch.empty(n, n, device=device, dtype=dtype)
    for _ in range(3):  # kernel selection, clocks ramping up
        torch.mm(a, b, out=c)
    sync()
    t0 = time.perf_counter()
    torch.mm(a, b, out=c)
    sync()
    once = max(time.perf_counter() - t0, 1e-9)
    iters = max(3, math.ceil(min_time_s / once))
    t0 = time.perf_counter()
    for _ in range(iters):
        torch.mm(a, b, out=c)
    sync()
    return 2.0 * n**3 * iters / (time.perf_counter() - t0)
