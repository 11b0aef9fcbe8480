"""`fertility report`: measure, diagnose, print."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path

import click

from fertility.cli.options import (
    check_outputs,
    command_options,
    options_of,
    slurm_pending,
    write_output,
)
from fertility.errors import CorpusError
from fertility.options import ReportOptions


@click.command(short_help="Measure chars/token per script and language.")
@options_of(ReportOptions)
def report(**kw) -> None:
    """Measure PATHS (files or folders) with one or more tokenizers."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.config import configured_tokenizers
    from fertility.measure import analyze
    from fertility.progress import Progress

    o: ReportOptions = command_options(ReportOptions, kw)
    output = o.output
    specs = list(o.tokenizers) or configured_tokenizers()
    check_outputs(
        {"-o/--output": output},
        o.allow_output_in_corpus,
        corpus=o.paths,
        tokenizers=specs,
        files=[o.policy],
    )
    if o.plots is not None:
        _check_plots(o.plots, o, specs)  # before measuring: a refused folder costs no run
    families = (
        [p.strip() for p in o.pretokenizers.split(",") if p.strip()] if o.pretokenizers else None
    )
    if o.tasks is not None:
        rep = _in_tasks(o, specs, families)
        if rep is None:  # handed to Slurm: the same command merges once the jobs are done
            return
    else:
        progress = Progress("measuring", quiet=o.quiet)  # its total: the Corpus analyze makes
        rep = analyze(
            o.paths,
            specs,
            pretokenizers=families,
            corpus_options=o.corpus,
            detail_docs=o.detail,
            seed=o.corpus.seed,
            progress=progress,
            workers=o.workers,
            on_corpus=progress.sized_by,
        )
        progress.done()
    pol = _policy(o.policy, o.reference, o.parallel)
    if o.reference:
        _require_reference(rep, o.reference)
    rep.policy = pol  # the JSON's Gini reads the premiums under its reference
    if not o.no_diagnose:
        rep.findings = _diagnose(rep, pol)
    if o.fmt in ("leaderboard", "leaderboard-csv"):
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report import leaderboard

        render = leaderboard.render_markdown if o.fmt == "leaderboard" else leaderboard.render_csv
        write_output(render(rep, pol), output)
    elif o.fmt == "json":
        # deferred: the library loads when a command runs (fast --help)
        from fertility.gate import verdicts

        rep.verdicts = verdicts(rep, pol)  # each tokenizer's verdict: the gate's under pol
        write_output(rep.to_json() + "\n", output)
    elif o.fmt == "csv":
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.text import render_csv

        write_output(render_csv(rep), output)
    elif o.fmt == "html":
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.html import render_html

        write_output(render_html(rep, rep.findings or [], policy=pol), output)
    else:
        # deferred: the library loads when a command runs (fast --help)
        from fertility.report.text import render_table

        text = render_table(rep, policy=pol, verbose=o.verbose, verdicts=not o.no_diagnose)
        if not specs:
            text += (
                "\nno tokenizer named: this profiles the corpus and the ceilings of the "
                "standard pre-tokenizers.\nname one with -t [LABEL=]SPEC, or list them "
                "as `tokenizers = [...]` in fertility.toml or [tool.fertility] of "
                "pyproject.toml.\n"
            )
        write_output(text, output)
    if o.plots is not None:
        # deferred: kaleido (the images extra) only for --plots
        from fertility.report.images import write_plots

        write_plots(rep, o.plots, _inputs(o, specs), allow_in_corpus=o.allow_output_in_corpus)


def _in_tasks(o: ReportOptions, specs, families):
    """--tasks N: measured by fertility.engine on datatrove's executor --executor."""
    # deferred: datatrove (the datatrove extra) only for --tasks
    try:
        from fertility.engine import measure
        from fertility.engine.step import tokenizer_keys
    except ImportError:
        raise click.UsageError(
            "--tasks: needs datatrove (pip install 'fertility[datatrove]')"
        ) from None
    if o.executor == "slurm" and not o.slurm_partition:
        raise click.UsageError("--executor slurm: give --slurm-partition")
    if families is None:
        families = [] if specs else ["gpt2", "cl100k", "o200k", "whitespace"]
    assert o.tasks is not None, "called for --tasks only"
    if o.corpus.precision is not None:
        raise CorpusError(
            "--precision with --tasks: a sample at stated precision is one process's "
            "(it stops when the intervals are narrow enough); --tasks measures every document"
        )
    keys = tokenizer_keys(specs, families)  # a tokenizer that fails to load: no folder made
    work_dir = o.work_dir or _default_work_dir(o, keys)
    if o.work_dir is None and not o.quiet:
        click.echo(
            f"report --tasks: the tasks' state is in {work_dir} (removed once the report is "
            "made; the same command relaunched resumes from it)",
            err=True,
        )
    # deferred: the library loads when a command runs (fast --help)
    from fertility.outputs import MANIFEST, claim_folder, remove

    # WORK is an output folder like any other (fertility.outputs): new, empty or one an earlier
    # --tasks run made; never an input, never inside the corpus unless allowed; the walker
    # skips it. The tasks write their counts there, datatrove its logs (completion markers).
    entries = ["fertility-run.json", "counts/", "logs/"]
    folder = claim_folder(
        work_dir,
        "report --tasks",
        entries,
        _inputs(o, specs),
        allow_in_corpus=o.allow_output_in_corpus,
    )
    rep = measure(
        o.paths,
        keys,
        work_dir=work_dir,
        tasks=o.tasks,
        executor=o.executor,
        corpus_options=o.corpus,
        detail_docs=o.detail,
        seed=o.corpus.seed,
        workers=o.workers,
        slurm={"partition": o.slurm_partition, "time": o.slurm_time, "env_command": o.slurm_env},
        quiet=o.quiet,
    )
    if rep is not None and o.work_dir is None:  # ours alone: nothing of it is needed now
        for entry in entries:
            remove(folder, entry.rstrip("/"))
        if os.listdir(folder) == [MANIFEST]:  # nothing else there: the folder goes too
            os.unlink(folder / MANIFEST)
            folder.rmdir()
    if rep is None:
        slurm_pending(work_dir)
    return rep


def _default_work_dir(o: ReportOptions, keys) -> str:
    """--tasks without --work-dir: a folder of its own for each set of inputs (the corpus
    paths, the tokenizers' files by fingerprint, the options that change the counts), so a
    relaunch of the same command finds and resumes it and a run of other inputs never meets
    it: in the temporary folder for the local executor, in the current one for Slurm and Ray
    (every node must see it). (Before: `fertility-tasks/` here, which the next run on another
    corpus refused.)"""
    corpus = {k: v for k, v in vars(o.corpus).items() if k != "on_warning"}
    # --detail as it was spelt before it was parsed, so an earlier version's folder is found
    detail = "all" if o.detail is None else str(o.detail)
    inputs = [[os.path.abspath(p) for p in o.paths], keys, corpus, detail, o.tasks]
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
    name = f"fertility-tasks-{key[:16]}"
    if o.executor != "local":
        return name
    return os.path.join(
        tempfile.gettempdir(), f"{name}-{os.getuid() if hasattr(os, 'getuid') else 0}"
    )


def _inputs(o: ReportOptions, specs):
    # deferred: the library loads when a command runs (fast --help)
    from fertility.outputs import Inputs

    return Inputs.of(corpus=o.paths, tokenizers=specs, files=[o.policy])


def _check_plots(folder: str, o: ReportOptions, specs) -> None:
    """--plots DIR under fertility.outputs' rule for output folders (the files it will
    hold are known only after measuring: writing checks them again)."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.errors import OutputError
    from fertility.outputs import check_folder
    from fertility.report.images import MADE_BY

    if not folder.strip():
        raise OutputError("--plots: empty folder name")
    # one path for two outputs (fertility.outputs refuses it among the -o-style files): the
    # report was written, then the plots refused, or the folder then held the report
    if o.output not in (None, "-"):
        report, plots = Path(os.path.realpath(o.output)), Path(os.path.realpath(folder))
        if report == plots:
            raise OutputError(
                f"{folder}: named as both -o/--output and --plots; give each output its own place"
            )
        if plots in report.parents:
            raise OutputError(
                f"{o.output}: lies inside the --plots folder {folder}; write the report elsewhere"
            )
    check_folder(folder, MADE_BY, [], _inputs(o, specs), allow_in_corpus=o.allow_output_in_corpus)


def _policy(policy_path, reference, parallel=False):
    # deferred: the library loads when a command runs (fast --help)
    from fertility.policy import load_policy

    policy = load_policy(policy_path)
    if parallel:
        policy = dataclasses.replace(policy, parallel=True)
    return dataclasses.replace(policy, reference=reference) if reference else policy


def _require_reference(rep, reference: str) -> None:
    """--reference names a language of the corpus, or exit 2 naming it."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.measure.parity import require_reference

    require_reference([r["key"] for r in rep.table if r["group"] == "language"], reference)


def _diagnose(rep, policy):
    # deferred: the library loads when a command runs (fast --help)
    from fertility.findings import diagnose_under

    return diagnose_under(rep, policy)
