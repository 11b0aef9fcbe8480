"""`fertility pretrain`: train a small model on a gated tokenizer (torch imported when run).

Its options are trainer.options.PretrainOptions' fields (declared there once; its corpus
options, --quiet and --allow-output-in-corpus as every corpus command's). The same command
runs under torchrun: `torchrun --nproc-per-node N -m fertility pretrain ...`.
"""

from __future__ import annotations

import json
import os

import click

from fertility.cli.options import command_options, need_torch, options_of
from fertility.progress import clock
from fertility.trainer.options import PretrainOptions


@click.command(short_help="Gate the tokenizer, then pretrain a model.")
@options_of(PretrainOptions)
def pretrain(**kw) -> None:
    """Gate the tokenizer, then pretrain a decoder-only model on PATHS into --out."""
    options: PretrainOptions = command_options(PretrainOptions, kw)
    need_torch("pretrain")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.trainer.run import pretrain as run_pretrain

    summary = run_pretrain(options)
    if os.environ.get("RANK", "0") == "0":  # under torchrun: one summary, rank 0's
        if options.fmt == "json":
            click.echo(json.dumps(summary, indent=2, default=str))
        else:
            click.echo(summary_text(summary))


def summary_text(s: dict) -> str:
    """The end of a run for a person: what was trained, how far, where it is."""
    params = s.get("params")
    lines = [
        f"pretrained: preset {s.get('preset')}"
        + (f", {params:,} parameters" if isinstance(params, int) else "")
        + f"; tokenizer {s.get('tokenizer')} (vocabulary {s.get('vocab_size', 0):,})",
        f"  {s.get('steps', 0):,} steps, {s.get('tokens', 0):,} tokens in "
        f"{clock(float(s.get('elapsed_s') or 0))}"
        + (
            f"; last training loss {s['final_loss']:.4f} nats/token"
            if isinstance(s.get("final_loss"), float)
            else ""
        ),
    ]
    if s.get("skipped_steps") or s.get("rollbacks"):
        lines.append(
            f"  {s.get('skipped_steps', 0)} non-finite steps skipped, "
            f"{s.get('rollbacks', 0)} rollbacks (metrics.jsonl says which)"
        )
    if s.get("forced"):
        lines.append("  the tokenizer failed the gate: trained anyway (--force, in run.json)")
    lines.append(f"  checkpoint: {s.get('checkpoint') or 'none written'}")
    lines.append(
        f"  run folder: {s.get('run_dir')} (run.json, metrics.jsonl; --format json prints "
        "this summary as JSON)"
    )
    return "\n".join(lines)
