"""`fertility pretrain`: train a small model on a gated tokenizer (torch imported when run).

Its options are trainer.options.PretrainOptions' fields (declared there once) and the corpus
options. The same command runs under torchrun: `torchrun --nproc-per-node N -m fertility
pretrain ...`.
"""

from __future__ import annotations

import json
import os

import click

from fertility.cli.options import (
    corpus_options,
    corpus_settings,
    from_params,
    need_torch,
    options_of,
)
from fertility.trainer.options import PretrainOptions


@click.command(short_help="Gate the tokenizer, then pretrain a model.")
@options_of(PretrainOptions)
@corpus_options
def pretrain(**kw) -> None:
    """Gate the tokenizer, then pretrain a decoder-only model on PATHS into --out."""
    options = from_params(PretrainOptions, kw, corpus=corpus_settings(kw))
    need_torch("pretrain")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.trainer.run import pretrain as run_pretrain

    summary = run_pretrain(options)
    if os.environ.get("RANK", "0") == "0":  # under torchrun: one summary, rank 0's
        click.echo(json.dumps(summary, indent=2, default=str))
