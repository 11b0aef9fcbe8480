"""The training contract (trainer/contract.py): four faults the gradient-flow arbiter lets
through, each refused before step 1 with one line naming the parameter: a frozen parameter,
a trainable one in no optimizer group, a tie the config states that the model does not have
(and the reverse), a loss whose mean counts ignored positions or padded vocabulary rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fertility.errors import TrainingError
from fertility.shards.format import write_shard
from fertility.trainer import loop
from fertility.trainer import model as M
from fertility.trainer.config import TrainConfig
from fertility.trainer.contract import check_contract
from fertility.trainer.data import TokenData
from fertility.trainer.model import Transformer, config_from_preset
from tests.trainer.tokfixture import CORPUS, train_tokenizer

FP = "c" * 64
VOCAB = 64  # the tiny preset pads it to 128 rows: padded rows exist to be scored by mistake


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "train-00000.bin"
    write_shard(path, rng.integers(0, VOCAB, 4_000), vocab_size=VOCAB, fingerprint=FP)
    return TokenData([path], fingerprint=FP, vocab_size=VOCAB)


def _cfg(**kw):
    base = dict(seq_len=32, micro_batch=4, steps=2, warmup_steps=1, device="cpu")
    return TrainConfig(**{**base, **kw}).validate()


def _refused(tmp_path, data, *, init=None, tie=True, **kw) -> str:
    """The one-line refusal of a run whose model `init` edits; nothing may have trained."""
    trainer = loop.Trainer(
        tmp_path / "run",
        _cfg(**kw),
        config_from_preset("tiny", VOCAB, {"tie_embeddings": tie}),
        data,
        fingerprint=FP,
        quiet=True,
        init=init,
    )
    with pytest.raises(TrainingError) as e:
        trainer.run()
    assert trainer.step == 0 and not (tmp_path / "run/metrics.jsonl").exists()
    assert not (tmp_path / "run/checkpoints").exists()
    message = str(e.value)
    assert "\n" not in message and message.startswith("training contract: "), message
    return message


def test_a_frozen_parameter_is_refused_by_name(tmp_path, data):
    def freeze(m):
        m.layers[1].mlp.up_proj.weight.requires_grad_(False)

    message = _refused(tmp_path, data, init=freeze)
    assert message.startswith("training contract: parameter layers.1.mlp.up_proj.weight is frozen")


def _forgets_the_norms(model, cfg, device):
    """An optimizer made from the matrices only: the RMSNorm gains (1-D) are in no group."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    return torch.optim.AdamW([{"params": matrices}], lr=cfg.lr)


def test_a_trainable_parameter_in_no_optimizer_group_is_refused_by_name(
    tmp_path, data, monkeypatch
):
    monkeypatch.setattr(loop, "make_optimizer", _forgets_the_norms)
    message = _refused(tmp_path, data)
    # The tiny preset's norms, counted by hand: 2 layers x (attn_norm, mlp_norm) + the final
    # norm = 5, the first in named_parameters() order being layers.0.attn_norm.weight.
    assert message.startswith(
        "training contract: parameter layers.0.attn_norm.weight (and 4 more) is trainable "
        "but in none of the optimizer's 1 parameter groups"
    ), message


def test_an_optimizer_made_for_another_copy_of_the_model_is_refused(tmp_path, data, monkeypatch):
    real = loop.make_optimizer
    monkeypatch.setattr(loop, "make_optimizer", lambda m, c, d: real(Transformer(m.cfg), c, d))
    message = _refused(tmp_path, data)
    # every parameter of the run's model is missing from it: the first one is named
    assert message.startswith("training contract: parameter tok_embeddings.weight (and "), message


def test_a_config_that_ties_the_head_to_a_separate_tensor_is_refused(tmp_path, data):
    def untie(m):  # a copy of the embedding: equal values at step 0, apart after step 1
        m.lm_head.weight = torch.nn.Parameter(m.tok_embeddings.weight.detach().clone())

    message = _refused(tmp_path, data, init=untie)
    assert message.startswith("training contract: parameter lm_head.weight is a separate tensor")
    assert "tie_embeddings = true" in message


def test_an_untied_config_whose_head_is_the_embedding_is_refused(tmp_path, data):
    def tie(m):
        m.lm_head.weight = m.tok_embeddings.weight

    message = _refused(tmp_path, data, init=tie, tie=False)
    assert message.startswith("training contract: parameter lm_head.weight is tok_embeddings")
    assert "tie_embeddings = false" in message


def _mean_over_every_position(h, weight, targets, vocab_size, ignore_index=-100, chunk=0):
    logits = F.linear(h.reshape(-1, h.shape[-1]), weight)[:, :vocab_size]
    total = F.cross_entropy(logits, targets.reshape(-1), ignore_index=ignore_index, reduction="sum")
    return total / targets.numel()  # the fault: ignored positions counted in the mean


def _scores_the_padded_rows(h, weight, targets, vocab_size, ignore_index=-100, chunk=0):
    logits = F.linear(h.reshape(-1, h.shape[-1]), weight)  # the fault: not cut to vocab_size
    return F.cross_entropy(logits, targets.reshape(-1), ignore_index=ignore_index)


def _does_not_skip_ignored(h, weight, targets, vocab_size, ignore_index=-100, chunk=0):
    logits = F.linear(h.reshape(-1, h.shape[-1]), weight)[:, :vocab_size]
    return F.cross_entropy(logits, targets.reshape(-1), ignore_index=-1)  # the fault


@pytest.mark.parametrize(
    "fault, says",
    [
        (_mean_over_every_position, "counts ignored positions or padded vocabulary rows"),
        (_scores_the_padded_rows, "counts ignored positions or padded vocabulary rows"),
        (_does_not_skip_ignored, "the loss fails on targets marked ignored (-100)"),
    ],
)
def test_a_loss_that_counts_ignored_positions_or_padded_rows_is_refused(
    tmp_path, data, monkeypatch, fault, says
):
    # Training windows have no ignored target, so these train as the honest loss would;
    # `fertility eval` and the held-out loss pad windows with ignored targets and would be off.
    monkeypatch.setattr(M, "chunked_lm_loss", fault)
    message = _refused(tmp_path, data)
    assert says in message, message


def test_the_honest_loss_matches_a_mean_over_the_kept_targets_worked_by_hand():
    """The check's premise, by a second method: the model's loss over a batch with ignored
    targets is the float64 mean of -log softmax over the kept targets (computed from the
    logits the model returns without targets: another code path, the plain head)."""
    torch.manual_seed(0)
    model = Transformer(config_from_preset("tiny", VOCAB))
    ids = torch.randint(0, VOCAB, (2, 16))
    targets = torch.randint(0, VOCAB, (2, 16))
    targets[0, 10:] = -100  # a padded tail
    targets[1, ::4] = -100  # skipped predictions
    with torch.no_grad():
        loss = float(model(ids, targets))
        logp = model(ids).double().log_softmax(-1)
    kept = [
        -float(logp[b, t, targets[b, t]]) for b in range(2) for t in range(16) if targets[b, t] >= 0
    ]
    assert len(kept) == 10 + 12
    # float32 against float64 over 22 terms of ~4 nats: ~1e-7 relative (measured 1e-8)
    assert loss == pytest.approx(sum(kept) / len(kept), rel=1e-5)


def test_an_honest_untied_model_with_an_embedding_group_passes():
    """Three optimizer groups (embedding_lr) and two head tensors: nothing to refuse."""
    model = Transformer(config_from_preset("tiny", VOCAB, {"tie_embeddings": False}))
    cfg = _cfg(embedding_lr=1e-2)
    optimizer = loop.make_optimizer(model, cfg, torch.device("cpu"))
    assert len(optimizer.param_groups) == 3
    batch = (torch.randint(0, VOCAB, (4, 32)), torch.randint(0, VOCAB, (4, 32)))
    check_contract(model, optimizer, model.cfg, batch)  # returns; a breach would raise


CONFIG = """preset = "tiny"
seq_len = 64
micro_batch = 4
warmup_steps = 1
device = "cpu"
"""


def test_pretrain_refuses_a_breach_with_one_line_and_exit_2(run, tmp_path, monkeypatch):
    tok = train_tokenizer(tmp_path / "tok/tokenizer.json")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG)
    monkeypatch.setattr(loop, "make_optimizer", _forgets_the_norms)
    out_dir = tmp_path / "run"
    code, out, err = run(
        "pretrain", *CORPUS, "-t", tok, "--out", out_dir, "--config", cfg, "--steps", "2",
        "--force", "--quiet",
    )  # fmt: skip
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert [l for l in lines if l.startswith("error: ")] == [lines[-1]], err
    assert lines[-1].startswith(
        "error: training contract: parameter layers.0.attn_norm.weight (and 4 more) is "
        "trainable but in none of the optimizer's 1 parameter groups"
    ), lines[-1]
    assert not (out_dir / "checkpoints").exists() and not (out_dir / "metrics.jsonl").exists()
