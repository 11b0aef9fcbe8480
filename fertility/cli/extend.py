"""`fertility extend`: widen a byte-level BPE, every id kept."""

from __future__ import annotations

import sys

import click

from fertility.cli.options import corpus_options, corpus_settings


@click.command()
@click.argument("base")
@click.argument("paths", nargs=-1, required=True)
@click.option("--add", type=click.IntRange(1), required=True, help="New tokens to learn.")
@click.option(
    "--out",
    "out_dir",
    required=True,
    help="Folder for tokenizer.json, ids-map.json, extend-report.json and the held-out documents.",
)
@click.option(
    "--langs",
    default=None,
    metavar="bn,hi",
    help="Languages to learn the new tokens on (default: those the gate fails).",
)
@click.option(
    "--heldout",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.1,
    show_default=True,
    help="Share of each language held out.",
)
@click.option("--heldout-max", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--policy", default=None, help="Gate policy TOML.")
@corpus_options
def extend(base, paths, add, out_dir, langs, heldout, heldout_max, policy, **kw) -> None:
    """Add tokens for a script to BASE, keeping every id (exit 1: the gate said no)."""

    # deferred: the library loads when a command runs (fast --help)
    from fertility.extend import extend as run_extend

    opts = corpus_settings(kw)
    say = (
        None if kw["quiet"] or not sys.stderr.isatty() else (lambda msg: click.echo(msg, err=True))
    )
    wanted = [x.strip() for x in langs.split(",") if x.strip()] if langs else None
    result = run_extend(
        base,
        paths,
        out_dir,
        add,
        langs=wanted,
        policy=policy,
        corpus_options=opts,
        heldout_fraction=heldout,
        heldout_max_docs=heldout_max,
        seed=opts.seed,
        progress=say,
        allow_output_in_corpus=kw.pop("allow_output_in_corpus"),
    )
    # deferred: the library loads when a command runs (fast --help)
    from fertility.report.fix import extend_text

    click.echo(extend_text(result))
    sys.exit(result.gate.exit_code)
