"""Two gloo processes under torchrun (`torchrun -m fertility pretrain`, the command line
itself) train like one process on the same global batch: DDP with a mix by language, FSDP2
in the corpus's order. Two launches, not three (each costs three starts of torch on a 2-core
machine): together they cover both wrappers' reductions and both batch sources' rank
striding, and the weights after the last step are compared for each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fertility.trainer import checkpoint as ck
from tests.trainer.tokfixture import CORPUS, REPO, PassingGate, train_tokenizer

STEPS = 8
# 8 windows of 64 tokens per optimizer step: one process accumulates 4 micro-batches of 2;
# two processes accumulate 2 each (rank-strided from the same permutation), all-reducing
# on the last one only.
SETTINGS = dict(
    seq_len=64,
    micro_batch=2,
    tokens_per_step=512,
    lr=3e-3,
    min_lr=3e-4,
    warmup_steps=2,
    checkpoint_every=4,
    heldout_fraction=0.05,
    device="cpu",
    steps=STEPS,
)


def _toml(settings: dict) -> str:
    """TrainConfig settings as a config file for --config."""

    def value(v):
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return json.dumps(v)  # numbers, strings and booleans are spelt alike

    return "".join(f"{k} = {value(v)}\n" for k, v in settings.items())


def _rows(run: Path):
    return [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]


def _one_process(tok: str, out: Path, settings: dict) -> None:
    from fertility.trainer.options import PretrainOptions
    from fertility.trainer.run import pretrain

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        options = PretrainOptions(CORPUS, tok, out, quiet=True, settings=settings)
        pretrain(options, gate=lambda p, t: PassingGate())
    finally:
        torch.set_num_threads(before)


def _two_processes(
    tmp_path: Path, tok: str, out: Path, settings: dict, shards: Path | None = None
) -> dict:
    """Runs the job (on `shards`, `fertility tokenize`'s folder, when given; else on CORPUS);
    returns the summary rank 0 printed."""
    config = tmp_path / "job.toml"
    config.write_text(_toml(settings))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "fertility",
        "pretrain",
        *(["--shards", str(shards)] if shards else CORPUS),
        "-t",
        tok,
        "--out",
        str(out),
        "--config",
        str(config),
        "--force",  # the trainer's test, not the gate's (the one process: PassingGate)
        "--quiet",
        "--format",
        "json",
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)  # one summary (rank 0's), nothing else on stdout


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return train_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json")


def _assert_same_run(two: Path, one: Path, steps: int) -> None:
    """Rank 0's metrics and the final weights of the two-process run match the one-process
    run's."""
    ddp, ref = _rows(two), _rows(one)
    assert json.loads((two / "run.json").read_text())["world_size"] == 2
    assert [r["step"] for r in ddp] == list(range(1, steps + 1))  # rank 0 alone writes
    assert [r["tokens"] for r in ddp] == [r["tokens"] for r in ref]
    # float32 (the trainer has no float64 setting, and torchrun runs the command line). A step's
    # loss is a mean of 512 positive per-token losses, reduced in another order across ranks:
    # worst 512 x 6e-8 = 3e-5 relative for a sequential sum, log2(512) x 6e-8 = 5e-7 for
    # torch's cascaded one, 3e-6 at a loss of 6; the weights' drift (below) changes it by
    # less. Measured: 4.8e-7 apart (1 ulp). atol=1e-4 leaves 30x on 3e-6; training on other
    # windows moves the losses by 0.14 (measured), a learning rate 1% off by 3.2e-3.
    np.testing.assert_allclose(
        [r["loss"] for r in ddp], [r["loss"] for r in ref], rtol=0, atol=1e-4
    )
    assert ref[-1]["loss"] < ref[0]["loss"] - 0.3  # the curve actually moves
    a = ck.load_weights(ck.step_dir(two, steps))  # FSDP: gathered in full
    b = ck.load_weights(ck.step_dir(one, steps))
    assert a.keys() == b.keys()
    # Weights after a few AdamW steps: the gradients' 512-term sums differ in order (about
    # sqrt(512) x 6e-8 = 1.4e-6 relative), and Adam's normalised step turns that into whole
    # lr-sized steps (3e-3) for elements whose gradient is near its rounding, so the largest
    # difference is a heavy-tailed statistic, not a bound: measured 1.7e-5 here; the one-
    # process accumulation test in float32 measured 1.3e-7 here and 1.41e-5 on an AVX-512 CPU,
    # 110x more. 1.7e-5 x 110 = 1.9e-3 is over the old 1e-3, so atol=3e-3 (was 1e-3). Other
    # training windows move the weights by 2.5e-2 (8x over it); finer errors (an lr 1% off:
    # 4e-3 here) are the loss check's above.
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=3e-3, msg=name)


@pytest.mark.slow
def test_fsdp2_under_two_processes_matches_one_in_corpus_order(tmp_path, tok):
    """FSDP2 (sharded parameters, reduce-scatter) on Batches' rank-strided windows."""
    settings = {**SETTINGS, "fsdp": True}
    _one_process(tok, tmp_path / "one", SETTINGS)
    summary = _two_processes(tmp_path, tok, tmp_path / "two", settings)
    assert summary["steps"] == STEPS
    _assert_same_run(tmp_path / "two", tmp_path / "one", STEPS)
    arbiter = json.loads((tmp_path / "two/run.json").read_text())["arbiter"]
    assert arbiter["ok"] and arbiter["step"] is None  # said why, not passed silently:
    assert any(s.startswith("optimizer step: FSDP") for s in arbiter["skipped"])


def test_ddp_with_a_mix_on_tokenized_shards_under_two_processes_matches_one(tmp_path, tok):
    """DDP (all-reduce on the last micro-batch) on MixBatches' windows: the same windows of
    each language, counted once (rank 0 counts the global batch); the two processes train on
    the shards `fertility tokenize` wrote beforehand (`pretrain --shards`: no rank tokenizes,
    the gate reads the tokenize pass's counts), the one process on the corpus it tokenizes
    itself, and both read the same windows; the entry point trains with --force, saying so
    in its summary (test_run refuses without it)."""
    steps = 6
    settings = {**SETTINGS, "steps": steps, "checkpoint_every": 100, "mix": {"bn": 0.6, "en": 0.4}}
    _one_process(tok, tmp_path / "one", settings)
    shards = tmp_path / "shards"
    made = subprocess.run(
        [sys.executable, "-m", "fertility", "tokenize", *CORPUS, "-t", tok, "--out", str(shards)]
        + ["--heldout-fraction", str(SETTINGS["heldout_fraction"]), "-q"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    summary = _two_processes(tmp_path, tok, tmp_path / "two", {**settings, "fsdp": False}, shards)
    assert not (tmp_path / "two" / "data").exists()  # nothing tokenized in the run
    assert summary["steps"] == steps and summary["forced"] is True  # the real gate refuses
    _assert_same_run(tmp_path / "two", tmp_path / "one", steps)  # final weights: step 6
    # the arbiter checked the step through DDP's own reduction (2 micro-batches per rank)
    step = json.loads((tmp_path / "two/run.json").read_text())["arbiter"]["step"]
    assert "reduced across ranks" in step["what"] and step["micro_batches"] == 2
    assert step["dtype"] == "float32" and step["worst"] <= step["tol"]
    one, two = _rows(tmp_path / "one"), _rows(tmp_path / "two")
    assert [r["languages"] for r in two] == [r["languages"] for r in one]
    for r in one:  # 8 windows of 64 target tokens per step, all of them bn or en
        assert set(r["languages"]) >= {"bn", "en"}
        assert r["languages"]["bn"]["tokens"] + r["languages"]["en"]["tokens"] == r["step"] * 512
    mix = [json.loads((tmp_path / d / "run.json").read_text())["mix"] for d in ("one", "two")]
    assert mix[1]["consumed"] == mix[0]["consumed"] == one[-1]["languages"]


def test_fsdp2_gathers_bf16_parameters_and_keeps_float32_weights_and_gradients(tmp_path):
    """A bf16 run's FSDP2 policy (#37): forward and backward see bf16 parameters, the sharded
    weights the optimizer steps and their gradients stay float32. One gloo process (world
    size 1): fully_shard's hooks and casts are the same as with more ranks."""
    import torch.distributed as dist

    from fertility.trainer.distributed import DistEnv, wrap_model
    from fertility.trainer.model import Transformer, config_from_preset

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:
        model = Transformer(config_from_preset("tiny", 64, {"max_seq_len": 16}))
        seen = []
        model.layers[0].attn.q_proj.register_forward_pre_hook(
            lambda mod, args: seen.append(mod.weight.dtype)
        )
        wrap_model(model, DistEnv(backend="gloo"), fsdp=True, param_dtype=torch.bfloat16)
        ids = torch.randint(0, 64, (2, 16))
        model(ids, ids).float().backward()
        assert seen == [torch.bfloat16]
        for name, p in model.named_parameters():
            assert p.dtype == torch.float32 and p.grad.dtype == torch.float32, name
    finally:
        dist.destroy_process_group()
