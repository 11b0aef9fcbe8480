"""Writing tokenizer.json: the byte-level BPE that a rank file (tiktoken, tekken) is, as the
`tokenizers` library reads it. `fertility extend` (a rank-file base) and `fertility export`
(a tiktoken run's tokenizer) both write it."""

from __future__ import annotations

from collections.abc import Iterable

from fertility.tokenizers.hf import bytes_to_unicode


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
    table = bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(table[x] for x in b)

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
            "vocab": {text(b): i for i, b in sorted(tokens.items())},
            "merges": [[text(a), text(b)] for a, b in merges],
        },
    }
