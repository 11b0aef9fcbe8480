"""Token shards: the file format (format.py), the writer of a data folder's part and the merge
of parts (parts.py), the folder's index.json (index.py).

Below both of its writers: the trainer's own build (fertility.trainer.data.build_shards, given
a corpus) and `fertility tokenize` (fertility.engine.tokenize, in datatrove tasks), which
`pretrain --shards` reads back. docs/TRAIN.md describes the folder.
"""

from fertility.shards.format import (
    HEADER_BYTES,
    ShardHeader,
    dtype_for_vocab,
    open_doc_table,
    open_shard,
    read_header,
    write_shard,
)
from fertility.shards.index import INDEX_SCHEMA, check_entries, read_index
from fertility.shards.parts import PartWriter, choose_separator, merge_parts, shard_meta

__all__ = [
    "HEADER_BYTES",
    "INDEX_SCHEMA",
    "PartWriter",
    "ShardHeader",
    "check_entries",
    "choose_separator",
    "dtype_for_vocab",
    "merge_parts",
    "open_doc_table",
    "open_shard",
    "read_header",
    "read_index",
    "shard_meta",
    "write_shard",
]
