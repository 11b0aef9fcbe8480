"""Tokenizer adapters, checked against the raw libraries and against spans worked out by hand.

Tiny tokenizers are trained here on a few KB of Bengali and English; nothing is downloaded.
"""

from __future__ import annotations

import base64
import json
import random
import signal
import socket
import sys

import numpy as np
import pytest
import sentencepiece as spm
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from fertility.errors import TokenizerError
from fertility.tokenizers import load_tokenizer
from fertility.tokenizers.base import Encoded
from fertility.tokenizers.spec import default_label, parse_tokenizer_arg, split_pattern_suffix
from tests.bpe import byte_level_bpe, sentencepiece_bpe
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

BENGALI = [
    "আমি বাংলায় গান গাই।",
    "আমার সোনার বাংলা, আমি তোমায় ভালোবাসি।",
    "চিরদিন তোমার আকাশ, তোমার বাতাস, আমার প্রাণে বাজায় বাঁশি।",
    "বাংলাদেশের রাজধানী ঢাকা একটি ব্যস্ত শহর।",
    "কলকাতা পশ্চিমবঙ্গের রাজধানী এবং একটি পুরনো শহর।",
    "রবীন্দ্রনাথ ঠাকুর সাহিত্যে নোবেল পুরস্কার পেয়েছিলেন।",
    "আজ আকাশে মেঘ করেছে, বিকেলে বৃষ্টি হতে পারে।",
    "ছেলেরা মাঠে ফুটবল খেলছে আর মেয়েরা গান গাইছে।",
    "আমরা সবাই মিলে নদীর ধারে বেড়াতে গেলাম।",
    "বইটি পড়তে আমার খুব ভালো লেগেছে।",
    "র\u200d্যাব শব্দে যুক্তাক্ষর আছে।",
]
ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "Tokenizers split text into pieces before they merge bytes.",
    "A vowel sign should stay with the consonant it follows.",
    "We measure characters per token for every script in the corpus.",
    "The river was wide and the boats were slow in the morning.",
    "Children played football in the field while it rained.",
    "She read the book twice because she liked it so much.",
    "Every language deserves a fair share of the vocabulary.",
]
CORPUS = (BENGALI + ENGLISH) * 8  # ~9 KB
SAMPLES = [
    "আমার সোনার বাংলা, the quick fox.",
    "বাংলাদেশ 😀 Zoë €5",
    "",
    " leading and  double  spaces ",
    "র\u200d্যাব",
]


@pytest.fixture(autouse=True)
def _no_hang():
    """Fail instead of hanging if anything ever waits on the network."""

    def timeout(signum, frame):
        raise TimeoutError("test took longer than 60 s")

    old = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def char_of_byte(text: str) -> list[int]:
    """The index of the character each UTF-8 byte of `text` belongs to (plain Python)."""
    out = []
    for i, ch in enumerate(text):
        out += [i] * len(ch.encode("utf-8"))
    return out


def spans_from_bytes(text: str, token_bytes: list[bytes]) -> list[tuple[int, int]]:
    """Expected spans when the tokens' bytes concatenate to the text's UTF-8."""
    owner, pos, spans = char_of_byte(text), 0, []
    for b in token_bytes:
        spans.append((owner[pos], owner[pos + len(b) - 1] + 1))
        pos += len(b)
    assert pos == len(text.encode("utf-8"))
    return spans


def spans(enc: Encoded) -> list[tuple[int, int]]:
    return list(zip(enc.starts.tolist(), enc.ends.tolist()))


# --- Hugging Face byte-level BPE ---------------------------------------------------------------


def train_bytelevel() -> Tokenizer:
    tok = byte_level_bpe(CORPUS, 500, specials=["<|endoftext|>"])
    return tok


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hf_bytelevel")
    train_bytelevel().save(str(d / "tokenizer.json"))
    return d


def test_hf_ids_agree_with_library(hf_dir):
    raw = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    ours = load_tokenizer(str(hf_dir))
    assert ours.kind == "hf" and ours.label == hf_dir.name
    for text, enc in zip(SAMPLES, ours.encode_batch(SAMPLES)):
        assert (
            enc.ids.dtype == np.int64
            and enc.starts.dtype == np.int64
            and enc.ends.dtype == np.int64
        )
        assert enc.ids.tolist() == raw.encode(text, add_special_tokens=False).ids
        assert ours.decode(enc.ids) == text


def test_hf_bytelevel_offsets_cover_the_bytes_of_each_token(hf_dir):
    tok = load_tokenizer(str(hf_dir / "tokenizer.json"))
    raw = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    for text, enc in zip(SAMPLES, tok.encode_batch(SAMPLES)):
        pieces = [tok.token_bytes(i) for i in enc.ids]
        assert b"".join(pieces) == text.encode("utf-8")
        assert spans(enc) == spans_from_bytes(text, pieces)
        # the library's own character offsets agree (GPT-2 has no offset trimming here)
        assert spans(enc) == raw.encode(text, add_special_tokens=False).offsets


def test_hf_bytelevel_split_char_tokens_all_span_that_char(hf_dir):
    tok = load_tokenizer(str(hf_dir))
    (enc,) = tok.encode_batch(["a😀"])  # no emoji in training: four single-byte tokens
    assert [tok.token_bytes(i) for i in enc.ids] == [b"a", b"\xf0", b"\x9f", b"\x98", b"\x80"]
    assert spans(enc) == [(0, 1), (1, 2), (1, 2), (1, 2), (1, 2)]


def test_hf_partial_mask_marks_incomplete_utf8(hf_dir):
    tok = load_tokenizer(str(hf_dir))
    raw = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    mask = tok.partial_mask()
    assert mask.shape == (tok.vocab_size,) and mask.dtype == bool
    # Second method: the ByteLevel decoder replaces incomplete UTF-8 with U+FFFD.
    expected = [("\ufffd" in raw.decode([i])) for i in range(tok.vocab_size)]
    assert mask.tolist() == expected
    assert mask[raw.token_to_id("ð")]  # byte 0xF0 alone
    assert not mask[raw.token_to_id("Ġthe")]


def test_hf_pre_tokenize_uses_gpt2_split(hf_dir):
    tok = load_tokenizer(str(hf_dir))
    assert tok.pre_tokenize(["বাংলা"])[0].tolist() == [[0, 1], [1, 3], [3, 4], [4, 5]]
    assert tok.pre_tokenize(["the fox"])[0].tolist() == [[0, 3], [3, 7]]
    cfg = tok.config()
    assert cfg["pattern"] == "gpt2" and cfg["byte_level"] and cfg["model"] == "bpe"
    assert tok.special_tokens == {"<|endoftext|>": 0} and tok.unk_id is None


def test_hf_special_token_text_is_ordinary_text(hf_dir):
    tok = load_tokenizer(str(hf_dir))
    (enc,) = tok.encode_batch(["a<|endoftext|>b"])
    assert 0 not in enc.ids.tolist()
    assert tok.decode(enc.ids) == "a<|endoftext|>b"


def test_hf_truncation_padding_and_post_processor_are_ignored(tmp_path, hf_dir):
    tok = train_bytelevel()
    tok.enable_truncation(max_length=4)
    tok.enable_padding(length=64)
    bos = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", bos)]
    )
    tok.save(str(tmp_path / "tokenizer.json"))
    raw = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    ours = load_tokenizer(str(tmp_path / "tokenizer.json"))
    text = CORPUS[1] + " " + CORPUS[12]
    (enc,) = ours.encode_batch([text])
    expected = raw.encode(text, add_special_tokens=False).ids
    assert len(expected) > 10
    assert enc.ids.tolist() == expected  # not cut at 4, not padded to 64, no BOS
    assert ours.fingerprint != load_tokenizer(str(hf_dir)).fingerprint  # post_processor differs


def test_hf_offsets_are_not_trimmed_and_nfc_texts_are_mapped(tmp_path):
    # GPT-2's real file trims the leading space out of a token's offsets (post-processor);
    # an NFC normaliser changes a decomposed "é" (e + U+0301) into one character.
    tok = train_bytelevel()
    tok.normalizer = normalizers.NFC()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.save(str(tmp_path / "tokenizer.json"))
    ours = load_tokenizer(str(tmp_path))
    the = tok.token_to_id("Ġthe")
    decomposed, composed = "a the cafe\u0301", "a the caf\u00e9"
    assert tok.encode(composed, add_special_tokens=False).offsets[1] == (2, 5)  # trimmed
    enc_d, enc_c = ours.encode_batch([decomposed, composed])
    assert enc_d.ids[1] == enc_c.ids[1] == the
    assert spans(enc_c)[1] == spans(enc_d)[1] == (1, 5)  # "Ġthe" spans its space
    # é is two UTF-8 bytes, so two byte-level tokens, both spanning the character. In the
    # decomposed text the library aligns the composed é with the "e" it starts from.
    assert spans(enc_c)[-2:] == [(9, 10), (9, 10)]
    assert spans(enc_d)[-2:] == [(9, 10), (9, 10)]


def test_hf_pre_tokens_from_the_encode_leave_out_texts_with_added_tokens(tmp_path):
    """A checked text's pre-tokens come from its encode's word ids unless the library may have
    taken an added token out of it first (pre_tokenize does not): one matched in the
    normalised text (added with normalized=True) whenever its id is there, one matched in
    the raw text when the text spells it. The second method is pre_tokenize."""
    from tokenizers import AddedToken

    tok = train_bytelevel()
    tok.add_tokens(["নতুন", AddedToken("QQQ", normalized=False)])
    tok.save(str(tmp_path / "tokenizer.json"))
    ours = load_tokenizer(str(tmp_path))
    texts = ["the নতুন fox", "a QQQ b", "the fox", "a QQ b", "আমি বাংলায় গান গাই"]
    flat, came = ours.encode_flat_checked(texts, np.ones(len(texts), dtype=bool))
    assert all(np.array_equal(a, b) for a, b in zip(flat, ours.encode_flat(texts)))
    pre = came.pre
    assert pre is not None and pre.docs.tolist() == [2, 3, 4]
    assert came.decoded == dict(enumerate(texts))  # every checked text, added tokens or not
    at = np.concatenate(([0], np.cumsum(pre.per_doc)))
    for k, doc in enumerate(pre.docs.tolist()):
        assert pre.spans[at[k] : at[k + 1]].tolist() == ours.pre_tokenize([texts[doc]])[0].tolist()
    assert [tuple(x) for x in pre.spans[: pre.per_doc[0]].tolist()] == [(0, 3), (3, 7)]


def test_hf_pre_tokens_from_the_encode_only_where_exact(tmp_path):
    """No pre-tokens come with a batch that takes the library's own offsets on a byte-level
    tokenizer (a text not in its normaliser's form: its post-processor may trim them), nor
    with a batch where nothing is checked; the decoded texts come either way (decode's, the
    second method), and the encode is encode_flat's."""
    tok = train_bytelevel()
    tok.normalizer = normalizers.NFC()
    tok.save(str(tmp_path / "tokenizer.json"))
    ours = load_tokenizer(str(tmp_path))
    composed, decomposed = ["a the caf\u00e9", "the fox"], ["a the cafe\u0301", "the fox"]
    for texts, want in ((composed, [0, 1]), (decomposed, None)):
        flat, came = ours.encode_flat_checked(texts, np.ones(2, dtype=bool))
        assert all(np.array_equal(a, b) for a, b in zip(flat, ours.encode_flat(texts)))
        pre = came.pre
        assert (pre is None) if want is None else pre.docs.tolist() == want
        assert came.decoded == {0: ours.decode(flat[0][: flat[3][0]]), 1: "the fox"}
    assert ours.encode_flat_checked(composed, np.zeros(2, dtype=bool))[1].pre is None


def test_hf_pre_tokenize_without_a_pre_tokenizer_keeps_each_text_whole(tmp_path):
    """A tokenizer.json with no pre-tokenizer does not cut its input: a batch's non-empty
    texts are one pre-token each (the whole text, its normaliser aside), an empty one has
    none (worked by hand)."""
    lib = Tokenizer(models.WordLevel({"[UNK]": 0, "ab": 1}, unk_token="[UNK]"))
    lib.normalizer = normalizers.Lowercase()
    lib.save(str(tmp_path / "tokenizer.json"))
    spans, counts = load_tokenizer(str(tmp_path)).pre_tokenize(["AB c", "", "x"])
    assert spans.tolist() == [[0, 4], [0, 1]] and counts.tolist() == [1, 0, 1]


def test_hf_fingerprint_ignores_truncation_and_padding(tmp_path, hf_dir):
    tok = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    tok.enable_truncation(max_length=4)
    tok.enable_padding(length=64)
    tok.save(str(tmp_path / "tokenizer.json"))
    assert load_tokenizer(str(tmp_path)).fingerprint == load_tokenizer(str(hf_dir)).fingerprint
    other = train_bytelevel()
    other.add_tokens(["নতুন"])
    other.save(str(tmp_path / "other.json"))
    assert (
        load_tokenizer(str(tmp_path / "other.json")).fingerprint
        != load_tokenizer(str(hf_dir)).fingerprint
    )


def test_canonical_json_in_pieces_is_json_dumps_byte_for_byte():
    """The fingerprint's serialisation in pieces (canonical_json) against json.dumps itself,
    on values a tokenizer.json may hold: containers just under, at and over the piece size,
    nested ones, floats, escapes, non-ASCII text, keys that are not strings."""
    import json

    from fertility.tokenizers.base import _PIECE, canonical_json

    kw = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":")}
    odd = {
        "b": [1.5, float("nan"), None, 'é\u2028x"\\', 1e300, -0.0, True],
        "a": {"z": 1, "y": list(range(3 * _PIECE))},
        "c": {str(i): {"k": [i, {"q": "ü"}]} for i in range(2 * _PIECE + 1)},
        "d": {1: 2, 3: 4},
        "e": [],
        "f": {},
        "": "",
    }
    sized = [[1] * n for n in (_PIECE, _PIECE + 1)] + [
        {f"k{i:05d}": i for i in range(n)} for n in (_PIECE, _PIECE + 1)
    ]
    for value in (odd, *sized, "s", 3, None):
        assert b"".join(canonical_json(value)) == json.dumps(value, **kw).encode()


def test_hf_normalizer_offsets_point_into_original(tmp_path):
    # NFKC turns "ﬁ" (one character) into "fi" (two); lowercasing keeps lengths. Spans must
    # index the original text.
    vocab = {"[UNK]": 0, "fi": 1, "##eld": 2, "the": 3, "ঢা": 4, "##কা": 5, "##e": 6}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece()
    tok.save(str(tmp_path / "wp.json"))
    ours = load_tokenizer(str(tmp_path / "wp.json"))
    text = "ﬁeld THE ঢাকা"
    (enc,) = ours.encode_batch([text])
    # greedy longest match: fi | ##eld, the, ঢা | ##কা
    assert enc.ids.tolist() == [1, 2, 3, 4, 5]
    assert spans(enc) == [(0, 1), (1, 4), (5, 8), (9, 11), (11, 13)]
    assert ours.pre_tokenize([text])[0].tolist() == [[0, 4], [5, 8], [9, 13]]
    assert ours.normalize(text) == "field the ঢাকা"
    assert ours.decode(enc.ids) == "field the ঢাকা"
    assert ours.unk_id == 0 and ours.config()["model"] == "wordpiece"
    assert [ours.token_bytes(i) for i in (1, 2, 5)] == [b"fi", b"eld", "কা".encode()]
    assert not ours.partial_mask().any()


def test_hf_byte_fallback_model(tmp_path):
    # Llama-2 style: Metaspace, BPE with <0xNN> byte-fallback pieces.
    vocab = {"<unk>": 0, **{f"<0x{b:02X}>": 1 + b for b in range(256)}}
    for piece in ["▁", "a", "▁a", "ব", "া", "বা"]:
        vocab[piece] = len(vocab)
    tok = Tokenizer(
        models.BPE(
            vocab=vocab, merges=[("▁", "a"), ("ব", "া")], byte_fallback=True, unk_token="<unk>"
        )
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    tok.save(str(tmp_path / "tokenizer.json"))
    ours = load_tokenizer(str(tmp_path))
    (enc,) = ours.encode_batch(["a বা😀"])
    # "▁a" | "▁" | "বা" | bytes F0 9F 98 80 of 😀 (ids 1 + byte)
    assert enc.ids.tolist() == [vocab["▁a"], vocab["▁"], vocab["বা"], 0xF1, 0xA0, 0x99, 0x81]
    assert spans(enc)[2:] == [(2, 4), (4, 5), (4, 5), (4, 5), (4, 5)]
    assert ours.decode(enc.ids) == "a বা😀"
    mask = ours.partial_mask()
    assert mask[1:257].all() and not mask[0] and not mask[257:].any()
    assert ours.token_bytes(vocab["▁a"]) == b" a" and ours.token_bytes(0xF1) == b"\xf0"
    assert ours.unk_id == 0
    assert ours.config()["byte_fallback"] and not ours.config()["byte_level"]


# --- SentencePiece ---------------------------------------------------------------------------


def train_sentencepiece() -> bytes:
    """A 420-piece SentencePiece BPE with byte fallback, trained on CORPUS: the model file."""
    return sentencepiece_bpe(CORPUS, 420, byte_fallback=True, character_coverage=1.0)


@pytest.fixture(scope="module")
def sp_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("sp") / "bn_en.model"
    path.write_bytes(train_sentencepiece())
    return path


def test_sp_ids_offsets_and_roundtrip(sp_path):
    raw = spm.SentencePieceProcessor(model_file=str(sp_path))
    tok = load_tokenizer(str(sp_path))
    assert tok.kind == "sentencepiece" and tok.label == "bn_en"
    texts = [t for t in SAMPLES if "  " not in t and not t.startswith(" ")]  # SP collapses spaces
    for text, enc in zip(texts, tok.encode_batch(texts)):
        assert enc.ids.tolist() == raw.encode(text)
        assert tok.decode(enc.ids) == text
        for i, a, b in zip(enc.ids.tolist(), enc.starts.tolist(), enc.ends.tolist()):
            piece = raw.id_to_piece(i)
            if not raw.is_byte(i):
                assert text[a:b] == piece.replace("▁", " ").lstrip(" ") or text[
                    a:b
                ] == piece.replace("▁", " ")


def test_sp_byte_pieces_span_their_character(sp_path):
    raw = spm.SentencePieceProcessor(model_file=str(sp_path))
    tok = load_tokenizer(str(sp_path))
    (enc,) = tok.encode_batch(["ক 😀"])
    pieces = [raw.id_to_piece(i) for i in enc.ids.tolist()]
    assert pieces[-4:] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert spans(enc)[-4:] == [(2, 3)] * 4
    mask = tok.partial_mask()
    assert mask.tolist() == [raw.is_byte(i) for i in range(raw.get_piece_size())]
    assert mask.sum() == 256
    assert tok.token_bytes(raw.piece_to_id("<0xF0>")) == b"\xf0"


def test_sp_settings_and_whitespace_pieces(sp_path):
    tok = load_tokenizer(str(sp_path))
    cfg = tok.config()
    assert cfg["model"] == "bpe" and cfg["byte_fallback"] and cfg["pattern"] == "whitespace"
    assert cfg["normalizer"]["name"] == "nmt_nfkc" and cfg["normalizer"]["add_dummy_prefix"]
    assert tok.unk_id == 0 and tok.special_tokens == {"<s>": 1, "</s>": 2}
    assert tok.pre_tokenize(["a  বাংলা x"])[0].tolist() == [[0, 1], [1, 2], [2, 8], [8, 10]]
    assert tok.normalize("ﬁ  x") == "fi x"  # NFKC and extra-space removal
    assert tok.token_bytes(tok.encode_batch(["the"])[0].ids[0]).startswith(b" ")


def test_sp_fingerprint_is_model_bytes(sp_path, tmp_path):
    copy = tmp_path / "copy.model"
    copy.write_bytes(sp_path.read_bytes())
    assert load_tokenizer(str(copy)).fingerprint == load_tokenizer(str(sp_path)).fingerprint


# --- tiktoken rank files ---------------------------------------------------------------------

# All 256 bytes (rank = byte value), then merges worked out by hand:
MERGES = [
    b"\xe0\xa6",  # 256: the lead bytes shared by every Bengali letter (not a whole character)
    b"\xe0\xa6\xac",  # 257: ব
    b"\xe0\xa6\xbe",  # 258: া
    b"\xe0\xa6\xac\xe0\xa6\xbe",  # 259: বা
    b" t",  # 260
    b"he",  # 261
    b" the",  # 262
]
RANKS = [bytes([b]) for b in range(256)] + MERGES


def rank_file_bytes() -> bytes:
    return b"".join(
        base64.b64encode(t) + b" " + str(r).encode() + b"\n" for r, t in enumerate(RANKS)
    )


@pytest.fixture()
def rank_dir(tmp_path):
    for name in ("ranks.tiktoken", "gpt2.tiktoken", "o200k_base.model"):
        (tmp_path / name).write_bytes(rank_file_bytes())
    return tmp_path


def test_tiktoken_ids_and_spans_by_hand(rank_dir):
    gpt2 = load_tokenizer(str(rank_dir / "gpt2.tiktoken"))
    o200k = load_tokenizer(str(rank_dir / "o200k_base.model"))  # text .model: sniffed, not SP
    assert gpt2.kind == o200k.kind == "tiktoken"
    # GPT-2 split: "ব" | "া" | " the" -> 257, 258, 262; o200k keeps "বা" whole -> 259.
    g, g2 = gpt2.encode_batch(["বা the", "ং"])
    assert g.ids.tolist() == [257, 258, 262] and spans(g) == [(0, 1), (1, 2), (2, 6)]
    (o,) = o200k.encode_batch(["বা the"])
    assert o.ids.tolist() == [259, 262] and spans(o) == [(0, 2), (2, 6)]
    # ং = E0 A6 82: merge 256 then the lone byte 0x82; both tokens span the character
    assert g2.ids.tolist() == [256, 0x82] and spans(g2) == [(0, 1), (0, 1)]
    assert gpt2.config()["pattern"] == "gpt2" and o200k.config()["pattern"] == "o200k"


def test_tiktoken_agrees_with_library_and_roundtrips(rank_dir):
    import tiktoken

    from fertility.tokenizers.patterns import FAMILIES

    raw = tiktoken.Encoding(
        "x",
        pat_str=FAMILIES["cl100k"],
        mergeable_ranks=dict(zip(RANKS, range(len(RANKS)))),
        special_tokens={},
    )
    tok = load_tokenizer(str(rank_dir / "ranks.tiktoken") + "#cl100k_base")
    for text, enc in zip(SAMPLES, tok.encode_batch(SAMPLES)):
        assert enc.ids.tolist() == raw.encode_ordinary(text)
        assert tok.decode(enc.ids) == text
        assert spans(enc) == spans_from_bytes(text, [tok.token_bytes(i) for i in enc.ids])


def test_tiktoken_partial_mask_by_hand(rank_dir):
    tok = load_tokenizer(str(rank_dir / "gpt2.tiktoken"))
    expected = [False] * 128 + [True] * 128 + [True, False, False, False, False, False, False]
    assert tok.partial_mask().tolist() == expected
    assert tok.vocab_size == 263 and tok.unk_id is None and tok.special_tokens == {}
    assert tok.token_bytes(259) == "বা".encode()


def test_tiktoken_explicit_pattern_wins_and_fingerprint(rank_dir):
    tok = load_tokenizer(str(rank_dir / "gpt2.tiktoken") + "#o200k")
    assert tok.encode_batch(["বা"])[0].ids.tolist() == [259]
    same = load_tokenizer(str(rank_dir / "ranks.tiktoken"), pattern="o200k_base")
    assert tok.fingerprint == same.fingerprint  # same ranks, same split
    assert tok.fingerprint != load_tokenizer(str(rank_dir / "gpt2.tiktoken")).fingerprint


def test_tiktoken_fingerprint_is_the_canonical_lines_however_the_file_writes_them(rank_dir):
    """The fingerprint is sha256 of "tiktoken", the ranks written as canonical ``base64
    rank`` lines in rank order, the pattern and the specials' JSON, each followed by a NUL
    byte (worked here with the standard library). A file in exactly that form is hashed as
    read (the text tiktoken._plain_ranks hands on); one that writes the same ranks otherwise
    (a rank with a leading zero, base64 with spare bits set, the lines out of order, no last
    newline) is not, and gets the same digest."""
    import hashlib

    from fertility.tokenizers.patterns import FAMILIES
    from fertility.tokenizers.tiktoken import _plain_ranks

    h = hashlib.sha256()
    for part in (b"tiktoken", rank_file_bytes(), FAMILIES["gpt2"].encode(), b"{}"):
        h.update(part + b"\0")
    canonical = rank_file_bytes()
    assert _plain_ranks(canonical)[1] == canonical
    lines = canonical.splitlines(keepends=True)
    assert lines[65] == b"QQ== 65\n"  # "A"
    variants = {
        "leading zero": b"".join([*lines[:65], b"QQ== 065\n", *lines[66:]]),
        "spare bits": b"".join([*lines[:65], b"QR== 65\n", *lines[66:]]),  # still "A"
        "out of order": b"".join([lines[1], lines[0], *lines[2:]]),
        "no last newline": canonical[:-1],
    }
    for name, data in [("canonical", canonical), *variants.items()]:
        if name in ("leading zero", "spare bits"):
            assert _plain_ranks(data)[1] is None, name
        (rank_dir / "v.tiktoken").write_bytes(data)
        tok = load_tokenizer(str(rank_dir / "v.tiktoken") + "#gpt2")
        assert tok.fingerprint == h.hexdigest(), name


def test_whole_utf8_is_what_python_decodes(monkeypatch):
    """Which tokens are partial (not whole UTF-8) is worked out for a whole vocabulary at once
    with numpy; second method: Python's strict UTF-8 decoder on each piece, over 5,000
    drawn lists of pieces made mostly of the bytes where UTF-8's rules turn (continuations,
    C0/C1, E0/ED/F0/F4 and the second bytes they allow, F5-FF), empty pieces included."""
    import random

    from fertility.tokenizers import base
    from fertility.tokenizers.base import whole_utf8

    def decodes(piece: bytes) -> bool:
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    edges = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0]
    edges += [0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]
    rng = random.Random(1)
    drawn = []
    for _ in range(5000):
        pieces = [
            bytes(rng.choice(edges) if rng.random() < 0.7 else rng.randrange(256) for _ in range(n))
            for n in [rng.randint(0, 5) for _ in range(rng.randint(0, 6))]
        ]
        assert whole_utf8(pieces).tolist() == [decodes(p) for p in pieces], pieces
        drawn += pieces
    # all of them at once, in chunks of 7 pieces (a vocabulary is checked in chunks)
    monkeypatch.setattr(base, "UTF8_CHUNK", 7)
    assert whole_utf8(drawn).tolist() == [decodes(p) for p in drawn]


def test_plain_rank_lines_are_what_the_line_regex_matches():
    """A rank file is read in bulk when every line is `[A-Za-z0-9+/]+={0,2} [0-9]{1,9}`
    (found with numpy, not a regex); any other file is read line by line, which names the
    line that is wrong. Second method: the regex itself, and int() of each rank, on 3,000
    files of lines drawn from plain ones and from the ways a line can depart from them."""
    import random
    import re

    from fertility.tokenizers.tiktoken import _Lines

    regex = re.compile(rb"(?:[A-Za-z0-9+/]+={0,2} [0-9]{1,9}\n)*")
    good = [b"QQ== 65\n", b"IQ== 0\n", b"aGk= 7\n", b"aGVsbG8h 123456789\n", b"Zm9v 0042\n"]
    bad = [
        b"QQ=== 1\n",  # a third "="
        b"== 5\n",  # padding alone
        b"QQ== 1234567890\n",  # ten digits
        b"QQ==  1\n",  # two spaces
        b"QQ== 1 \n",
        b" QQ== 1\n",
        b"QQ==\t1\n",
        b"QQ== 1\r\n",
        b"QQ== 1a\n",  # a letter in the rank
        b"QQ== 1=\n",
        b"QQ=A 1\n",  # "=" inside the base64
        b"QQ== \n",  # no rank
        b"\n",  # a blank line
        b"QQ==\n",
        "QQ\u00e9 1\n".encode(),
    ]
    rng = random.Random(0)
    for _ in range(3000):
        lines = [rng.choice(good) for _ in range(rng.randint(1, 6))]
        if rng.random() < 0.6:
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(bad))
        body = b"".join(lines)
        found = _Lines(body)
        assert found.ok == bool(regex.fullmatch(body)), body
        if found.ok:
            assert found.ranks.tolist() == [int(r) for r in body.split()[1::2]], body


def test_tiktoken_pattern_that_skips_text_keeps_spans_right(rank_dir):
    tok = load_tokenizer(str(rank_dir / "ranks.tiktoken") + r"#re:\S+")
    (enc,) = tok.encode_batch(["বা the"])  # the space matches no piece: tiktoken drops it
    assert enc.ids.tolist() == [259, ord("t"), 261]
    assert spans(enc) == [(0, 2), (3, 4), (4, 6)]


def test_rank_file_without_pattern_is_refused(rank_dir):
    path = rank_dir / "ranks.tiktoken"
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(str(path))
    msg = str(err.value)
    assert str(path) in msg and "#PATTERN" in msg and "\n" not in msg


@pytest.mark.parametrize(
    "content, words",
    [
        (b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(200)), "single-byte"),
        (rank_file_bytes() + base64.b64encode(b"zz") + b" 5\n", "share a rank"),
        (rank_file_bytes() + b"!!notbase64 300\n", "line 264"),
        # plain lines, read in bulk; the duplicate is still named by its line
        (rank_file_bytes() + base64.b64encode(b"a") + b" 300\n", "line 264: token listed twice"),
    ],
)
def test_bad_rank_files(tmp_path, content, words):
    path = tmp_path / "cl100k_base.tiktoken"
    path.write_bytes(content)
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(str(path))
    assert words in str(err.value) and str(path) in str(err.value)


def test_rank_file_with_empty_token_reads_as_tiktoken_reads_it(tmp_path):
    """Whisper's multilingual.tiktoken ends with `= 50256`: padding alone, the empty token."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from fertility.tokenizers.patterns import FAMILIES

    path = tmp_path / "gpt2.tiktoken"
    path.write_bytes(rank_file_bytes() + b"= 263\n")
    ranks = load_tiktoken_bpe(str(path))
    raw = tiktoken.Encoding("x", pat_str=FAMILIES["gpt2"], mergeable_ranks=ranks, special_tokens={})
    tok = load_tokenizer(str(path))
    assert ranks[b""] == 263 and tok.vocab_size == raw.n_vocab == 264
    assert tok.token_bytes(263) == b"" and not tok.partial_mask()[263]
    for text, enc in zip(SAMPLES, tok.encode_batch(SAMPLES)):
        assert enc.ids.tolist() == raw.encode_ordinary(text) and tok.decode(enc.ids) == text


def test_unknown_pattern_name_is_named_with_the_known_ones(rank_dir, run):
    from fertility.tokenizers.patterns import known_names

    path = rank_dir / "ranks.tiktoken"
    for spec in (f"{path}#qwen", "tiktoken:cl100k_base#qwen"):
        with pytest.raises(TokenizerError) as err:
            load_tokenizer(spec)
        msg = str(err.value)
        assert msg.startswith(spec.split("#")[0] + ": ") and "'qwen'" in msg and "\n" not in msg
        assert all(name in msg for name in known_names()) and "re:REGEX" in msg
    (rank_dir / "en.txt").write_text("the\n", encoding="utf-8")
    code, _, stderr = run("report", rank_dir / "en.txt", "-t", f"{path}#qwen")
    assert code == 2 and stderr.startswith(f"error: {path}: unknown split pattern 'qwen'")
    # a file whose own name holds a '#' is still a file; a missing one is still missing
    (rank_dir / "a#b.tiktoken").write_bytes(rank_file_bytes())
    assert load_tokenizer(str(rank_dir / "a#b.tiktoken") + "#gpt2").vocab_size == 263
    with pytest.raises(TokenizerError, match="no such file"):
        load_tokenizer(str(rank_dir / "missing.tiktoken#qwen"))


def test_missing_tiktoken_package(rank_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(TokenizerError, match=r"pip install 'fertility\[tiktoken\]'"):
        load_tokenizer(str(rank_dir / "gpt2.tiktoken"))
    with pytest.raises(TokenizerError, match=r"pip install 'fertility\[tiktoken\]'"):
        load_tokenizer("tiktoken:cl100k_base")


# --- bad inputs --------------------------------------------------------------------------------


def bad_inputs(tmp_path, hf_dir, sp_path):
    rnd = random.Random(0)
    (tmp_path / "random.model").write_bytes(bytes(rnd.randrange(256) for _ in range(4000)))
    text = (hf_dir / "tokenizer.json").read_text(encoding="utf-8")
    (tmp_path / "truncated.json").write_text(text[: len(text) // 2], encoding="utf-8")
    (tmp_path / "nomodel.json").write_text(json.dumps({"version": "1.0"}), encoding="utf-8")
    (tmp_path / "empty.json").write_bytes(b"")
    data = sp_path.read_bytes()
    (tmp_path / "truncated.model").write_bytes(data[: int(len(data) * 0.6)])
    (tmp_path / "emptydir").mkdir()
    return [
        "random.model",
        "truncated.json",
        "nomodel.json",
        "empty.json",
        "truncated.model",
        "emptydir",
        "missing.json",
    ]


def test_bad_tokenizer_files_raise_one_line_errors(tmp_path, hf_dir, sp_path):
    for name in bad_inputs(tmp_path, hf_dir, sp_path):
        path = tmp_path / name
        with pytest.raises(TokenizerError) as err:
            load_tokenizer(str(path))
        msg = str(err.value)
        assert str(path) in msg and "\n" not in msg, msg


def test_pattern_on_hf_or_sp_is_an_error(hf_dir, sp_path):
    for spec in (str(hf_dir) + "#cl100k", str(sp_path) + "#gpt2"):
        with pytest.raises(TokenizerError, match="applies only to tiktoken"):
            load_tokenizer(spec)
    with pytest.raises(TokenizerError, match="unknown split pattern"):
        load_tokenizer(str(hf_dir), pattern="nope")


# --- parsing -tLABEL=SPEC ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arg, expected",
    [
        ("tokenizer.json", (None, "tokenizer.json")),
        ("my=tokenizer.json", ("my", "tokenizer.json")),
        ("v2.b_x-1=hf:org/name", ("v2.b_x-1", "hf:org/name")),
        ("hf:org/name", (None, "hf:org/name")),
        ("tiktoken:cl100k_base", (None, "tiktoken:cl100k_base")),
        ("gpt4=tiktoken:cl100k_base#mark_aware", ("gpt4", "tiktoken:cl100k_base#mark_aware")),
        ("./dir=x/tokenizer.json", (None, "./dir=x/tokenizer.json")),
        ("a=b=c.model", ("a", "b=c.model")),
        ("ll=ranks.model#llama3", ("ll", "ranks.model#llama3")),
    ],
)
def test_parse_tokenizer_arg(arg, expected):
    assert parse_tokenizer_arg(arg) == expected


def test_parse_tokenizer_arg_existing_path_with_equals(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x=y.json").write_text("{}")
    assert parse_tokenizer_arg("x=y.json") == (None, "x=y.json")


@pytest.mark.parametrize("arg", ["", "=x.json", "lab="])
def test_parse_tokenizer_arg_rejects(arg):
    with pytest.raises(TokenizerError):
        parse_tokenizer_arg(arg)


def test_split_pattern_suffix_and_labels():
    assert split_pattern_suffix("r.tiktoken#cl100k") == ("r.tiktoken", "cl100k")
    assert split_pattern_suffix("r.tiktoken#re:a#b") == ("r.tiktoken", "re:a#b")
    assert split_pattern_suffix("dir#1/r.tiktoken") == ("dir#1/r.tiktoken", None)
    assert default_label("tiktoken:cl100k_base") == "cl100k_base"
    assert default_label("hf:meta-llama/Llama-3.1-8B@main") == "Llama-3.1-8B"
    assert default_label("models/qwen/tokenizer.json") == "qwen"
    assert default_label("Meta-Llama-3-8B/original/tokenizer.model") == "Meta-Llama-3-8B"


# --- offline hub / tiktoken -----------------------------------------------------------------------


@pytest.fixture()
def no_network(monkeypatch):
    """Any connection attempt fails at once and is recorded."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network disabled in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def test_tiktoken_name_offline_is_a_clear_error(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # empty cache
    with pytest.raises(TokenizerError) as err:
        load_tokenizer("tiktoken:cl100k_base")
    assert "tiktoken:cl100k_base" in str(err.value) and "cache" in str(err.value)
    with pytest.raises(TokenizerError, match="unknown tiktoken encoding"):
        load_tokenizer("tiktoken:cl99k")


def _hub_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return tmp_path / "hub"


def test_hf_hub_offline_without_cache_is_a_clear_error(tmp_path, monkeypatch, no_network):
    _hub_cache(tmp_path, monkeypatch)
    with pytest.raises(TokenizerError) as err:
        load_tokenizer("hf:org/absent")
    assert "hf:org/absent" in str(err.value) and "offline" in str(err.value)
    assert no_network == []  # nothing was even attempted
    with pytest.raises(TokenizerError, match="not a Hugging Face repository"):
        load_tokenizer("hf:../../etc")


def test_hf_hub_offline_reads_local_cache(tmp_path, monkeypatch, no_network, hf_dir):
    cache = _hub_cache(tmp_path, monkeypatch)
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--org--tiny"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit / "tokenizer.json").write_bytes(
        (hf_dir / "tokenizer.json").read_bytes()
    )
    tok = load_tokenizer("hf:org/tiny")
    assert tok.label == "tiny" and tok.kind == "hf"
    assert tok.fingerprint == load_tokenizer(str(hf_dir)).fingerprint
    assert no_network == []


# --- streaming and settings that must not leak into measurements ---------------------------------


def test_bpe_dropout_is_off_when_measuring(tmp_path, hf_dir):
    obj = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    obj["model"]["dropout"] = 0.9  # would scatter nearly every merge
    (tmp_path / "tokenizer.json").write_text(json.dumps(obj), encoding="utf-8")
    plain = load_tokenizer(str(hf_dir))
    drop = load_tokenizer(str(tmp_path))
    texts = CORPUS[:5]
    assert [e.ids.tolist() for e in drop.encode_batch(texts)] == [
        e.ids.tolist() for e in plain.encode_batch(texts)
    ]


def test_pattern_argument_wins_over_suffix(tmp_path):
    (tmp_path / "gpt2.tiktoken").write_bytes(rank_file_bytes())
    tok = load_tokenizer(str(tmp_path / "gpt2.tiktoken") + "#gpt2", pattern="o200k")
    assert tok.config()["pattern"] == "o200k"
    assert tok.encode_batch(["বা"])[0].ids.tolist() == [259]


def test_tiktoken_engine_keeps_zwj_inside_mark_aware_words(tmp_path):
    # র = E0 A6 B0, ZWJ = E2 80 8D. The merge "র"+ZWJ (rank 260) can only be applied when
    # both sit in one piece: mark_aware keeps them together, o200k cuts before the ZWJ.
    merges = [
        b"\xe0\xa6",
        b"\xe0\xa6\xb0",
        b"\xe2\x80",
        b"\xe2\x80\x8d",
        b"\xe0\xa6\xb0\xe2\x80\x8d",
    ]
    ranks = [bytes([b]) for b in range(256)] + merges
    body = b"".join(
        base64.b64encode(t) + b" " + str(r).encode() + b"\n" for r, t in enumerate(ranks)
    )
    (tmp_path / "r.tiktoken").write_bytes(body)
    text = "\u09b0\u200d"
    aware = load_tokenizer(str(tmp_path / "r.tiktoken") + "#mark_aware")
    o200k = load_tokenizer(str(tmp_path / "r.tiktoken") + "#o200k")
    assert aware.encode_batch([text])[0].ids.tolist() == [260]
    assert o200k.encode_batch([text])[0].ids.tolist() == [257, 259]
    assert aware.pre_tokenize([text])[0].tolist() == [[0, 2]]
    assert o200k.pre_tokenize([text])[0].tolist() == [[0, 1], [1, 2]]


def test_every_adapter_satisfies_the_protocol(hf_dir, sp_path, rank_dir):
    from fertility.tokenizers.base import Tokenizer as Protocol

    for spec in (str(hf_dir), str(sp_path), str(rank_dir / "gpt2.tiktoken")):
        tok = load_tokenizer(spec, label="x")
        assert isinstance(tok, Protocol) and tok.label == "x" and tok.spec == spec
        assert len(tok.fingerprint) == 64 and tok.partial_mask().shape == (tok.vocab_size,)
        cfg = tok.config()
        assert {
            "kind",
            "model",
            "byte_level",
            "byte_fallback",
            "normalizer",
            "pre_tokenizer",
            "pattern",
            "pattern_regex",
            "unk_token",
        } <= set(cfg)
        assert tok.encode_batch([]) == []


def test_hf_encode_flat_equals_encode_batch_on_every_path(tmp_path, hf_dir):
    """The measuring path's flat arrays are the per-text encodings laid end to end: on the
    fast byte-length path, with an NFC normaliser (composed and decomposed texts in one
    batch), and with a normaliser that changes lengths (the library's offsets)."""
    tok = train_bytelevel()
    tok.normalizer = normalizers.NFC()
    tok.save(str(tmp_path / "nfc.json"))
    texts = ["a the cafe\u0301", "a the caf\u00e9", "বাংলা ভাষা", "x", "ﬁeld THE"]
    for ours in (load_tokenizer(str(hf_dir)), load_tokenizer(str(tmp_path / "nfc.json"))):
        for batch in (texts, texts[1:3]):  # with and without a text NFC changes
            ids, starts, ends, counts = ours.encode_flat(batch)
            encs = ours.encode_batch(batch)
            assert counts.tolist() == [len(e.ids) for e in encs]
            assert ids.tolist() == [i for e in encs for i in e.ids.tolist()]
            assert starts.tolist() == [i for e in encs for i in e.starts.tolist()]
            assert ends.tolist() == [i for e in encs for i in e.ends.tolist()]


def test_tiktoken_encode_flat_equals_encode_batch(rank_dir):
    """As for Hugging Face: the flat path, and the fallback for a split pattern that leaves
    text unmatched (there tokens do not add up to the text's bytes)."""
    texts = ["বা the", "ং", "", "x  y"]
    for spec in (str(rank_dir / "gpt2.tiktoken"), str(rank_dir / "ranks.tiktoken") + r"#re:\S+"):
        tok = load_tokenizer(spec)
        ids, starts, ends, counts = tok.encode_flat(texts)
        encs = tok.encode_batch(texts)
        assert counts.tolist() == [len(e.ids) for e in encs]
        assert ids.tolist() == [i for e in encs for i in e.ids.tolist()]
        assert starts.tolist() == [i for e in encs for i in e.starts.tolist()]
        assert ends.tolist() == [i for e in encs for i in e.ends.tolist()]
        assert ids.dtype == starts.dtype == ends.dtype == np.int64
    assert [a.tolist() for a in tok.encode_flat([])] == [[], [], [], []]


def test_byte_level_text_and_bytes_are_gpt2s_alphabet_both_ways():
    import itertools

    from fertility.tokenizers.hf import byte_level_bytes, byte_level_text, bytes_to_unicode

    table = bytes_to_unicode()  # the alphabet, a character per byte, joined one by one
    samples = [bytes(range(256)), b""] + [bytes(p) for p in itertools.product(range(256), repeat=2)]
    for data in samples:
        text = "".join(table[b] for b in data)
        assert byte_level_text(data) == text
        assert byte_level_bytes(text) == data
    # a character the alphabet writes otherwise (a plain space is U+0120) is refused
    with pytest.raises(ValueError, match="' ' is not in the byte-level alphabet"):
        byte_level_bytes("a b")
    with pytest.raises(ValueError, match="is not in the byte-level alphabet"):
        byte_level_bytes("\u0100\u4e2d")


@pytest.mark.realworld
@pytest.mark.parametrize("name", ["r50k_base.tiktoken#gpt2", "o200k_base.tiktoken"])
def test_a_rank_files_fingerprint_is_the_sha256_of_its_lines_in_rank_order(rw, name):  # noqa: F811
    import hashlib

    from fertility.tokenizers.base import sha256_hex

    tok = load_tokenizer(str(rw / "tokenizers" / name))
    ranks = dict(tok._ranks)
    # the definition, written out: every token by rank as `base64 rank` lines
    lines = b"".join(
        base64.b64encode(t) + b" " + str(r).encode() + b"\n"
        for t, r in sorted(ranks.items(), key=lambda kv: kv[1])
    )
    want = sha256_hex("tiktoken", lines, tok._pattern, "{}")
    assert tok.fingerprint == want
    # a rank file's own lines are those lines (its bytes hashed the same way)
    path = rw / "tokenizers" / name.partition("#")[0]
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(lines).digest()
    # ranks held in another order give the same fingerprint (sorted, not read in order)
    shuffled = list(ranks.items())
    random.Random(3).shuffle(shuffled)
    other = load_tokenizer(str(rw / "tokenizers" / name))
    other._ranks = dict(shuffled)
    assert other.fingerprint == want


@pytest.mark.parametrize("model", ["unigram", "wordlevel", "sparse"])
def test_hf_vocab_size_is_one_past_the_librarys_largest_id(tmp_path, model):
    """vocab_size is read from the file: a Unigram's ids are its list's positions, a
    WordLevel's its map's (which may skip ids), an added token's the library's (it numbers
    it after the map's size: 3, below 50); one past the largest, as the library's own
    get_vocab says."""
    from tokenizers import AddedToken, Tokenizer, models

    vocab = {"<unk>": 0, "a": 1, "b": 50 if model == "sparse" else 2}
    if model == "unigram":
        m = models.Unigram([(p, -1.0) for p in vocab], unk_id=0, byte_fallback=False)
    else:
        m = models.WordLevel(vocab, unk_token="<unk>")
    raw = Tokenizer(m)
    raw.add_tokens([AddedToken("zz", special=False)])
    path = tmp_path / "tokenizer.json"
    raw.save(str(path))
    ids = Tokenizer.from_file(str(path)).get_vocab(with_added_tokens=True).values()
    tok = load_tokenizer(str(path))
    assert tok.vocab_size == max(ids) + 1 == (51 if model == "sparse" else 4)
