"""Pretraining throughput of the real trainer (trainer.loop.Trainer, what `fertility pretrain`
runs after tokenizing), prepared to run unattended on one H100/H200 in under 5 minutes:

    python benchmarks/pretrain_gpu.py --steps 150            # 0.4b, vocab 32000, seq 2048
    python benchmarks/pretrain_gpu.py --data tokens.npy      # real token ids, not random ones
    python benchmarks/pretrain_gpu.py --device cpu --preset tiny --steps 3   # CPU smoke run

It writes the tokens as a shard, builds the Trainer with the run's own defaults (bf16
autocast, torch.compile, fused AdamW, chunked cross-entropy, padded vocabulary) and runs
`--steps` steps: the gradient-flow arbiter first (its time is printed), then training, with
a line printed at every read of the device (every --log-every steps), so a run cut short
still leaves figures. MFU is against the datasheet dense bf16 peak first (H100/H200 SXM: 989
TFLOP/s), the measured matmul peak second. With --record the result block is appended to
benchmarks/RESULTS.md. Exit status: 0; 1 when the arbiter refused the model; 2 on bad input.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: checkout.py
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()  # runs from a plain checkout: fertility.trainer is ./trainer

from fertility.errors import FertilityError, TrainingError  # noqa: E402
from fertility.shards.format import write_shard  # noqa: E402
from fertility.trainer.config import TrainConfig  # noqa: E402
from fertility.trainer.data import TokenData  # noqa: E402
from fertility.trainer.distributed import DistEnv  # noqa: E402
from fertility.trainer.loop import Trainer  # noqa: E402
from fertility.trainer.model import PRESETS, config_from_preset  # noqa: E402
from fertility.trainer.throughput import detect_peak_flops, flops_per_token, measure_matmul_peak  # noqa: E402

FP = "b" * 64  # the shard's tokenizer fingerprint: any fixed string will do here


def _secs(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} s"


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
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--log-every", type=int, default=10, help="steps between device reads")
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile (default: the trainer's: on for CUDA)",
    )
    p.add_argument("--device", default=None, help="default: cuda when available")
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="token ids: a 1-D .npy, or a raw binary file read as --data-dtype",
    )
    p.add_argument("--data-dtype", default="uint16", choices=["uint16", "uint32", "int32"])
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--project-tokens", type=float, default=2e9)
    p.add_argument("--record", action="store_true", help="append the result to RESULTS.md")
    return p.parse_args(argv)


def tokens_for(args, n: int) -> tuple[np.ndarray, str]:
    if args.data is None:
        return np.random.default_rng(1234).integers(0, args.vocab, n), "random tokens"
    if not args.data.is_file():
        raise FertilityError(f"{args.data}: no such token file")
    data = (
        np.load(args.data, mmap_mode="r", allow_pickle=False)
        if args.data.suffix == ".npy"
        else np.memmap(args.data, dtype=args.data_dtype, mode="r")
    )
    if data.ndim != 1 or len(data) < n:
        raise FertilityError(f"{args.data}: need a 1-D array of at least {n} token ids")
    if int(data.max()) >= args.vocab:
        raise FertilityError(
            f"{args.data}: token id {int(data.max())} does not fit --vocab {args.vocab}"
        )
    return np.asarray(data[:n]), f"{args.data} (first {n:,} tokens)"


class Printer:
    """Trainer callback: one line per device read, as the run goes."""

    def __init__(self, step_tokens: int, fpt: float, measured: float):
        self.step_tokens, self.fpt, self.measured = step_tokens, fpt, measured
        self.t0 = time.perf_counter()
        self.first: float | None = None  # seconds until the first step's line (arbiter, compile)
        self.rates: list[tuple[int, float, float | None]] = []

    def on_step_end(self, step: int, record: dict) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.t0
        self.rates.append((step, record["tokens_per_s"], record["mfu"]))
        mfu = "n/a" if record["mfu"] is None else f"{record['mfu']:.1%}"
        meas = record["tokens_per_s"] * self.fpt / self.measured
        loss = "nan" if record["loss"] is None else f"{record['loss']:.4f}"
        print(
            f"step {step:5d}  loss {loss}  {record['tokens_per_s']:,.0f} tokens/s  "
            f"MFU {mfu} datasheet, {meas:.1%} measured  "
            f"elapsed {time.perf_counter() - self.t0:.1f} s",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    batch = args.batch or (16 if cuda else 2)
    seq = args.seq or PRESETS[args.preset]["max_seq_len"]
    if cuda:
        torch.set_float32_matmul_precision("high")  # fp32 leftovers (outside autocast) on TF32
    model_over = {"max_seq_len": max(seq, PRESETS[args.preset]["max_seq_len"])}
    cfg = TrainConfig(
        preset=args.preset,
        model=model_over,
        seq_len=seq,
        micro_batch=batch,
        steps=args.steps,
        lr=args.lr,
        warmup_steps=min(10, args.steps),
        device=device.type,
        checkpoint_every=10**9,
        keep_last=1,
        log_every=args.log_every,
        eval_every=0,
        compile="auto" if args.compile is None else args.compile,
    ).validate()
    model_cfg = config_from_preset(args.preset, args.vocab, model_over)
    fpt = flops_per_token(model_cfg, seq)
    device_name, table_peak = detect_peak_flops(device)
    n = 8192 if cuda else 512
    # The CPU run is float32 (the trainer's CPU default): its ceiling is a float32 matmul.
    mm_dtype = torch.bfloat16 if cuda else torch.float32
    measured = measure_matmul_peak(device, mm_dtype, n=n, min_time_s=0.5 if cuda else 0.1)
    print(f"device   {device_name}; torch {torch.__version__}", flush=True)
    print(
        f"peak     datasheet dense bf16 {tflops(table_peak)}; measured {n}^3 bf16 matmul "
        f"{tflops(measured)} ({str(mm_dtype).split('.')[-1]})",
        flush=True,
    )

    with tempfile.TemporaryDirectory() as tmp:
        tokens, source = tokens_for(args, max(batch * (seq + 1) * 4, 1 << 20))
        shard = Path(tmp) / "train-00000.bin"
        write_shard(shard, tokens, vocab_size=args.vocab, fingerprint=FP)
        data = TokenData([shard], fingerprint=FP, vocab_size=args.vocab)
        printer = Printer(batch * seq, fpt, measured)
        t = Trainer(
            Path(tmp) / "run",
            cfg,
            model_cfg,
            data,
            fingerprint=FP,
            quiet=True,
            callbacks=printer,
            env=DistEnv(device=device),
        )
        print(
            f"model    preset {args.preset}: {t.raw.num_params():,} params, vocab "
            f"{args.vocab} (embedding rows {model_cfg.padded_vocab_size}), seq {seq}, batch "
            f"{batch}; {fpt / 1e9:.3f} GFLOP/token; {source}; torch.compile "
            f"{'on' if t.compiled else 'off'}",
            flush=True,
        )
        try:
            summary = t.run()
            arbiter = "ok"
        except TrainingError as e:
            print(f"error: {e}", file=sys.stderr)
            summary, arbiter = None, f"FAILED: {e}"

    steady = [r for s, r, _ in printer.rates if s > min(10, args.steps // 2)]
    tps = float(np.mean(steady)) if steady else 0.0
    achieved = tps * fpt
    mfu_table = f"{achieved / table_peak:.1%}" if table_peak else "n/a"
    mem = f"{torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB" if cuda else "n/a"
    ref = flops_per_token(config_from_preset("0.4b", args.vocab), 2048) * args.project_tokens
    hours = ref / achieved / 3600 if achieved else float("inf")
    first = f"{printer.first:.1f} s" if printer.first is not None else "n/a"
    timing = t.timing  # the trainer's own clock of the arbiter and the first step
    block = "\n".join(
        [
            f"### pretrain_gpu.py --preset {args.preset} --steps {args.steps}, "
            f"{datetime.date.today().isoformat()}",
            f"- device: {device_name}, torch {torch.__version__}; datasheet dense bf16 peak "
            f"{tflops(table_peak)}, measured {n}^3 {str(mm_dtype).split('.')[-1]} matmul "
            f"{tflops(measured)}",
            f"- run: trainer.loop.Trainer, preset {args.preset}, vocab {args.vocab}, seq {seq}, "
            f"batch {batch}, torch.compile {'on' if cfg.use_compile(device.type) else 'off'}; "
            f"{source}",
            f"- arbiter: {arbiter}; first step's line after {first}: checks before step 1 "
            f"(arbiter) {_secs(timing.get('preflight_s'))}, first step "
            f"{_secs(timing.get('first_step_s'))} (compilation included when on)",
            f"- throughput: {tps:,.0f} tokens/s over the steps after the first 10; MFU "
            f"{mfu_table} of the datasheet peak, {achieved / measured:.1%} of the measured peak; "
            f"peak memory {mem}",
            f"- projected: {hours:.1f} h on one device for 0.4B params x "
            f"{args.project_tokens / 1e9:g}B tokens at this rate",
        ]
    )
    print("\n" + block, flush=True)
    if args.record:
        with open(ROOT / "benchmarks/RESULTS.md", "a", encoding="utf-8") as f:
            f.write("\n" + block + "\n")
    return 0 if summary is not None else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FertilityError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
