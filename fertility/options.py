"""Options declared once: typed dataclass fields that carry their default, their type, their
help and their command-line spelling.

A field made with `option(...)` is a command-line option (or argument); the command line
builds its click parameters from the fields (`fertility.cli.options.options_of`) and the
options object back from what click parsed (`from_params`), so no option list, type or
default is written twice. The type says how the value is read: `bool` a flag, `int`/`float`
a number (`min`/`max` its range), a `Literal[...]` one of a fixed set, `tuple[str, ...]` a
repeatable option (or, with `argument=True`, the command's arguments); a `Literal` field with
`switches` is one flag per value (fix's --nfc/--nfkc); `parse` reads the text into the field's
own type (--detail N|all: a number or None), its OptionValueError a bad value. A field without
`option(...)` is the Python API's alone (a callback), or a nested options object whose
fields are options in its place (a command's CorpusOptions). The options every corpus command
shares, --quiet and --allow-output-in-corpus, are CorpusCommandOptions', which its options
object inherits.

This module imports nothing heavy: the command line reads it to build `--help`.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from fertility.errors import TrainingError

# Fixed sets of values, one declaration each (the command line offers exactly these).
Device = Literal["auto", "cpu", "cuda"]  # the trainer's; eval also takes cuda:N
ReportFormat = Literal["table", "json", "csv", "html", "leaderboard", "leaderboard-csv"]
GateFormat = Literal["text", "json"]
EvalFormat = Literal["table", "json"]
PretrainFormat = Literal["text", "json"]  # the summary at the end of a run
Executor = Literal["local", "slurm", "ray"]  # datatrove executors of --tasks (fertility.engine)
ExportTarget = Literal["hf"]
FixModel = Literal["bpe", "unigram"]
FixBackend = Literal["tokenizers", "sentencepiece"]
Normalization = Literal["none", "nfc", "nfkc"]
Severity = Literal["error", "warning", "info"]  # a finding's; the policy's fail_on, "error" first
Group = Literal[
    "all", "language", "script", "running"
]  # what a report row is about (fertility.measure)
Uncertain = Literal["fail", "pass"]  # the gate's verdict when a check is uncertain

# Measuring a document holds the tokenizers' offsets and the per-character arrays at once:
# 78-212 bytes per character with the four standard pre-tokenizers, 230-934 with a byte-level
# BPE (the most where each character is several tokens: Bengali, Chinese), measured as the
# peak RSS between a 2M- and a 4M-character line (docs/RELIABILITY.md, "Corpus input"). So
# one longer than this is refused (--max-doc-chars raises it), and a limit whose document
# needs more than the memory left, at MIN_BYTES_PER_CHAR (under every measurement), is
# refused before anything is read (fertility.corpus.memory).
MAX_DOC_CHARS = 1_000_000
MIN_BYTES_PER_CHAR = 75
# A file whose first 8 KB are more than this share invalid UTF-8 is not text (random bytes:
# about 47%; Latin-1 French or German: 1-3%); --max-invalid-utf8 raises it.
MAX_INVALID_SHARE = 0.25

FLAG = "fertility.option"  # the metadata key of a field's command-line spelling


@dataclass(frozen=True)
class Switch:
    """One flag that sets its field to `value` (a field's `switches`)."""

    decl: str
    value: str
    help: str = ""
    hidden: bool = False


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
    # an argument that may be left out though the Python API requires it (pretrain's PATHS,
    # which --shards stands in for: the options object checks which was given)
    optional: bool = False
    parse: Callable[[str], Any] | None = None  # the text given -> the field's value
    # a Literal field given by one flag per value (e.g. --nfc, --nfkc) instead of a --name
    switches: tuple[Switch, ...] = ()

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
    switches: tuple[Switch, ...] = (),
    config: bool = False,
    optional: bool = False,
) -> Any:
    """A dataclass field that is also a command-line option. No default: a required one.
    `config=True`: the field is also a key of the trainer's TrainConfig (trainer.options)."""
    flag = Flag(
        help,
        decls,
        metavar,
        min,
        max,
        min_open,
        max_open,
        show_default,
        argument,
        optional,
        parse,
        switches,
    )
    return field(default=default, metadata={FLAG: flag, "config": config})


def fields_in_order(cls: type) -> list[dataclasses.Field]:
    """The fields of `cls` in the order of its command line: its own as declared, then those
    it inherits (a corpus command's --quiet and --allow-output-in-corpus, CorpusCommandOptions',
    come after its own options and its corpus options)."""
    own = vars(cls).get("__annotations__", {})
    fields = dataclasses.fields(cls)
    return [f for f in fields if f.name in own] + [f for f in fields if f.name not in own]


def flags(cls: type) -> list[tuple[dataclasses.Field, Flag]]:
    """The fields of `cls` that are command-line options, in command-line order."""
    return [(f, f.metadata[FLAG]) for f in fields_in_order(cls) if FLAG in f.metadata]


class OptionValueError(ValueError):
    """A value an option's `parse` refuses: the command line says it as click says any bad
    value, naming the option (exit 2)."""


@dataclass(frozen=True)
class CorpusOptions:
    """How a corpus is read: `Corpus`'s options besides its paths (fertility.corpus), and
    every corpus command's corpus options (its options object's field of this type), declared
    here once. Every function that takes `corpus_options=` takes one of these."""

    text_field: str = option(
        "text", show_default=True, help="JSONL field / parquet column holding the text."
    )
    lang_field: str | None = option(
        None, help="JSONL field / parquet column holding the language label."
    )
    whole_files: bool = option(False, help="Each file is one document.")
    sample: float | None = option(
        None,
        min=0,
        max=1,
        min_open=True,
        help="Keep a FRACTION of the documents of every file (a seeded hash of file and line "
        "picks them).",
    )
    max_docs: int | None = option(
        None,
        min=1,
        help="Keep N documents (of those --sample keeps) drawn across every file: each "
        "language gets its share within one document (the corpus is read once more first).",
    )
    seed: int = option(0, show_default=True, help="Seed of --sample, --max-docs and --precision.")
    precision: float | None = option(
        None,
        min=0,
        max=1,
        min_open=True,
        max_open=True,
        metavar="REL",
        help="report and gate: read random blocks of every file until each language's and "
        "judged script's chars/token 95% interval is within REL of its value (relative "
        "half-width), or the corpus ends (docs/METRICS.md, Samples).",
    )
    strict: bool = option(False, help="Fail on invalid UTF-8 instead of replacing and counting it.")
    max_doc_chars: int = option(
        MAX_DOC_CHARS,
        min=1,
        show_default=True,
        help="Refuse a longer document (measuring one holds about 80-930 bytes of memory "
        "per character; a limit this machine cannot hold is refused).",
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


@dataclass(frozen=True, kw_only=True)
class CorpusCommandOptions:
    """The two options every command that reads a corpus takes besides the corpus options,
    declared here once: each such command's options object inherits them. Keyword-only, so
    the command's own fields keep their places (PretrainOptions is given its first three
    positionally); on the command line they come last (`fields_in_order`)."""

    quiet: bool = option(False, decls=("--quiet", "-q"), help="No progress on stderr.")
    allow_output_in_corpus: bool = option(
        False,
        help="Write outputs inside a corpus folder this command reads (refused by "
        "default; later runs skip what fertility wrote there).",
    )


# Options more than one verb declares, spelt once.
TOKENIZER_SPEC = "[LABEL=]SPEC"
WORKERS_HELP = (
    "Measuring processes (default: one, and after a few seconds of measuring it hands "
    "the rest to one per core, up to 4, if its own timings say they would finish sooner). "
    "The result does not depend on it."
)
# --detail N checks a language's first N documents (DETAIL_DOCS unless told), stopping sooner
# once N x DETAIL_CHARS characters are checked: 200 short lines cost little, but 200 web pages of 6 KB cost three
# times the encoding of four tokenizers (docs/METRICS.md). 256: two long sentences, so a
# corpus of sentences is still checked on its first N documents (51,200 characters at 200).
DETAIL_DOCS = 200
DETAIL_CHARS = 256
# Documents per batch of a pass (fewer where fertility.measure.passes.BATCH_CHARS characters
# come first): one encode call per tokenizer, and the unit the tasks share out.
BATCH_DOCS = 4096
DETAIL_HELP = (
    "Documents per language that get the per-document checks (round trip, own "
    f"pre-tokenizer ceiling, normaliser changes): the first N, stopping sooner once "
    f"N x {DETAIL_CHARS} characters are checked ('all': every document)."
)
HELDOUT_HELP = "Share of each language held out."


def parse_detail(text: str) -> int | None:
    """--detail N|all: the documents per language that get the per-document checks (None:
    all of them), as `analyze`'s and `gate_run`'s detail_docs take it."""
    if text == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        raise OptionValueError("expected a number of documents or 'all'") from None
    if n < 0:
        raise OptionValueError("must be >= 0")
    return n


def _detail() -> Any:
    return option(
        DETAIL_DOCS, parse=parse_detail, show_default=True, metavar="N|all", help=DETAIL_HELP
    )


def _paths() -> Any:
    return option(argument=True)


def _one_tokenizer(what: str) -> Any:
    """A command's one required -t (report's is repeatable and declared there)."""
    return option(
        decls=("-t", "--tokenizer"),
        metavar=TOKENIZER_SPEC,
        help=f"{what} (same SPEC forms as `report`).",
    )


def _workers() -> Any:
    return option(None, min=1, help=WORKERS_HELP)


def _heldout() -> Any:
    return option(
        0.1, min=0, max=1, min_open=True, max_open=True, show_default=True, help=HELDOUT_HELP
    )


def _executor() -> Any:
    return option(
        "local", show_default=True, help="Where --tasks run: local processes, Slurm or Ray."
    )


def _slurm_partition() -> Any:
    return option(None, help="--executor slurm: the partition.")


def _slurm_time() -> Any:
    return option("04:00:00", show_default=True, help="--executor slurm: each job's time limit.")


def _slurm_env() -> Any:
    return option(
        None,
        metavar="COMMAND",
        help="--executor slurm: the command each job runs first (e.g. 'source .venv/bin/activate').",
    )


# fix and extend hold out runs of this many consecutive lines (fertility.corpus.sampling says
# why; docs/FIX.md measures it)
HELDOUT_BLOCK = 100


def _heldout_block() -> Any:
    return option(
        HELDOUT_BLOCK,
        min=1,
        show_default=True,
        metavar="LINES",
        help="Hold out runs of this many consecutive lines (records), not single lines: "
        "neighbouring lines share their topic (1: single lines).",
    )


# --parallel of report and gate (fertility.findings.parity: the premium only on evidence)
PARALLEL_HELP = (
    "The files are translations line by line (the token premium's layout; FLORES-style "
    "files of one folder need no flag); their line lengths must still agree."
)


@dataclass(frozen=True)
class ReportOptions(CorpusCommandOptions):
    """Everything `report` is told (its command-line options are these fields)."""

    paths: tuple[str, ...] = _paths()
    tokenizers: tuple[str, ...] = option(
        (),
        decls=("-t", "--tokenizer"),
        metavar=TOKENIZER_SPEC,
        help="tokenizer.json (or its folder), Tekken .json, SentencePiece .model, "
        "tiktoken rank file (SPEC#PATTERN names its split pattern), tiktoken:NAME "
        "or hf:ORG/NAME. "
        "Repeatable.",
    )
    fmt: ReportFormat = option(
        "table",
        decls=("--format",),
        show_default=True,
        help="table: for a terminal (fits COLUMNS); json, csv: every row and field; html: one page.",
    )
    output: str | None = option(
        None, decls=("-o", "--output"), help="Write to FILE instead of stdout."
    )
    plots: str | None = option(
        None,
        metavar="DIR",
        help="Also write each chart of the HTML report into DIR as NAME.png and NAME.svg "
        "(any --format; needs the images extra, kaleido, and a Chrome or Chromium).",
    )
    pretokenizers: str | None = option(
        None,
        metavar="LIST",
        help="Comma-separated pre-tokenizer families to measure as ceilings "
        "(gpt2, cl100k, o200k, whitespace, mark_aware). Default: all four standard "
        "ones when no tokenizer is named, none otherwise.",
    )
    detail: int | None = _detail()
    reference: str | None = option(
        None, help="Reference language of the parity premium (default: the policy's, en)."
    )
    parallel: bool = option(False, help=PARALLEL_HELP)
    policy: str | None = option(None, help="Gate policy TOML (thresholds of the findings).")
    no_diagnose: bool = option(False, help="Measurements only, no findings.")
    verbose: bool = option(
        False,
        decls=("-v", "--verbose"),
        help="Table: every column, and every finding "
        "with its evidence, cause and fix (default: one line per rule and tokenizer).",
    )
    workers: int | None = _workers()
    # --tasks: measuring split into datatrove tasks (fertility.engine, docs/SCALE.md)
    tasks: int | None = option(
        None,
        min=1,
        help="Split the measuring into N datatrove tasks (the counts do not depend on N); "
        "a relaunch with the same --work-dir runs only the unfinished ones.",
    )
    executor: Executor = _executor()
    work_dir: str | None = option(
        None,
        metavar="DIR",
        help="--tasks: the folder of the tasks' counts, logs and completion markers, kept "
        "(default: a folder of these inputs' own, said on stderr and removed once the report "
        "is made: in the temporary folder for local, in the current one for slurm and ray, "
        "which every node must see).",
    )
    slurm_partition: str | None = _slurm_partition()
    slurm_time: str = _slurm_time()
    slurm_env: str | None = _slurm_env()
    # the corpus options (on the command line after the command's own)
    corpus: CorpusOptions = field(default_factory=CorpusOptions)


# The shards' defaults, `fertility tokenize`'s and the trainer's (trainer/config.py)
HELDOUT_FRACTION = 0.01
SEPARATOR = "auto"  # the tokenizer's end-of-text token, else a reserved id past the vocabulary
SHARD_TOKENS = 1 << 28  # a shard is closed once it holds this many tokens


def _separator(text: str) -> int | str:
    if text in ("auto", "none"):
        return text
    if text.isascii() and text.isdigit():
        return int(text)
    raise TrainingError(f"--separator: {text!r} is not auto, none or a token id (an integer)")


@dataclass(frozen=True)
class TokenizeOptions(CorpusCommandOptions):
    """Everything `tokenize` is told (its command-line options are these fields)."""

    paths: tuple[str, ...] = _paths()
    tokenizer: str = _one_tokenizer("The tokenizer to train with")
    out: str = option(
        help="The shards' folder (new, empty or an earlier run of the same inputs, which a "
        "relaunch finishes)."
    )
    tasks: int = option(
        1,
        min=1,
        show_default=True,
        help="datatrove tasks; a relaunch runs only the unfinished ones (each task reads the "
        "whole corpus and encodes every N-th batch).",
    )
    executor: Executor = _executor()
    workers: int | None = option(
        None,
        min=1,
        help="--executor local: tasks run at once (default: all of them; at most one per core).",
    )
    heldout_fraction: float = option(
        HELDOUT_FRACTION,
        min=0,
        max=1,
        max_open=True,
        show_default=True,
        help="Share of documents held out for evaluation (a hash of --seed, file and line "
        "picks them).",
    )
    separator: int | str = option(
        SEPARATOR,
        parse=_separator,
        show_default=True,
        metavar="auto|none|ID",
        help="The id after every document: auto is the tokenizer's end-of-text token, else a "
        "new id past its vocabulary.",
    )
    shard_tokens: int = option(
        SHARD_TOKENS, min=1, show_default=True, help="A shard is closed once it holds this many."
    )
    batch_docs: int = option(
        BATCH_DOCS,
        min=1,
        show_default=True,
        help="Documents per batch (fewer where 262,144 characters come first): one encode call, "
        "and the unit the tasks share out.",
    )
    no_counts: bool = option(
        False,
        help="Write the shards alone, without the counts the gate reads (about a fifth less "
        "CPU); `pretrain --shards` then trains on them only with --force.",
    )
    policy: str | None = option(
        None, metavar="FILE", help="Gate policy TOML of the verdict printed at the end."
    )
    fmt: GateFormat = option(
        "text",
        decls=("--format",),
        show_default=True,
        help="text: a summary for a person; json: the shards' index and the gate's verdict.",
    )
    slurm_partition: str | None = _slurm_partition()
    slurm_time: str = _slurm_time()
    slurm_env: str | None = _slurm_env()
    corpus: CorpusOptions = field(default_factory=CorpusOptions)


@dataclass(frozen=True)
class GateOptions(CorpusCommandOptions):
    """Everything `gate` is told (its command-line options are these fields)."""

    paths: tuple[str, ...] = _paths()
    tokenizer: str = _one_tokenizer("The candidate tokenizer")
    baseline: str | None = option(
        None,
        metavar=TOKENIZER_SPEC,
        help="The candidate must not be worse than this one beyond the policy margin.",
    )
    policy: str | None = option(
        None,
        help="Policy TOML; default: fertility.toml [gate], "
        "[tool.fertility.gate] of pyproject.toml, else the built-in policy (docs/GATE.md).",
    )
    reference: str | None = option(
        None,
        help="Reference language of the premium check (default: the policy's, en; en is "
        "also eng_Latn); one the corpus lacks is refused.",
    )
    parallel: bool = option(False, help=PARALLEL_HELP)
    fmt: GateFormat = option(
        "text",
        decls=("--format",),
        show_default=True,
        help="text: the verdict and every check; json: the same as a document (docs/GATE.md).",
    )
    output: str | None = option(None, decls=("-o", "--output"), help="Write the verdict to FILE.")
    junit: str | None = option(None, metavar="FILE", help="Also write JUnit XML for CI.")
    html_out: str | None = option(
        None, decls=("--html",), metavar="FILE", help="Also write the HTML report."
    )
    detail: int | None = _detail()
    verbose: bool = option(
        False,
        decls=("-v", "--verbose"),
        help="Every blocking finding with its cause "
        "and fix, and every check's note (default: one line per rule).",
    )
    workers: int | None = _workers()
    corpus: CorpusOptions = field(default_factory=CorpusOptions)


@dataclass(frozen=True)
class FixOptions(CorpusCommandOptions):
    """Everything `fix` is told (its command-line options are these fields)."""

    paths: tuple[str, ...] = _paths()
    vocab_size: int = option(min=1, help="Size of the new vocabulary, special tokens included.")
    out_dir: str = option(
        decls=("--out",),
        help="Folder for tokenizer.json, fix-report.json, report.html and the held-out documents.",
    )
    from_tok: str | None = option(
        None,
        decls=("--from",),
        metavar=TOKENIZER_SPEC,
        help="The tokenizer being replaced: its special tokens (and ids where they fit) "
        "are kept, and it is measured beside the new one.",
    )
    model: FixModel = option("bpe", show_default=True, help="The vocabulary model to train.")
    backend: FixBackend = option(
        "tokenizers", show_default=True, help="The library that trains it (docs/FIX.md)."
    )
    normalization: Normalization | None = option(
        None,
        help="The normaliser (default: none, the text is kept as written).",
        switches=(
            Switch(
                "--nfc",
                "nfc",
                "Normalise to NFC (lossy: "
                "the report lists what it changes; without it the text is kept as written).",
            ),
            Switch("--nfkc", "nfkc", "Normalise to NFKC (lossy)."),
            Switch("--no-normalize", "none", "Deprecated: no normaliser is the default.", True),
        ),
    )
    temperature: float = option(
        0.3,
        min=0,
        show_default=True,
        help="Language sampling: p(lang) ∝ chars(lang)^T (0: uniform, 1: as found).",
    )
    heldout: float = _heldout()
    heldout_block: int = _heldout_block()
    heldout_max: int = option(
        1000, min=1, show_default=True, help="At most N held-out documents per language."
    )
    max_train_chars: int | None = option(
        None, min=1, help="Training-text budget of the sampler (default: all training text)."
    )
    special_tokens: tuple[str, ...] = option(
        (),
        decls=("--special-token",),
        help="Special token to add (repeatable; default <|endoftext|>, or --from's).",
    )
    policy: str | None = option(None, help="Gate policy TOML for the new tokenizer.")
    corpus: CorpusOptions = field(default_factory=CorpusOptions)


@dataclass(frozen=True)
class ExtendOptions(CorpusCommandOptions):
    """Everything `extend` is told (its command-line options are these fields)."""

    base: str = option(argument=True)
    paths: tuple[str, ...] = _paths()
    add: int = option(min=1, help="New tokens to learn.")
    out_dir: str = option(
        decls=("--out",),
        help="Folder for tokenizer.json, ids-map.json, extend-report.json and the held-out "
        "documents.",
    )
    langs: str | None = option(
        None,
        metavar="bn,hi",
        help="Languages to learn the new tokens on (default: those the gate fails).",
    )
    heldout: float = _heldout()
    heldout_block: int = _heldout_block()
    heldout_max: int = option(
        1000, min=1, show_default=True, help="At most N held-out documents per language."
    )
    policy: str | None = option(None, help="Gate policy TOML.")
    corpus: CorpusOptions = field(default_factory=CorpusOptions)


@dataclass(frozen=True)
class EvalOptions(CorpusCommandOptions):
    """Everything `eval` is told (its command-line options are these fields)."""

    run_dir: str = option(argument=True)
    corpus: tuple[str, ...] = option(
        (),
        metavar="PATH",
        help="Held-out text to score instead of the run's own held-out split.",
    )
    tasks: tuple[str, ...] = option(
        (), metavar="FILE.jsonl", help="Multiple-choice task files (docs/EVAL.md)."
    )
    no_lm: bool = option(False, help="Tasks only, no language-modelling scores.")
    fmt: EvalFormat = option(
        "table",
        decls=("--format",),
        show_default=True,
        help="table: for a terminal; json: every score with its interval (docs/EVAL.md).",
    )
    output: str | None = option(
        None, decls=("-o", "--output"), help="Write to FILE instead of stdout."
    )
    step: int | None = option(None, help="Checkpoint step (default: newest).")
    # any of Device, or cuda:N
    device: str = option(
        "auto",
        show_default=True,
        metavar="|".join((*typing.get_args(Device), "cuda:N")),
        help="Where to score (auto: CUDA when available).",
    )
    context: int | None = option(
        None, min=1, help="Window length (default: the training sequence length)."
    )
    twin_seed: int = option(
        0,
        show_default=True,
        help="Seed of the randomly initialised twin the model is scored against.",
    )
    bootstrap: int = option(
        1000,
        min=0,
        show_default=True,
        help="Bootstrap replicates of each interval over documents (below 10: no interval).",
    )
    base: str | None = option(
        None,
        metavar="MODEL_DIR",
        help="Also score this Hugging Face model folder and print each language's bits per "
        "byte against it (default: a continued run's --init-from folder).",
    )
    # `--corpus` is the held-out paths: the corpus options are this field
    corpus_options: CorpusOptions = field(default_factory=CorpusOptions)


@dataclass(frozen=True)
class ExportOptions:
    """Everything `export` is told (its command-line options are these fields)."""

    run_dir: str = option(argument=True)
    out_dir: str = option(argument=True)
    target: ExportTarget = option(
        decls=("--to",), help="hf: a Llama-architecture folder transformers loads."
    )
    step: int | None = option(None, help="Checkpoint step to export (default: the newest).")
    overwrite: bool = option(
        False, help="Replace a previous export's files in OUT_DIR (other files are kept)."
    )
