"""The token shard file format (see trainer/data.py for the folder around it).

Layout (little-endian), `HEADER_BYTES` bytes of header then the token array:

    magic        8s   b"FERTTOK\\0"
    version      u32  1
    dtype        u32  itemsize of the token array: 2 (uint16) or 4 (uint32)
    vocab_size   u64  the tokenizer's vocabulary size
    fingerprint  64s  the tokenizer's fingerprint (ASCII, NUL-padded)
    n_tokens     u64
    n_docs       u64
    separator    i64  id appended after every document, or -1 for none
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fertility.errors import TrainingError

MAGIC = b"FERTTOK\0"
VERSION = 1
HEADER = struct.Struct("<8sIIQ64sQQq")
HEADER_BYTES = 256  # room to grow; also keeps the token array aligned
_DTYPES: dict[int, np.dtype] = {2: np.dtype("<u2"), 4: np.dtype("<u4")}


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    """uint16 when every id (0 .. vocab_size-1) fits in 16 bits, else uint32."""
    return _DTYPES[2] if vocab_size <= 1 << 16 else _DTYPES[4]


@dataclass(frozen=True)
class ShardHeader:
    version: int
    dtype: np.dtype
    vocab_size: int
    fingerprint: str
    n_tokens: int
    n_docs: int
    separator: int | None


def _pack_header(h: ShardHeader) -> bytes:
    fp = h.fingerprint.encode("ascii")
    if len(fp) > 64:
        raise TrainingError(f"tokenizer fingerprint longer than 64 characters: {h.fingerprint}")
    packed = HEADER.pack(
        MAGIC,
        VERSION,
        h.dtype.itemsize,
        h.vocab_size,
        fp,
        h.n_tokens,
        h.n_docs,
        -1 if h.separator is None else h.separator,
    )
    return packed.ljust(HEADER_BYTES, b"\0")


def _read_head(path: str | Path, what: str, layout: struct.Struct, magic: bytes) -> tuple:
    """The header fields of a file of ours (`what`: its name in an error), refused when it
    cannot be read, is not ours (magic) or is another version: a shard's and a document
    table's alike."""
    try:
        with open(path, "rb") as f:
            raw = f.read(HEADER_BYTES)
    except OSError as e:
        raise TrainingError(f"{path}: cannot read {what} ({e.strerror})") from None
    if len(raw) < layout.size or raw[:8] != magic:
        raise TrainingError(f"{path}: not a fertility {what} (bad magic)")
    fields = layout.unpack_from(raw)
    if fields[1] != VERSION:
        raise TrainingError(f"{path}: {what} version {fields[1]}, this build reads {VERSION}")
    return fields


def read_header(path: str | Path) -> ShardHeader:
    _, version, code, vocab, fp, n_tok, n_docs, sep = _read_head(path, "token shard", HEADER, MAGIC)
    if code not in _DTYPES:
        raise TrainingError(f"{path}: unknown token dtype code {code}")
    return ShardHeader(
        version,
        _DTYPES[code],
        vocab,
        fp.rstrip(b"\0").decode("ascii"),
        n_tok,
        n_docs,
        None if sep < 0 else sep,
    )


class ShardWriter:
    """Appends token arrays to one shard file; the header is written on close."""

    def __init__(
        self, path: Path, *, vocab_size: int, fingerprint: str, separator: int | None
    ) -> None:
        self.path = path
        self.dtype = dtype_for_vocab(vocab_size)
        self._meta = (vocab_size, fingerprint, separator)
        self.n_tokens = 0
        self.n_docs = 0
        self._f = open(path, "wb")
        self._f.write(b"\0" * HEADER_BYTES)

    def append(self, tokens: np.ndarray, n_docs: int) -> None:
        self._f.write(np.ascontiguousarray(tokens, dtype=self.dtype).tobytes())
        self.n_tokens += len(tokens)
        self.n_docs += n_docs

    def close(self) -> dict[str, Any]:
        vocab, fp, sep = self._meta
        self._f.seek(0)
        self._f.write(
            _pack_header(
                ShardHeader(VERSION, self.dtype, vocab, fp, self.n_tokens, self.n_docs, sep)
            )
        )
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        return {"file": self.path.name, "tokens": self.n_tokens, "docs": self.n_docs}

    def abandon(self) -> None:
        """Close after an error without a header: its zeros are no magic, so the file is
        never read as a shard (a relaunch writes its part again)."""
        self._f.close()


def write_shard(
    path: str | Path,
    tokens: np.ndarray,
    *,
    vocab_size: int,
    fingerprint: str,
    n_docs: int = 1,
    separator: int | None = None,
) -> ShardHeader:
    """Write a whole token array as one shard (tests and tools; the pipeline streams)."""
    w = ShardWriter(Path(path), vocab_size=vocab_size, fingerprint=fingerprint, separator=separator)
    w.append(np.asarray(tokens), n_docs)
    w.close()
    return read_header(path)


def open_shard(path: str | Path) -> tuple[ShardHeader, np.ndarray]:
    """Header and a read-only memory map of the tokens; a truncated file is refused."""
    h = read_header(path)
    expected = HEADER_BYTES + h.n_tokens * h.dtype.itemsize
    size = os.path.getsize(path)
    if size != expected:
        raise TrainingError(f"{path}: token shard is {size} bytes, its header says {expected}")
    if h.n_tokens == 0:
        return h, np.zeros(0, dtype=h.dtype)
    return h, np.memmap(path, dtype=h.dtype, mode="r", offset=HEADER_BYTES, shape=(h.n_tokens,))


# -- building ----------------------------------------------------------------------------


# -- the document table beside a split's shards -------------------------------------------
# One row per document, in the order the shards hold them, so that a mixture can sample by
# language and count what was consumed in characters (trainer/mix.py). Layout: a header
# (magic b"FERTDOC\0", version u32, fingerprint 64s, n_docs u64, n_tokens u64: the split's
# total, checked against its shards) padded to HEADER_BYTES, then n_docs rows of six
# little-endian int64: shard (index into the split's shard list), start (token offset in that
# shard), tokens (including the separator after it), lang (index into index.json's
# "languages"), chars (code points of its text), bytes (UTF-8).

DOC_MAGIC = b"FERTDOC\0"
DOC_HEADER = struct.Struct("<8sI64sQQ")
DOC_COLUMNS = ("shard", "start", "tokens", "lang", "chars", "bytes")


class DocTableWriter:
    """Streams rows of the document table; the header is written on close."""

    def __init__(self, path: Path, fingerprint: str) -> None:
        self.path, self.fingerprint = path, fingerprint
        self.n_docs = self.n_tokens = 0
        self._f = open(path, "wb")
        self._f.write(b"\0" * HEADER_BYTES)

    def append(self, rows: np.ndarray) -> None:
        rows = np.ascontiguousarray(rows, dtype="<i8").reshape(-1, len(DOC_COLUMNS))
        self._f.write(rows.tobytes())
        self.n_docs += len(rows)
        self.n_tokens += int(rows[:, 2].sum())

    def close(self) -> None:
        self._f.seek(0)
        self._f.write(
            DOC_HEADER.pack(
                DOC_MAGIC, VERSION, self.fingerprint.encode("ascii"), self.n_docs, self.n_tokens
            ).ljust(HEADER_BYTES, b"\0")
        )
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()

    def abandon(self) -> None:
        """Close after an error without a header (never read as a table: no magic)."""
        self._f.close()


def open_doc_table(path: str | Path, *, fingerprint: str, n_tokens: int) -> np.ndarray:
    """The (n_docs, 6) int64 table, memory-mapped; refused when it does not match the shards."""
    _, _, fp, n_docs, total = _read_head(path, "document table", DOC_HEADER, DOC_MAGIC)
    fp = fp.rstrip(b"\0").decode("ascii")
    if fp != fingerprint:
        raise TrainingError(
            f"{path}: document table was made by tokenizer {fp}, the shards' is {fingerprint}"
        )
    if total != n_tokens:
        raise TrainingError(
            f"{path}: document table covers {total} tokens, the shards hold {n_tokens}"
        )
    size = os.path.getsize(path)
    if size != HEADER_BYTES + n_docs * 8 * len(DOC_COLUMNS):
        raise TrainingError(
            f"{path}: document table is {size} bytes, its header says {n_docs} documents"
        )
    if n_docs == 0:
        return np.zeros((0, len(DOC_COLUMNS)), dtype="<i8")
    return np.memmap(
        path, dtype="<i8", mode="r", offset=HEADER_BYTES, shape=(n_docs, len(DOC_COLUMNS))
    )
