"""`fertility extend`: add a script to an existing tokenizer, every base id kept.

The run is fertility/extend/run.py (its steps, in order, are described there); the byte-level
BPE extension is fertility/extend/bpe.py, the SentencePiece one fertility/extend/sentencepiece.py,
the held-out measurement, ids check and ids map fertility/extend/report.py.
"""

from fertility.errors import ExtendError
from fertility.extend.run import BASE, EXTENDED, OUTPUTS, SCHEMA, ExtendResult, extend

__all__ = ["BASE", "EXTENDED", "OUTPUTS", "SCHEMA", "ExtendError", "ExtendResult", "extend"]
