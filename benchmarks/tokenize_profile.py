"""Where `fertility tokenize` (or `report`) spends its time, stage by stage: one in-process
run of `fertility tokenize DIR -t TOK --out OUT -q --tasks 1` with every Python thread under
its own cProfile (the main thread counts and writes, `fertility-read` reads and decodes the
corpus, the `fertility-encode_N` threads each encode a batch), and each thread's CPU seconds.
With `report` first, the run is `fertility report DIR -t TOK [-t TOK2 ...] --format json -o
OUT -q --workers 1` (the pass in this process, as a report of one tokenizer on two cores
runs it; benchmarks/analyze_throughput.py runs this after its rounds).

    python benchmarks/tokenize_profile.py DIR TOK OUT
    python benchmarks/tokenize_profile.py report DIR OUT.json TOK [TOK2 ...]

Each profiler counts its thread's CPU seconds (time.thread_time), not wall seconds: on a
machine other jobs load, wall time inside a function is mostly waiting for a core. The
tokenizer's own threads (HF's rayon pool, off during the pass: fertility.threads
.encoding_threads) are not Python threads: their CPU is the process's CPU less that of the
Python threads. The profiler slows Python-heavy stages (the counts, the
part's writing) more than numpy- and Rust-heavy ones; read the shares.
"""

from __future__ import annotations

import cProfile
import pstats
import resource
import sys
import threading
import time

PROFILES: dict[str, cProfile.Profile] = {}
CPU: dict[str, float] = {}
_run = threading.Thread.run


def _profiled_run(self) -> None:
    prof = cProfile.Profile(time.thread_time)
    PROFILES[self.name] = prof
    t = time.thread_time()
    prof.enable()
    try:
        _run(self)
    finally:
        prof.disable()
        CPU[self.name] = time.thread_time() - t


threading.Thread.run = _profiled_run  # type: ignore[method-assign]

# (stage, thread, function as pstats names it: (file suffix, name)): cumulative CPU seconds
# under the profiler; "~" matches a built-in whose name holds it; thread "*": every thread.
# A stage the command did not run (no CPU under its name) is left out of the table.
STAGES = [
    (
        "imports (every module, wherever imported)",
        "MainThread",
        ("importlib._bootstrap>", "_find_and_load"),
    ),
    ("loading the tokenizer", "MainThread", ("tokenizers/__init__.py", "load_tokenizer")),
    ("the tokenizer's fingerprint (beside the first batches)", "*", ("hf.py", "fingerprint")),
    ("read + decode the corpus (Corpus.doc_batches)", "fertility-read", ("corpus/", "doc_batches")),
    (
        "encode: the library's encode (Rust, each batch on one thread)",
        "fertility-encode",
        ("~", "encode_batch_fast"),
    ),
    (
        "encode: ids and offsets to flat arrays (flat_from_id_lists)",
        "fertility-encode",
        ("tokenizers/", "flat_from_id_lists"),
    ),
    ("the counts (measure_batch)", "MainThread", ("measure/batch.py", "measure_batch")),
    (
        "  of which the text's analysis (analyze_texts)",
        "MainThread",
        ("fertility/unicode/", "analyze_texts"),
    ),
    ("    of which running text (running_mask)", "MainThread", ("running.py", "running_mask")),
    (
        "  of which the per-(script, document) keys (_Keys)",
        "MainThread",
        ("measure/batch.py", "__init__"),
    ),
    (
        "  of which the tokenizer's ids folded in (_measure_tokenizer)",
        "MainThread",
        ("measure/batch.py", "_measure_tokenizer"),
    ),
    (
        "    of which the detail checks (_detail_checks)",
        "MainThread",
        ("measure/batch.py", "_detail_checks"),
    ),
    (
        "the report built from the counts (build_report)",
        "MainThread",
        ("measure/report.py", "build_report"),
    ),
    ("the findings (diagnose)", "MainThread", ("findings/diagnosis.py", "diagnose")),
    (
        "the report's JSON, its card included (Report.to_json)",
        "MainThread",
        ("measure/report.py", "to_json"),
    ),
    ("held-out split hashing (heldout_mask)", "MainThread", ("parts.py", "heldout_mask")),
    ("token stream with separators (PartWriter._stream)", "MainThread", ("parts.py", "_stream")),
    # (fertility/shards/format.py: both writers' append, one name)
    (
        "file writes of the shards and document tables (ShardWriter, DocTableWriter.append)",
        "MainThread",
        ("shards", "append"),
    ),
    (
        "document table rows and language totals (PartWriter._table)",
        "MainThread",
        ("parts.py", "_table"),
    ),
    ("the part's writing, all of the above (PartWriter.add)", "MainThread", ("parts.py", "add")),
    ("saving the counts (codec.save)", "MainThread", ("engine/codec.py", "save")),
    (
        "merge_parts + index.json (_write_index)",
        "MainThread",
        ("fertility/engine/", "_write_index"),
    ),
    (
        "the gate: counts read back and the report built (shards_report)",
        "MainThread",
        ("fertility/engine/", "shards_report"),
    ),
    ("the gate's checks (evaluate)", "MainThread", ("fertility/gate.py", "evaluate")),
    ("the task (TokenizeCorpus.run)", "MainThread", ("engine/tokenize.py", "run")),
    (
        "the tasks' launch (run_tasks, the task included; datatrove's executor for 2+ tasks)",
        "MainThread",
        ("fertility/engine/", "run_tasks"),
    ),
]


def cumulative(thread: str, where: tuple[str, str]) -> float:
    """The stage's cumulative CPU seconds in every thread named `thread` or `thread_N` (the
    pass's encoding threads are a pool: fertility-encode_0, fertility-encode_1, ...)."""
    suffix, name = where
    total = 0.0
    for prof in (
        p for n, p in PROFILES.items() if thread == "*" or n == thread or n.startswith(thread + "_")
    ):
        stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
        total += sum(
            v[3]
            for (file, _, fn), v in stats.items()
            if (name in fn if suffix == "~" else fn == name and suffix in file)
        )
    return total


def main() -> None:
    if sys.argv[1] == "report":
        corpus, out, *toks = sys.argv[2:]
        args = ["report", corpus, "--format", "json", "-o", out, "-q", "--workers", "1"]
        for i, tok in enumerate(toks):
            args += ["-t", f"t{i}={tok}"]
    else:
        corpus, tok, out = sys.argv[1:4]
        args = ["tokenize", corpus, "-t", tok, "--out", out, "-q", "--tasks", "1"]
    main_prof = cProfile.Profile(time.thread_time)
    PROFILES["MainThread"] = main_prof
    cpu0, t0 = time.process_time(), time.perf_counter()
    t_main = time.thread_time()
    main_prof.enable()
    from fertility.cli import main as cli

    try:
        cli(args)
    finally:
        main_prof.disable()
    CPU["MainThread"] = time.thread_time() - t_main
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    print(
        f"\nwall {wall:.2f} s under the profiler, process CPU {cpu:.2f} s, "
        f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    py = sum(CPU.values())
    for name, s in sorted(CPU.items()):
        print(f"  thread {name}: {s:.2f} s CPU")
    print(f"  the tokenizer's own threads (process less Python threads): {cpu - py:.2f} s CPU")
    print("\n| stage | thread | CPU s (profiled) | share of process CPU |\n|---|---|---|---|")
    rows = [("encode: the tokenizer's own threads (Rust, CPU)", "rayon", cpu - py)]
    rows += [(stage, thread, cumulative(thread, where)) for stage, thread, where in STAGES]
    for stage, thread, s in (row for row in rows if row[2] > 0):
        print(f"| {stage} | {thread} | {s:.2f} | {s / cpu:.0%} |")


if __name__ == "__main__":
    main()
