"""Writing a data folder (trainer/data.py) from encoded batches, in one part or in many.

A part is what one writer makes of the documents it is given: train and held-out shards
(fertility/shards/format.py), the training documents' table, the held-out documents as JSONL and the
per-language totals, closed by `part.json`, written last. `pretrain` writes one part at the
root of its data folder (trainer.data.build_shards); `fertility tokenize` one part per
datatrove task under `parts/NNNNN/` (fertility.engine.tokenize), and `merge_parts` then
writes the folder's own document table, held-out JSONL and index.json over them, so the
trainer reads both folders alike.

Batches arrive as the measuring path encodes them (fertility.tokenizers' encode_flat: every
document's ids end to end and the tokens per document), so a pass that measures and
tokenizes encodes each document once. Everything per token is numpy; per document only the
held-out hash, the UTF-8 length and, for held-out documents, one JSON line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fertility.errors import TrainingError

if TYPE_CHECKING:  # index.json's parts (fertility/schemas/shards.py), for mypy only
    from fertility.schemas.shards import Shard, ShardLanguage, ShardParts
from fertility.hashing import mix64
from fertility.outputs import open_inside
from fertility.shards.format import (
    DocTableWriter,
    ShardWriter,
    dtype_for_vocab,
    open_doc_table,
)

PART_JSON = "part.json"
DOC_TABLE = "train-docs.bin"
HELDOUT_JSONL = "heldout.jsonl"
# Names under which tokenizers spell "end of document", most specific first.
_EOS_NAMES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "[EOS]", "<|im_end|>")


def choose_separator(
    special_tokens: dict[str, int], setting: int | str, vocab_size: int | None = None
) -> int | None:
    """The id put between documents: the tokenizer's end-of-text token when it has one.

    With "auto" and no such token (any tiktoken rank file, say) the id just past the
    tokenizer's vocabulary, `vocab_size`, is reserved for it: documents glued together would
    teach the model to continue one text with another. Only an explicit "none" concatenates.
    """
    if isinstance(setting, int) and not isinstance(setting, bool):
        return setting
    if setting == "none":
        return None
    for name in _EOS_NAMES:
        if name in special_tokens:
            return int(special_tokens[name])
    for name, idx in sorted(special_tokens.items()):
        if "eos" in name.lower() or "endoftext" in name.lower():
            return int(idx)
    return vocab_size


def shard_meta(tokenizer: Any, separator: int | str) -> dict[str, Any]:
    """The shards' header fields for `tokenizer`: vocabulary size (one more when the separator
    is a reserved id), fingerprint and separator id; an impossible separator is refused."""
    vocab = int(tokenizer.vocab_size)
    sep = choose_separator(dict(tokenizer.special_tokens), separator, vocab)
    if sep is not None and not 0 <= sep <= vocab:
        raise TrainingError(
            f"separator id {sep} is outside the tokenizer's vocabulary "
            f"(size {vocab}; {vocab} itself reserves a new id)"
        )
    vocab += sep == vocab  # a reserved separator: the shards hold one id more
    return {"vocab_size": vocab, "fingerprint": tokenizer.fingerprint, "separator": sep}


def heldout_mask(
    seed: int,
    sources: Sequence[str],
    lines: Sequence[int],
    fraction: float,
    file_keys: Mapping[str, str] | None = None,
) -> np.ndarray:
    """Which documents are held out: a hash of (seed, file, line) per document under
    `fraction` of its range, so the split depends neither on the order documents are read in
    nor on how they are batched. The file is `file_keys[source]` (Corpus.file_keys: its path
    relative to the argument that named it), so `data`, `./data`, an absolute path, a moved
    copy and a URL of one tree hold out the same documents; a source it lacks (documents
    handed over without their corpus) is hashed as it is. blake2b of (seed, file) once per
    distinct source, mixed with the line number by splitmix64 (vectorised: a hash call per
    document cost a tenth of the tokenizing time)."""
    n = len(sources)
    if fraction <= 0 or n == 0:
        return np.zeros(n, bool)
    keys = file_keys or {}
    salts = {
        src: int.from_bytes(
            hashlib.blake2b(f"{seed}\0{keys.get(src, src)}".encode(), digest_size=8).digest(),
            "little",
        )
        for src in set(sources)
    }
    salt = np.fromiter(map(salts.__getitem__, sources), np.uint64, n)
    key = mix64(salt ^ mix64(np.asarray(lines, np.uint64)))
    return key < np.uint64(min(int(fraction * 2.0**64), 2**64 - 1))


class _Split:
    """Writers for one split, opening a new shard whenever the current one is full."""

    def __init__(self, out: Path, name: str, meta: dict[str, Any], shard_tokens: int) -> None:
        self.out, self.name, self.meta, self.shard_tokens = out, name, meta, shard_tokens
        self.done: list[dict[str, Any]] = []
        self.cur: ShardWriter | None = None

    def add(self, tokens: np.ndarray, n_docs: int) -> None:
        if self.cur is None:
            path = self.out / f"{self.name}-{len(self.done):05d}.bin"
            self.cur = ShardWriter(path, **self.meta)
        self.cur.append(tokens, n_docs)
        if self.cur.n_tokens >= self.shard_tokens:
            self.done.append(self.cur.close())
            self.cur = None

    def starts(self, tokens: np.ndarray) -> tuple[int, np.ndarray]:
        """(shard index, token offset in it) of documents of `tokens` tokens each (separator
        included) about to be added as one array: they land in the current shard (a shard
        closes only after an add)."""
        offset = 0 if self.cur is None else self.cur.n_tokens
        return len(self.done), offset + np.cumsum(tokens) - tokens

    def close(self) -> list[dict[str, Any]]:
        if self.cur is not None:
            self.done.append(self.cur.close())
            self.cur = None
        return self.done


class PartWriter:
    """One part of a data folder, written into `folder` from encoded batches (module doc)."""

    def __init__(
        self,
        folder: Path,
        meta: dict[str, Any],
        *,
        seed: int,
        heldout_fraction: float,
        shard_tokens: int,
        spec: str = "",
        file_keys: Mapping[str, str] | None = None,
    ) -> None:
        self.folder, self.meta, self.spec = folder, meta, spec
        self.file_keys = file_keys  # what the held-out split hashes (heldout_mask)
        self.seed, self.fraction = seed, heldout_fraction
        folder.mkdir(parents=True, exist_ok=True)
        self.splits = {n: _Split(folder, n, meta, shard_tokens) for n in ("train", "heldout")}
        self.sep = meta["separator"]
        self.docs = DocTableWriter(folder / DOC_TABLE, meta["fingerprint"])
        self.held = open(folder / HELDOUT_JSONL, "w", encoding="utf-8")
        self.langs: dict[str, int] = {}  # language -> its index, first seen first
        self.totals = np.zeros((0, 4), np.int64)  # per language: docs, tokens, chars, bytes
        self.n_docs = self.n_tokens = 0

    def add(self, batch: Any, ids: np.ndarray, per_doc: np.ndarray) -> None:
        """Documents of `batch` (a fertility.corpus.DocBatch) with their `ids` end to end and
        `per_doc` tokens each. A document of no tokens adds nothing (not even a separator)."""
        ids, per_doc = np.asarray(ids, np.int64), np.asarray(per_doc, np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.meta["vocab_size"]):
            bad = int(ids.max()) if ids.max() >= self.meta["vocab_size"] else int(ids.min())
            raise TrainingError(
                f"{self.spec}: produced token id {bad} outside its vocabulary "
                f"(size {self.meta['vocab_size']})"
            )
        starts = np.cumsum(per_doc) - per_doc
        held = heldout_mask(self.seed, batch.sources, batch.lines, self.fraction, self.file_keys)
        some = per_doc > 0
        for name, mask in (("train", some & ~held), ("heldout", some & held)):
            sel = np.flatnonzero(mask)
            if not len(sel):
                continue
            tokens, lens = self._stream(ids, starts[sel], per_doc[sel])
            if name == "train":
                self._table(batch, sel, lens)
            else:
                for i in sel:
                    record = {
                        "text": batch.texts[i],
                        "lang": batch.langs[i],
                        "source": batch.sources[i],
                        "line": batch.lines[i],
                    }
                    self.held.write(json.dumps(record, ensure_ascii=False) + "\n")
            self.splits[name].add(tokens, len(sel))
            self.n_tokens += len(tokens)
        self.n_docs += int(some.sum())

    def _stream(
        self, ids: np.ndarray, starts: np.ndarray, lens: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The selected documents' ids, each followed by the separator, as one array, and
        each document's length in it (separator included)."""
        step = lens + (self.sep is not None)
        out_start = np.cumsum(step) - step
        total = int(step.sum())
        doc = np.repeat(np.arange(len(lens)), lens)
        within = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        out = np.empty(total, np.int64)
        out[out_start[doc] + within] = ids[starts[doc] + within]
        if self.sep is not None:
            out[out_start + lens] = self.sep
        return out, step

    def _table(self, batch: Any, sel: np.ndarray, lens: np.ndarray) -> None:
        """Document-table rows (fertility/shards/format.py) and the language totals of the training
        documents `sel` of `batch`, `lens` tokens each."""
        # per document: C-level map()s, no Python frame per document
        n, texts = len(batch.texts), batch.texts
        # first seen first (dict.fromkeys keeps order; a set's would vary from run to run)
        codes = {
            lang: self.langs.setdefault(lang, len(self.langs))
            for lang in dict.fromkeys(batch.langs)
        }
        lang = np.fromiter(map(codes.__getitem__, batch.langs), np.int64, n)[sel]
        chars = np.fromiter(map(len, texts), np.int64, n)[sel]
        nbytes = np.fromiter(map(len, map(str.encode, texts)), np.int64, n)[sel]
        shard, start = self.splits["train"].starts(lens)
        self.docs.append(np.stack([np.full(len(sel), shard), start, lens, lang, chars, nbytes], 1))
        if len(self.langs) > len(self.totals):
            grown = np.zeros((len(self.langs), 4), np.int64)
            grown[: len(self.totals)] = self.totals
            self.totals = grown
        for col, values in enumerate((np.ones_like(lens), lens, chars, nbytes)):
            self.totals[:, col] += np.bincount(lang, values, len(self.langs)).astype(np.int64)

    def close(self) -> dict[str, Any]:
        """Close every file and write part.json (this part's index), last."""
        self.held.close()
        self.docs.close()
        part = {
            **self.meta,
            "train": self.splits["train"].close(),
            "heldout": self.splits["heldout"].close(),
            "languages": [
                {"lang": lang, "docs": int(d), "chars": int(c), "bytes": int(b), "tokens": int(t)}
                for lang, (d, t, c, b) in zip(self.langs, self.totals)
            ],
            "documents": self.n_docs,
        }
        (self.folder / PART_JSON).write_text(json.dumps(part, indent=1, ensure_ascii=False))
        return part

    def abort(self) -> None:
        """Close the files after an error (the part stays without part.json: unfinished)."""
        for split in self.splits.values():
            if split.cur is not None:
                split.cur.abandon()
        self.held.close()
        self.docs.abandon()


def read_part(folder: Path) -> dict[str, Any] | None:
    """A finished part's part.json, or None when the part is not finished."""
    path = folder / PART_JSON
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TrainingError(f"{path}: unreadable part index ({e})") from None


def merge_parts(out: Path, folders: Sequence[Path]) -> ShardParts:
    """The data folder's own files over finished parts, in `folders`' order: the training
    documents' table (shard indices and language ids renumbered), the held-out JSONL
    (concatenated) and the index fields every part shares, shards listed as paths relative to
    `out`. Languages are numbered in order of first appearance, part by part."""
    parts = []
    for folder in folders:
        part = read_part(folder)
        if part is None:
            raise TrainingError(f"{folder}: part not finished ({PART_JSON} missing)")
        parts.append(part)
    meta = {k: parts[0][k] for k in ("vocab_size", "fingerprint", "separator")}
    for folder, part in zip(folders, parts):
        if {k: part[k] for k in meta} != meta:
            raise TrainingError(f"{folder}: part made with another tokenizer or separator")
    langs: dict[str, ShardLanguage] = {}
    train: list[Shard] = []
    heldout: list[Shard] = []
    table = DocTableWriter(out / DOC_TABLE, meta["fingerprint"])
    try:
        with open_inside(out, HELDOUT_JSONL, binary=True, error=TrainingError) as held:
            for folder, part in zip(folders, parts):
                rel = os.path.relpath(folder, out)
                ids = np.array(
                    [_add_lang(langs, row) for row in part["languages"]] or [0], np.int64
                )
                rows = open_doc_table(
                    folder / DOC_TABLE,
                    fingerprint=meta["fingerprint"],
                    n_tokens=sum(s["tokens"] for s in part["train"]),
                )
                for lo in range(0, len(rows), 1 << 20):  # bounded memory on any corpus
                    chunk = np.array(rows[lo : lo + (1 << 20)])
                    chunk[:, 0] += len(train)
                    chunk[:, 3] = ids[chunk[:, 3]]
                    table.append(chunk)
                train += [_moved(s, rel) for s in part["train"]]
                heldout += [_moved(s, rel) for s in part["heldout"]]
                with open(folder / HELDOUT_JSONL, "rb") as src:
                    shutil.copyfileobj(src, held, 1 << 20)
    finally:
        table.close()
    return {
        "vocab_size": meta["vocab_size"],
        "fingerprint": meta["fingerprint"],
        "separator": meta["separator"],
        "dtype": str(dtype_for_vocab(meta["vocab_size"]).name),
        "train": train,
        "heldout": heldout,
        "languages": list(langs.values()),
    }


def _moved(shard: dict[str, Any], rel: str) -> Shard:
    """A part's shard entry (part.json), its file named from the data folder."""
    return {"file": f"{rel}/{shard['file']}", "tokens": shard["tokens"], "docs": shard["docs"]}


def _add_lang(langs: dict[str, ShardLanguage], row: dict[str, Any]) -> int:
    """Add a part's language totals to the merged ones; the language's merged index."""
    total = langs.setdefault(
        row["lang"], {"lang": row["lang"], "docs": 0, "chars": 0, "bytes": 0, "tokens": 0}
    )
    total["docs"] += row["docs"]
    total["chars"] += row["chars"]
    total["bytes"] += row["bytes"]
    total["tokens"] += row["tokens"]
    return list(langs).index(row["lang"])


__all__ = ["PartWriter", "merge_parts", "read_part", "shard_meta"]
