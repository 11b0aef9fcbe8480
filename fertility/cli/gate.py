"""`fertility gate`: the policy's verdict on one tokenizer (exit 0 pass, 1 fail)."""

from __future__ import annotations

import dataclasses
import json
import sys

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
from fertility.options import GateFormat


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "-t",
    "--tokenizer",
    "tokenizer",
    required=True,
    metavar="[LABEL=]SPEC",
    help="The candidate tokenizer (same SPEC forms as `report`).",
)
@click.option(
    "--baseline",
    default=None,
    metavar="[LABEL=]SPEC",
    help="The candidate must not be worse than this one beyond the policy margin.",
)
@click.option(
    "--policy",
    default=None,
    help="Policy TOML; default: fertility.toml [gate], "
    "[tool.fertility.gate] of pyproject.toml, else the built-in policy (docs/GATE.md).",
)
@click.option("--reference", default=None, help="Reference language of the premium check.")
@click.option("--format", "fmt", type=choice(GateFormat), default="text", show_default=True)
@click.option("-o", "--output", default=None, help="Write the verdict to FILE.")
@click.option("--junit", default=None, metavar="FILE", help="Also write JUnit XML for CI.")
@click.option(
    "--html", "html_out", default=None, metavar="FILE", help="Also write the HTML report."
)
@click.option("--detail", default="200", show_default=True, metavar="N|all")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Every blocking finding with its cause "
    "and fix, and every check's note (default: one line per rule).",
)
@workers_option
@corpus_options
def gate(
    paths,
    tokenizer,
    baseline,
    policy,
    reference,
    fmt,
    output,
    junit,
    html_out,
    detail,
    verbose,
    workers,
    **kw,
) -> None:
    """Exit 0 when the tokenizer passes the policy on PATHS, 1 when it fails, 2 on bad input."""

    # deferred: the library loads when a command runs (fast --help)
    from fertility.gate import gate_run
    from fertility.policy import load_policy

    opts = corpus_settings(kw)
    check_outputs(
        {"-o/--output": output, "--junit": junit, "--html": html_out},
        kw,
        corpus=paths,
        tokenizers=[tokenizer, baseline],
        files=[policy],
    )
    pol = load_policy(policy)
    if reference:
        pol = dataclasses.replace(pol, reference=reference)
    rep, result = gate_run(
        paths,
        tokenizer,
        policy=pol,
        baseline=baseline,
        corpus_options=opts,
        detail_docs=parse_detail(detail),
        seed=opts.seed,
        workers=workers,
        quiet=kw["quiet"],
    )
    if fmt == "json":
        text = json.dumps(result.to_dict(), ensure_ascii=False, indent=2, allow_nan=False)
    else:
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.summary import gate_lines
        from fertility.report.table import terminal_width

        text = "\n".join(gate_lines(rep, result, terminal_width(), verbose))
    write_output(text if text.endswith("\n") else text + "\n", output)
    if junit:
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.gate import gate_junit

        write_output(gate_junit(result), junit)
    if html_out:
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.html import render_html

        rep.findings = result.findings
        write_output(render_html(rep, result.findings, result), html_out)
    sys.exit(result.exit_code)
