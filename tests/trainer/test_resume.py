"""Exact resume: N steps straight == N/2 steps, SIGKILL, resume, the rest (bit for bit),
in the corpus's order and with a mix in characters (trainer/mix.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fertility.trainer import checkpoint as ck
from tests.trainer.tokfixture import CORPUS, REPO, PassingGate, train_tokenizer

N = 16
SETTINGS = dict(
    seq_len=64,
    micro_batch=4,
    tokens_per_step=512,
    lr=3e-3,
    min_lr=3e-4,
    warmup_steps=3,
    checkpoint_every=N // 4,
    keep_last=4,
    heldout_fraction=0.05,
    device="cpu",
    steps=N,
)
MIXED = {**SETTINGS, "mix": {"bn": 0.5, "en": 0.3, "zh": 0.2}}

# The training process: runs until step N/2 + 2 (two steps past the N/2 checkpoint, so the
# resumed run must redo them), says so, then waits to be killed.
JOB = """
import json, os, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from fertility.trainer.options import PretrainOptions
from fertility.trainer.run import pretrain
from tests.trainer.tokfixture import PassingGate

corpus, tok, out, settings, pause_at, marker = json.loads(sys.argv[1])

class PauseForKill:
    def on_step_end(self, step, record):
        if step == pause_at:
            Path(marker).write_text(str(os.getpid()))
            time.sleep(600)

pretrain(PretrainOptions(corpus, tok, out, quiet=True, settings=settings),
         gate=lambda p, t: PassingGate(), callbacks=PauseForKill())
"""


def _pretrain(tok, out, settings=SETTINGS, **kw):
    from fertility.trainer.options import PretrainOptions
    from fertility.trainer.run import pretrain

    options = PretrainOptions(CORPUS, tok, out, quiet=True, settings=settings, **kw)
    return pretrain(options, gate=lambda p, t: PassingGate())


def _losses(run: Path):
    rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows if "event" not in r]


def _assert_same_state(a: Path, b: Path):
    wa, wb = ck.load_weights(a), ck.load_weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name
    sa, sb = ck.load_train_state(a), ck.load_train_state(b)
    assert sa["cursor"] == sb["cursor"]
    for name, st in sa["optimizer"]["state"].items():
        for key, value in st.items():
            assert torch.equal(value, sb["optimizer"]["state"][name][key]), (name, key)


def _start_job(tok, out, tmp_path, settings=SETTINGS) -> tuple[subprocess.Popen, Path]:
    """The training process, started: it runs to step N/2 + 2 and waits there."""
    marker = tmp_path / "paused"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    args = json.dumps([CORPUS, tok, str(out), settings, N // 2 + 2, str(marker)])
    proc = subprocess.Popen(
        [sys.executable, "-c", JOB, args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return proc, marker


def _kill_when_paused(proc: subprocess.Popen, marker: Path) -> None:
    deadline = time.monotonic() + 240
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"training process ended early: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("training process did not reach the kill point")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # no clean-up handlers, no flush: a crash
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("settings", [SETTINGS, MIXED], ids=["corpus-order", "mix"])
def test_resume_after_sigkill_is_exact(tmp_path, settings):
    tok = train_tokenizer(tmp_path / "tokenizer.json")
    killed = tmp_path / "killed"
    # Started first: the two runs share nothing but the tokenizer, and the killed one's
    # start-up (importing torch) and training use the second core while this one trains.
    job = _start_job(tok, killed, tmp_path, settings)
    straight = tmp_path / "straight"
    try:
        _pretrain(tok, straight, settings)
    except BaseException:
        job[0].kill()  # it would otherwise wait at its pause point for 10 minutes
        raise
    _kill_when_paused(*job)
    assert [s for s, _ in ck.list_checkpoints(killed)] == [N // 4, N // 2]
    assert _losses(killed)[-1][0] == N // 2 + 2  # steps past the checkpoint were logged
    backup = tmp_path / "killed-copy"
    shutil.copytree(killed, backup)

    summary = _pretrain(tok, killed, settings, resume=True)
    assert summary["steps"] == N
    _assert_same_state(ck.step_dir(straight, N), ck.step_dir(killed, N))
    assert _losses(killed) == _losses(straight)  # redone steps replace the killed run's lines

    # A corrupt newest checkpoint: the resume falls back to the one before, still exact.
    weights = ck.step_dir(backup, N // 2) / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    weights.write_bytes(bytes(raw))
    _pretrain(tok, backup, settings, resume=True)
    _assert_same_state(ck.step_dir(straight, N), ck.step_dir(backup, N))
    assert _losses(backup) == _losses(straight)
