"""Checkpoint folders: round trip, atomic writes, keep-last-K, corrupt ones skipped."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from fertility.errors import EvalError, TrainingError
from fertility.trainer import checkpoint as ck
from fertility.trainer.model import Transformer, config_from_preset


def _model(seed=0):
    torch.manual_seed(seed)
    return Transformer(config_from_preset("tiny", 50))


def _save(run, step, model, keep_last=3, **extra):
    state = {
        "optimizer": {"lr": torch.tensor(0.1)},
        "cursor": {"epoch": 0, "position": step},
        "rng": ck.capture_rng(),
        **extra,
    }
    manifest = {
        "tokens_seen": step * 100,
        "tokenizer_fingerprint": "f" * 64,
        "model": model.cfg.to_dict(),
        "config": {"seed": 0},
    }
    return ck.save_checkpoint(run, step, model.state_dict(), state, manifest, keep_last)


def test_round_trip_with_tied_weights(tmp_path):
    model = _model()
    path = _save(tmp_path, 100, model)
    assert path == tmp_path / "checkpoints" / "step-00000100"
    assert sorted(p.name for p in path.iterdir()) == [
        "model.safetensors",
        "optimizer.pt",
        "state.json",
    ]
    manifest = json.loads((path / "state.json").read_text())
    assert manifest["step"] == 100 and manifest["tokens_seen"] == 10000
    loaded, m2 = ck.load_model(tmp_path)
    assert m2["step"] == 100
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert loaded.lm_head.weight is loaded.tok_embeddings.weight  # still tied
    state = ck.load_train_state(path)
    assert state["cursor"] == {"epoch": 0, "position": 100}


def test_rng_states_restore_exactly(tmp_path):
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    path = _save(tmp_path, 1, _model())
    expected = (torch.rand(5), np.random.rand(5), [random.random() for _ in range(5)])
    torch.manual_seed(99), np.random.seed(99), random.seed(99)
    ck.restore_rng(ck.load_train_state(path)["rng"])  # loaded with weights_only=True
    got = (torch.rand(5), np.random.rand(5), [random.random() for _ in range(5)])
    assert torch.equal(got[0], expected[0])
    assert np.array_equal(got[1], expected[1]) and got[2] == expected[2]


def test_keep_last_k(tmp_path):
    model = _model()
    for step in (10, 20, 30, 40, 50):
        _save(tmp_path, step, model, keep_last=2)
    assert [s for s, _ in ck.list_checkpoints(tmp_path)] == [40, 50]


def test_interrupted_write_leaves_no_checkpoint(tmp_path, monkeypatch):
    model = _model()
    _save(tmp_path, 10, model)

    def dies(*a, **k):
        raise KeyboardInterrupt  # as if the process stopped in the middle of the write

    monkeypatch.setattr(ck.torch, "save", dies)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, 20, model)
    monkeypatch.undo()
    leftovers = [p.name for p in (tmp_path / "checkpoints").iterdir()]
    assert "step-00000020" not in leftovers and any(n.startswith(".tmp-") for n in leftovers)
    path, manifest = ck.latest_checkpoint(tmp_path)
    assert manifest["step"] == 10
    ck.remove_partial(tmp_path)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-00000010"]


@pytest.mark.parametrize(
    "damage", ["flip_weights", "truncate_optimizer", "drop_manifest", "drop_optimizer"]
)
def test_corrupt_checkpoint_skipped_for_the_previous(tmp_path, damage):
    model = _model()
    _save(tmp_path, 10, model)
    newest = _save(tmp_path, 20, _model(seed=1))
    if damage == "flip_weights":
        raw = bytearray((newest / "model.safetensors").read_bytes())
        raw[-3] ^= 0xFF  # one bit pattern in the last weight: loadable, but wrong
        (newest / "model.safetensors").write_bytes(bytes(raw))
    elif damage == "truncate_optimizer":
        raw = (newest / "optimizer.pt").read_bytes()
        (newest / "optimizer.pt").write_bytes(raw[: len(raw) // 2])
    elif damage == "drop_manifest":
        (newest / "state.json").unlink()
    else:
        (newest / "optimizer.pt").unlink()
    warnings = []
    path, manifest = ck.latest_checkpoint(tmp_path, warn=warnings.append)
    assert manifest["step"] == 10 and path.name == "step-00000010"
    assert len(warnings) == 1 and "step-00000020" in warnings[0]
    with pytest.raises(TrainingError):
        ck.verify_checkpoint(newest)
    loaded, _ = ck.load_model(tmp_path)  # eval/export also fall back to the good one
    assert torch.equal(loaded.tok_embeddings.weight, model.tok_embeddings.weight)


def test_load_model_errors(tmp_path):
    with pytest.raises(EvalError, match="no valid checkpoint"):
        ck.load_model(tmp_path)
    _save(tmp_path, 10, _model())
    with pytest.raises(EvalError, match="step 30"):
        ck.load_model(tmp_path, step=30)
    assert ck.load_model(tmp_path, step=10)[1]["step"] == 10


def test_same_step_written_again_replaces_it(tmp_path):
    a, b = _model(0), _model(1)
    _save(tmp_path, 10, a)
    _save(tmp_path, 10, b)  # after a rollback the step is reached again
    loaded, _ = ck.load_model(tmp_path, step=10)
    assert torch.equal(loaded.tok_embeddings.weight, b.tok_embeddings.weight)
