"""The small tokenizers the tests train themselves (never downloaded): byte-level BPE
tokenizer.json files and SentencePiece models."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers


def byte_level_bpe(
    lines: Iterable[str],
    vocab_size: int,
    *,
    pre_tokenizer=None,
    normalizer=None,
    specials: Iterable[str] = (),
    path: str | Path | None = None,
) -> Tokenizer:
    """A byte-level BPE trained on `lines`: GPT-2's split unless `pre_tokenizer` is given,
    ByteLevel decoder, the 256 byte symbols as initial alphabet. Saved to `path` if given."""
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer or pre_tokenizers.ByteLevel(
        add_prefix_space=False, use_regex=True
    )
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        list(lines),
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(specials),
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tok.save(str(path))
    return tok


def sentencepiece_bpe(lines: Iterable[str], vocab_size: int, **settings) -> bytes:
    """A SentencePiece BPE model trained on `lines` (the model file's bytes), with
    SentencePiece's own `settings` (byte_fallback, normalization_rule_name, ...)."""
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=vocab_size,
        model_type="bpe",
        hard_vocab_limit=False,
        minloglevel=2,
        **settings,
    )
    return out.getvalue()
