"""Measuring split into tasks, on datatrove (the library FineWeb and FineWeb-2 were built with).

Its executors run the same pipeline on one machine (local), on Slurm and on Ray, and its
completion markers (WORK/logs/completions/NNNNN) make a relaunch run only the unfinished
tasks; a single local task runs in the launching process without them (run_tasks). Each
task writes its counts (fertility.engine.step, fertility.engine.codec); `merge` adds them
up in task order and builds the Report with fertility.measure.build_report, the
code analyze() ends with. docs/ARCHITECTURE.md ("Past one machine") says where it sits.
The launch is fertility/engine/tasks.py (measure, run_tasks, make_executor), the merge
fertility/engine/report.py.

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from fertility.engine import MeasureDocuments, merge

    step = MeasureDocuments("work/", ["tokenizer.json"])
    LocalPipelineExecutor([JsonlReader("data/"), step], tasks=4, logging_dir="work/logs").run()
    report = merge("work/", step.keys)
"""

from fertility.engine.report import merge
from fertility.engine.step import MeasureCorpus, MeasureDocuments
from fertility.engine.tasks import (
    EXECUTORS,
    MANIFEST,
    check_inputs,
    check_manifest,
    make_executor,
    measure,
    run_tasks,
)

__all__ = [
    "EXECUTORS",
    "MANIFEST",
    "MeasureCorpus",
    "MeasureDocuments",
    "check_inputs",
    "check_manifest",
    "make_executor",
    "measure",
    "merge",
    "run_tasks",
]
