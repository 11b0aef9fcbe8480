"""Corpus: files and folders -> language-labelled documents, streamed.

What is read, how documents are cut and labelled, what bad input does, the limits and the
sampling: fertility/corpus/reader.py (`Corpus`). The documents it gives:
fertility/corpus/documents.py. Which files a path names: walk.py; the file formats:
formats.py; URLs: remote.py.
"""

from fertility.corpus.documents import DocBatch, Document, batched
from fertility.corpus.reader import Corpus, CorpusWarning, file_entry, warn
from fertility.corpus.walk import shown
from fertility.options import CorpusOptions

__all__ = [
    "Corpus",
    "CorpusOptions",
    "CorpusWarning",
    "DocBatch",
    "Document",
    "batched",
    "file_entry",
    "shown",
    "warn",
]
