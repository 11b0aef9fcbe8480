"""Pretraining throughput on one GPU, prepared to run unattended on an H100/H200:

    python benchmarks/pretrain_gpu.py                       # 0.4b preset, vocab 32000, seq 2048
    python benchmarks/pretrain_gpu.py --data tokens.npy     # real tokens instead of random ones
    python benchmarks/pretrain_gpu.py --device cpu --preset tiny --steps 3   # CPU smoke run

In order: the gradient-flow arbiter on the device (every parameter learns; fused attention
and torch.compile give the math path's gradients), a measured dense bf16 matmul peak, then
`--steps` training steps (bf16 autocast, torch.compile, fused AdamW) timed by the wall clock,
then a few steps timed phase by phase (the backward pass is where a slow run hides). It
prints tokens/s, MFU against the measured peak and against the datasheet peak, the projected
hours for 0.4B params x 2B tokens, and a block to paste into benchmarks/RESULTS.md.
Exit status: 0, or 1 when the arbiter failed (the numbers are still printed), 2 on bad input.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout

from fertility.errors import FertilityError  # noqa: E402
from trainer.arbiter import run_arbiter  # noqa: E402
from trainer.config import TrainConfig  # noqa: E402
from trainer.loop import make_optimizer  # noqa: E402
from trainer.model import PRESETS, Transformer, config_from_preset, lm_loss  # noqa: E402
from trainer.throughput import (  # noqa: E402
    ThroughputMeter,
    detect_peak_flops,
    flops_per_token,
    measure_matmul_peak,
)


def tflops(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x / 1e12:.1f} TFLOP/s" if x >= 1e12 else f"{x / 1e9:.1f} GFLOP/s"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="0.4b", choices=sorted(PRESETS))
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, default=None, help="default: the preset's max_seq_len")
    p.add_argument("--batch", type=int, default=None, help="sequences per step (16 GPU, 2 CPU)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--arbiter-batch", type=int, default=2,
                   help="sequences for the arbiter: its math-attention pass stores every "
                        "T x T attention matrix, ~1.3 GiB per layer per sequence at 2048")
    p.add_argument("--phase-steps", type=int, default=10,
                   help="extra steps timed per phase (forward/backward/optimizer); 0 skips")
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the average")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile (default: on for CUDA, off for CPU)")
    p.add_argument("--device", default=None, help="default: cuda when available")
    p.add_argument("--data", type=Path, default=None,
                   help="token ids: a 1-D .npy, or a raw binary file read as --data-dtype")
    p.add_argument("--data-dtype", default="uint16", choices=["uint16", "uint32", "int32"])
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--project-tokens", type=float, default=2e9)
    p.add_argument("--log-every", type=int, default=50)
    return p.parse_args(argv)


def token_source(args, seq: int, device: torch.device):
    """(batch(n) -> (ids, targets) of shape [n, seq], description)."""
    if args.data is None:
        g = torch.Generator(device=device).manual_seed(1234)

        def random_batch(n: int):
            x = torch.randint(0, args.vocab, (n, seq + 1), device=device, generator=g)
            return x[:, :-1], x[:, 1:]

        return random_batch, "random tokens"
    if not args.data.is_file():
        raise FertilityError(f"{args.data}: no such token file")
    data = (np.load(args.data, mmap_mode="r", allow_pickle=False) if args.data.suffix == ".npy"
            else np.memmap(args.data, dtype=args.data_dtype, mode="r"))
    if data.ndim != 1 or len(data) < seq + 2:
        raise FertilityError(f"{args.data}: need a 1-D array of more than {seq + 1} token ids")
    top = int(data.max())
    if top >= args.vocab:
        raise FertilityError(f"{args.data}: token id {top} does not fit --vocab {args.vocab}")
    rng = np.random.default_rng(1234)

    def corpus_batch(n: int):
        starts = rng.integers(0, len(data) - seq - 1, size=n)
        x = torch.from_numpy(np.stack([data[s:s + seq + 1] for s in starts]).astype(np.int64))
        x = x.to(device, non_blocking=True)
        return x[:, :-1], x[:, 1:]

    return corpus_batch, f"{args.data} ({len(data):,} tokens)"


class Trainer:
    """One optimizer step of the benchmark, also runnable phase by phase. The optimizer
    (AdamW, fused on CUDA, decay on matrices only) and clipping are those of trainer.loop."""

    def __init__(self, model, cmodel, device: torch.device, lr: float):
        self.model, self.cmodel, self.device = model, cmodel, device
        self.cuda = device.type == "cuda"
        self.cfg = TrainConfig(lr=lr)
        self.opt = make_optimizer(model, self.cfg, device)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def forward(self, ids, targets):
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            return lm_loss(self.cmodel(ids), targets)

    def update(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def phases(self, batch, n_batch: int, steps: int) -> tuple[float, float, float]:
        """Mean seconds of forward, backward, optimizer, with a synchronize between them."""
        spent = [0.0, 0.0, 0.0]
        for _ in range(steps):
            ids, targets = batch(n_batch)
            self.sync()
            t0 = time.perf_counter()
            loss = self.forward(ids, targets)
            self.sync()
            t1 = time.perf_counter()
            loss.backward()
            self.sync()
            t2 = time.perf_counter()
            self.update()
            self.sync()
            t3 = time.perf_counter()
            for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2)):
                spent[i] += dt / steps
        return spent[0], spent[1], spent[2]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    use_compile = cuda if args.compile is None else args.compile
    args.batch = args.batch or (16 if cuda else 2)
    seq = args.seq or PRESETS[args.preset]["max_seq_len"]
    if cuda:
        torch.set_float32_matmul_precision("high")  # fp32 leftovers (outside autocast) on TF32

    cfg = config_from_preset(args.preset, args.vocab,
                             {"max_seq_len": max(seq, PRESETS[args.preset]["max_seq_len"])})
    torch.manual_seed(0)
    model = Transformer(cfg).to(device)
    fpt = flops_per_token(cfg, seq)
    batch, source = token_source(args, seq, device)
    device_name, table_peak = detect_peak_flops(device)
    n_params = model.num_params()
    print(f"device   {device_name}; torch {torch.__version__}")
    print(f"model    preset {args.preset}: {n_params:,} params ({model.num_params(True):,} "
          f"non-embedding), vocab {args.vocab}, seq {seq}, batch {args.batch}; "
          f"{fpt / 1e9:.3f} GFLOP/token (PaLM convention)")
    print(f"data     {source}; bf16 autocast; torch.compile {'on' if use_compile else 'off'}")
    # Static shapes: the arbiter's small batch and the training batch each get their own
    # specialised graph instead of one dynamic-batch graph with slower kernels.
    cmodel = torch.compile(model, dynamic=False) if use_compile else model

    t0 = time.perf_counter()
    ids, targets = batch(min(args.arbiter_batch, args.batch))
    report = run_arbiter(model, ids, targets, compiled=cmodel if use_compile else False,
                         amp_dtype=torch.bfloat16)
    del ids, targets
    print(report.format_text())
    worst = max(report.path_diffs.values(), default=float("nan"))
    print(f"arbiter  {time.perf_counter() - t0:.1f} s (includes compilation when on)")

    n = 8192 if cuda else 512
    measured_peak = measure_matmul_peak(device, torch.bfloat16, n=n,
                                        min_time_s=0.5 if cuda else 0.1)
    print(f"peak     measured {n}^3 bf16 matmul {tflops(measured_peak)}; "
          f"datasheet dense bf16 {tflops(table_peak)}")

    trainer = Trainer(model, cmodel, device, args.lr)
    warmup = min(args.warmup, max(args.steps - 1, 0))
    meter = ThroughputMeter(cfg, seq, device, peak_flops=table_peak, warmup_steps=warmup)
    tokens = args.batch * seq
    stats: dict = {}
    for step in range(args.steps):
        loss = trainer.forward(*batch(args.batch))
        loss.backward()
        trainer.update()
        stats = meter.step(tokens)
        if step % args.log_every == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  {stats['tokens_per_s']:,.0f} tokens/s"
                  f"  elapsed {stats['elapsed_s']:.1f} s", flush=True)
    phase_steps = min(args.phase_steps, args.steps)
    fwd, bwd, upd = trainer.phases(batch, args.batch, phase_steps) if phase_steps else (0, 0, 0)

    tps = stats.get("avg_tokens_per_s") or stats.get("tokens_per_s", 0.0)
    achieved = tps * fpt
    mfu_measured = achieved / measured_peak
    mfu_table = f"{achieved / table_peak:.1%}" if table_peak else "n/a"
    # forward is 1/3 of the training FLOPs (2N of 6N per token), backward 2/3
    mfu_fwd = tokens * fpt / 3 / fwd / measured_peak if fwd else float("nan")
    mfu_bwd = tokens * fpt * 2 / 3 / bwd / measured_peak if bwd else float("nan")
    ref_cfg = config_from_preset("0.4b", args.vocab, {"max_seq_len": 2048})
    ref_flops = flops_per_token(ref_cfg, 2048) * args.project_tokens
    hours_same = args.project_tokens / tps / 3600 if tps else float("inf")
    hours_ref = ref_flops / achieved / 3600 if achieved else float("inf")
    mem = f"{torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB" if cuda else "n/a"
    steady = max(args.steps - warmup, 0)
    phases = (f"forward {fwd * 1e3:.1f} ms (MFU {mfu_fwd:.1%}), backward {bwd * 1e3:.1f} ms "
              f"(MFU {mfu_bwd:.1%}), optimizer {upd * 1e3:.1f} ms per step, measured-peak MFU, "
              f"mean of {phase_steps} synchronised steps")
    print(f"result   {tps:,.0f} tokens/s over {steady} steady steps "
          f"({tflops(achieved)} achieved); peak memory {mem}")
    print(f"result   MFU {mfu_measured:.1%} of measured peak, {mfu_table} of datasheet peak")
    print(f"result   {phases}")
    print(f"result   {args.project_tokens / 1e9:g}B tokens: {hours_same:.1f} h at this preset's "
          f"rate; {hours_ref:.1f} h for the 0.4b preset (seq 2048) at this MFU")

    print("\n---- paste into benchmarks/RESULTS.md ----")
    print(f"### pretrain_gpu.py, {datetime.date.today().isoformat()}")
    print(f"- device: {device_name}, torch {torch.__version__}; datasheet dense bf16 peak "
          f"{tflops(table_peak)}, measured {n}^3 bf16 matmul {tflops(measured_peak)}")
    print(f"- model: preset {args.preset}, {n_params / 1e6:.1f}M params, vocab {args.vocab}, "
          f"seq {seq}, batch {args.batch}, bf16 autocast, torch.compile "
          f"{'on' if use_compile else 'off'}, fused AdamW {'on' if cuda else 'off'}; {source}")
    print(f"- arbiter: {'ok' if report.ok else 'FAILED: ' + report.summary()}; "
          f"{report.checked} params, worst fast-vs-math/compiled grad diff {worst:.2g} "
          f"(tol {report.tol:g}, batch {min(args.arbiter_batch, args.batch)})")
    print(f"- throughput: {tps:,.0f} tokens/s over {steady} steps after {warmup} warm-up; "
          f"MFU {mfu_measured:.1%} (measured peak), {mfu_table} (datasheet peak); "
          f"peak memory {mem}")
    print(f"- phases: {phases}")
    print(f"- projected: {hours_ref:.1f} h on one device for 0.4B params x "
          f"{args.project_tokens / 1e9:g}B tokens at this MFU")
    return 0 if report.ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FertilityError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
