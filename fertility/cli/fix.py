"""`fertility fix`: train a corrected vocabulary and prove it on held-out text."""

from __future__ import annotations

import sys

import click

from fertility.cli.options import command_options, options_of
from fertility.options import FixOptions


@click.command(short_help="Train a corrected vocabulary and prove it.")
@options_of(FixOptions)
def fix(**kw) -> None:
    """Train a corrected vocabulary and prove it on held-out text (exit 1: the gate said no)."""

    # deferred: the library loads when a command runs (fast --help)
    from fertility.fix import fix as run_fix
    from fertility.fix.config import FixConfig
    from fertility.progress import Stages

    o: FixOptions = command_options(FixOptions, kw)
    config = FixConfig(
        vocab_size=o.vocab_size,
        model=o.model,
        backend=o.backend,
        normalization=o.normalization or "none",
        temperature=o.temperature,
        heldout_fraction=o.heldout,
        heldout_max_docs=o.heldout_max,
        heldout_block=o.heldout_block,
        seed=o.corpus.seed,
        max_train_chars=o.max_train_chars,
        special_tokens=o.special_tokens or None,
    )
    stages = Stages(o.quiet)  # each stage's line with the time so far, on a terminal only
    result = run_fix(
        o.paths,
        o.out_dir,
        config,
        from_tokenizer=o.from_tok,
        corpus_options=o.corpus,
        policy=o.policy,
        progress=stages if stages.enabled else None,
        allow_output_in_corpus=o.allow_output_in_corpus,
    )
    stages.done("fix")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.fix.text import fix_text

    click.echo(fix_text(result))
    sys.exit(result.gate.exit_code)
