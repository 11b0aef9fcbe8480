"""`fertility tokenize`: the trainer's token shards written by datatrove tasks, measured in the
same pass, so `pretrain --shards` neither tokenizes nor reads the corpus again for its gate.

    OUT/parts/NNNNN/       task NNNNN's shards, document table, held-out JSONL, part.json
                           (fertility/shards/parts.py)
    OUT/counts/NNNNN.*     task NNNNN's counts (fertility.engine.codec): the gate's evidence
    OUT/logs/              datatrove's logs and completion markers (two tasks or more; one
                           local task runs in this process, its counts its marker:
                           fertility.engine.tasks._in_process)
    OUT/train-docs.bin, OUT/heldout.jsonl, OUT/index.json
                           the folder's own, over the parts (shards.parts.merge_parts);
                           index.json is written last: a folder without it is unfinished
    OUT/fertility-run.json the inputs: a relaunch must tokenize the same ones

Task r encodes every N-th batch of the corpus read by fertility.corpus (as MeasureCorpus
measures it), writes the ids into its part and measures them; a relaunch runs only the tasks
without a completion marker (datatrove's; a single local task's is its counts), each from an
empty part, so a killed run finishes with the same files as one that was never killed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fertility.engine import codec
from fertility.engine.step import COUNTS_FOLDER, MeasureCorpus
from fertility.errors import FertilityError, OutputError
from fertility.files import locked_folder
from fertility.measure.passes import KEEP_DOCS, encode_pass, run_pass
from fertility.options import (
    BATCH_DOCS,
    DETAIL_DOCS,
    HELDOUT_FRACTION,
    SEPARATOR,
    SHARD_TOKENS,
)
from fertility.outputs import remove, write_inside
from fertility.progress import Progress
from fertility.shards.index import INDEX_SCHEMA, read_index
from fertility.shards.parts import PartWriter, merge_parts, shard_meta

if TYPE_CHECKING:  # index.json's record (fertility/schemas/shards.py), for mypy only
    from fertility.schemas.shards import Shards

PARTS = "parts"
# what `fertility tokenize` writes into OUT (fertility.outputs: only these may be replaced)
OUTPUTS = [
    "fertility-run.json",
    "counts/",
    "logs/",
    f"{PARTS}/",
    "train-docs.bin",
    "heldout.jsonl",
    "index.json",
]


class TokenizeCorpus(MeasureCorpus):
    """Tokenize a corpus read by fertility.corpus into the trainer's shards, every
    `world_size`-th batch in this task, and measure the same ids (what `fertility tokenize`
    runs; its counts are MeasureCorpus's). `output` must be a local folder: the trainer
    memory-maps the shards."""

    name = "fertility: tokenize corpus"
    type = "🔢 - TOKENIZE"

    def __init__(
        self,
        output: str,
        paths: Sequence[str],
        tokenizer,
        *,
        heldout_fraction: float = HELDOUT_FRACTION,
        separator: int | str = SEPARATOR,
        shard_tokens: int = SHARD_TOKENS,
        quiet: bool = True,
        counts: bool = True,
        **kw,
    ) -> None:
        super().__init__(output, paths, [tokenizer], **kw)
        self.root, self.quiet, self.counts = str(output), quiet, counts
        self.heldout_fraction, self.separator = heldout_fraction, separator
        self.shard_tokens = shard_tokens

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        # deferred: the corpus reader with the step (a task process imports this module)
        from fertility.corpus import Corpus

        toks, accs, state = self._start(world_size)
        tok = toks[0]
        rel = f"{PARTS}/{rank:05d}"
        folder = Path(self.root) / rel
        # an unfinished earlier attempt of this task, removed only where OUT's manifest lists
        # parts/ (tokenize() claims OUT first); anything else there is not ours to replace
        remove(Path(self.root), rel)
        if folder.exists():
            raise OutputError(
                f"{folder}: exists and was not written by fertility tokenize; not replaced "
                "(run tokenize(), which claims the folder, or choose another output)"
            )
        quiet = None if rank == 0 else (lambda message: None)
        corpus = Corpus(self.paths, self.options, sizes=self.sizes, on_warning=quiet)
        writer = PartWriter(
            folder,
            shard_meta(tok, self.separator),
            seed=self.settings[0],
            heldout_fraction=self.heldout_fraction,
            shard_tokens=self.shard_tokens,
            spec=tok.spec,
            file_keys=corpus.file_keys(),
        )
        # Task 0 shows progress on stderr: its own share of the corpus times the tasks (the
        # tasks take every N-th batch, so the shares are about equal).
        progress = Progress.for_corpus("tokenizing", corpus, quiet=self.quiet or rank != 0)
        mine = lambda i: i % world_size == rank  # noqa: E731 (the task's batches)
        sink = lambda batch, enc: writer.add(batch, enc[0][0], enc[0][3])  # noqa: E731
        scaled = lambda docs, nbytes: progress(docs * world_size, nbytes * world_size)  # noqa: E731
        try:
            if self.counts:
                run_pass(
                    corpus, toks, accs, state, self.batch_size, owned=mine, sink=sink,
                    progress=scaled if progress.enabled else None,
                )  # fmt: skip
            else:  # the shards alone; the task still saves the corpus summary (no counts)
                accs = []
                shown = scaled if progress.enabled else None
                encode_pass(corpus, tok, self.batch_size, owned=mine, sink=sink, progress=shown)
        except BaseException:
            writer.abort()
            progress.close()
            raise
        writer.close()
        progress.done()
        self.stat_update("documents", value=state.docs_measured)
        self._save(rank, accs, state, corpus.summary())
        if data:
            yield from data


def tokenize(
    paths: Sequence[str],
    tokenizer,
    out: str,
    *,
    tasks: int = 1,
    executor: str = "local",
    corpus_options=None,
    seed: int = 0,
    heldout_fraction: float = HELDOUT_FRACTION,
    separator: int | str = SEPARATOR,
    shard_tokens: int = SHARD_TOKENS,
    batch_size: int = BATCH_DOCS,
    detail_docs: int | None = DETAIL_DOCS,
    workers: int | None = None,
    quiet: bool = True,
    counts: bool = True,
    inputs=None,
    allow_in_corpus: bool = False,
    slurm: dict | None = None,
    ray: dict | None = None,
) -> Shards | None:
    """Tokenize `paths` with `tokenizer` (a spec or a loaded tokenizer that can be reloaded)
    into `out` (module doc) in `tasks` datatrove tasks; the index (index.json's content), or
    None when the tasks were handed to Slurm and are not all finished (run the same call
    again once they are). `out` is claimed first (fertility.outputs.claim_folder): new, empty
    or an earlier run of the same inputs, never inside the corpus unless `allow_in_corpus`;
    `inputs` (fertility.outputs.Inputs): every input of the run, default the corpus and the
    tokenizer. `counts=False`: the
    shards alone, without the counts the gate reads (about a fifth less CPU; `pretrain
    --shards` then trains on them only with --force)."""
    # deferred: the executors and the corpus reader when a run starts
    from fertility.corpus import CorpusOptions
    from fertility.engine import check_inputs, run_tasks
    from fertility.outputs import Inputs, claim_folder

    options = corpus_options or CorpusOptions()
    spec = tokenizer if isinstance(tokenizer, str) else tokenizer.spec
    inputs = inputs or Inputs.of(corpus=[str(p) for p in paths], tokenizers=[spec])
    # before anything is written, parts/ above all: a task empties its own part folder
    claim_folder(out, "tokenize", OUTPUTS, inputs, allow_in_corpus=allow_in_corpus)
    if options.precision is not None:
        raise FertilityError(
            "--precision: tokenize writes every document it reads into the shards; "
            "a sample at stated precision is report's and gate's"
        )
    step = TokenizeCorpus(
        out,
        paths,
        tokenizer,
        corpus_options=options,
        detail_docs=detail_docs,
        keep_docs=KEEP_DOCS,
        batch_size=batch_size,
        seed=seed,
        heldout_fraction=heldout_fraction,
        separator=separator,
        shard_tokens=shard_tokens,
        quiet=quiet,
        counts=counts,
    )
    keys = step.keys
    settings = {"detail_docs": detail_docs, "seed": seed, "keep_docs": step.settings[2]}
    shards = {
        "heldout_fraction": heldout_fraction,
        "separator": separator,
        "shard_tokens": shard_tokens,
    }
    # one run at a time: a second one (same inputs) would empty the first's part folders
    with locked_folder(Path(out), OutputError, "`fertility tokenize`"):
        sizes = check_inputs(
            out, paths, keys, options, settings, batch_size, tasks, "--out", shards=shards,
            counts=counts,
        )  # fmt: skip
        done = read_index(out)
        if done is not None:  # finished before: nothing to run again
            return done
        step.sizes = sizes  # every task reads the bytes the files had at launch
        if not run_tasks(
            executor, step, tasks, out, workers, slurm, ray, options.on_warning, quiet
        ):
            return None
        return _write_index(Path(out), tasks, seed, heldout_fraction, settings if counts else None)


def _write_index(root: Path, tasks: int, seed: int, heldout_fraction, settings) -> Shards:
    """index.json over the finished parts (written last: a folder without it is unfinished);
    `settings`: the counts' settings, None when the run measured none (--no-counts)."""
    merged = merge_parts(root, [root / PARTS / f"{r:05d}" for r in range(tasks)])
    if not merged["train"]:
        raise FertilityError(f"{root}: the corpus produced no training tokens")
    summary = codec.load(root, f"{COUNTS_FOLDER}/00000", ["summary"])["summary"]
    index: Shards = {
        "schema": INDEX_SCHEMA,
        **merged,
        "seed": seed,
        "heldout_fraction": heldout_fraction,
        "corpus": summary,
        "counts": None
        if settings is None
        else {"folder": "counts", "tasks": tasks, "settings": settings},
    }
    write_inside(root, "index.json", json.dumps(index, indent=1, ensure_ascii=False))
    return index


def shards_report(out: str | os.PathLike, tokenizer, index: Shards | None = None):
    """The Report of the counts a `fertility tokenize` run measured in `out` for `tokenizer`
    (loaded; its fingerprint must be the one that made the shards): the gate's evidence
    without a second pass over the corpus."""
    from fertility.engine import merge

    index = index or read_index(os.fspath(out))
    if index is None:
        raise OutputError(f"{out}: no finished shards (index.json missing)")
    counts = index.get("counts")
    if counts is None:
        raise FertilityError(
            f"{out}: shards without the gate's counts (`fertility tokenize --no-counts`, or "
            "built by pretrain); tokenize again without --no-counts"
        )
    settings = {**counts["settings"], "tasks": counts["tasks"], "executor": "shards"}
    return merge(
        str(out),
        toks=[tokenizer],
        tasks=counts["tasks"],
        settings=settings,
    )


__all__ = ["OUTPUTS", "TokenizeCorpus", "shards_report", "tokenize"]
