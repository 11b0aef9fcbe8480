"""`fertility report`: measure, diagnose, print."""

from __future__ import annotations

import dataclasses

import click

from fertility.cli.options import (
    check_outputs,
    choice,
    corpus_options,
    corpus_settings,
    parse_detail,
    workers_option,
    write_output,
)
from fertility.options import ReportFormat


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "-t",
    "--tokenizer",
    "tokenizers",
    multiple=True,
    metavar="[LABEL=]SPEC",
    help="tokenizer.json (or its folder), Tekken .json, SentencePiece .model, "
    "tiktoken rank file (SPEC#PATTERN names its split pattern), tiktoken:NAME "
    "or hf:ORG/NAME. "
    "Repeatable.",
)
@click.option(
    "--format",
    "fmt",
    type=choice(ReportFormat),
    default="table",
    show_default=True,
)
@click.option("-o", "--output", default=None, help="Write to FILE instead of stdout.")
@click.option(
    "--pretokenizers",
    default=None,
    metavar="LIST",
    help="Comma-separated pre-tokenizer families to measure as ceilings "
    "(gpt2, cl100k, o200k, whitespace, mark_aware). Default: all four standard "
    "ones when no tokenizer is named, none otherwise.",
)
@click.option(
    "--detail",
    default="200",
    show_default=True,
    metavar="N|all",
    help="Documents per language that get the per-document checks (round trip, "
    "own pre-tokenizer ceiling, normaliser changes).",
)
@click.option(
    "--reference",
    default=None,
    help="Reference language of the parity premium (default: the policy's, en).",
)
@click.option("--policy", default=None, help="Gate policy TOML (thresholds of the findings).")
@click.option("--no-diagnose", is_flag=True, help="Measurements only, no findings.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Table: every column, and every finding "
    "with its evidence, cause and fix (default: one line per rule and tokenizer).",
)
@workers_option
@corpus_options
def report(
    paths,
    tokenizers,
    fmt,
    output,
    pretokenizers,
    detail,
    reference,
    policy,
    no_diagnose,
    verbose,
    workers,
    **kw,
) -> None:
    """Measure PATHS (files or folders) with one or more tokenizers."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.config import configured_tokenizers
    from fertility.measure import analyze
    from fertility.progress import Progress

    opts = corpus_settings(kw)
    specs = list(tokenizers) or configured_tokenizers()
    check_outputs({"-o/--output": output}, kw, corpus=paths, tokenizers=specs, files=[policy])
    families = [p.strip() for p in pretokenizers.split(",") if p.strip()] if pretokenizers else None
    progress = Progress("measuring", quiet=kw["quiet"])
    rep = analyze(
        paths,
        specs,
        pretokenizers=families,
        corpus_options=opts,
        detail_docs=parse_detail(detail),
        seed=opts.seed,
        progress=progress,
        workers=workers,
    )
    progress.close()
    pol = _policy(policy, reference)
    if not no_diagnose:
        rep.findings = _diagnose(rep, pol)
    if fmt == "json":
        write_output(rep.to_json() + "\n", output)
    elif fmt == "csv":
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.text import render_csv

        write_output(render_csv(rep), output)
    elif fmt == "html":
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.html import render_html

        write_output(render_html(rep, rep.findings, policy=pol), output)
    else:
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.text import render_table

        text = render_table(rep, policy=pol, verbose=verbose, verdicts=not no_diagnose)
        if not specs:
            text += (
                "\nno tokenizer named: this profiles the corpus and the ceilings of the "
                "standard pre-tokenizers.\nname one with -t [LABEL=]SPEC, or list them "
                "as `tokenizers = [...]` in fertility.toml or [tool.fertility] of "
                "pyproject.toml.\n"
            )
        write_output(text, output)


def _policy(policy_path, reference):
    # deferred: the library loads when a command runs (fast --help)
    from fertility.policy import load_policy

    policy = load_policy(policy_path)
    return dataclasses.replace(policy, reference=reference) if reference else policy


def _diagnose(rep, policy):
    # deferred: the library loads when a command runs (fast --help)
    from fertility.findings import diagnose

    return diagnose(rep, policy.thresholds, reference=policy.reference)
