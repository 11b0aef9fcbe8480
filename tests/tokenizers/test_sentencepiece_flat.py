"""SentencePiece's encode_flat from piece lengths (SentencePieceTokenizer._flat_from_lengths)
against the library's own offset mapping (the path it replaces, forced by turning the lengths
off): the same ids, spans and counts on the real Mistral models and real text of 13
languages, on texts that test its assumptions, and the library's answer wherever the
lengths cannot be exact (another normaliser, whitespace the normaliser removes, an unknown
piece)."""

from __future__ import annotations

import numpy as np
import pytest

from fertility.tokenizers import load_tokenizer
from tests.bpe import sentencepiece_bpe
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

MISTRAL = ["mistral/tokenizer.model.v1", "mistral/mistral_instruct_tokenizer_240323.model.v3"]
EDGES = [
    " leading space",
    "double  space and trailing ",
    "\ttab\tand\nnewline\r\n",
    "😀 emoji 🇧🇩 and rare Han 𠀀 𪚥 (byte pieces)",
    "▁ the escape character itself ▁▁",
    " ",
    "a",
    "\x00x\x7f",
    "ক্ষ বাংলা x\u200dy",
    "ſ ﬁ Ａ (what NFKC would change)",
]


def _library(tok, texts):
    """encode_flat through the library's offset mapping."""
    lengths = tok.__dict__.get("_piece_chars")
    tok.__dict__["_piece_chars"] = None  # the cached table, turned off
    try:
        return tok.encode_flat(texts)
    finally:
        tok.__dict__["_piece_chars"] = lengths


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.realworld
@pytest.mark.parametrize("model", MISTRAL)
def test_lengths_give_the_librarys_spans_on_real_text(rw, model):  # noqa: F811
    tok = load_tokenizer(str(rw / "tokenizers" / model))
    for path in sorted((rw / "text").glob("*.txt")):  # each language's first 1,500 lines
        lines = [x for x in path.read_text("utf-8").splitlines() if x.strip()][:1500]
        for i in range(0, len(lines), 500):
            batch = lines[i : i + 500]
            fast = tok._flat_from_lengths(batch)
            assert fast is not None, (path.name, i)  # taken: no fallback on real text
            assert _same(fast, _library(tok, batch)), (path.name, i)
    fast = tok._flat_from_lengths(EDGES)
    assert fast is not None and _same(fast, _library(tok, EDGES))
    for text in EDGES:  # each alone too: a text's first and last tokens
        assert _same(tok.encode_flat([text]), _library(tok, [text])), repr(text)


def _train(tmp_path, name: str, **settings) -> str:
    text = ["আমার সোনার বাংলা, আমি তোমায় ভালোবাসি।", "The quick brown fox jumps over it."] * 50
    path = tmp_path / f"{name}.model"
    path.write_bytes(sentencepiece_bpe(text, 400, **settings))
    return str(path)


def test_the_library_answers_where_lengths_cannot_be_exact(tmp_path):
    """NFKC (the trainer's default normaliser) maps 'ﬁ' to 'fi': no lengths at all; the
    identity normaliser removing extra whitespace, on a text that has some: that batch
    goes to the library; an unknown piece (no byte fallback, a character never seen): so
    does its batch. Each answer equals the library's."""
    nfkc = load_tokenizer(_train(tmp_path, "nfkc", byte_fallback=True))
    assert nfkc._piece_chars is None and nfkc._flat_from_lengths(["ﬁ a"]) is None
    squeeze = load_tokenizer(
        _train(
            tmp_path,
            "squeeze",
            byte_fallback=True,
            normalization_rule_name="identity",
            remove_extra_whitespaces=True,
        )
    )
    assert squeeze._flat_from_lengths(["one space"]) is not None
    assert squeeze._flat_from_lengths(["one space", "two  spaces"]) is None
    unknown = load_tokenizer(
        _train(tmp_path, "unknown", byte_fallback=False, normalization_rule_name="identity")
    )
    assert unknown._flat_from_lengths(["quick"]) is not None
    assert unknown._flat_from_lengths(["quick", "zebra ж"]) is None
    for tok in (nfkc, squeeze, unknown):
        texts = ["ﬁ a", "two  spaces ", "zebra ж", "আমার বাংলা"]
        assert _same(tok.encode_flat(texts), _library(tok, texts))


@pytest.mark.parametrize("split", [True, False])
def test_pre_tokenize_cuts_at_whitespace_or_not_at_all(tmp_path, split):
    """pre_tokenize of a batch, worked by hand: at whitespace (each piece takes the space
    before it, SentencePiece's ▁), or, for a model trained with split_by_whitespace=false,
    each non-empty text whole; an empty text has none."""
    lines = ["the quick brown fox", "a b c d", "bangla বাংলা text"] * 50
    path = tmp_path / "sp.model"
    path.write_bytes(sentencepiece_bpe(lines, 60, split_by_whitespace=split))
    spans, counts = load_tokenizer(str(path)).pre_tokenize(["ab cd", "", "x"])
    if split:
        assert spans.tolist() == [[0, 2], [2, 5], [0, 1]] and counts.tolist() == [2, 0, 1]
    else:
        assert spans.tolist() == [[0, 5], [0, 1]] and counts.tolist() == [1, 0, 1]
