"""--log-to: the numbers of metrics.jsonl, read back from TensorBoard's event files with
TensorBoard's own reader; a missing package or an unknown sink is one line, exit 2."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from fertility.trainer import checkpoint as ck
from fertility.trainer.config import TrainConfig
from fertility.trainer.data import TokenData
from fertility.trainer.loop import Trainer
from fertility.trainer.model import config_from_preset
from fertility.trainer.shards import write_shard

FP = "f" * 64
VOCAB = 64
SEP = VOCAB - 1


@pytest.fixture
def shards(tmp_path):
    rng = np.random.default_rng(1)
    train = (np.arange(8_000) * 5 + rng.integers(0, 3, 8_000)) % (VOCAB - 1)
    held = rng.integers(0, VOCAB - 1, 600)
    held[::50] = SEP  # documents of 49 ids between separators
    write_shard(tmp_path / "train.bin", train, vocab_size=VOCAB, fingerprint=FP)
    write_shard(tmp_path / "held.bin", held, vocab_size=VOCAB, fingerprint=FP)
    data = TokenData([tmp_path / "train.bin"], fingerprint=FP, vocab_size=VOCAB)
    heldout = TokenData([tmp_path / "held.bin"], fingerprint=FP, vocab_size=VOCAB)
    heldout.separator = SEP
    return data, heldout


def _run(tmp_path, shards, steps, resume=False):
    cfg = TrainConfig(
        seq_len=16,
        micro_batch=2,
        steps=steps,
        warmup_steps=2,
        checkpoint_every=3,
        keep_last=5,
        eval_every=2,
        eval_windows=2,
        device="cpu",
        log_to=["tensorboard"],
    ).validate()
    data, heldout = shards
    trainer = Trainer(
        tmp_path / "run",
        cfg,
        config_from_preset("tiny", VOCAB),
        data,
        fingerprint=FP,
        quiet=True,
        heldout=heldout,
    )
    return trainer.run(resume=resume)


def _events(run_dir):
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _expected(run_dir):
    """metrics.jsonl as (step, value) per tag, in TensorBoard's float32."""
    lines = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    want: dict[str, list] = {}
    for line in lines:
        if "event" not in line:
            pairs = {f"train/{k}": line[k] for k in ("loss", "lr", "grad_norm", "tokens_per_s")}
        elif line["event"] == "heldout":  # every number of the line (a flag is not one)
            pairs = {
                f"heldout/{k}": v
                for k, v in line.items()
                if k != "step" and type(v) in (int, float)
            }
        else:
            continue
        for tag, value in pairs.items():
            want.setdefault(tag, []).append((line["step"], float(np.float32(value))))
    return want


def test_tensorboard_holds_the_numbers_of_metrics_jsonl(tmp_path, shards):
    _run(tmp_path, shards, steps=4)
    got, want = _events(tmp_path / "run"), _expected(tmp_path / "run")
    assert len(want["train/loss"]) == 4 and len(want["heldout/loss"]) == 2
    assert {"heldout/tokens", "heldout/documents", "heldout/train_loss"} <= set(want)
    # MFU is null on the CPU: left out, not drawn as 0
    assert "train/mfu" not in got
    assert got == want


def test_a_resumed_run_shows_each_step_once(tmp_path, shards):
    # 5 steps checkpoint at 3 and 5; without the last one, --resume redoes steps 4 and 5.
    _run(tmp_path, shards, steps=5)
    shutil.rmtree(ck.step_dir(tmp_path / "run", 5))
    _run(tmp_path, shards, steps=5, resume=True)
    got, want = _events(tmp_path / "run"), _expected(tmp_path / "run")
    assert [s for s, _ in got["train/loss"]] == [1, 2, 3, 4, 5]
    assert got == want


def _cli_args(tmp_path):
    from tests.trainer.tokfixture import CORPUS, train_tokenizer

    tok = train_tokenizer(tmp_path / "tok/tokenizer.json")
    return ["pretrain", CORPUS, "-t", tok, "--out", tmp_path / "run", "--device", "cpu"]


@pytest.mark.parametrize("sink", ["tensorboard", "wandb"])
def test_a_sink_without_its_package_is_one_line_naming_the_extra(tmp_path, run, monkeypatch, sink):
    monkeypatch.setitem(sys.modules, sink, None)  # as if not installed: find_spec says None
    code, out, err = run(*_cli_args(tmp_path), "--log-to", sink)
    assert code == 2, err
    assert err.strip().splitlines() == [
        f"error: --log-to: {sink} needs the {sink} package: pip install 'fertility[{sink}]'"
    ]
    assert not (tmp_path / "run").exists()  # refused before anything is written


@pytest.mark.parametrize("given", ["tensorbord", "tensorboard,tensorboard"])
def test_an_unknown_or_repeated_sink_is_refused(tmp_path, run, given):
    code, out, err = run(*_cli_args(tmp_path), "--log-to", given)
    assert code == 2, err
    assert err.startswith("error: --log-to must be tensorboard, wandb, each at most once")
    assert len(err.strip().splitlines()) == 1


def test_every_number_of_a_heldout_line_is_drawn_under_its_json_path():
    from fertility.trainer.sinks import scalars

    # a held-out line with per-language figures (as an evaluation that records them writes)
    line = {
        "event": "heldout",
        "step": 4,
        "loss": 2.5,
        "documents": 3,
        "languages": {"bn": {"loss": 1.5, "bits_per_byte": 0.75}, "en": {"loss": 3}},
    }
    assert scalars(line) == {
        "heldout/loss": 2.5,
        "heldout/documents": 3.0,
        "heldout/languages/bn/loss": 1.5,
        "heldout/languages/bn/bits_per_byte": 0.75,
        "heldout/languages/en/loss": 3.0,
    }
    # a skipped step's null loss is left out; other events are not drawn
    assert scalars({"step": 5, "loss": None, "lr": 0.5, "skipped": True}) == {"train/lr": 0.5}
    assert scalars({"event": "rollback", "step": 5, "to_step": 3}) == {}
