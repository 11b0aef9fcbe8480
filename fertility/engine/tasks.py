"""Measuring in datatrove tasks: `measure` launches MeasureCorpus on an executor (local,
Slurm, Ray: make_executor) after checking WORK holds no run of other inputs (check_inputs,
check_manifest), then merges what the tasks wrote (fertility/engine/report.py). run_tasks is
the one launch `report --tasks` and `fertility tokenize` share."""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from fertility.corpus import warn as corpus_warning
from fertility.engine import codec
from fertility.engine.report import merge
from fertility.engine.step import COUNTS_FOLDER, MeasureCorpus, quiet_logs
from fertility.errors import FertilityError, OutputError
from fertility.files import locked_folder
from fertility.measure import Report
from fertility.measure.parallel import cap_workers
from fertility.measure.passes import KEEP_DOCS
from fertility.options import BATCH_DOCS, DETAIL_DOCS
from fertility.outputs import open_inside
from fertility.threads import usable_cores

EXECUTORS = ("local", "slurm", "ray")
MANIFEST = "fertility-run.json"  # WORK's inputs: a relaunch must measure the same ones


def measure(
    paths: Sequence[str],
    keys: list,
    *,
    work_dir: str,
    tasks: int,
    executor: str = "local",
    corpus_options=None,
    detail_docs: int | None = DETAIL_DOCS,
    keep_docs: int = KEEP_DOCS,
    batch_size: int = BATCH_DOCS,
    seed: int = 0,
    workers: int | None = None,
    slurm: dict | None = None,
    ray: dict | None = None,
    quiet: bool = False,
) -> Report | None:
    """Measure `paths` with the tokenizers of `keys` (fertility.engine.step.tokenizer_keys)
    in `tasks` datatrove tasks whose files go to `work_dir`; the Report, or None when the
    tasks were handed to Slurm and are not all finished (run the same call again once they
    are: it launches only the unfinished ones, and merges when none is left). `quiet`:
    datatrove's log lines and statistics kept off stderr."""
    # deferred: the corpus options' module with the corpus
    from fertility.corpus import CorpusOptions

    options = corpus_options or CorpusOptions()
    settings = {"detail_docs": detail_docs, "seed": seed, "keep_docs": keep_docs}
    os.makedirs(work_dir, exist_ok=True)
    # one launch at a time: a second would run the same tasks into the same counts
    with locked_folder(Path(work_dir), OutputError, "`fertility report --tasks`"):
        sizes = check_inputs(work_dir, paths, keys, options, settings, batch_size, tasks)
        step = MeasureCorpus(
            work_dir,
            paths,
            [],
            corpus_options=options,
            sizes=sizes,
            detail_docs=detail_docs,
            keep_docs=keep_docs,
            batch_size=batch_size,
            seed=seed,
            quiet=quiet,
        )
        step.keys = keys
        if not run_tasks(
            executor, step, tasks, work_dir, workers, slurm, ray, options.on_warning, quiet
        ):
            return None
    return merge(
        work_dir, keys, tasks=tasks, settings={**settings, "tasks": tasks, "executor": executor}
    )


def run_tasks(
    kind: str, step, tasks: int, work_dir: str, workers, slurm, ray, warn, quiet: bool
) -> bool:
    """Run `step` as `tasks` datatrove tasks (make_executor); True when every task is done
    (False: Slurm jobs still running, or tasks that failed; a relaunch finishes them). One
    local task runs in this process (_in_process)."""
    if kind == "local" and tasks == 1:
        _in_process(step, work_dir)
        return True
    run = make_executor(kind, [step], tasks, work_dir, workers, slurm or {}, ray or {}, warn)
    with quiet_logs(quiet):
        run.run()
    return not run.get_incomplete_ranks(skip_completed=True)


def _in_process(step, work_dir: str) -> None:
    """Task 0 of 1 run here, as datatrove's local executor runs a task when it has one
    worker (the step called in this process), without the executor: importing it costs a
    third of a second (datatrove.io's Hub client: 5% of a 25 MB `tokenize`), and it would
    add a manager process, its logs and a completion marker. The task's counts are its
    marker instead (their JSON is the last file it writes, whole): a relaunch after them
    does not run it again."""
    if f"{COUNTS_FOLDER}/00000" not in codec.saved(work_dir, COUNTS_FOLDER):
        deque(step(None, 0, 1), maxlen=0)


def make_executor(
    kind: str, pipeline, tasks: int, work_dir: str, workers, slurm: dict, ray: dict, warn=None
):
    """The datatrove executor of `kind` for `pipeline`, logging (and its completion markers)
    under WORK/logs. slurm: SlurmPipelineExecutor's options (time and partition at least);
    ray: RayPipelineExecutor's; the cluster is the one ray.init() reaches (RAY_ADDRESS).
    local: `workers` tasks at once (default all), at most one per core (a `workers` over
    the cores is said through `warn`, fertility.measure.parallel.cap_workers)."""
    logs = os.path.join(work_dir, "logs")
    n = workers or -1
    if kind == "local":
        from datatrove.executor import LocalPipelineExecutor

        # datatrove starts a pool of `workers` processes (-1: one per task), however many
        # tasks are left: more than the cores would only share them
        n = cap_workers(workers, warn or corpus_warning) if workers else min(tasks, usable_cores())
        return LocalPipelineExecutor(pipeline, tasks=tasks, workers=n, logging_dir=logs)
    if kind == "slurm":
        from datatrove.executor import SlurmPipelineExecutor

        return SlurmPipelineExecutor(pipeline, tasks=tasks, workers=n, logging_dir=logs, **slurm)
    if kind == "ray":
        try:
            import ray as ray_lib
        except ImportError:
            raise FertilityError(
                "--executor ray: needs ray (pip install 'fertility[datatrove]' ray)"
            ) from None
        from datatrove.executor.ray import RayPipelineExecutor

        if not ray_lib.is_initialized():
            ray_lib.init(log_to_driver=False)  # RAY_ADDRESS, else a local instance
        return RayPipelineExecutor(pipeline, tasks=tasks, workers=n, logging_dir=logs, **ray)
    raise FertilityError(f"--executor: {kind!r} is not one of {', '.join(EXECUTORS)}")


def check_inputs(
    work_dir: str,
    paths,
    keys,
    options,
    settings: dict,
    batch_size: int,
    tasks: int,
    option: str = "--work-dir",
    **more,
) -> dict:
    """The corpus files' sizes now, after checking that WORK holds no run of other inputs
    (check_manifest): the paths and their sizes, the tokenizers, the corpus options, the
    settings, the batch size, the number of tasks and `more` (what a step adds). `option`:
    how the user named WORK (`fertility tokenize`'s is --out)."""
    # deferred: the corpus reads sizes only when a run starts
    from fertility.corpus import Corpus

    quiet = options.__class__(**{**vars(options), "on_warning": lambda m: None})
    sizes = Corpus([str(p) for p in paths], quiet).sizes()
    manifest = {
        "paths": [str(p) for p in paths],
        "sizes": {str(k): v for k, v in sizes.items()},
        "tokenizers": [list(k) for k in keys],
        "corpus_options": {k: v for k, v in vars(options).items() if k != "on_warning"},
        "settings": settings,
        **more,
        "batch_size": batch_size,
        "tasks": tasks,
    }
    check_manifest(work_dir, manifest, option)
    return sizes


def check_manifest(work_dir: str, manifest: dict, option: str = "--work-dir") -> None:
    """Write WORK's manifest, or check that the one there is this run's: counts of other
    inputs (a changed file, other tokenizers, another number of tasks) must not be merged."""
    path = os.path.join(work_dir, MANIFEST)
    text = json.dumps(manifest, sort_keys=True, indent=1)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            if fh.read() != text:
                raise OutputError(
                    f"{option} {work_dir}: holds a run of other inputs (corpus, tokenizers, "
                    "options or --tasks differ); remove it or choose another folder"
                )
        return
    os.makedirs(work_dir, exist_ok=True)
    with open_inside(Path(work_dir), MANIFEST) as fh:  # fertility.outputs: no link followed
        fh.write(text)
