"""Writing tokenizer.json: the byte-level BPE that a rank file (tiktoken, tekken) is, as the
`tokenizers` library reads it. `fertility extend` (a rank-file base) and `fertility export`
(a tiktoken run's tokenizer) both write it; `mismatches` checks a converted tokenizer.json
against the tokenizer it came from."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from fertility.tokenizers.hf import byte_level_texts


def mismatches(tok: Any, obj: dict, texts: list[str]) -> int:
    """How many `texts` the tokenizer.json `obj` encodes differently from `tok` (-1: it does
    not load)."""
    # deferred: the Rust tokenizers library only when used
    from tokenizers import Tokenizer as HFTokenizer

    try:
        hf = HFTokenizer.from_str(json.dumps(obj, ensure_ascii=False))
    except Exception:  # the binding raises plain Exception (e.g. a regex Onig rejects)
        return -1
    theirs = hf.encode_batch(texts, add_special_tokens=False)
    ours = tok.encode_batch(texts)
    return sum(a.ids != b.ids.tolist() for a, b in zip(theirs, ours))


def special_added_token(token_id: int, content: str) -> dict:
    """An `added_tokens` entry for a special token: matched whole, never normalised."""
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


def split_then_bytes(regex: str, prefix_space: bool = False) -> dict:
    """The pre-tokenizer: split by `regex`, then bytes to GPT-2's alphabet without splitting
    again (ByteLevel's trim_offsets only acts as a post-processor; it is off)."""
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {
                "type": "ByteLevel",
                "add_prefix_space": prefix_space,
                "trim_offsets": False,
                "use_regex": False,
            },
        ],
    }


def byte_level_bpe(
    tokens: dict[int, bytes],
    merges: Iterable[tuple[bytes, bytes]],
    regex: str,
    specials: dict[str, int],
) -> dict:
    """tokenizer.json of `tokens` (id -> bytes) made by `merges`, split by `regex`, with the
    `specials` (content -> id) as special added tokens; no normaliser, no post-processor. A
    piece that is a whole token is that token (ignore_merges), as tiktoken does."""
    ids, pieces = zip(*sorted(tokens.items())) if tokens else ((), ())
    halves = byte_level_texts(x for pair in merges for x in pair)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            special_added_token(i, c) for c, i in sorted(specials.items(), key=lambda kv: kv[1])
        ],
        "normalizer": None,
        "pre_tokenizer": split_then_bytes(regex),
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": dict(zip(byte_level_texts(pieces), ids)),
            "merges": [list(pair) for pair in zip(halves[0::2], halves[1::2])],
        },
    }
