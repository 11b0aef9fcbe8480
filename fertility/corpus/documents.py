"""The documents a Corpus gives: one at a time (`Document`) or as columns (`DocBatch`, the
measuring path's form), and `batched` (lists of consecutive items, streamed)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from typing import NamedTuple


class Document(NamedTuple):
    """One document, immutable (a NamedTuple: millions are made per corpus, and a frozen
    dataclass costs several times more to build)."""

    text: str  # never altered except invalid UTF-8 replaced (and counted)
    lang: str  # language label, "und" when unknown
    source: str  # path of the file it came from
    line: int  # 1-based line (.txt) or record (.jsonl/.parquet) number; 1 for whole files


class DocBatch(NamedTuple):
    """Consecutive documents as columns (the measuring path's form: one list per field, so
    no object is built per document). Entry i of each list is document i's field."""

    texts: list[str]
    langs: list[str]
    sources: list[str]
    lines: list[int]

    def __len__(self) -> int:  # documents, not fields
        return len(self.texts)

    def documents(self) -> list[Document]:
        return list(map(Document, self.texts, self.langs, self.sources, self.lines))

    @classmethod
    def of(cls, docs: list[Document]) -> DocBatch:
        texts, langs, sources, lines = zip(*docs) if docs else ((), (), (), ())
        return cls(list(texts), list(langs), list(sources), list(lines))

    def cut(self, start: int, end: int) -> DocBatch:
        """Documents start to end (exclusive) of this batch."""
        if start == 0 and end >= len(self):  # all of it: no copy
            return self
        return DocBatch(
            self.texts[start:end],
            self.langs[start:end],
            self.sources[start:end],
            self.lines[start:end],
        )

    @classmethod
    def joined(cls, parts: list[DocBatch]) -> DocBatch:
        """One batch of consecutive parts, in order."""
        if len(parts) == 1:
            return parts[0]
        return cls(*(list(chain.from_iterable(columns)) for columns in zip(*parts)))


def batched(items: Iterable, size: int) -> Iterator[list]:
    """Lists of `size` consecutive items (the last may be shorter), streamed."""
    batch: list = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
