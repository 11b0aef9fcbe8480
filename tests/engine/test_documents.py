"""MeasureDocuments in a datatrove pipeline of a user's own (datatrove's JsonlReader, a filter
of datatrove's, our step) on real text: per language, the documents, characters and tokens
the merged Report counts are those of the documents the filter let through, tokenized by the
tokenizer's own library (tiktoken); and the documents pass on unchanged to a writer after
the step."""

import json

import pytest

pytest.importorskip("datatrove")
tiktoken = pytest.importorskip("tiktoken")

from datatrove.executor import LocalPipelineExecutor  # noqa: E402
from datatrove.pipeline.filters import LambdaFilter  # noqa: E402
from datatrove.pipeline.readers import JsonlReader  # noqa: E402
from datatrove.pipeline.writers import JsonlWriter  # noqa: E402
from tiktoken.load import load_tiktoken_bpe  # noqa: E402

from fertility.engine import MeasureDocuments, merge  # noqa: E402
from fertility.tokenizers.patterns import FAMILIES  # noqa: E402
from tests.realworld.conftest import rw  # noqa: E402, F401 (the fixture: real tokenizers and text)

pytestmark = pytest.mark.realworld
LANGS = (("bn", 150), ("en", 150), ("ja", 100))


def test_measure_documents_in_a_pipeline_of_ones_own(rw, tmp_path):  # noqa: F811
    data = tmp_path / "data"
    data.mkdir()
    docs = {}
    for lang, n in LANGS:  # one JSONL file per language: the tasks split them
        lines = [t for t in (rw / "text" / f"{lang}.txt").read_text("utf-8").splitlines() if t]
        docs[lang] = lines[:n]
        with open(data / f"{lang}.jsonl", "w", encoding="utf-8") as fh:
            for i, text in enumerate(lines[:n]):
                fh.write(json.dumps({"text": text, "id": f"{lang}-{i}", "language": lang}) + "\n")
    rank = rw / "tokenizers" / "cl100k_base.tiktoken"
    keep = lambda doc: len(doc.text) >= 20  # noqa: E731 (a filter of the user's)
    step = MeasureDocuments(str(tmp_path / "counts"), [f"{rank}#cl100k_base"])
    LocalPipelineExecutor(
        [
            JsonlReader(str(data)),
            LambdaFilter(keep),
            step,
            JsonlWriter(str(tmp_path / "out"), compression=None),
        ],
        tasks=3,
        workers=1,
        logging_dir=str(tmp_path / "logs"),
    ).run()
    report = merge(str(tmp_path / "counts"), step.keys, tasks=3)

    enc = tiktoken.Encoding(
        "cl100k",
        pat_str=FAMILIES["cl100k"],
        special_tokens={},
        mergeable_ranks=load_tiktoken_bpe(str(rank)),
    )
    f = report.frame
    for lang, texts in docs.items():
        kept = [t for t in texts if len(t) >= 20]
        (row,) = f[(f["group"] == "language") & (f["key"] == lang)].itertuples()
        assert row.documents == len(kept)
        assert row.chars == sum(map(len, kept))
        assert row.tokens == sum(len(enc.encode_ordinary(t)) for t in kept)
    assert report.corpus["documents"] == sum(
        len([t for t in v if len(t) >= 20]) for v in docs.values()
    )
    # the step passes every document on, text and metadata unchanged
    written = [
        json.loads(line)
        for path in sorted((tmp_path / "out").glob("*.jsonl"))
        for line in path.read_text("utf-8").splitlines()
    ]
    assert sorted((d["id"], d["text"]) for d in written) == sorted(
        (f"{lang}-{i}", t)
        for lang, texts in docs.items()
        for i, t in enumerate(texts)
        if len(t) >= 20
    )
    assert all(d["metadata"]["language"] == d["id"].split("-")[0] for d in written)
