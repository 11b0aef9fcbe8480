"""--log-to: the numbers of metrics.jsonl, read back from TensorBoard's event files with
TensorBoard's own reader and from an offline W&B run's records; a missing package or an unknown
sink is one line, exit 2.

W&B (measured with wandb 0.31.0 on the 2-core test machine): the test extra installs it (69 MB
with its dependencies, 24 s from the index); offline (WANDB_MODE=offline) a run needs no
network or login, and init to finish takes ~0.7 s after a 2.6 s import. wandb no longer ships
a Python reader for its run files (wandb.sdk.internal.datastore, which older releases had,
is not in 0.30 or 0.31; their Go service reads the files), so `_wandb_records` reads the
file's framing itself (LevelDB's log format, which the .wandb file is: 7-byte headers in
32 KiB blocks, after a 7-byte ":W&B" file header) and decodes every record with wandb's own
protobuf message, wandb.proto's Record: the numbers are those wandb wrote, in its JSON, so
exact. The service wandb starts (wandb-core) outlives
run.finish() until wandb.teardown() or exit, and only then completes the file; the test tears
it down after each run and checks that no process is left.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import time

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from fertility.shards.format import write_shard
from fertility.trainer import checkpoint as ck
from fertility.trainer.config import TrainConfig
from fertility.trainer.data import TokenData
from fertility.trainer.loop import Trainer
from fertility.trainer.model import config_from_preset

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


def _run(tmp_path, shards, steps, resume=False, log_to=("tensorboard",)):
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
        log_to=list(log_to),
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


def _expected(run_dir, cast=lambda v: float(np.float32(v))):
    """metrics.jsonl as (step, value) per tag, in TensorBoard's float32 unless `cast` says."""
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
            want.setdefault(tag, []).append((line["step"], cast(value)))
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


WANDB_ENV = {
    "WANDB_MODE": "offline",  # no network, no login
    "WANDB_SILENT": "true",
    "WANDB_CONSOLE": "off",  # leave pytest's stdout alone
    "WANDB_DISABLE_GIT": "true",
    "WANDB_DISABLE_CODE": "true",
    "WANDB__DISABLE_STATS": "true",  # no system-metrics sampler
    "WANDB_ERROR_REPORTING": "false",  # no crash reports sent
}


def _wandb_records(path):
    """wandb's protobuf Records of one .wandb file (the framing: see the module docstring)."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, block, pos, parts = path.read_bytes(), 32768, 7, b""
    assert data[:7] == b":W&B\xe1\xbe\x00"  # ident, magic 0xBEE1, version 0
    while pos + 7 <= len(data):
        room = block - pos % block
        _crc, n, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if room < 7 or kind == 0:  # a block's zero-padded tail
            pos += room
            continue
        parts += data[pos + 7 : pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):  # FULL, or LAST of FIRST/MIDDLE/LAST
            record = Record()
            record.ParseFromString(parts)
            yield record
            parts = b""


def _wandb_history(path):
    """(step, value) per key of the history rows: W&B's own "_" keys (time, step) left out."""
    got: dict[str, list] = {}
    for r in _wandb_records(path):
        if r.WhichOneof("record_type") == "history":
            for item in r.history.item:
                key = item.key or "/".join(item.nested_key)  # wandb-core writes the latter
                if not key.startswith("_"):
                    got.setdefault(key, []).append(
                        (r.history.step.num, json.loads(item.value_json))
                    )
    return got


def _descendants_named(word):
    """Processes below this one whose command line holds `word` (Linux /proc)."""
    parent = {}
    for d in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{d}/stat").read()
            parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError):
            continue
    found = []
    for pid in parent:
        p = pid
        while p in parent and p != os.getpid():
            p = parent[p]
        if p == os.getpid() and pid != p:
            try:
                if word in open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"):
                    found.append(pid)
            except OSError:
                continue
    return found


def _wandb_file(run_dir, run_id, runs):
    """The .wandb file of the `runs`-th process that wrote this run (W&B's offline folders
    are named by start time, so they sort in order)."""
    files = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    assert [f.name for f in files] == [f"run-{run_id}.wandb"] * runs
    return files[-1]


def _wandb_run(path):
    (run,) = [r.run for r in _wandb_records(path) if r.WhichOneof("record_type") == "run"]
    return run


def _run_wandb(tmp_path, shards, **kw):
    """A run with --log-to wandb, then wandb's service ended: by then its file is complete
    (wandb-core writes it to the end only as it exits) and no process may be left."""
    import wandb

    try:
        _run(tmp_path, shards, steps=5, log_to=["wandb"], **kw)
        assert _descendants_named("wandb-core")  # the process the check below sees end
    finally:
        wandb.teardown()
    deadline = time.monotonic() + 10
    while _descendants_named("wandb") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _descendants_named("wandb")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_wandb_offline_holds_the_numbers_of_metrics_jsonl(tmp_path, shards, monkeypatch):
    for name, value in WANDB_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))  # nothing under ~
    run_dir = tmp_path / "run"
    _run_wandb(tmp_path, shards)
    run_id = (run_dir / "wandb-id").read_text().strip()
    first = _wandb_file(run_dir, run_id, 1)
    got, want = _wandb_history(first), _expected(run_dir, cast=float)
    assert len(want["train/loss"]) == 5 and len(want["heldout/loss"]) == 2
    assert "train/mfu" not in got  # null on the CPU: left out
    assert got == want  # JSON numbers both sides: exact
    run = _wandb_run(first)
    assert (run.run_id, run.display_name, run.project) == (run_id, "run", "fertility")

    # --resume from step 3: the same W&B run (the id kept in wandb-id), steps 4 and 5 again
    shutil.rmtree(ck.step_dir(run_dir, 5))
    # W&B names an offline run's folder by the second it started: the resumed run must start
    # in a later second than the first, or both would write one folder
    time.sleep(1.01 - time.time() % 1)
    _run_wandb(tmp_path, shards, resume=True)
    second = _wandb_file(run_dir, run_id, 2)
    assert _wandb_run(second).run_id == run_id
    want = {
        k: [(s, v) for s, v in pairs if s > 3] for k, pairs in _expected(run_dir, float).items()
    }
    assert _wandb_history(second) == {k: v for k, v in want.items() if v}


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
