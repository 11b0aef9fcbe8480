"""Our token ids equal the tokenizers' own libraries on real tokenizer files and real text.

Reference per format: tiktoken (rank files, with the split pattern the publisher ships),
sentencepiece (SentencePiece models), tokenizers (WordPiece and byte-level BPE JSON).
Every language of ROOT/text is sampled evenly over its file, so each source (Firefox strings,
GTK and iso-codes catalogues, the Russian jokes) is in the sample.
"""

from __future__ import annotations

import pytest
import sentencepiece
import tiktoken
import tiktoken.load
import tokenizers
from tiktoken_ext import openai_public

from fertility import load_tokenizer

pytestmark = pytest.mark.realworld

PER_LANGUAGE = 200

# The split patterns as Meta's own loaders pass them to tiktoken.Encoding, copied from
# llama-models 0.3.0 (llama_models/llama3/tokenizer.py and llama_models/llama4/tokenizer.py).
LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA4_PAT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@pytest.fixture(scope="module")
def lines(rw):
    out = []
    for path in sorted((rw / "text").glob("*.txt")):
        text = path.read_text(encoding="utf-8").splitlines()
        out += text[:: max(1, len(text) // PER_LANGUAGE)][:PER_LANGUAGE]
    return out


def ours(path, pattern=None):
    tok = load_tokenizer(str(path), pattern=pattern)
    return lambda texts: [e.ids.tolist() for e in tok.encode_batch(texts)]


def openai_pattern(encoding: str, ranks: dict, monkeypatch) -> str:
    """tiktoken's own pat_str for an OpenAI encoding, fed the ranks from our file (offline)."""
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks)
    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: ranks)
    return openai_public.ENCODING_CONSTRUCTORS[encoding]()["pat_str"]


RANK_FILES = [
    # (file, pattern given to our loader (None: from the file name),
    #  the reference's pattern: a tiktoken encoding name or the publisher's regex)
    ("o200k_base.tiktoken", None, "o200k_base"),
    ("cl100k_base.tiktoken", None, "cl100k_base"),
    ("r50k_base.tiktoken", None, "r50k_base"),
    ("llama3/tokenizer.model", "llama3", LLAMA3_PAT),
    ("llama4/tokenizer.model", "o200k", LLAMA4_PAT),
]


@pytest.mark.parametrize("name,pattern,reference", RANK_FILES, ids=[r[0] for r in RANK_FILES])
def test_rank_files_match_tiktoken(rw, lines, monkeypatch, name, pattern, reference):
    path = rw / "tokenizers" / name
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    if reference in openai_public.ENCODING_CONSTRUCTORS:
        pat = openai_pattern(reference, ranks, monkeypatch)
    else:
        pat = reference
    enc = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens={})
    assert ours(path, pattern)(lines) == [enc.encode_ordinary(t) for t in lines]


@pytest.mark.parametrize(
    "name", ["mistral/tokenizer.model.v1", "mistral/mistral_instruct_tokenizer_240323.model.v3"]
)
def test_sentencepiece_models_match_sentencepiece(rw, lines, name):
    path = rw / "tokenizers" / name
    sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
    expected = sp.encode(lines)  # the Python API adds no BOS/EOS unless asked
    assert ours(path)(lines) == expected


@pytest.mark.parametrize(
    "name", ["minilm/tokenizer.json", "bpe-gpt2/tokenizer.json", "bpe-o200k/tokenizer.json"]
)
def test_tokenizer_json_matches_tokenizers(rw, lines, name):
    path = rw / "tokenizers" / name
    reference = tokenizers.Tokenizer.from_file(str(path))
    limit = (reference.truncation or {}).get("max_length")
    reference.no_truncation()
    reference.no_padding()
    expected = [e.ids for e in reference.encode_batch(lines, add_special_tokens=False)]
    assert ours(path)(lines) == expected
    if limit:  # the file truncates: the sample must hold lines past it, or truncation went unseen
        assert max(map(len, expected)) > limit
