"""The `fertility` command: a thin shell over the library.

Exit codes: 0 success; 1 the gate said no; 2 bad input (any FertilityError, or a usage error);
130 interrupted.
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
                     help="Seed of --sample and of the bootstrap."),
        click.option("--strict", is_flag=True, help="Fail on invalid UTF-8 instead of "
                     "replacing and counting it."),
        click.option("--quiet", "-q", is_flag=True, help="No progress on stderr."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


workers_option = click.option(
    "--workers", type=click.IntRange(1), default=None,
    help="Measuring processes (default: one per core, up to 4, on corpora of 32 MB or more; "
         "else 1). The result does not depend on it.")


def corpus_kwargs(kw: dict) -> dict:
    return {"text_field": kw.pop("text_field"), "lang_field": kw.pop("lang_field"),
            "whole_files": kw.pop("whole_files"), "sample": kw.pop("sample"),
            "max_docs": kw.pop("max_docs"), "seed": kw["seed"], "strict": kw.pop("strict"),
            "on_warning": _warn}  # --quiet silences progress, never a warning about the data


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def write_output(text: str, output: str | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    from fertility._files import write_text_atomic

    write_text_atomic(output, text)  # a reader never sees a half-written report


def parse_detail(value: str) -> int | None:
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter("expected a number of documents or 'all'") from None
    if n < 0:
        raise click.BadParameter("must be >= 0")
    return n


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fertility")
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
@workers_option
@corpus_options
def report(paths, tokenizers, fmt, output, pretokenizers, detail, reference, policy,
           no_diagnose, workers, **kw) -> None:
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
    if not no_diagnose:
        rep.findings = _diagnose(rep, policy, reference)
    if fmt == "json":
        write_output(rep.to_json() + "\n", output)
    elif fmt == "csv":
        from fertility.report import render_csv

        write_output(render_csv(rep), output)
    elif fmt == "html":
        from fertility.report.html import render_html

        write_output(render_html(rep, rep.findings), output)
    else:
        from fertility.report import render_table

        text = render_table(rep)
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
@workers_option
@corpus_options
def gate(paths, tokenizer, baseline, policy, reference, fmt, output, junit, html_out, detail,
         workers, **kw) -> None:
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
    text = (json.dumps(result.to_dict(), ensure_ascii=False, indent=2, allow_nan=False) + "\n"
            if fmt == "json" else result.format_text())
    write_output(text if text.endswith("\n") else text + "\n", output)
    if junit:
        write_output(result.to_junit(), junit)
    if html_out:
        from fertility.report.html import render_html

        rep.findings = result.findings
        write_output(render_html(rep, result.findings, result), html_out)
    sys.exit(result.exit_code)


def _diagnose(rep, policy_path, reference):
    from fertility.diagnose import diagnose
    from fertility.policy import load_policy

    policy = load_policy(policy_path)
    return diagnose(rep, policy.thresholds, reference=reference or policy.reference)


def main(argv: list[str] | None = None) -> None:
    """Entry point: turn library errors into one line and a documented exit code."""
    import fertility.cli_train  # noqa: F401  (registers fix, pretrain, eval, export)

    try:
        cli.main(args=argv, prog_name="fertility", standalone_mode=False)
    except FertilityError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    # Run as `python -m fertility.cli`: this file is __main__, so take the group that
    # fertility.cli_train registers its commands on from the imported module.
    from fertility.cli import main as _main

    _main()
