"""WordPiece spans from the pieces' lengths (fertility.tokenizers.wordpiece, the measuring
path of HFTokenizer.encode_flat) against the library's own offsets (the path it replaces,
forced by turning it off): the same ids, spans and counts, token for token, on MiniLM's real
tokenizer.json and real text of 13 languages under every setting of BERT's normaliser and
none; on texts that test its assumptions one by one; and the library's answer wherever the
lengths cannot be shown exact."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fertility.tokenizers import load_tokenizer
from fertility.tokenizers.wordpiece import GONE, LETTER, MIXED, PUNCT, SPACE
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

MINILM = "minilm/tokenizer.json"
SETTINGS = [  # BERT's normaliser as MiniLM ships it, then each setting changed
    {},
    {"lowercase": False},  # cased: no NFD, accents kept
    {"lowercase": False, "strip_accents": True},
    {"strip_accents": False},  # lower-cased, accents kept
    {"handle_chinese_chars": False},
    {"clean_text": False},
    None,  # no normaliser at all
]
EDGES = [
    "İstanbul ΟΔΟΣ straße ﬁne Ａ",  # lower case of two characters, final sigma, ligature
    "한국어 텍스트",  # NFD: each syllable three jamo
    "café naïve a\u0301\u0323 e\u0323\u0301",  # combining marks, in and out of canonical order
    "ক্ষ বাংলা x\u200dy \u200c",  # virama, ZWJ and ZWNJ (format characters: removed)
    "中文字符和English混合",  # handle_chinese_chars: each Han character a word
    "\x00nul\x07bell \ufffd tab\tnew\nline\r\n  ",  # controls and whitespace
    "a" * 150 + " short",  # longer than max_input_chars_per_word: one unknown token
    "𓀀𓀁 hieroglyph 😀",  # characters the vocabulary lacks: unknown tokens
    "##x #hash [UNK] [CLS] ...!?",  # the continuing prefix and the specials as text
    " ",
    "",
    "x",
]


def _minilm(rw, tmp_path, setting):  # noqa: F811
    obj = json.loads((rw / "tokenizers" / MINILM).read_text("utf-8"))
    if setting is None:
        obj["normalizer"] = None
    else:
        obj["normalizer"].update(setting)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(obj), "utf-8")
    return load_tokenizer(str(path))


def _library(tok, texts):
    """encode_flat through the library's offsets (the pieces' path turned off)."""
    pieces, tok._wordpiece = tok._wordpiece, None
    try:
        return tok.encode_flat(texts)
    finally:
        tok._wordpiece = pieces


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def _real_batches(rw):  # noqa: F811
    """Each language's first 600 lines as they are, then joined five to a document."""
    for path in sorted((rw / "text").glob("*.txt")):
        lines = [x for x in path.read_text("utf-8").splitlines() if x.strip()][:600]
        yield path.name, lines
        yield path.name, [" ".join(lines[i : i + 5]) for i in range(0, len(lines), 5)]


@pytest.mark.realworld
@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_pieces_give_the_librarys_spans_on_real_text(rw, tmp_path, setting):  # noqa: F811
    tok = _minilm(rw, tmp_path, setting)
    assert tok._wordpiece is not None
    for name, batch in _real_batches(rw):
        ids, _, _, counts = _library(tok, batch)
        bad = tok._wordpiece.spans(batch, ids, counts).bad
        assert not bad.any(), (name, [batch[i][:40] for i in np.flatnonzero(bad)[:3]])
        assert _same(tok.encode_flat(batch), _library(tok, batch)), name
    for text in EDGES:  # each alone (a text's first and last tokens), then all at once
        assert _same(tok.encode_flat([text]), _library(tok, [text])), repr(text)
    assert _same(tok.encode_flat(EDGES), _library(tok, EDGES))
    # the detail documents' pre-tokens (the words) are the library's pre-tokenizer's after
    # its normaliser, with character offsets (HFTokenizer.pre_tokenize, one call per text)
    pre = tok.encode_flat_checked(EDGES, np.ones(len(EDGES), dtype=bool))[1].pre
    assert pre is not None and pre.docs.tolist() == list(range(len(EDGES)))
    spans, per_text = tok.pre_tokenize(EDGES)
    assert pre.per_doc.tolist() == per_text.tolist()
    assert pre.spans.tolist() == spans.tolist()


@pytest.mark.realworld
def test_characters_classed_by_the_librarys_own_parts(rw, tmp_path):  # noqa: F811
    """MiniLM (lower case, accents stripped): by hand, what BERT's normaliser and
    pre-tokenizer make of single characters."""
    spans = _minilm(rw, tmp_path, {})._wordpiece
    assert spans._classify("A") == (LETTER, 1)
    assert spans._classify("é") == (LETTER, 1)  # NFD e + U+0301, the accent stripped
    assert spans._classify("İ") == (LETTER, 1)  # NFD's I + U+0307, stripped, lower-cased
    assert spans._classify("한") == (LETTER, 3)  # three jamo
    assert spans._classify("\u0301") == (GONE, 0)  # a mark alone: stripped
    assert spans._classify("\u200d") == (GONE, 0)  # a format character: cleaned away
    assert spans._classify("\u3000") == (SPACE, 0)
    assert spans._classify(",") == (PUNCT, 1)
    assert spans._classify("$") == (PUNCT, 1)  # BERT counts ASCII symbols as punctuation
    assert spans._classify("中")[1] == 1
    # U+1D165 (a musical stem) keeps a combining class after NFD: canonical ordering
    # could move it, so its texts are the library's
    assert spans._classify("\U0001d165") == (MIXED, 0)
    # accents kept (no NFD): İ lower-cases to two characters, i and U+0307
    kept = _minilm(rw, tmp_path, {"strip_accents": False})._wordpiece
    assert kept._classify("İ") == (LETTER, 2)
    assert kept._classify("\U0001d165") == (LETTER, 1)  # nothing reorders it there


@pytest.mark.realworld
def test_the_library_answers_where_pieces_cannot_be_exact(rw, tmp_path):  # noqa: F811
    """A text with a character whose place canonical ordering decides, and one holding an
    added (non-special) token, which the library takes out before its pre-tokenizer: those
    texts are marked and get the library's offsets; the others keep the pieces'."""
    obj = json.loads((rw / "tokenizers" / MINILM).read_text("utf-8"))
    obj["added_tokens"].append(
        {
            "id": len(obj["model"]["vocab"]),
            "content": "fooword",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": True,
            "special": False,
        }
    )
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(obj), "utf-8")
    tok = load_tokenizer(str(path))
    texts = ["plain text", "a\U0001d165\u0301b stem", "say fooword now", "more plain text"]
    ids, _, _, counts = _library(tok, texts)
    bad = tok._wordpiece.spans(texts, ids, counts).bad
    assert bad.tolist() == [False, True, True, False]
    assert _same(tok.encode_flat(texts), _library(tok, texts))
    # and no pre-tokens of theirs come with the encode (the measuring thread asks for them)
    pre = tok.encode_flat_checked(texts, np.ones(len(texts), dtype=bool))[1].pre
    assert pre is not None and pre.docs.tolist() == [0, 3]


@pytest.mark.realworld
@pytest.mark.parametrize(
    "change",
    [
        {"pre_tokenizer": {"type": "Whitespace"}},
        {"normalizer": {"type": "Sequence", "normalizers": [{"type": "Lowercase"}]}},
        {"model": "prefix"},  # a continuing prefix of letters: a word may begin with it
    ],
    ids=["whitespace", "sequence", "prefix"],
)
def test_other_parts_keep_the_librarys_offsets(rw, tmp_path, change):  # noqa: F811
    obj = json.loads((rw / "tokenizers" / MINILM).read_text("utf-8"))
    if change.get("model") == "prefix":
        obj["model"]["continuing_subword_prefix"] = "zz"
    else:
        obj.update(change)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(obj), "utf-8")
    tok = load_tokenizer(str(path))
    assert tok._wordpiece is None
    texts = ["plain text", "বাংলা লেখা, 中文 и текст", ""]
    assert _same(tok.encode_flat(texts), _library(tok, texts))
    # there the detail documents' pre-tokens come from the library's word ids (the path the
    # others took before): still the library's pre-tokenizer's
    pre = tok.encode_flat_checked(texts, np.ones(len(texts), dtype=bool))[1].pre
    spans, per_text = tok.pre_tokenize(texts)
    assert pre is not None and pre.docs.tolist() == [0, 1, 2]
    assert pre.per_doc.tolist() == per_text.tolist() and pre.spans.tolist() == spans.tolist()
