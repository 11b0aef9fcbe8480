"""Token shards: the corpus tokenized once into memory-mapped files, then read in a seeded order.

The shard file format is fertility/shards/format.py; fertility/shards/parts.py writes the
folder and fertility/shards/index.py reads its index.json. A data
folder holds `train-00000.bin ...`,
`heldout-00000.bin ...`, `heldout.jsonl` (the held-out documents, so evaluation can score each
language), `train-docs.bin` (per training document: where it lies, its language, characters
and bytes; trainer/mix.py samples and counts by it) and `index.json`, written last. The
folder is built under `<name>.partial` and renamed, so a half-built one is never mistaken for a
whole one. A folder `fertility tokenize` wrote holds its shards in `parts/NNNNN/` (one folder
per task), listed in index.json by their paths; it is read the same way.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fertility.corpus import DocBatch, batched
from fertility.errors import TrainingError, visible
from fertility.measure.parallel import cap_workers
from fertility.outputs import remove, replace_inside
from fertility.progress import StatusLine
from fertility.shards.format import dtype_for_vocab, open_doc_table, open_shard
from fertility.shards.index import INDEX_SCHEMA, read_index
from fertility.shards.parts import (
    DOC_TABLE,
    HELDOUT_JSONL,
    PART_JSON,
    PartWriter,
    shard_meta,
)
from fertility.threads import usable_cores
from fertility.tokenizers import reload_key, reload_tokenizer
from fertility.tokenizers.kinds import capabilities

if TYPE_CHECKING:  # index.json's record (fertility/schemas/shards.py), for mypy only
    from fertility.schemas.shards import ShardLanguage, Shards

_worker_tok: Any = None
_worker_err: str | None = None


def _worker_init(key: tuple) -> None:
    # Never raise here: a Pool whose initializer fails respawns workers forever. The error
    # is kept and raised by the first encode call, which the parent sees.
    global _worker_tok, _worker_err
    try:
        _worker_tok = reload_tokenizer(*key)  # the very same tokenizer, or an error
    except Exception as e:  # noqa: BLE001 - reported to the parent below
        _worker_err = f"{key[2]}: cannot load the tokenizer in a worker process ({e})"


def _worker_encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    if _worker_err is not None:
        raise TrainingError(_worker_err)
    ids, _, _, per_doc = _worker_tok.encode_flat(texts)
    return ids, per_doc


def _warn(message: str) -> None:
    print(f"warning: {visible(message)}", file=sys.stderr)


def build_shards(
    documents: Iterable[Any],
    tokenizer: Any,
    data_dir: str | Path,
    *,
    seed: int = 0,
    heldout_fraction: float = 0.01,
    separator: int | str = "auto",
    shard_tokens: int = 1 << 28,
    batch_size: int = 512,
    workers: int = 0,
    quiet: bool = False,
    summary: Any = None,
    file_keys: Mapping[str, str] | None = None,
) -> Shards:
    """Tokenize `documents` (objects with text, lang, source, line) into `data_dir`, one part
    (fertility/shards/parts.py) at its root.

    Streams: documents are encoded `batch_size` at a time, in order, so the shards are the
    same whatever `workers` is. `workers` 0 uses the tokenizer's own threads where its kind
    has them (kinds.Capabilities.batch_threads: HF tokenizers) and one process per core
    otherwise; 1 encodes in this process. `summary` is a
    callable returning the corpus summary after the pass (stored in index.json). `file_keys`:
    the corpus's Corpus.file_keys(), what the held-out split hashes for each source (without
    it, the source as given). Returns the index dict.
    """
    data_dir = Path(data_dir)
    part = data_dir.with_name(data_dir.name + ".partial")
    _remove_ours(part)
    meta = shard_meta(tokenizer, separator)
    writer = PartWriter(
        part,
        meta,
        seed=seed,
        heldout_fraction=heldout_fraction,
        shard_tokens=shard_tokens,
        spec=tokenizer.spec,
        file_keys=file_keys,
    )

    if workers == 0:
        workers = 1 if capabilities(tokenizer).batch_threads else usable_cores()
    elif workers > 1:  # a pool of more processes than cores would only share them
        workers = cap_workers(workers, _warn, "tokenize_workers")
    batches = (
        DocBatch(
            [d.text for d in b], [d.lang for d in b], [d.source for d in b], [d.line for d in b]
        )
        for b in batched(documents, batch_size)
    )
    pool = None
    if workers > 1:
        # spawn, not fork: forked HF tokenizers deadlock, and workers reload from the spec
        ctx = multiprocessing.get_context("spawn")
        pool = ctx.Pool(workers, initializer=_worker_init, initargs=(reload_key(tokenizer),))
        encoded = _parallel_encode(pool, batches, in_flight=2 * workers)
    else:
        encoded = (
            (b, (flat[0], flat[3])) for b in batches for flat in (tokenizer.encode_flat(b.texts),)
        )

    status = StatusLine(quiet)
    t0 = time.monotonic()
    try:
        for batch, (ids, per_doc) in encoded:
            writer.add(batch, ids, per_doc)
            rate = writer.n_tokens / max(time.monotonic() - t0, 1e-9)
            status.update(
                f"tokenizing: {writer.n_docs:,} documents, {writer.n_tokens:,} tokens, "
                f"{rate:,.0f} tokens/s"
            )
    except BaseException:
        writer.abort()
        raise
    finally:
        if pool is not None:
            pool.terminate()
        status.close()
    done = writer.close()
    index: Shards = {
        "schema": INDEX_SCHEMA,
        "fingerprint": done["fingerprint"],
        "vocab_size": done["vocab_size"],
        "separator": done["separator"],
        "dtype": str(dtype_for_vocab(meta["vocab_size"]).name),
        "seed": seed,
        "heldout_fraction": heldout_fraction,
        "train": done["train"],
        "heldout": done["heldout"],
        "languages": done["languages"],
        "corpus": summary() if callable(summary) else summary,
    }
    if not index["train"]:
        raise TrainingError(f"{data_dir}: the corpus produced no training tokens")
    (part / PART_JSON).unlink()  # the folder's index.json is its own
    (part / "index.json").write_text(json.dumps(index, indent=1, ensure_ascii=False))
    _remove_ours(data_dir)
    replace_inside(part, data_dir.parent, data_dir.name, TrainingError)  # no link followed
    return index


def _parallel_encode(
    pool: Any, batches: Iterator[Any], in_flight: int
) -> Iterator[tuple[Any, tuple[np.ndarray, np.ndarray]]]:
    """Encode batches in worker processes, in order, with at most `in_flight` outstanding.

    (Pool.imap would read the whole corpus ahead into memory; this keeps streaming.)
    """

    pending: deque = deque()
    for batch in batches:
        pending.append((batch, pool.apply_async(_worker_encode, (batch.texts,))))
        if len(pending) >= in_flight:
            done, result = pending.popleft()
            yield done, result.get()
    while pending:
        done, result = pending.popleft()
        yield done, result.get()


def _remove_ours(path: Path) -> None:
    """Delete an earlier build's `path`, only when the manifest of its folder lists it
    (fertility.outputs): a `data/` the user keeps beside a run, their corpus perhaps, stays."""
    if path.exists() or path.is_symlink():
        remove(path.parent, path.name)
    if path.exists() or path.is_symlink():
        raise TrainingError(f"{path}: exists and was not written by fertility; not replaced")


# -- reading -----------------------------------------------------------------------------


class TokenData:
    """The shards of one split, checked against the run's tokenizer and model."""

    def __init__(self, paths: Sequence[str | Path], *, fingerprint: str, vocab_size: int) -> None:
        self.paths = [Path(p) for p in paths]
        self.tokens: list[np.ndarray] = []
        # The training split's document table and per-language totals, when the folder has
        # them (from_dir; folders built before they existed have neither: no mixture, no
        # per-language counts).
        self.docs: np.ndarray | None = None
        self.languages: list[ShardLanguage] = []  # index.json's per-language totals
        self.separator: int | None = None
        self.folder: Path | None = None  # the data folder (from_dir): heldout.jsonl's
        for p in self.paths:
            h, arr = open_shard(p)
            if h.fingerprint != fingerprint:
                raise TrainingError(
                    f"{p}: shard was made by tokenizer {h.fingerprint}, this run's "
                    f"tokenizer is {fingerprint}; rebuild the shards "
                    "(use a new --out) or use the tokenizer that made them"
                )
            if len(arr):
                top = int(arr.max())  # one vectorised pass; an id >= vocab would index garbage
                if top >= vocab_size:
                    raise TrainingError(
                        f"{p}: token id {top} >= the model's vocabulary size {vocab_size}"
                    )
            self.tokens.append(arr)

    @classmethod
    def from_dir(
        cls, data_dir: str | Path, split: str, *, fingerprint: str, vocab_size: int
    ) -> TokenData:
        index = read_index(data_dir)
        if index is None:
            raise TrainingError(f"{data_dir}: no token shards (index.json missing)")
        if split not in ("train", "heldout"):
            raise ValueError(f"split {split!r}: train or heldout")
        data = cls(
            [Path(data_dir) / s["file"] for s in index["train" if split == "train" else "heldout"]],
            fingerprint=fingerprint,
            vocab_size=vocab_size,
        )
        if split == "train" and "languages" in index:
            data.docs = open_doc_table(
                Path(data_dir) / DOC_TABLE, fingerprint=fingerprint, n_tokens=data.n_tokens
            )
            data.languages = index["languages"]
        data.separator = index["separator"]
        data.folder = Path(data_dir)
        return data

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)


# Mixed into the seed of the grid offsets, so they are drawn apart from the window orders.
_GRID_KEY = 0x6F666673


def grid_offsets(seed: int, epoch: int, n: int, seq_len: int) -> np.ndarray:
    """Where the grid of windows of each of `n` streams (shards; with a mix, languages)
    starts in pass `epoch`: token 0 in the first pass, then a seeded offset in
    [0, seq_len) per stream, so window boundaries move from pass to pass (nanoGPT draws
    every window at a random offset). The number of windows per pass stays
    (tokens - 1) // seq_len, so the cursor counts the same windows whatever the offset; a
    window that would run past its stream's end is moved back to end there. A function of
    (seed, epoch, stream) alone: a resumed run reads the same windows."""
    if epoch == 0:
        return np.zeros(n, np.int64)
    return np.random.default_rng([seed, epoch, _GRID_KEY]).integers(0, seq_len, size=n)


class BatchSource:
    """What the training loop reads micro-batches from (`Batches` here; trainer.mix's
    `CountedBatches` and `MixBatches`): one protocol, one cursor.

    The cursor counts windows of seq_len+1 tokens consumed by all ranks together: `epoch`
    (passes over the `n_windows` windows) and `position` (windows into the current one).
    state_dict() holds it with what it is counted in (seed, n_windows, seq_len), and
    load_state_dict() refuses a state counted in anything else: the shards or the config
    changed. consumed() is, per language, the characters, bytes and tokens read so far.
    """

    data: TokenData
    seed: int
    n_windows: int
    seq_len: int
    epoch: int
    position: int

    def next(self, advance: bool = True) -> tuple[Any, Any]:
        """(inputs, targets) as int64 torch tensors of shape (micro_batch, seq_len);
        `advance` moves the cursor past them."""
        raise NotImplementedError

    def peek(self) -> tuple[Any, Any]:
        """The next micro-batch, the cursor left where it is."""
        return self.next(advance=False)

    def consumed(self) -> dict[str, dict[str, int]]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "n_windows": self.n_windows,
            "seq_len": self.seq_len,
        }

    def check_state(self, state: dict[str, Any]) -> None:
        """Refuse a cursor state counted in other windows than this source's."""
        for key in ("seed", "n_windows", "seq_len"):
            if key in state and int(state[key]) != getattr(self, key):
                raise TrainingError(
                    f"checkpoint data cursor has {key} = {state[key]}, the data "
                    f"now has {getattr(self, key)}; the shards or config changed"
                )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


class Batches(BatchSource):
    """Fixed-length windows drawn without replacement, in a seeded order, resumable.

    Each shard is cut into windows of seq_len+1 tokens (inputs and shifted targets) starting
    every seq_len tokens from the pass's grid offset (grid_offsets: 0 in the first pass);
    windows never cross shards. Epoch e visits all windows in the order
    `default_rng([seed, e]).permutation(n)`. The cursor (epoch, position) counts windows
    consumed by all ranks together: a micro-batch takes the next micro_batch*world windows and
    rank r keeps every world-th one starting at r, so the union over ranks is exactly what one
    process would have read. A batch that does not fit in what is left of an epoch starts the
    next epoch (the tail is dropped, never repeated).
    """

    def __init__(
        self,
        data: TokenData,
        seq_len: int,
        micro_batch: int,
        *,
        seed: int,
        rank: int = 0,
        world: int = 1,
    ) -> None:
        self.data, self.seq_len, self.micro_batch = data, seq_len, micro_batch
        self.seed, self.rank, self.world = seed, rank, world
        per_shard = np.array([max(0, (len(t) - 1) // seq_len) for t in data.tokens], np.int64)
        self.n_windows = int(per_shard.sum())
        self._starts = np.concatenate([[0], np.cumsum(per_shard)])
        if self.n_windows < micro_batch * world:
            raise TrainingError(
                f"{data.paths[0].parent}: {self.n_windows} windows of "
                f"{seq_len + 1} tokens, fewer than one batch "
                f"({micro_batch} x {world}); lower seq_len or micro_batch"
            )
        self.epoch, self.position = 0, 0
        self.last_batch = np.empty(0, np.int64)
        self._perm_epoch, self._perm = -1, np.empty(0, np.int64)

    def _permutation(self, epoch: int) -> np.ndarray:
        if self._perm_epoch != epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n_windows)
            self._perm_epoch = epoch
        return self._perm

    def _next_global(self) -> tuple[int, int, np.ndarray]:
        """(epoch, position, every rank's windows) of the next micro-batch, the cursor
        left as it is."""
        need = self.micro_batch * self.world
        epoch, pos = self.epoch, self.position
        if pos + need > self.n_windows:
            epoch, pos = epoch + 1, 0
        return epoch, pos, self._permutation(epoch)[pos : pos + need]

    def window_indices(self, advance: bool = True) -> np.ndarray:
        """This rank's windows of the next micro-batch; `advance` moves the cursor past it."""
        epoch, pos, batch = self._next_global()
        if advance:
            self.epoch, self.position = epoch, pos + len(batch)
            self.last_batch = batch  # every rank's windows: what the run consumed (trainer.mix)
        return batch[self.rank :: self.world]

    def window_starts(
        self, indices: np.ndarray, epoch: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(shard, token offset in it) where each window of pass `epoch` (default: the
        cursor's) begins: shard s's grid starts at grid_offsets(...)[s]."""
        epoch = self.epoch if epoch is None else epoch
        shard = np.searchsorted(self._starts, indices, side="right") - 1
        shift = grid_offsets(self.seed, epoch, len(self.data.tokens), self.seq_len)[shard]
        lens = np.array([len(t) for t in self.data.tokens], np.int64)[shard]
        start = (indices - self._starts[shard]) * self.seq_len + shift
        return shard, np.minimum(start, lens - self.seq_len - 1)

    def windows(self, indices: np.ndarray, epoch: int | None = None) -> np.ndarray:
        """(len(indices), seq_len+1) int64 array of the windows' tokens."""
        shard, offsets = self.window_starts(indices, epoch)
        rows = [self.data.tokens[s][o : o + self.seq_len + 1] for s, o in zip(shard, offsets)]
        return np.stack(rows).astype(np.int64)

    def next(self, advance: bool = True) -> tuple[Any, Any]:
        """(inputs, targets) as int64 torch tensors of shape (micro_batch, seq_len)."""
        # deferred: torch is the optional train extra
        import torch

        epoch = self._next_global()[0]  # (a micro-batch never spans two epochs)
        w = torch.from_numpy(self.windows(self.window_indices(advance), epoch))
        return w[:, :-1], w[:, 1:]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.check_state(state)
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def heldout_documents(heldout: TokenData, n: int) -> list[tuple[str, int]]:
    """(language, UTF-8 bytes) of the first `n` held-out documents: the first `n` lines of
    heldout.jsonl in the data folder, written in the order of the held-out shards' documents
    (fertility/shards/parts.py). [] when there is none, or it holds fewer (nothing is guessed)."""
    if heldout.folder is None or n == 0:
        return []
    out: list[tuple[str, int]] = []
    path = heldout.folder / HELDOUT_JSONL
    if not path.is_file():  # a data folder from before heldout.jsonl
        return []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if len(out) == n:
                break
            try:
                record = json.loads(line)
                text, lang = record["text"], record.get("lang")
                out.append((lang if isinstance(lang, str) and lang else "und", len(text.encode())))
            except (ValueError, KeyError, TypeError, AttributeError):
                raise TrainingError(f"{path}: line {number} is not a held-out record") from None
    return out if len(out) == n else []


def heldout_windows(
    streams: Sequence[np.ndarray],
    separator: int | None,
    seq_len: int,
    budget: int,
    owners: list[int] | None = None,
) -> tuple[list[np.ndarray], list[int], int, int]:
    """(windows, skips, documents, scored tokens): the held-out text the trainer scores,
    whole documents from the start of the held-out split until `budget` tokens are scored.

    With a separator each document is scored as `fertility eval` scores it (eval/nll.py):
    the separator, then the document's ids, every id of the document scored and the
    separator after it not (an end-of-text after a line is nearly free: counting it, and
    windows that start mid-document, made the trainer's old figure disagree with eval's);
    a document longer than seq_len
    predictions is cut into eval's windows (window k scores S[kT+1 : kT+T+1], the last one
    ends at the document's end and skips the predictions already scored). `skips[i]` is
    the number of leading predictions of window i not scored. Without a separator the
    shards hold no document boundaries: consecutive windows of the stream, every target
    scored, and documents is 0. `owners`, when given, gets each window's document (its
    index in the held-out split, the line of heldout.jsonl); without a separator none."""
    T = seq_len
    windows: list[np.ndarray] = []
    skips: list[int] = []
    docs = tokens = 0
    if separator is None:
        for arr in streams:
            for o in range(0, len(arr) - T, T):
                if tokens >= budget:
                    break
                windows.append(np.asarray(arr[o : o + T + 1], np.int64))
                skips.append(0)
                tokens += T
        return windows, skips, 0, tokens
    for arr in streams:
        a = np.asarray(arr, np.int64)
        ends = np.flatnonzero(a == separator)
        starts = np.concatenate(([0], ends[:-1] + 1))
        for s, e in zip(starts, ends):
            if tokens >= budget:
                return windows, skips, docs, tokens
            if e == s:
                continue  # (empty documents are not written; a stray separator scores nothing)
            seq = np.concatenate(([separator], a[s:e]))
            n = len(seq) - 1  # predictions: every id of the document
            n_win = -(-n // T)
            windows.extend(seq[w * T : w * T + T + 1] for w in range(n_win - 1))
            last = max(0, n - T)
            windows.append(seq[last:])
            skips.extend([0] * (n_win - 1) + [(n_win - 1) * T - last])
            if owners is not None:
                owners.extend([docs] * n_win)
            docs, tokens = docs + 1, tokens + n
    return windows, skips, docs, tokens
