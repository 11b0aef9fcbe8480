"""Files people have load as their publishers' own code reads them, on real text.

- Mistral's tekken_240911.json: ids of mistral-common's Tekkenizer.encode(bos=False, eos=False).
- Whisper's multilingual.tiktoken (one rank is the empty token): tiktoken's own
  load_tiktoken_bpe and Encoding with Whisper's GPT-2 split.
- Llama 4's tokenizer.model asked for by name (`#llama4`): tiktoken.Encoding as llama-models
  builds it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tiktoken
import tiktoken.load
from mistral_common.tokens.tokenizers.tekken import Tekkenizer

from fertility import load_tokenizer
from tests.realworld.test_counts import LLAMA4_PAT, lines, ours  # noqa: F401 (lines: fixture)

pytestmark = pytest.mark.realworld

# Whisper's split, copied from openai-whisper 20250625 (whisper/tokenizer.py, get_encoding).
WHISPER_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def test_tekken_matches_mistral_common(rw, lines):  # noqa: F811
    path = rw / "tokenizers" / "tekken" / "tekken_240911.json"
    ref = Tekkenizer.from_file(path)
    tok = load_tokenizer(str(path))
    assert tok.kind == "tekken" and tok.vocab_size == ref.n_words
    got = [e.ids.tolist() for e in tok.encode_batch(lines)]
    assert got == [ref.encode(t, bos=False, eos=False) for t in lines]
    assert [tok.decode(ids) for ids in got] == [ref.decode(ids) for ids in got]


def test_whisper_multilingual_matches_tiktoken(rw, lines):  # noqa: F811
    path = rw / "tokenizers" / "whisper-multilingual.tiktoken"
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    assert b"" in ranks  # the line that a strict base64 reader refused
    enc = tiktoken.Encoding(
        "multilingual", pat_str=WHISPER_PAT, mergeable_ranks=ranks, special_tokens={}
    )
    assert ours(f"{path}#gpt2")(lines) == [enc.encode_ordinary(t) for t in lines]


def test_llama4_by_name_matches_llama_models(rw, lines):  # noqa: F811
    path = rw / "tokenizers" / "llama4" / "tokenizer.model"
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    # llama_models/llama4/tokenizer.py: 2048 special tokens after the ranks; encode() passes
    # allowed_special=set(), disallowed_special=() so a special written in text is text.
    specials = {f"<|reserved_special_token_{i}|>": len(ranks) + i for i in range(2048)}
    enc = tiktoken.Encoding(
        path.name, pat_str=LLAMA4_PAT, mergeable_ranks=ranks, special_tokens=specials
    )
    expected = [enc.encode(t, allowed_special=set(), disallowed_special=()) for t in lines]
    assert ours(f"{path}#llama4")(lines) == expected
    assert ours(f"{path}#llama3")(lines) != expected  # cl100k's split differs on this text


def test_report_measures_all_three_by_kind(rw, run):
    toks = rw / "tokenizers"
    code, out, err = run(
        "report",
        rw / "text" / "bn.txt",
        "-t",
        toks / "tekken" / "tekken_240911.json",
        "-t",
        f"whisper={toks / 'whisper-multilingual.tiktoken'}#gpt2",
        "-t",
        f"llama4={toks / 'llama4' / 'tokenizer.model'}#llama4",
        "--format",
        "json",
        "--no-diagnose",
        "--max-docs",
        "300",
    )
    assert code == 0, err
    kinds = {t["label"]: t["kind"] for t in json.loads(out)["tokenizers"]}
    assert kinds == {"tekken_240911": "tekken", "whisper": "tiktoken", "llama4": "tiktoken"}


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "whisper-multilingual"])
def test_rank_files_read_as_tiktoken_reads_them(rw, name):
    """Plain rank files are read in bulk, others (Whisper's `=` line) line by line: either
    way the ranks are tiktoken's own loader's."""
    from fertility.tokenizers.tiktoken import parse_ranks

    path = rw / "tokenizers" / f"{name}.tiktoken"
    assert parse_ranks(path, path.read_bytes())[0] == tiktoken.load.load_tiktoken_bpe(str(path))


def test_sentencepiece_flat_encoding_is_its_per_text_one(rw, lines):  # noqa: F811
    """encode_flat reads the binding's lists in one pass: the same ids and spans as
    encode_batch end to end, byte pieces (emoji outside Mistral's vocabulary) included."""
    from fertility.tokenizers.base import concat_encoded

    tok = load_tokenizer(str(rw / "tokenizers" / "mistral" / "tokenizer.model.v1"))
    texts = [*lines[:300], "😀", "a😀b", "", "😀😀"]
    flat, ref = tok.encode_flat(texts), concat_encoded(tok.encode_batch(texts))
    assert tok.partial_mask()[flat[0]].any()  # byte pieces were widened
    assert all(np.array_equal(a, b) for a, b in zip(flat, ref))


def test_wordpiece_flat_encoding_is_its_per_text_one(rw, lines):  # noqa: F811
    """MiniLM's tokenizer.json (BERT's normaliser: lower case, accents stripped, so spans are
    the library's own offsets): encode_flat reads them in one pass, the same ids and spans as
    encode_batch end to end."""
    from fertility.tokenizers.base import concat_encoded

    tok = load_tokenizer(str(rw / "tokenizers" / "minilm" / "tokenizer.json"))
    texts = [*lines[:300], "Café ÉCOLE", "", "ﬁ"]
    flat, ref = tok.encode_flat(texts), concat_encoded(tok.encode_batch(texts))
    assert not tok._fast and len(flat[0]) > 1000
    assert all(np.array_equal(a, b) for a, b in zip(flat, ref))


@pytest.mark.parametrize("name", ["bpe-gpt2", "bpe-o200k", "minilm"])
def test_a_tokenizer_json_fingerprint_is_its_canonical_json_hashed(rw, name):
    """The fingerprint hashes the tokenizer.json in pieces (tokenizers.base.canonical_json,
    so the pass's threads run between them); the pieces are json.dumps's canonical text, byte
    for byte, and the fingerprint the sha256 of that text whole, as counts and shards saved
    before recorded it."""
    import hashlib

    from fertility.tokenizers.base import canonical_json

    path = rw / "tokenizers" / name / "tokenizer.json"
    obj = json.loads(path.read_text(encoding="utf-8"))
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    pieces = list(canonical_json(obj))
    assert b"".join(pieces) == text.encode() and len(pieces) > 10
    tok = load_tokenizer(str(path))
    whole = json.dumps(tok._measured, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert tok.fingerprint == hashlib.sha256(b"hf\0" + whole.encode() + b"\0").hexdigest()


@pytest.mark.parametrize(
    "name", ["o200k_base.tiktoken", "mistral/tokenizer.model.v1", "tekken/tekken_240911.json"]
)
def test_partial_of_the_ids_seen_is_the_whole_masks(rw, lines, name):  # noqa: F811
    """The measuring pass asks which of each batch's ids are partial (split characters, byte
    pieces), id by id as they first appear; the answers are the whole-vocabulary mask's
    (computed by a second tokenizer loaded from the same file): rank-file tokens that split a
    character, SentencePiece's <0xNN> pieces, Tekken's byte tokens; asked twice, asked once
    the whole mask is known, and on real text."""
    path = str(rw / "tokenizers" / name)
    tok, whole = load_tokenizer(path), load_tokenizer(path).partial_mask()
    rng = np.random.default_rng(0)
    seen = tok.encode_flat([*lines[:400], "😀 a😀b 𝔘𝔫𝔦"])[0]
    # real text's ids, the partial ids themselves, a random draw, real text's ids again
    draws = [seen, np.flatnonzero(whole)[:500], rng.integers(0, tok.vocab_size, 5000), seen]
    assert whole[seen].any() and not whole.all()  # both answers are asked for
    assert sum(map(len, draws)) < tok.vocab_size  # each id worked out as it comes
    for ids in draws:
        assert np.array_equal(tok.partial_of(ids), whole[ids])
    # asked about a vocabulary's worth of ids, it works out the whole mask: the same answers
    many = rng.integers(0, tok.vocab_size, tok.vocab_size)
    assert np.array_equal(tok.partial_of(many), whole[many])
    assert "_partial" in vars(tok) and np.array_equal(tok.partial_of(seen), whole[seen])
    assert np.array_equal(tok.partial_mask(), whole)


@pytest.mark.parametrize(
    "name",
    [
        "bpe-gpt2/tokenizer.json",
        "bpe-o200k/tokenizer.json",
        "o200k_base.tiktoken",
        "whisper-multilingual.tiktoken#gpt2",  # one of its ranks is the empty token
        "tekken/tekken_240911.json",
    ],
)
def test_spans_from_the_tokens_are_the_byte_by_byte_ones_on_real_text(rw, lines, name):  # noqa: F811
    """The measuring path's spans come from each token's count of characters it starts
    (TokenBytes); the second method is the map of every byte of the batch to its character
    (base._byte_spans), over the same ids of every language's real text, and for a
    tokenizer.json the library's own character offsets."""
    from fertility.tokenizers.base import _byte_spans, flat_offsets

    tok = load_tokenizer(str(rw / "tokenizers" / name))
    texts = [*lines, "😀 a😀b 𝔘𝔫𝔦", "", "e\u0301"]
    ids, starts, ends, counts = tok.encode_flat(texts)
    tb = tok._token_bytes
    n_chars = np.array([len(t) for t in texts])
    assert (tb.leads.take(ids) != tb.length.take(ids)).any()  # multi-byte characters met
    assert (tb.first_lead.take(ids) == 0).any()  # and tokens that start inside one
    # the tokens' way is the one taken: no empty token, each text's characters all started
    per_text = np.add.reduceat(tb.leads.take(ids), np.cumsum(counts) - counts)
    assert tb.length.take(ids).all() and np.array_equal(np.where(counts, per_text, 0), n_chars)
    n_bytes = np.array([len(t.encode()) for t in texts])
    by_bytes = _byte_spans(texts, n_chars, n_bytes, tb.length.take(ids), counts, clip=False)
    assert np.array_equal(starts, by_bytes[0]) and np.array_equal(ends, by_bytes[1])
    assert flat_offsets(texts, ids, counts, tb)[2] == []  # every text's tokens add up
    if name.endswith("tokenizer.json"):
        from tokenizers import Tokenizer

        lib = Tokenizer.from_file(str(rw / "tokenizers" / name))
        lib.post_processor = None  # (as measured: no specials, offsets not trimmed)
        encs = lib.encode_batch(texts, add_special_tokens=False)
        assert [i for e in encs for i in e.ids] == ids.tolist()
        assert [o for e in encs for o in e.offsets] == list(zip(starts.tolist(), ends.tolist()))


@pytest.mark.parametrize("name", ["bpe-gpt2", "bpe-o200k", "minilm"])
def test_pre_tokens_read_off_the_encode_are_the_librarys_pre_tokenizer_on_real_text(
    rw,
    lines,  # noqa: F811
    name,
):
    """The detail checks' pre-tokens come with the encode (encode_flat_checked: byte-level
    BPE on the fast path, from its word ids; MiniLM's WordPiece, the words its spans were
    worked out from, fertility.tokenizers.wordpiece); the second method is the library's own
    pre-tokenizer run on each text after its normaliser, with character offsets into the
    text. Their decoded texts (decode_batch) are the library's decode of each. Real lines of
    every language, the same joined 20 at a time, text the byte-level files cut inside
    characters, and a text that spells MiniLM's special tokens."""
    from tokenizers import PreTokenizedString, Tokenizer

    path = rw / "tokenizers" / name / "tokenizer.json"
    tok = load_tokenizer(str(path))
    joined = [" ".join(lines[i : i + 20]) for i in range(0, len(lines), 20)]
    texts = [*lines, *joined, "😀 a😀b 𝔘𝔫𝔦", "[UNK] [CLS] x"]
    checked = np.arange(len(texts)) % 3 != 1
    flat, came = tok.encode_flat_checked(texts, checked)
    assert all(np.array_equal(a, b) for a, b in zip(flat, tok.encode_flat(texts)))
    pre = came.pre
    assert pre is not None and pre.docs.tolist() == np.flatnonzero(checked).tolist()
    lib = Tokenizer.from_file(str(path))
    # the texts decoded on the encoding thread (decode_batch) are the library's decode of each
    bounds = np.concatenate(([0], np.cumsum(flat[3]))).tolist()
    assert came.decoded is not None and sorted(came.decoded) == pre.docs.tolist()
    for doc, text in came.decoded.items():
        ids = flat[0][bounds[doc] : bounds[doc + 1]].tolist()
        assert text == lib.decode(ids, skip_special_tokens=False)

    def library(text):
        pts = PreTokenizedString(text)
        if lib.normalizer is not None:
            pts.normalize(lib.normalizer.normalize)
        lib.pre_tokenizer.pre_tokenize(pts)
        splits = pts.get_splits(offset_referential="original", offset_type="char")
        return [(s, e) for _, (s, e), _ in splits if e > s]

    at = np.concatenate(([0], np.cumsum(pre.per_doc)))
    for k, doc in enumerate(pre.docs.tolist()):
        assert [tuple(x) for x in pre.spans[at[k] : at[k + 1]].tolist()] == library(texts[doc])


@pytest.mark.parametrize("name", ["bpe-gpt2", "bpe-o200k", "minilm"])
def test_a_tokenizer_json_vocabulary_size_is_the_librarys_largest_id(rw, name):
    """vocab_size is read from the file (its model's vocabulary and added tokens); the
    second method is the library's own get_vocab with the added tokens."""
    from tokenizers import Tokenizer

    path = rw / "tokenizers" / name / "tokenizer.json"
    ids = Tokenizer.from_file(str(path)).get_vocab(with_added_tokens=True).values()
    assert load_tokenizer(str(path)).vocab_size == max(ids) + 1
