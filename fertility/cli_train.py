"""The commands that train or evaluate: fix, pretrain, eval, export (registered on the
`fertility` group in fertility/cli.py). Each parses options and calls one library function."""

from __future__ import annotations

import json

import click

from fertility.cli import cli, corpus_kwargs, corpus_options, write_output
from fertility.errors import FertilityError


def _need_torch(command: str) -> None:
    """torch is an optional extra: say how to get it instead of raising ImportError."""
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError:
        raise FertilityError(f"`fertility {command}` needs PyTorch and safetensors: "
                             "pip install 'fertility[train]'") from None


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("-t", "--tokenizer", "tokenizer", required=True, metavar="[LABEL=]SPEC",
              help="Tokenizer to train with (tokenizer.json, .model, rank file, ...).")
@click.option("--out", "out_dir", required=True, help="Run folder (created).")
@click.option("--preset", default=None, help="Model size: tiny, small, base, 0.4b.")
@click.option("--config", "config_path", default=None, help="TrainConfig TOML.")
@click.option("--steps", type=click.IntRange(1), default=None)
@click.option("--tokens", type=click.IntRange(1), default=None, help="Train for N tokens.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default=None)
@click.option("--resume", is_flag=True, help="Continue from the newest valid checkpoint.")
@click.option("--force", is_flag=True, help="Train even when the tokenizer fails the gate "
              "(recorded in run.json).")
@click.option("--policy", default=None, help="Gate policy TOML.")
@corpus_options
def pretrain(paths, tokenizer, out_dir, preset, config_path, steps, tokens, device, resume,
             force, policy, **kw) -> None:
    """Gate the tokenizer, then pretrain a decoder-only model on PATHS into --out."""
    if steps and tokens:
        raise click.UsageError("give --steps or --tokens, not both")
    _need_torch("pretrain")
    from trainer.run import pretrain as run_pretrain

    opts = corpus_kwargs(kw)
    summary = run_pretrain(paths, tokenizer, out_dir, preset=preset, config_path=config_path,
                           steps=steps, tokens=tokens, device=device, resume=resume,
                           force=force, quiet=kw["quiet"], corpus_options=opts, policy=policy)
    click.echo(json.dumps(summary, indent=2, default=str))


@cli.command("eval")
@click.argument("run_dir")
@click.option("--corpus", multiple=True, metavar="PATH",
              help="Held-out text to score instead of the run's own held-out split.")
@click.option("--tasks", multiple=True, metavar="FILE.jsonl", help="Multiple-choice task "
              "files (docs/EVAL.md).")
@click.option("--no-lm", is_flag=True, help="Tasks only, no language-modelling scores.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
@click.option("-o", "--output", default=None)
@click.option("--step", type=int, default=None, help="Checkpoint step (default: newest).")
@click.option("--device", default="auto", show_default=True)
@click.option("--context", type=click.IntRange(1), default=None,
              help="Window length (default: the training sequence length).")
@click.option("--twin-seed", type=int, default=0, show_default=True)
@click.option("--bootstrap", type=click.IntRange(0), default=1000, show_default=True)
@corpus_options
def eval_cmd(run_dir, corpus, tasks, no_lm, fmt, output, step, device, context, twin_seed,
             bootstrap, **kw) -> None:
    """Per-token NLL and bits per byte against a random-init twin; multiple-choice accuracy."""
    _need_torch("eval")
    from eval.run import evaluate, render_json, render_text
    from trainer.data import StatusLine

    opts = corpus_kwargs(kw)
    status = StatusLine(kw["quiet"])
    try:
        result = evaluate(run_dir, corpus=list(corpus) or None, tasks=tasks, step=step,
                          device=device, context=context, lm=not no_lm, twin_seed=twin_seed,
                          bootstrap=bootstrap, seed=kw["seed"], max_docs=opts["max_docs"],
                          corpus_options=opts, progress=status.update)
    finally:
        status.close()
    write_output(render_json(result) if fmt == "json" else render_text(result), output)


@cli.command()
@click.argument("run_dir")
@click.argument("out_dir")
@click.option("--to", "target", type=click.Choice(["hf"]), required=True,
              help="hf: a Llama-architecture folder transformers loads.")
@click.option("--step", type=int, default=None)
@click.option("--overwrite", is_flag=True)
def export(run_dir, out_dir, target, step, overwrite) -> None:
    """Write RUN_DIR's model and tokenizer as a Hugging Face Llama folder."""
    _need_torch("export")
    from eval.export import export_hf

    s = export_hf(run_dir, out_dir, step=step, overwrite=overwrite)
    click.echo(f"wrote {s['out_dir']} (step {s['step']}): {', '.join(s['files'])}")
    click.echo(f"tokenizer: {s['tokenizer']}")
