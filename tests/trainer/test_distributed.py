"""Two gloo processes under torchrun train like one process on the same global batch, with
and without a mix by language."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.trainer.tokfixture import CORPUS, REPO, PassingGate, train_tokenizer
from trainer import checkpoint as ck

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

JOB = """
import json, sys
import torch
torch.set_num_threads(1)
from trainer.run import pretrain
from tests.trainer.tokfixture import PassingGate

corpus, tok, out, settings = json.loads(sys.argv[1])

pretrain(corpus, tok, out, quiet=True, overrides=settings, gate=lambda p, t: PassingGate())
"""


def _rows(run: Path):
    return [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]


def _one_process(tok: str, out: Path, settings: dict) -> None:
    from trainer.run import pretrain

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pretrain(CORPUS, tok, out, quiet=True, overrides=settings, gate=lambda p, t: PassingGate())
    finally:
        torch.set_num_threads(before)


def _two_processes(tmp_path: Path, tok: str, out: Path, settings: dict) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
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
        str(script),
        json.dumps([CORPUS, tok, str(out), settings]),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The one-process reference run, and the tokenizer it used."""
    tmp = tmp_path_factory.mktemp("single")
    tok = train_tokenizer(tmp / "tokenizer.json")
    _one_process(tok, tmp / "run", SETTINGS)
    return tok, tmp / "run"


@pytest.mark.parametrize(
    "fsdp", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["ddp", "fsdp2"]
)
def test_two_gloo_processes_match_one(tmp_path, single, fsdp):
    tok, ref = single
    _two_processes(tmp_path, tok, tmp_path / "ddp", {**SETTINGS, "fsdp": fsdp})

    ddp, one = _rows(tmp_path / "ddp"), _rows(ref)
    assert json.loads((tmp_path / "ddp/run.json").read_text())["world_size"] == 2
    assert [r["step"] for r in ddp] == list(range(1, STEPS + 1))  # rank 0 alone writes
    assert [r["tokens"] for r in ddp] == [r["tokens"] for r in one]
    np.testing.assert_allclose(
        [r["loss"] for r in ddp], [r["loss"] for r in one], rtol=0, atol=1e-4
    )
    assert one[-1]["loss"] < one[0]["loss"] - 0.3  # the curve actually moves
    a = ck.load_weights(ck.step_dir(tmp_path / "ddp", STEPS))  # FSDP: gathered in full
    b = ck.load_weights(ck.step_dir(ref, STEPS))
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-3, msg=name)


def test_a_mix_under_two_processes_matches_one(tmp_path, single):
    """The same windows of each language, counted once (rank 0 counts the global batch)."""
    tok, _ = single
    settings = {**SETTINGS, "steps": 6, "checkpoint_every": 100, "mix": {"bn": 0.6, "en": 0.4}}
    _one_process(tok, tmp_path / "one", settings)
    _two_processes(tmp_path, tok, tmp_path / "two", settings)
    one, two = _rows(tmp_path / "one"), _rows(tmp_path / "two")
    assert [r["step"] for r in two] == list(range(1, 7))
    assert [r["languages"] for r in two] == [r["languages"] for r in one]
    for r in one:  # 8 windows of 64 target tokens per step, all of them bn or en
        assert set(r["languages"]) >= {"bn", "en"}
        assert r["languages"]["bn"]["tokens"] + r["languages"]["en"]["tokens"] == r["step"] * 512
    np.testing.assert_allclose(
        [r["loss"] for r in two], [r["loss"] for r in one], rtol=0, atol=1e-4
    )
    mix = [json.loads((tmp_path / d / "run.json").read_text())["mix"] for d in ("one", "two")]
    assert mix[1]["consumed"] == mix[0]["consumed"] == one[-1]["languages"]
