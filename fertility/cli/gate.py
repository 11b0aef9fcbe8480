"""`fertility gate`: the policy's verdict on one tokenizer (exit 0 pass, 1 fail)."""

from __future__ import annotations

import dataclasses
import json
import sys

import click

from fertility.cli.options import (
    check_outputs,
    command_options,
    options_of,
    write_output,
)
from fertility.options import GateOptions


@click.command(short_help="Pass (0) or fail (1) a tokenizer under the policy.")
@options_of(GateOptions)
def gate(**kw) -> None:
    """Exit 0 when the tokenizer passes the policy on PATHS, 1 when it fails, 2 on bad input."""

    # deferred: the library loads when a command runs (fast --help)
    from fertility.gate import gate_run
    from fertility.policy import load_policy

    o: GateOptions = command_options(GateOptions, kw)
    output, junit, html_out = o.output, o.junit, o.html_out
    check_outputs(
        {"-o/--output": output, "--junit": junit, "--html": html_out},
        o.allow_output_in_corpus,
        corpus=o.paths,
        tokenizers=[o.tokenizer, o.baseline],
        files=[o.policy],
    )
    pol = load_policy(o.policy)
    if o.reference:
        pol = dataclasses.replace(pol, reference=o.reference)
    if o.parallel:
        pol = dataclasses.replace(pol, parallel=True)
    rep, result = gate_run(
        o.paths,
        o.tokenizer,
        policy=pol,
        baseline=o.baseline,
        corpus_options=o.corpus,
        detail_docs=o.detail,
        seed=o.corpus.seed,
        workers=o.workers,
        quiet=o.quiet,
    )
    if o.reference:  # one the corpus lacks: exit 2 naming it, not a silent "no premium"
        # deferred: the library loads when a command runs (fast --help)
        from fertility.measure.parity import require_reference

        require_reference([r["key"] for r in rep.table if r["group"] == "language"], o.reference)
    if o.fmt == "json":
        text = json.dumps(result.to_dict(), ensure_ascii=False, indent=2, allow_nan=False)
    else:
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.summary import gate_lines
        from fertility.report.table import terminal_width

        text = "\n".join(gate_lines(rep, result, terminal_width(), o.verbose))
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
