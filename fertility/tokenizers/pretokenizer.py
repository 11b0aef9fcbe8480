"""A standard pre-tokenizer family measured as a tokenizer (its ceiling)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

import numpy as np

from fertility.tokenizers.base import Flat, Kind
from fertility.tokenizers.patterns import resolve_pattern, split_many

# The kind of a pre-tokenizer family measured as a tokenizer (its frame rows, its Report.tokenizers
# entry): a report row's kind tells a real tokenizer from a ceiling.
PRETOKENIZER: Final = "pretokenizer"


class PretokenizerFamily:
    """A standard pre-tokenizer measured as if each pre-token were a token: the ceiling."""

    kind: Kind = PRETOKENIZER
    path = None  # no file
    vocab_size = 0
    unk_id = None
    special_tokens: dict[str, int] = {}

    def __init__(self, name: str) -> None:
        self.label, self.pattern = resolve_pattern(name)
        self.spec = f"pretokenizer:{self.label}"
        self.fingerprint = hashlib.sha256(self.pattern.encode()).hexdigest()

    def pre_tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return split_many(self.pattern, texts)

    def encode_flat(self, texts: list[str]) -> Flat:
        flat, counts = self.pre_tokenize(texts)
        return np.zeros(len(flat), np.int64), flat[:, 0], flat[:, 1], counts

    def config(self) -> dict:
        return {"pattern": self.pattern}
