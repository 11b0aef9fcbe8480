"""FLOPs per token by hand, MFU arithmetic, the wall-clock meter and its warning, the peak
table lookup, and a CPU smoke run of benchmarks/pretrain_gpu.py."""

import argparse
import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import fertility.trainer.throughput as tp
from fertility.errors import FertilityError
from fertility.trainer.model import config_from_preset
from fertility.trainer.throughput import (
    ThroughputMeter,
    detect_peak_flops,
    flops_per_token,
    measure_matmul_peak,
    peak_for_name,
)

ROOT = Path(__file__).resolve().parents[2]


def test_flops_per_token_tiny_by_hand():
    cfg = config_from_preset("tiny", 1000)  # d 64, 2 layers, 4 heads of 16, d_ff 256
    n = 2 * (4 * 64 * 64 + 3 * 64 * 256) + 64 * 1000  # q,k,v,o + gate,up,down; lm_head once
    assert n == 195_072
    assert flops_per_token(cfg, 128, with_attention=False) == 6 * 195_072
    assert flops_per_token(cfg, 128) == 6 * 195_072 + 12 * 2 * 64 * 128  # = 1,367,040
    # GQA: k and v project to 2 heads of 16 -> 64 x 32 each
    gqa = config_from_preset("tiny", 1000, {"n_kv_heads": 2})
    n_gqa = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 256) + 64 * 1000
    assert flops_per_token(gqa, 128, with_attention=False) == 6 * n_gqa
    # Untied embeddings add no FLOPs: the input embedding is a lookup.
    untied = config_from_preset("tiny", 1000, {"tie_embeddings": False})
    assert flops_per_token(untied, 128) == flops_per_token(cfg, 128)


class FakeClock:
    def __init__(self, times):
        self.times = iter(times)

    def __call__(self):
        return next(self.times)


def test_meter_reads_the_wall_clock_and_computes_mfu(monkeypatch):
    cfg = config_from_preset("tiny", 1000)
    fpt = 1_367_040  # by hand above
    # construction at t=100; steps end at 102, 103, 107
    monkeypatch.setattr(tp.time, "perf_counter", FakeClock([100.0, 102.0, 103.0, 107.0]))
    warnings = []
    meter = ThroughputMeter(
        cfg, 128, "cpu", peak_flops=1e9, warmup_steps=1, warn=warnings.append, warn_below=0.0
    )
    # The approx sites here are float64 closed forms of exact inputs (integer tokens, whole
    # seconds, 1e9): rate x FLOPs / peak rounds two or three operations, a few ulps. approx's
    # default rel=1e-6 is only that rounding; averaging in the warm-up step would give 857
    # instead of 1000 tokens/s, a FLOP count without attention 0.86x the MFU.
    s1 = meter.step(1000)  # 1000 tokens in 2 s
    assert s1["tokens_per_s"] == 500.0 and s1["elapsed_s"] == 2.0
    assert s1["mfu"] == pytest.approx(500 * fpt / 1e9)
    assert s1["avg_tokens_per_s"] is None  # the warm-up step is not averaged
    s2 = meter.step(3000)  # 3000 tokens in 1 s
    assert s2["tokens_per_s"] == 3000.0 and s2["elapsed_s"] == 3.0
    s3 = meter.step(2000)  # 2000 tokens in 4 s
    assert s3["avg_tokens_per_s"] == pytest.approx(5000 / 5)  # steps 2 and 3 only
    assert s3["avg_mfu"] == pytest.approx(1000 * fpt / 1e9)
    assert warnings == []


def test_meter_on_cpu_has_no_mfu_and_no_warning(monkeypatch):
    monkeypatch.setattr(tp.time, "perf_counter", FakeClock([0.0, 1.0, 2.0]))
    warnings = []
    meter = ThroughputMeter(
        config_from_preset("tiny", 1000), 128, "cpu", warn=warnings.append, warmup_steps=0
    )
    out = meter.step(10)
    assert out["mfu"] is None and out["tokens_per_s"] == 10.0
    meter.step(10)
    assert warnings == []


def test_meter_warns_once_per_n_steps_below_threshold(monkeypatch):
    cfg = config_from_preset("tiny", 1000)
    fpt = flops_per_token(cfg, 128)
    peak = 1000 * fpt / 0.03  # 1000 tokens/s is 3% MFU
    monkeypatch.setattr(tp.time, "perf_counter", FakeClock(itertools.count(0.0, 1.0)))
    warnings = []
    meter = ThroughputMeter(
        cfg, 128, "cpu", peak_flops=peak, warn=warnings.append, warmup_steps=2, warn_every=5
    )
    for _ in range(2 + 11):  # float64, a few ulps from 0.03; approx's rel=1e-6 is rounding only
        assert meter.step(1000)["mfu"] == pytest.approx(0.03)
    assert len(warnings) == 3  # steady steps 1, 6 and 11
    assert "3.0%" in warnings[0] and "below 10%" in warnings[0]
    fast = ThroughputMeter(
        cfg, 128, "cpu", peak_flops=peak / 10, warn=warnings.append, warmup_steps=0
    )
    fast.step(1000)  # 30% MFU: quiet
    assert len(warnings) == 3


def test_peak_table_lookup_by_device_name():
    assert peak_for_name("NVIDIA H100 80GB HBM3") == ("H100 SXM", 989.4e12)  # 1979 sparse / 2
    assert peak_for_name("NVIDIA H100 PCIe")[0] == "H100 PCIe"
    assert peak_for_name("NVIDIA H200")[0] == "H200 SXM"
    assert peak_for_name("NVIDIA A100-SXM4-80GB") == ("A100", 312e12)
    assert peak_for_name("NVIDIA A100 80GB PCIe")[0] == "A100"
    assert peak_for_name("NVIDIA A10")[0] == "A10"
    assert peak_for_name("NVIDIA A10G") is None
    assert peak_for_name("NVIDIA L4")[0] == "L4"
    assert peak_for_name("NVIDIA L40S")[0] == "L40S"
    assert peak_for_name("NVIDIA GeForce RTX 4090")[0] == "RTX 4090"
    assert peak_for_name("AMD Instinct MI300X")[0] == "MI300X"
    assert peak_for_name("Tesla T4") is None
    name, peak = detect_peak_flops("cpu")
    assert name.startswith("cpu") and peak is None


def test_measure_matmul_peak_arithmetic(monkeypatch):
    # Every perf_counter call advances 1 s: one probe product takes 1 s, so 3 timed
    # products take 1 s in all -> 3 * 2 * n^3 FLOP/s.
    monkeypatch.setattr(tp.time, "perf_counter", FakeClock(itertools.count(0.0, 1.0)))
    assert measure_matmul_peak("cpu", torch.float32, n=32) == 3 * 2 * 32**3


def test_measure_matmul_peak_runs_for_real_on_cpu():
    flops = measure_matmul_peak("cpu", torch.float32, n=128, min_time_s=0.05)
    assert math.isfinite(flops) and 1e6 < flops < 1e14


def _bench():
    spec = importlib.util.spec_from_file_location(
        "pretrain_gpu", ROOT / "benchmarks" / "pretrain_gpu.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_benchmark_smoke_run_times_the_real_trainer(capsys, monkeypatch):
    """benchmarks/pretrain_gpu.py runs trainer.loop.Trainer itself (arbiter included) and
    prints a line per step as it goes, so a run cut short still leaves figures."""
    bench = _bench()
    seen = []
    real_run = bench.Trainer.run
    monkeypatch.setattr(bench.Trainer, "run", lambda self, *a: seen.append(self) or real_run(self))
    assert (
        bench.main(
            [
                "--device",
                "cpu",
                "--preset",
                "tiny",
                "--steps",
                "3",
                "--vocab",
                "300",
                "--seq",
                "32",
                "--log-every",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert len(seen) == 1 and isinstance(seen[0], bench.Trainer)
    assert [l.split()[1] for l in out.splitlines() if l.startswith("step ")] == ["1", "2", "3"]
    assert "- arbiter: ok" in out and "embedding rows 384" in out


def test_benchmark_reads_a_token_file(tmp_path):
    bench = _bench()
    tokens = np.arange(1000, dtype=np.uint16) % 500
    np.save(tmp_path / "t.npy", tokens)
    args = argparse.Namespace(data=tmp_path / "t.npy", data_dtype="uint16", vocab=500)
    got, desc = bench.tokens_for(args, 800)
    assert np.array_equal(got, tokens[:800]) and "first 800 tokens" in desc
    args.vocab = 400  # id 499 does not fit
    with pytest.raises(FertilityError, match="token id 499"):
        bench.tokens_for(args, 800)
