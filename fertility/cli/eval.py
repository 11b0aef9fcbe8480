"""`fertility eval`: score a run folder on held-out text and tasks."""

from __future__ import annotations

import dataclasses

import click

from fertility.cli.options import (
    check_outputs,
    command_options,
    need_torch,
    options_of,
    write_output,
)
from fertility.options import EvalOptions


@click.command("eval", short_help="Score a run: NLL, bits per byte, tasks.")
@options_of(EvalOptions)
def eval_cmd(**kw) -> None:
    """Per-token NLL and bits per byte against a random-init twin; multiple-choice accuracy."""
    need_torch("eval")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.eval.render import render_json, render_text
    from fertility.eval.run import evaluate
    from fertility.progress import Timed
    from fertility.trainer.rundir import RunDir

    o: EvalOptions = command_options(EvalOptions, kw)
    opts = o.corpus_options
    run = RunDir(o.run_dir)  # what eval reads of the run: -o may sit beside it, never on it
    check_outputs(
        {"-o/--output": o.output},
        o.allow_output_in_corpus,
        corpus=o.corpus,
        files=[run.run_json, run.metrics, *o.tasks],
        folders=[run.checkpoints, run.data, run.tokenizer_dir],
    )
    status = Timed(o.quiet)  # each line with the time so far; a count with its ETA
    try:
        result = evaluate(
            o.run_dir,
            corpus=list(o.corpus) or None,
            tasks=o.tasks,
            step=o.step,
            device=o.device,
            context=o.context,
            lm=not o.no_lm,
            twin_seed=o.twin_seed,
            bootstrap=o.bootstrap,
            seed=opts.seed,
            max_docs=opts.max_docs,
            corpus_options=dataclasses.replace(opts, max_docs=None),
            progress=status.update,
            base=o.base,
        )
    finally:
        status.close()
    write_output(render_json(result) if o.fmt == "json" else render_text(result), o.output)
