"""`fertility extend`: widen a byte-level BPE, every id kept."""

from __future__ import annotations

import sys

import click

from fertility.cli.options import command_options, options_of
from fertility.options import ExtendOptions


@click.command(short_help="Add a script's tokens to a tokenizer, ids kept.")
@options_of(ExtendOptions)
def extend(**kw) -> None:
    """Add tokens for a script to BASE, keeping every id (exit 1: the gate said no)."""

    # deferred: the library loads when a command runs (fast --help)
    from fertility.extend import extend as run_extend
    from fertility.progress import Stages

    o: ExtendOptions = command_options(ExtendOptions, kw)
    stages = Stages(o.quiet)  # each stage's line with the time so far, on a terminal only
    wanted = [x.strip() for x in o.langs.split(",") if x.strip()] if o.langs else None
    result = run_extend(
        o.base,
        o.paths,
        o.out_dir,
        o.add,
        langs=wanted,
        policy=o.policy,
        corpus_options=o.corpus,
        heldout_fraction=o.heldout,
        heldout_max_docs=o.heldout_max,
        heldout_block=o.heldout_block,
        seed=o.corpus.seed,
        progress=stages if stages.enabled else None,
        allow_output_in_corpus=o.allow_output_in_corpus,
    )
    stages.done("extend")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.extend.text import extend_text

    click.echo(extend_text(result))
    sys.exit(result.gate.exit_code)
