"""`fertility fix`'s settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import numpy as np

from fertility.errors import FixError
from fertility.options import HELDOUT_BLOCK, FixBackend, FixModel, Normalization


@dataclass(frozen=True)
class Backend:
    """What differs between the libraries `fix` trains with, declared once (the names are
    fertility.options.FixBackend's)."""

    needs_unk: bool  # trains only with an UNK id in the vocabulary
    byte_documents: bool  # reads documents as UTF-8 bytes (its limits count bytes)
    split_regex: bool  # applies the pre-tokenizer's split pattern (SentencePiece has none)
    artifact: str  # the file the trained vocabulary is written to
    native_model: bool  # the artifact is the library's own model (tokenizer.json made beside)


BACKENDS: dict[str, Backend] = {
    "tokenizers": Backend(
        needs_unk=False,
        byte_documents=False,
        split_regex=True,
        artifact="tokenizer.json",
        native_model=False,
    ),
    "sentencepiece": Backend(
        needs_unk=True,
        byte_documents=True,
        split_regex=False,
        artifact="tokenizer.model",
        native_model=True,
    ),
}
assert set(BACKENDS) == set(get_args(FixBackend))


@dataclass
class FixConfig:
    vocab_size: int
    model: FixModel = "bpe"
    backend: FixBackend = "tokenizers"
    normalization: Normalization = "none"  # nfc, nfkc: lossy (see the docstring)
    temperature: float = 0.3  # p_lang ∝ chars_lang ** temperature
    heldout_fraction: float = 0.1  # per language, by document
    heldout_max_docs: int | None = 1000  # per language; None: no cap
    heldout_block: int = HELDOUT_BLOCK  # held out in runs of this many consecutive lines
    seed: int = 0  # held-out split and sampling order
    max_train_chars: int | None = None  # sampling budget; None: all training characters
    special_tokens: tuple[str, ...] | None = None  # None: --from's, else DEFAULT_SPECIALS
    pattern: str = "mark_aware"  # split of the tokenizers backend (a patterns name)

    @property
    def trainer(self) -> Backend:
        return BACKENDS[self.backend]

    def validate(self) -> None:
        def bad(msg: str) -> FixError:
            return FixError(f"fix settings: {msg}")

        if (
            isinstance(self.vocab_size, bool)
            or not isinstance(self.vocab_size, int)
            or self.vocab_size < 1
        ):
            raise bad(f"vocab_size={self.vocab_size!r}: must be a whole number >= 1")
        for name, allowed in (  # the sets fertility.options declares
            ("model", get_args(FixModel)),
            ("backend", get_args(FixBackend)),
            ("normalization", get_args(Normalization)),
        ):
            if getattr(self, name) not in allowed:
                raise bad(f"{name}={getattr(self, name)!r}: use one of {', '.join(allowed)}")
        if not (self.temperature >= 0 and np.isfinite(self.temperature)):
            raise bad(f"temperature={self.temperature!r}: must be a number >= 0")
        if not 0 < self.heldout_fraction < 1:
            raise bad(f"heldout_fraction={self.heldout_fraction!r}: must be in (0, 1)")
        if isinstance(self.heldout_block, bool) or not (
            isinstance(self.heldout_block, int) and self.heldout_block >= 1
        ):
            raise bad(f"heldout_block={self.heldout_block!r}: must be a whole number >= 1")
        if self.heldout_max_docs is not None and self.heldout_max_docs < 1:
            raise bad(f"heldout_max_docs={self.heldout_max_docs!r}: must be >= 1")
        if self.max_train_chars is not None and self.max_train_chars < 1:
            raise bad(f"max_train_chars={self.max_train_chars!r}: must be >= 1")
