"""The trainer's held-out loss is `fertility eval`'s per-token NLL on the same documents.

Real text (the realworld fixtures' Bengali and English lines) through a real byte-level BPE
into real shards; the trainer's figure (Trainer.heldout_loss over trainer.data.heldout_windows)
against eval's own path (eval/nll.py: prepare re-tokenizes heldout.jsonl's text, score runs
the model on its windows), which shares no code with it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from fertility.eval import nll
from fertility.tokenizers import load_tokenizer
from fertility.trainer.config import TrainConfig
from fertility.trainer.data import TokenData, build_shards, heldout_windows
from fertility.trainer.loop import Trainer
from fertility.trainer.model import config_from_preset

SEQ = 32  # shorter than many documents: eval's rolling windows are exercised


@dataclass
class Doc:
    text: str
    lang: str
    source: str
    line: int


@pytest.fixture(scope="module")
def held(rw, tmp_path_factory):
    root = tmp_path_factory.mktemp("heldout")
    tok = load_tokenizer(str(rw / "tokenizers/bpe-gpt2/tokenizer.json"))
    docs = [
        Doc(line, lang, f"{lang}.txt", i + 1)
        for lang in ("bn", "en")
        for i, line in enumerate(
            (rw / "text" / f"{lang}.txt").read_text("utf-8").splitlines()[:120]
        )
        if line.strip()
    ]
    index = build_shards(docs, tok, root / "data", heldout_fraction=0.3, workers=1, quiet=True)
    n_ids = int(tok.vocab_size) + (index["separator"] == int(tok.vocab_size))
    data = TokenData.from_dir(root / "data", "train", fingerprint=tok.fingerprint, vocab_size=n_ids)
    heldout = TokenData.from_dir(
        root / "data", "heldout", fingerprint=tok.fingerprint, vocab_size=n_ids
    )
    cfg = TrainConfig(seq_len=SEQ, micro_batch=4, steps=1, device="cpu", eval_windows=12)
    # init_std 0.5: peaked random logits, so per-token losses differ widely (at 0.02 every
    # token costs about ln V and any definition would agree)
    model_cfg = config_from_preset("tiny", n_ids, {"init_std": 0.5})
    torch.manual_seed(0)
    trainer = Trainer(
        root / "run",
        cfg.validate(),
        model_cfg,
        data,
        fingerprint=tok.fingerprint,
        heldout=heldout,
        quiet=True,
    )
    texts = [
        json.loads(x)["text"] for x in (root / "data/heldout.jsonl").read_text("utf-8").splitlines()
    ]
    return trainer, tok, texts, index["separator"]


def test_trainer_heldout_loss_is_evals_nll_on_the_same_documents(held):
    trainer, tok, texts, sep = held
    loss, tokens, docs, _ = trainer.heldout_loss()
    assert sep is not None and 2 <= docs < len(texts)  # the budget stops inside the split
    prepared = nll.prepare(texts[:docs], tok, SEQ, sep)
    assert prepared.windowed_docs > 0  # some documents span several windows
    expected = nll.score(trainer.raw, prepared)
    assert tokens == prepared.n_tokens
    # The same float32 model on the same windows; only the batch composition differs (the
    # trainer pads windows to seq_len and batches micro_batch of them, eval packs its own),
    # which changes float32 summation order in the matmuls: ~1e-6 relative per token, and
    # the mean of ~400 tokens accumulates in float64. rel 1e-5 is 10x that; counting the
    # separator targets, or scoring the stream with the previous document as context, moves
    # the figure by > 1e-2 (asserted below).
    assert loss == pytest.approx(float(expected.mean()), rel=1e-5)

    # The stream definition the trainer used before (every target, separators included,
    # windows across documents) is not eval's: this test can tell them apart.
    stream = heldout_windows(trainer.heldout.tokens, None, SEQ, tokens)
    x = torch.from_numpy(np.stack(stream[0]))
    with torch.no_grad():
        old = float(trainer.raw(x[:, :-1], x[:, 1:]))
    assert abs(old - loss) > 1e-2


def test_each_languages_loss_and_bits_per_byte_are_evals_on_its_documents(held):
    trainer, tok, texts, sep = held
    # a budget past the Bengali documents (the split holds them first), so both are scored
    before, trainer.cfg.eval_windows = trainer.cfg.eval_windows, 400
    trainer._heldout_windows = None
    try:
        loss, tokens, docs, languages = trainer.heldout_loss()
    finally:
        trainer.cfg.eval_windows, trainer._heldout_windows = before, None
    records = [
        json.loads(x)
        for x in (trainer.heldout.folder / "heldout.jsonl").read_text("utf-8").splitlines()
    ]
    first = records[:docs]
    assert set(languages) == {r["lang"] for r in first} == {"bn", "en"}
    for lang, got in languages.items():
        mine = [r["text"] for r in first if r["lang"] == lang]
        expected = nll.score(trainer.raw, nll.prepare(mine, tok, SEQ, sep))  # eval's own path
        size = sum(len(t.encode("utf-8")) for t in mine)
        assert got["tokens"] == len(expected) and got["bytes"] == size
        assert got["loss"] == pytest.approx(float(expected.mean()), rel=1e-5)
        # bits per byte: the nats of the language's tokens in bits, over its UTF-8 bytes
        bpb = float(expected.astype(np.float64).sum()) / math.log(2) / size
        assert got["bits_per_byte"] == pytest.approx(bpb, rel=1e-5)
    # the languages together are the whole figure
    assert sum(v["tokens"] for v in languages.values()) == tokens
    total = sum(v["loss"] * v["tokens"] for v in languages.values())
    assert total / tokens == pytest.approx(loss, rel=1e-12)


def test_heldout_windows_follow_evals_rule():
    # hand-worked: separator 9, documents [1 2 3 4 5] and [6]; T = 2
    stream = np.array([1, 2, 3, 4, 5, 9, 6, 9])
    windows, skips, docs, tokens = heldout_windows([stream], 9, 2, 100)
    assert [w.tolist() for w in windows] == [[9, 1, 2], [2, 3, 4], [3, 4, 5], [9, 6]]
    assert skips == [0, 0, 1, 0]  # the last window of the first document re-feeds 4
    assert (docs, tokens) == (2, 6)  # every document id scored once, no separator target
    # the budget takes whole documents: the first one already reaches 5 >= 3
    assert heldout_windows([stream], 9, 2, 3)[2:] == (1, 5)
