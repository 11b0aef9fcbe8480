"""Measuring split into tasks, on datatrove (the library FineWeb and FineWeb-2 were built with).

Its executors run the same pipeline on one machine (local), on Slurm and on Ray, and its
completion markers (WORK/logs/completions/NNNNN) make a relaunch run only the unfinished
tasks. Each task writes its counts (fertility.engine.step, fertility.engine.codec); `merge`
adds them up in task order and builds the Report with fertility.measure.build_report, the
code analyze() ends with. docs/ARCHITECTURE.md ("Past one machine") says where it sits.

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from fertility.engine import MeasureDocuments, merge

    step = MeasureDocuments("work/", ["tokenizer.json"])
    LocalPipelineExecutor([JsonlReader("data/"), step], tasks=4, logging_dir="work/logs").run()
    report = merge("work/", step.keys)
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fertility.corpus import warn as corpus_warning
from fertility.engine.step import (
    COUNTS_FOLDER,
    MeasureCorpus,
    MeasureDocuments,
    load_keys,
    quiet_logs,
)
from fertility.errors import FertilityError, OutputError
from fertility.files import locked_folder
from fertility.measure import Report, build_report
from fertility.measure.counters import TokenizerAccumulator
from fertility.measure.parallel import cap_workers, usable_cores
from fertility.measure.passes import KEEP_DOCS, PassState
from fertility.outputs import open_inside

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
    detail_docs: int | None = 200,
    keep_docs: int = KEEP_DOCS,
    batch_size: int = 4096,
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
    (False: Slurm jobs still running, or tasks that failed; a relaunch finishes them)."""
    run = make_executor(kind, [step], tasks, work_dir, workers, slurm or {}, ray or {}, warn)
    with quiet_logs(quiet):
        run.run()
    return not run.get_incomplete_ranks(skip_completed=True)


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


def merge(
    output,
    keys=None,
    *,
    toks=None,
    tasks: int | None = None,
    settings: dict | None = None,
) -> Report:
    """The Report of the counts the tasks of a MeasureCorpus, MeasureDocuments or
    TokenizeCorpus step wrote into `output` (every task's, in task order; `tasks`: how many
    there must be), for the tokenizers of `keys` (reloaded here) or `toks` (loaded already).
    Counts of other tokenizers are refused: by fingerprint (by label in counts written before
    fingerprints were). Languages are numbered in order of first appearance, task by task."""
    from datatrove.io import get_datafolder

    folder = get_datafolder(output)
    names = sorted(
        f[: -len(".json")] for f in folder.list_files(COUNTS_FOLDER) if f.endswith(".json")
    )
    if not names or (tasks is not None and len(names) != tasks):
        raise FertilityError(
            f"{output}: {len(names)} task counts, expected {tasks or 'some'}; "
            "run the unfinished tasks first"
        )
    from fertility.engine import codec

    toks = toks if toks is not None else load_keys(keys)
    accs = [TokenizerAccumulator(t) for t in toks]
    settings = settings or {}
    state = PassState(
        settings.get("seed", 0), settings.get("detail_docs"), settings.get("keep_docs", 0)
    )
    summary: dict | None = None
    for rank, name in enumerate(names):
        part = codec.load(folder.open, name)
        theirs = part.get("fingerprints", part["labels"])
        ours = [t.fingerprint if "fingerprints" in part else t.label for t in toks]
        if theirs != ours:
            raise FertilityError(
                f"{output}/{COUNTS_FOLDER}/{name}: counts of tokenizers {part['labels']}, "
                f"not of {[t.label for t in toks]} (another tokenizer file)"
            )
        ids = [
            state.langs.setdefault(lang, len(state.langs))
            for lang in sorted(part["langs"], key=part["langs"].get)
        ]
        for acc, exported in zip(accs, part["accs"]):
            acc.merge(_renumber(exported, ids, len(state.langs)))
        for row in part["doc_rows"]:
            state.doc_rows.append(
                {**row, "order": (rank if "engine" in part["summary"] else 0, row["order"])}
            )
        state.docs_table_full |= part["docs_table_full"]
        summary = _summary(summary, part["summary"])
    assert summary is not None, "names is not empty"
    return build_report(accs, state, summary, toks, settings)


def _renumber(exported: dict, ids: list[int], n_langs: int) -> dict:
    """A task's accumulator export with its language ids replaced by the merged ones
    (ids[task's id] = merged id): the rows of the per-language tables and the keys of the
    per-language dicts."""
    out = dict(exported)
    for name in ("counts", "boot", "boot_running"):
        tables = out[name]
        lang = np.zeros((n_langs, tables.lang.shape[1]), np.int64)
        lang[ids[: len(tables.lang)]] = tables.lang
        tables.lang = lang
    out["vocab_lang"] = {ids[k]: v for k, v in exported["vocab_lang"].items()}
    out["roundtrip"] = {ids[k]: v for k, v in exported["roundtrip"].items()}
    return out


def _summary(merged: dict | None, part: dict) -> dict:
    """The corpus object: a MeasureCorpus task read the whole corpus, so task 0's is the
    run's; a MeasureDocuments task's counts are its own share, so they add up."""
    if "engine" not in part:
        return merged or part
    if merged is None:
        return dict(part)
    return {k: merged[k] + part[k] if k != "engine" else v for k, v in part.items()}


__all__ = ["MeasureCorpus", "MeasureDocuments", "measure", "merge", "make_executor", "EXECUTORS"]
