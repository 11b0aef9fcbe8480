"""The `fertility` command: a thin shell over the library.

Exit codes: 0 success; 1 the gate said no; 2 bad input (any FertilityError, a usage error, or
any unexpected error: one line, the traceback with `fertility --debug`); 130 interrupted
(Ctrl-C); 143 terminated (SIGTERM). docs/RELIABILITY.md lists the promises and their tests.
"""

from __future__ import annotations

import sys

import click

from fertility.errors import FertilityError


def corpus_options(f):
    """Options every command that reads a corpus shares."""
    opts = [
        click.option("--text-field", default="text", show_default=True,
                     help="JSONL field / parquet column holding the text."),
        click.option("--lang-field", default=None,
                     help="JSONL field / parquet column holding the language label."),
        click.option("--whole-files", is_flag=True, help="Each file is one document."),
        click.option("--sample", type=click.FloatRange(0, 1, min_open=True), default=None,
                     help="Read a deterministic FRACTION of the documents."),
        click.option("--max-docs", type=click.IntRange(1), default=None,
                     help="Read at most N documents (after --sample)."),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Seed of --sample."),
        click.option("--strict", is_flag=True, help="Fail on invalid UTF-8 instead of "
                     "replacing and counting it."),
        click.option("--max-doc-chars", type=click.IntRange(1), default=1_000_000,
                     show_default=True, help="Refuse a longer document (measuring one costs "
                     "about 75-115 bytes of memory per character)."),
        click.option("--max-invalid-utf8", type=click.FloatRange(0, 1), default=0.25,
                     show_default=True, metavar="SHARE", help="Skip a file as binary when "
                     "more than this share of its first 8 KB is invalid UTF-8 (1: never)."),
        click.option("--quiet", "-q", is_flag=True, help="No progress on stderr."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


workers_option = click.option(
    "--workers", type=click.IntRange(1), default=None,
    help="Measuring processes (default: one per core, up to 4, on corpora of 256 MB or more; "
         "else 1). The result does not depend on it.")


def corpus_kwargs(kw: dict) -> dict:
    return {"text_field": kw.pop("text_field"), "lang_field": kw.pop("lang_field"),
            "whole_files": kw.pop("whole_files"), "sample": kw.pop("sample"),
            "max_docs": kw.pop("max_docs"), "seed": kw["seed"], "strict": kw.pop("strict"),
            "max_doc_chars": kw.pop("max_doc_chars"),
            "max_invalid_utf8": kw.pop("max_invalid_utf8"),
            "on_warning": _warn}  # --quiet silences progress, never a warning about the data


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def write_output(text: str, output: str | None) -> None:
    """`text` to stdout (no -o, or `-o -`) or to the file (fertility._files: a regular file is
    replaced in one rename, a symlink written through, a device written in place)."""
    if output is None or output == "-":
        try:
            sys.stdout.write(text)
            sys.stdout.flush()  # a full disk shows here, not at exit after the verdict
        except BrokenPipeError:
            raise
        except OSError as e:
            _silence_stdout()
            raise FertilityError(f"stdout: cannot write ({e.strerror or e})") from None
        return
    if not output.strip():
        raise FertilityError("-o/--output: empty file name")
    from fertility._files import write_text_atomic

    write_text_atomic(output, text)  # a reader never sees a half-written report


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's own flush at exit (of what could not be
    written) raises nothing more after our one line."""
    import os

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
        raise click.BadParameter("expected a number of documents or 'all'",
                                 param_hint="'--detail'") from None
    if n < 0:
        raise click.BadParameter("must be >= 0", param_hint="'--detail'")
    return n


_DEBUG = {"on": False}


def _set_debug(ctx, param, value) -> None:
    _DEBUG["on"] = _DEBUG["on"] or bool(value)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fertility")
@click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
              help="Show the traceback of an unexpected error (it still exits 2).")
def cli() -> None:
    """Measure, diagnose and fix tokenizer fertility per Unicode script and language."""


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-t", "--tokenizer", "tokenizers", multiple=True, metavar="[LABEL=]SPEC",
              help="tokenizer.json (or its folder), Tekken .json, SentencePiece .model, "
                   "tiktoken rank file (SPEC#PATTERN names its split pattern), tiktoken:NAME "
                   "or hf:ORG/NAME. "
                   "Repeatable.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv", "html"]),
              default="table", show_default=True)
@click.option("-o", "--output", default=None, help="Write to FILE instead of stdout.")
@click.option("--pretokenizers", default=None, metavar="LIST",
              help="Comma-separated pre-tokenizer families to measure as ceilings "
                   "(gpt2, cl100k, o200k, whitespace, mark_aware). Default: all four standard "
                   "ones when no tokenizer is named, none otherwise.")
@click.option("--detail", default="200", show_default=True, metavar="N|all",
              help="Documents per language that get the per-document checks (round trip, "
                   "own pre-tokenizer ceiling, normaliser changes).")
@click.option("--reference", default=None,
              help="Reference language of the parity premium (default: the policy's, en).")
@click.option("--policy", default=None, help="Gate policy TOML (thresholds of the findings).")
@click.option("--no-diagnose", is_flag=True, help="Measurements only, no findings.")
@click.option("-v", "--verbose", is_flag=True, help="Table: every column, and every finding "
              "with its evidence, cause and fix (default: one line per rule and tokenizer).")
@workers_option
@corpus_options
def report(paths, tokenizers, fmt, output, pretokenizers, detail, reference, policy,
           no_diagnose, verbose, workers, **kw) -> None:
    """Measure PATHS (files or folders) with one or more tokenizers."""
    from fertility.config import configured_tokenizers
    from fertility.measure import analyze
    from fertility.progress import Progress

    opts = corpus_kwargs(kw)
    specs = list(tokenizers) or configured_tokenizers()
    families = [p.strip() for p in pretokenizers.split(",") if p.strip()] if pretokenizers \
        else None
    progress = Progress("measuring", quiet=kw["quiet"])
    rep = analyze(paths, specs, pretokenizers=families, corpus_options=opts,
                  detail_docs=parse_detail(detail), seed=kw["seed"], progress=progress,
                  workers=workers)
    progress.close()
    pol = _policy(policy, reference)
    if not no_diagnose:
        rep.findings = _diagnose(rep, pol)
    if fmt == "json":
        write_output(rep.to_json() + "\n", output)
    elif fmt == "csv":
        from fertility.report import render_csv

        write_output(render_csv(rep), output)
    elif fmt == "html":
        from fertility.report.html import render_html

        write_output(render_html(rep, rep.findings, policy=pol), output)
    else:
        from fertility.report import render_table

        text = render_table(rep, policy=pol, verbose=verbose, verdicts=not no_diagnose)
        if not specs:
            text += ("\nno tokenizer named: this profiles the corpus and the ceilings of the "
                     "standard pre-tokenizers.\nname one with -t [LABEL=]SPEC, or list them "
                     "as `tokenizers = [...]` in fertility.toml or [tool.fertility] of "
                     "pyproject.toml.\n")
        write_output(text, output)


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-t", "--tokenizer", "tokenizer", required=True, metavar="[LABEL=]SPEC",
              help="The candidate tokenizer (same SPEC forms as `report`).")
@click.option("--baseline", default=None, metavar="[LABEL=]SPEC",
              help="The candidate must not be worse than this one beyond the policy margin.")
@click.option("--policy", default=None, help="Policy TOML; default: fertility.toml [gate], "
              "[tool.fertility.gate] of pyproject.toml, else the built-in policy (docs/GATE.md).")
@click.option("--reference", default=None, help="Reference language of the premium check.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("-o", "--output", default=None, help="Write the verdict to FILE.")
@click.option("--junit", default=None, metavar="FILE", help="Also write JUnit XML for CI.")
@click.option("--html", "html_out", default=None, metavar="FILE", help="Also write the HTML "
              "report.")
@click.option("--detail", default="200", show_default=True, metavar="N|all")
@click.option("-v", "--verbose", is_flag=True, help="Every blocking finding with its cause "
              "and fix, and every check's note (default: one line per rule).")
@workers_option
@corpus_options
def gate(paths, tokenizer, baseline, policy, reference, fmt, output, junit, html_out, detail,
         verbose, workers, **kw) -> None:
    """Exit 0 when the tokenizer passes the policy on PATHS, 1 when it fails, 2 on bad input."""
    import dataclasses
    import json

    from fertility.gate import evaluate
    from fertility.measure import analyze
    from fertility.policy import load_policy
    from fertility.progress import Progress

    opts = corpus_kwargs(kw)
    pol = load_policy(policy)
    if reference:
        pol = dataclasses.replace(pol, reference=reference)
    specs = [tokenizer] + ([baseline] if baseline else [])
    progress = Progress("measuring", quiet=kw["quiet"])
    rep = analyze(paths, specs, corpus_options=opts, detail_docs=parse_detail(detail),
                  seed=kw["seed"], progress=progress, workers=workers)
    progress.close()
    labels = [t["label"] for t in rep.tokenizers]
    result = evaluate(rep, pol, label=labels[0], baseline_label=labels[1] if baseline else None)
    if fmt == "json":
        text = json.dumps(result.to_dict(), ensure_ascii=False, indent=2, allow_nan=False)
    else:
        from fertility.report import terminal_width
        from fertility.report.summary import gate_lines

        text = "\n".join(gate_lines(rep, result, terminal_width(), verbose))
    write_output(text if text.endswith("\n") else text + "\n", output)
    if junit:
        write_output(result.to_junit(), junit)
    if html_out:
        from fertility.report.html import render_html

        rep.findings = result.findings
        write_output(render_html(rep, result.findings, result), html_out)
    sys.exit(result.exit_code)


def _policy(policy_path, reference):
    import dataclasses

    from fertility.policy import load_policy

    policy = load_policy(policy_path)
    return dataclasses.replace(policy, reference=reference) if reference else policy


def _diagnose(rep, policy):
    from fertility.diagnose import diagnose

    return diagnose(rep, policy.thresholds, reference=policy.reference)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like Ctrl-C, so every `finally` runs (worker
    processes terminated, temporary files removed, no partial output). Not a KeyboardInterrupt:
    click would turn that into Abort (and print a blank line), losing which signal it was."""


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> None:
    """Entry point: turn every error into one line and a documented exit code (2 for any
    error, expected or not: 1 is only the gate's "no"; 130 Ctrl-C, 143 SIGTERM)."""
    import signal
    import threading

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run(argv)
    finally:  # called in-process (tests, notebooks): leave the caller's handler as it was
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(argv: list[str] | None) -> None:
    _DEBUG["on"] = False
    try:
        import fertility.cli_train  # noqa: F401  (registers fix, pretrain, eval, export)

        cli.main(args=argv, prog_name="fertility", standalone_mode=False)
        sys.stdout.flush()
    except FertilityError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except (Terminated, KeyboardInterrupt, click.exceptions.Abort) as exc:
        terminated = isinstance(exc, Terminated)
        click.echo("terminated" if terminated else "interrupted", err=True)
        sys.exit(143 if terminated else 130)
    except click.ClickException as exc:  # click's own is four lines (usage, hint, blank, error)
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        click.echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(0)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001  a bug, a Rust panic, MemoryError, ...
        _unexpected(exc)


def _unexpected(exc: BaseException) -> None:
    """One line and exit 2 for what no check foresaw; the traceback only with --debug."""
    from fertility.errors import one_line

    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        what = f"{exc.filename}: {exc.strerror or one_line(exc)}"
    elif isinstance(exc, MemoryError):
        what = "out of memory"
    elif isinstance(exc, RecursionError):
        what = "input nested too deeply (recursion limit)"
    else:
        what = f"unexpected {type(exc).__name__}: {one_line(exc)}"
    if _DEBUG["on"]:
        import traceback

        traceback.print_exception(exc)
    click.echo(f"error: {what}" + ("" if _DEBUG["on"] else
               " (rerun as `fertility --debug ...` for the traceback)"), err=True)
    sys.exit(2)


if __name__ == "__main__":
    # Run as `python -m fertility.cli`: this file is __main__, so take the group that
    # fertility.cli_train registers its commands on from the imported module.
    from fertility.cli import main as _main

    _main()
