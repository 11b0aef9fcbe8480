"""`fertility eval`: score a run folder on held-out text and tasks."""

from __future__ import annotations

import dataclasses
import typing

import click

from fertility.cli.options import (
    check_outputs,
    choice,
    corpus_options,
    corpus_settings,
    need_torch,
    write_output,
)
from fertility.options import Device, EvalFormat


@click.command("eval")
@click.argument("run_dir")
@click.option(
    "--corpus",
    multiple=True,
    metavar="PATH",
    help="Held-out text to score instead of the run's own held-out split.",
)
@click.option(
    "--tasks",
    multiple=True,
    metavar="FILE.jsonl",
    help="Multiple-choice task files (docs/EVAL.md).",
)
@click.option("--no-lm", is_flag=True, help="Tasks only, no language-modelling scores.")
@click.option("--format", "fmt", type=choice(EvalFormat), default="table", show_default=True)
@click.option("-o", "--output", default=None)
@click.option("--step", type=int, default=None, help="Checkpoint step (default: newest).")
@click.option(
    "--device",
    default="auto",
    show_default=True,
    metavar="|".join((*typing.get_args(Device), "cuda:N")),
    help="Where to score (auto: CUDA when available).",
)
@click.option(
    "--context",
    type=click.IntRange(1),
    default=None,
    help="Window length (default: the training sequence length).",
)
@click.option("--twin-seed", type=int, default=0, show_default=True)
@click.option("--bootstrap", type=click.IntRange(0), default=1000, show_default=True)
@corpus_options
def eval_cmd(
    run_dir, corpus, tasks, no_lm, fmt, output, step, device, context, twin_seed, bootstrap, **kw
) -> None:
    """Per-token NLL and bits per byte against a random-init twin; multiple-choice accuracy."""
    need_torch("eval")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.eval.render import render_json, render_text
    from fertility.eval.run import evaluate
    from fertility.progress import StatusLine
    from fertility.trainer.rundir import RunDir

    opts = corpus_settings(kw)
    run = RunDir(run_dir)  # what eval reads of the run: -o may sit beside it, never on it
    check_outputs(
        {"-o/--output": output},
        kw,
        corpus=corpus,
        files=[run.run_json, run.metrics, *tasks],
        folders=[run.checkpoints, run.data, run.tokenizer_dir],
    )
    status = StatusLine(kw["quiet"])
    try:
        result = evaluate(
            run_dir,
            corpus=list(corpus) or None,
            tasks=tasks,
            step=step,
            device=device,
            context=context,
            lm=not no_lm,
            twin_seed=twin_seed,
            bootstrap=bootstrap,
            seed=opts.seed,
            max_docs=opts.max_docs,
            corpus_options=dataclasses.replace(opts, max_docs=None),
            progress=status.update,
        )
    finally:
        status.close()
    write_output(render_json(result) if fmt == "json" else render_text(result), output)
