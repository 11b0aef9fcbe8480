"""Mistral's Tekken tokenizer files (``tekken_*.json``), counted as mistral-common counts.

A Tekken file is a tiktoken BPE written as JSON (mistral_common/tokens/tokenizers/tekken.py):

- ``config.pattern``: the split regex (tiktoken's ``pat_str``);
- ``vocab``: ``{"rank", "token_bytes" (base64), "token_str"}`` in rank order, the first 256
  the single bytes;
- ``config.default_vocab_size``: the size of the vocabulary in use, of which the first
  ``config.default_num_special_tokens`` ids are special tokens. Those listed in
  ``special_tokens`` keep their ranks; files without that list (up to v7) use
  mistral-common's twenty legacy names; the rest are ``<SPECIAL_i>`` fillers.

mistral-common keeps the first ``default_vocab_size - default_num_special_tokens`` vocab
entries as tiktoken ranks and adds the number of specials to every id that tiktoken returns;
``Tekkenizer.encode(text, bos=False, eos=False)`` is that and nothing more (special tokens
written in the text are encoded as text). Here the shift is built into the ranks instead:
tiktoken merges the adjacent pair of lowest rank, and adding one constant to every rank
changes no comparison, so an Encoding over the shifted ranks returns mistral-common's ids
directly and the tiktoken adapter measures it unchanged. Decoding drops special tokens, as
mistral-common's default policy (IGNORE) does; byte-level BPE never produces ``<unk>``, so
the adapter has no UNK id.
"""

from __future__ import annotations

import base64
import binascii
from functools import cached_property
from pathlib import Path

import numpy as np

from fertility.errors import TokenizerError, one_line
from fertility.tokenizers.base import MAX_TOKEN_ID, Kind
from fertility.tokenizers.guard import rust_call
from fertility.tokenizers.patterns import check_split_pattern, identify
from fertility.tokenizers.tiktoken import TiktokenTokenizer, require_tiktoken

# Every special token the config declares and the file does not list becomes a "<SPECIAL_i>"
# entry (a Python string and a dict slot, about 150 bytes), so the declared count, not the
# file's size, decides the memory: 300,000,000 took 5.7 GB before running out. Mistral's files
# declare 1,000 (tekken_240718 to tekken v13); this is 65 times that and costs about 10 MB.
MAX_SPECIAL_TOKENS = 1 << 16

# mistral-common's Tekkenizer.DEPRECATED_SPECIAL_TOKENS: ids 0-19 of files that list none.
LEGACY_SPECIALS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)


def looks_like_tekken(obj) -> bool:
    """A JSON object with ``config.pattern`` and a ``vocab`` list of rank entries."""
    if not isinstance(obj, dict):
        return False
    config, vocab = obj.get("config"), obj.get("vocab")
    return (
        isinstance(config, dict)
        and "pattern" in config
        and isinstance(vocab, list)
        # an empty vocab is still a Tekken file: from_json refuses it by name
        and (not vocab or (isinstance(vocab[0], dict) and "token_bytes" in vocab[0]))
    )


def from_json(path: Path, obj: dict, spec: str, label: str) -> TekkenTokenizer:
    tiktoken = require_tiktoken(str(path))
    config = obj["config"]
    pattern = config["pattern"]
    size, n_special = config.get("default_vocab_size"), config.get("default_num_special_tokens")
    if not isinstance(pattern, str) or not pattern:
        raise TokenizerError(f"{path}: Tekken config.pattern is not a regex string")
    if not all(isinstance(n, int) and n >= 0 for n in (size, n_special)):
        raise TokenizerError(
            f"{path}: Tekken config needs integer default_vocab_size and default_num_special_tokens"
        )
    # What the config declares is checked before anything is built from it.
    if size > MAX_TOKEN_ID + 1:
        raise TokenizerError(
            f"{path}: Tekken default_vocab_size {size:,} is beyond any real vocabulary "
            f"(ids at most {MAX_TOKEN_ID:,})"
        )
    if n_special > MAX_SPECIAL_TOKENS:
        raise TokenizerError(
            f"{path}: Tekken default_num_special_tokens {n_special:,} is beyond any real "
            f"tokenizer (at most {MAX_SPECIAL_TOKENS:,})"
        )
    # tiktoken's engine panics on an empty piece: refused here, before any text
    check_split_pattern(path, pattern, "Tekken config.pattern", empty_ok=False)
    if not obj["vocab"]:  # (a vocab shorter than the config's is _ranks' to refuse)
        raise TokenizerError(f"{path}: has no vocabulary (Tekken 'vocab' is empty)")
    specials = _specials(path, obj.get("special_tokens"), n_special)
    ranks = _ranks(path, obj["vocab"], size - n_special, n_special)
    try:
        with rust_call(path, "tiktoken"):
            enc = tiktoken.Encoding(
                label, pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
            )
    except TokenizerError:
        raise
    except Exception as e:  # the Rust core rejects some regexes fancy-regex cannot compile
        raise TokenizerError(
            f"{path}: tiktoken cannot use the Tekken pattern ({one_line(e)})"
        ) from None
    tok = TekkenTokenizer(enc, ranks, specials, spec, label, identify(pattern), pattern)
    tok.path = path
    return tok


def _specials(path: Path, listed, n_special: int) -> dict[str, int]:
    if listed is None:
        listed = [{"rank": i, "token_str": s} for i, s in enumerate(LEGACY_SPECIALS)]
    if not isinstance(listed, list) or not all(
        isinstance(t, dict)
        and isinstance(t.get("rank"), int)
        and isinstance(t.get("token_str"), str)
        for t in listed
    ):
        raise TokenizerError(
            f"{path}: Tekken special_tokens is not a list of {{rank, token_str}} entries"
        )
    out = {t["token_str"]: t["rank"] for t in listed}
    if len(out) != len(listed) or len(out) > n_special:
        raise TokenizerError(
            f"{path}: Tekken special_tokens repeat a name or outnumber "
            f"default_num_special_tokens ({n_special})"
        )
    for i in range(len(listed), n_special):
        out[f"<SPECIAL_{i}>"] = i
    if sorted(out.values()) != list(range(n_special)):
        raise TokenizerError(f"{path}: Tekken special token ranks are not 0..{n_special - 1}")
    return out


def _ranks(path: Path, vocab: list, inner: int, shift: int) -> dict[bytes, int]:
    """tiktoken ranks of the first `inner` vocab entries, each shifted by `shift`."""
    if inner < 256 or len(vocab) < inner:
        raise TokenizerError(
            f"{path}: Tekken vocab has {len(vocab)} entries; the config "
            f"uses {inner} (at least the 256 single bytes)"
        )
    ranks: dict[bytes, int] = {}
    for i, entry in enumerate(vocab[:inner]):
        try:
            if not isinstance(entry, dict) or entry.get("rank") != i:
                raise ValueError(f"expected rank {i}")
            token = base64.b64decode(entry["token_bytes"], validate=True)
        except (KeyError, TypeError, ValueError, binascii.Error) as e:
            raise TokenizerError(f"{path}: Tekken vocab entry {i}: {one_line(e)}") from None
        if i < 256 and token != bytes([i]):
            raise TokenizerError(f"{path}: Tekken vocab entry {i} is not the single byte {i}")
        ranks[token] = i + shift
    if len(ranks) != inner:
        raise TokenizerError(f"{path}: Tekken vocab lists a token twice")
    return ranks


class TekkenTokenizer(TiktokenTokenizer):
    kind: Kind = "tekken"

    @cached_property
    def _n_special(self) -> int:
        return len(self.special_tokens)

    def decode(self, ids) -> str:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        return super().decode(ids[ids >= self._n_special])

    @cached_property
    def _table(self) -> list[bytes]:
        table = [b""] * self.vocab_size  # special tokens add nothing to decoded text
        for tok, rank in self._ranks.items():
            table[rank] = tok
        return table
