"""Options and output helpers every command shares."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from fertility.errors import FertilityError, visible

if TYPE_CHECKING:
    from fertility.corpus import CorpusOptions


def need_torch(command: str) -> None:
    """torch is an optional extra: say how to get it instead of raising ImportError."""
    try:
        # deferred: torch is the optional train extra
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        raise FertilityError(
            f"`fertility {command}` needs PyTorch and safetensors: pip install 'fertility[train]'"
        ) from None


def corpus_options(f):
    """Options every command that reads a corpus shares."""
    opts = [
        click.option(
            "--text-field",
            default="text",
            show_default=True,
            help="JSONL field / parquet column holding the text.",
        ),
        click.option(
            "--lang-field",
            default=None,
            help="JSONL field / parquet column holding the language label.",
        ),
        click.option("--whole-files", is_flag=True, help="Each file is one document."),
        click.option(
            "--sample",
            type=click.FloatRange(0, 1, min_open=True),
            default=None,
            help="Read a deterministic FRACTION of the documents.",
        ),
        click.option(
            "--max-docs",
            type=click.IntRange(1),
            default=None,
            help="Read at most N documents (after --sample).",
        ),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample."),
        click.option(
            "--strict",
            is_flag=True,
            help="Fail on invalid UTF-8 instead of replacing and counting it.",
        ),
        click.option(
            "--max-doc-chars",
            type=click.IntRange(1),
            default=1_000_000,
            show_default=True,
            help="Refuse a longer document (measuring one costs "
            "about 75-115 bytes of memory per character).",
        ),
        click.option(
            "--max-invalid-utf8",
            type=click.FloatRange(0, 1),
            default=0.25,
            show_default=True,
            metavar="SHARE",
            help="Skip a file as binary when "
            "more than this share of its first 8 KB is invalid UTF-8 (1: never).",
        ),
        click.option("--quiet", "-q", is_flag=True, help="No progress on stderr."),
        click.option(
            "--allow-output-in-corpus",
            is_flag=True,
            help="Write outputs inside a corpus folder this command reads (refused by "
            "default; later runs skip what fertility wrote there).",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


workers_option = click.option(
    "--workers",
    type=click.IntRange(1),
    default=None,
    help="Measuring processes (default: one, and after a few seconds of measuring it hands "
    "the rest to one per core, up to 4, if its own timings say they would finish sooner). "
    "The result does not depend on it.",
)


def corpus_settings(kw: dict) -> CorpusOptions:
    """The corpus options out of a command's keyword arguments, as one CorpusOptions (`seed`
    stays in `kw`: it also seeds the bootstrap and the trainer)."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.corpus import CorpusOptions

    return CorpusOptions(
        text_field=kw.pop("text_field"),
        lang_field=kw.pop("lang_field"),
        whole_files=kw.pop("whole_files"),
        sample=kw.pop("sample"),
        max_docs=kw.pop("max_docs"),
        seed=kw["seed"],
        strict=kw.pop("strict"),
        max_doc_chars=kw.pop("max_doc_chars"),
        max_invalid_utf8=kw.pop("max_invalid_utf8"),
        on_warning=_warn,
    )  # --quiet silences progress, never a warning about the data


def _warn(message: str) -> None:
    click.echo(f"warning: {visible(message)}", err=True)


def write_output(text: str, output: str | None) -> None:
    """`text` to stdout (no -o, or `-o -`) or to the file (fertility.files: a regular file is
    replaced in one rename, a symlink written through, a device written in place)."""
    if output is None or output == "-":
        try:
            sys.stdout.write(text)
            sys.stdout.flush()  # a full disk shows here, not at exit after the verdict
        except BrokenPipeError:
            raise
        except OSError as e:
            silence_stdout()
            raise FertilityError(f"stdout: cannot write ({e.strerror or e})") from None
        return
    if not output.strip():
        raise FertilityError("-o/--output: empty file name")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.outputs import write_file

    write_file(output, text)  # recorded as ours, then replaced in one rename


def check_outputs(outputs: dict, kw: dict, **inputs) -> None:
    """The output policy (fertility.outputs), before anything is measured: `outputs` maps
    each option to its path; `inputs` are Inputs.of's keywords (corpus, tokenizers, files,
    folders). Takes --allow-output-in-corpus out of `kw`."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.outputs import Inputs, check_file_outputs

    allow = kw.pop("allow_output_in_corpus", False)
    check_file_outputs(outputs, Inputs.of(**inputs), allow_in_corpus=allow)


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's own flush at exit (of what could not be
    written) raises nothing more after our one line."""

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def parse_detail(value: str) -> int | None:
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(
            "expected a number of documents or 'all'", param_hint="'--detail'"
        ) from None
    if n < 0:
        raise click.BadParameter("must be >= 0", param_hint="'--detail'")
    return n
