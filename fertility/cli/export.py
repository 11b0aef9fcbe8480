"""`fertility export`: a run folder as a Hugging Face Llama folder."""

from __future__ import annotations

import click

from fertility.cli.options import choice, need_torch
from fertility.options import ExportTarget


@click.command()
@click.argument("run_dir")
@click.argument("out_dir")
@click.option(
    "--to",
    "target",
    type=choice(ExportTarget),
    required=True,
    help="hf: a Llama-architecture folder transformers loads.",
)
@click.option("--step", type=int, default=None)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace a previous export's files in OUT_DIR (other files are kept).",
)
def export(run_dir, out_dir, target, step, overwrite) -> None:
    """Write RUN_DIR's model and tokenizer as a Hugging Face Llama folder."""
    need_torch("export")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.eval.export import export_hf

    s = export_hf(run_dir, out_dir, step=step, overwrite=overwrite)
    click.echo(f"wrote {s['out_dir']} (step {s['step']}): {', '.join(s['files'])}")
    click.echo(f"tokenizer: {s['tokenizer']}")
