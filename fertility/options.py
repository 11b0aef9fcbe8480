"""Options declared once: typed dataclass fields that carry their default, their type, their
help and their command-line spelling.

A field made with `option(...)` is a command-line option (or argument); the command line
builds its click parameters from the fields (`fertility.cli.options.options_of`) and the
options object back from what click parsed (`from_params`), so no option list, type or
default is written twice. The type says how the value is read: `bool` a flag, `int`/`float`
a number (`min`/`max` its range), a `Literal[...]` one of a fixed set, `tuple[str, ...]` a
repeatable option (or, with `argument=True`, the command's arguments). A field without
`option(...)` is the Python API's alone (a callback, a nested options object).

This module imports nothing heavy: the command line reads it to build `--help`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

# Fixed sets of values, one declaration each (the command line offers exactly these).
Device = Literal["auto", "cpu", "cuda"]  # the trainer's; eval also takes cuda:N
ReportFormat = Literal["table", "json", "csv", "html"]
GateFormat = Literal["text", "json"]
EvalFormat = Literal["table", "json"]
ExportTarget = Literal["hf"]
FixModel = Literal["bpe", "unigram"]
FixBackend = Literal["tokenizers", "sentencepiece"]
Normalization = Literal["none", "nfc", "nfkc"]

# Measuring a document costs about 75-115 bytes per character (the tokenizer's offsets, the
# per-character arrays; a 50M-character line: 3.7 GB), so one longer than this is refused:
# a 1M-character one stays near 120 MB. --max-doc-chars raises it.
MAX_DOC_CHARS = 1_000_000
# A file whose first 8 KB are more than this share invalid UTF-8 is not text (random bytes:
# about 47%; Latin-1 French or German: 1-3%); --max-invalid-utf8 raises it.
MAX_INVALID_SHARE = 0.25

FLAG = "fertility.option"  # the metadata key of a field's command-line spelling


@dataclass(frozen=True)
class Flag:
    """How one field is spelt and explained on the command line."""

    help: str = ""
    decls: tuple[str, ...] = ()  # e.g. ("-t", "--tokenizer"); default: --field-name
    metavar: str | None = None
    min: float | None = None  # numbers: the range (inclusive unless *_open)
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    show_default: bool = False
    argument: bool = False  # a positional argument (a tuple field: one or more)
    parse: Callable[[str], Any] | None = None  # the text given -> the field's value

    def names(self, name: str) -> tuple[str, ...]:
        return self.decls or ("--" + name.replace("_", "-"),)


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str = "",
    decls: tuple[str, ...] = (),
    metavar: str | None = None,
    min: float | None = None,
    max: float | None = None,
    min_open: bool = False,
    max_open: bool = False,
    show_default: bool = False,
    argument: bool = False,
    parse: Callable[[str], Any] | None = None,
    config: bool = False,
) -> Any:
    """A dataclass field that is also a command-line option. No default: a required one.
    `config=True`: the field is also a key of the trainer's TrainConfig (trainer.options)."""
    flag = Flag(help, decls, metavar, min, max, min_open, max_open, show_default, argument, parse)
    return field(default=default, metadata={FLAG: flag, "config": config})


def flags(cls: type) -> list[tuple[dataclasses.Field, Flag]]:
    """The fields of `cls` that are command-line options, in declaration order."""
    return [(f, f.metadata[FLAG]) for f in dataclasses.fields(cls) if FLAG in f.metadata]


@dataclass(frozen=True)
class CorpusOptions:
    """How a corpus is read: `Corpus`'s options besides its paths (fertility.corpus), and
    every command's corpus options (`fertility.cli.options.corpus_options`), declared here
    once. Every function that takes `corpus_options=` takes one of these."""

    text_field: str = option(
        "text", show_default=True, help="JSONL field / parquet column holding the text."
    )
    lang_field: str | None = option(
        None, help="JSONL field / parquet column holding the language label."
    )
    whole_files: bool = option(False, help="Each file is one document.")
    sample: float | None = option(
        None, min=0, max=1, min_open=True, help="Read a deterministic FRACTION of the documents."
    )
    max_docs: int | None = option(None, min=1, help="Read at most N documents (after --sample).")
    seed: int = option(0, show_default=True, help="Seed of --sample.")
    strict: bool = option(False, help="Fail on invalid UTF-8 instead of replacing and counting it.")
    max_doc_chars: int = option(
        MAX_DOC_CHARS,
        min=1,
        show_default=True,
        help="Refuse a longer document (measuring one costs "
        "about 75-115 bytes of memory per character).",
    )
    max_invalid_utf8: float = option(
        MAX_INVALID_SHARE,
        min=0,
        max=1,
        show_default=True,
        metavar="SHARE",
        help="Skip a file as binary when "
        "more than this share of its first 8 KB is invalid UTF-8 (1: never).",
    )
    # called with each warning about the data (None: Python's warnings.warn)
    on_warning: Callable[[str], None] | None = None
