"""Several measuring processes give exactly the report of one."""

import numpy as np
import pandas as pd
import pytest
from tokenizers import normalizers

from fertility.corpus import CorpusOptions
from fertility.measure import analyze
from tests.bpe import byte_level_bpe
from tests.textdata import SENTENCE


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("par")
    corpus = root / "corpus"
    corpus.mkdir()
    rng = np.random.default_rng(0)
    words = {
        "bn": SENTENCE.split(),
        "en": "rain fell on the wet river fields today".split(),
        "th": ["ฉัน", "กิน", "ข้าว", "แล้ว"],
    }
    for lang, pool in words.items():
        lines = [" ".join(rng.choice(pool, size=rng.integers(1, 12))) for _ in range(700)]
        (corpus / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [x for p in sorted(corpus.iterdir()) for x in p.read_text("utf-8").splitlines()]
    byte_level_bpe(lines, 300, normalizer=normalizers.NFKC(), path=root / "tok.json")
    return corpus, root / "tok.json"


def test_two_processes_give_the_report_of_one(setup):
    corpus, tok = setup
    kw = dict(pretokenizers=["gpt2"], batch_size=64, detail_docs=30, keep_docs=1000, seed=5)
    one = analyze([corpus], [f"bpe={tok}"], workers=1, **kw)
    two = analyze([corpus], [f"bpe={tok}"], workers=2, **kw)
    assert two.settings["workers"] == 2 and one.settings["workers"] == 1
    pd.testing.assert_frame_equal(one.frame, two.frame)  # intervals included
    pd.testing.assert_frame_equal(one.docs, two.docs)
    assert one.corpus == two.corpus and one.corpus["docs_table_full"]
    assert one.samples == two.samples
    assert one.normalization == two.normalization
    assert one.byte_fallback_chars == two.byte_fallback_chars
    assert one.running_langs == two.running_langs and one.running_langs  # merged exactly


def test_worker_errors_reach_the_caller(setup, tmp_path):
    from fertility.errors import CorpusError

    (tmp_path / "en.txt").write_bytes(b"fine\nbad \xff\n")
    with pytest.raises(CorpusError, match="invalid UTF-8"):
        analyze([tmp_path], [str(setup[1])], workers=2, corpus_options=CorpusOptions(strict=True))


WORKER = """
import os, queue, sys
from fertility.corpus import Corpus, CorpusOptions
from fertility.measure.parallel import _worker
from fertility.tokenizers import load_tokenizer, reload_key

corpus, tok = sys.argv[1], sys.argv[2]
options = CorpusOptions()
specs = [reload_key(load_tokenizer(tok))]
sizes = Corpus([corpus], options).sizes()
messages = queue.Queue()
_worker(os.getppid(), 0, 1, [corpus], options, sizes, specs, (0, 30, 1000), 64, 0, messages)
kinds = [kind for kind, _, _ in list(messages.queue)]
print(kinds[-1], *sorted({"pandas", "pyarrow"} & set(sys.modules)))
"""


def test_a_worker_measures_without_pandas_or_pyarrow(setup):
    """A measuring process (each of --workers N) runs the pass alone: it loads neither pandas
    (the frame is built by the parent) nor pyarrow (no parquet file here), each of which cost
    every worker about 0.4 s and 40-80 MB before it read a batch."""
    import subprocess
    import sys

    corpus, tok = setup
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(corpus), str(tok)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["result"]  # the pass ran to its result, nothing else loaded
