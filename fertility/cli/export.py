"""`fertility export`: a run folder as a Hugging Face Llama folder."""

from __future__ import annotations

import click

from fertility.cli.options import from_params, need_torch, options_of
from fertility.options import ExportOptions


@click.command(short_help="Write a run as a Hugging Face folder.")
@options_of(ExportOptions)
def export(**kw) -> None:
    """Write RUN_DIR's model and tokenizer as a Hugging Face Llama folder."""
    need_torch("export")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.eval.export import export_hf

    o: ExportOptions = from_params(ExportOptions, kw)
    s = export_hf(o.run_dir, o.out_dir, step=o.step, overwrite=o.overwrite)
    click.echo(f"wrote {s['out_dir']} (step {s['step']}): {', '.join(s['files'])}")
    click.echo(f"tokenizer: {s['tokenizer']}")
