"""URL corpus paths (fertility/corpus/remote.py) read through fsspec: a FineWeb-2-style tree
served by a real HTTP server on 127.0.0.1 that answers range requests, and fsspec's memory://,
give the documents and labels the same tree gives from the local disk; --precision reads only
some row groups of a served parquet file; a dead host is one line within seconds, for every
verb that takes a corpus; gate and tokenize read the served tree as the local one. Nothing
here leaves this machine."""

from __future__ import annotations

import http.server
import json
import os
import re
import threading
import time
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fertility.corpus import Corpus

EXCERPT = Path(__file__).resolve().parents[1] / "realworld" / "excerpt"


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Files with `Range: bytes=a-b` answered 206 (what object stores and the hub do), folders
    as the standard index page; each body's bytes are added to the server's `sent`."""

    def log_message(self, *args):  # quiet
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            return super().send_head()
        try:
            f = open(path, "rb")
        except OSError:
            self.send_error(404)
            return None
        size = os.fstat(f.fileno()).st_size
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        start, end = 0, size - 1
        if m:
            if m.group(1):
                start = int(m.group(1))
                end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            else:  # a suffix: the last N bytes
                start = max(0, size - int(m.group(2)))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        f.seek(start)
        self.range = end - start + 1
        return f

    def copyfile(self, source, outputfile):
        data = source.read(getattr(self, "range", None) or -1)
        self.server.sent += len(data)
        outputfile.write(data)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """data/ben_Beng/train/000.parquet (real Bengali lines, many row groups) and
    data/eng_Latn/train/000.jsonl beside it, as FineWeb-2 lays out a language's files."""
    root = tmp_path_factory.mktemp("served")
    bn = [x for x in (EXCERPT / "bn.txt").read_text("utf-8").splitlines() if x.strip()]
    en = [x for x in (EXCERPT / "en.txt").read_text("utf-8").splitlines() if x.strip()]
    (root / "data/ben_Beng/train").mkdir(parents=True)
    (root / "data/eng_Latn/train").mkdir(parents=True)
    # 400 row groups of distinct rows, stored plainly: each group's bytes are its own, and
    # --precision draws its least number of blocks (30) from ten times as many
    rows = [f"{i} {bn[i % len(bn)]}" for i in range(400 * 20)]
    pq.write_table(
        pa.table({"text": rows}),
        root / "data/ben_Beng/train/000.parquet",
        row_group_size=20,
        compression="none",
        use_dictionary=False,
    )
    lines = "".join(json.dumps({"text": x}, ensure_ascii=False) + "\n" for x in en)
    (root / "data/eng_Latn/train/000.jsonl").write_text(lines, encoding="utf-8")
    (root / "data/.hidden.txt").write_text("not read\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def server(tree):
    handler = lambda *a, **kw: RangeHandler(*a, directory=str(tree), **kw)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.sent = 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _read(paths):
    corpus = Corpus(paths)
    return [(d.lang, d.text) for d in corpus.documents()], corpus


def test_a_served_tree_reads_as_the_local_one(tree, server):
    url = f"http://127.0.0.1:{server.server_port}/data/"
    got, corpus = _read([url])
    want, local = _read([str(tree / "data")])
    assert got == want
    assert {lang for lang, _ in got} == {"ben_Beng", "eng_Latn"}  # from the folders' names
    assert [f.rel for f in corpus.files] == [f.rel for f in local.files]
    skipped = corpus.summary()["skipped_files"]
    assert [s["reason"] for s in skipped] == ["hidden"] and skipped[0]["path"].endswith(
        "/data/.hidden.txt"
    )


def test_memory_urls_read_as_the_local_files(tree):
    fs = fsspec.filesystem("memory")
    for p in sorted(tree.rglob("*")):
        if p.is_file():
            fs.pipe(f"/fsspec-test/{p.relative_to(tree).as_posix()}", p.read_bytes())
    got, _ = _read(["memory://fsspec-test/data"])
    want, _ = _read([str(tree / "data")])
    assert got == want
    # a file named itself: labelled by its own folder, as a local file is (here: none)
    one, _ = _read(["memory://fsspec-test/data/eng_Latn/train/000.jsonl"])
    assert one == _read([str(tree / "data/eng_Latn/train/000.jsonl")])[0]


def test_precision_reads_only_the_row_groups_it_needs(tree, server, run):
    url = f"http://127.0.0.1:{server.server_port}/data/ben_Beng/train/000.parquet"
    size = (tree / "data/ben_Beng/train/000.parquet").stat().st_size
    server.sent = 0
    code, out, err = run(
        "report", url, "--pretokenizers", "whitespace", "-q", "--precision", "0.05"
    )
    assert code == 0, err
    # about 30 of the 400 row groups, and the footer once
    assert 0 < server.sent < size / 4, (server.sent, size)


def test_a_dead_host_is_one_line_within_seconds(run):
    t0 = time.monotonic()
    code, out, err = run("report", "http://127.0.0.1:9/corpus/", "-q")  # port 9: refused
    assert time.monotonic() - t0 < 10
    assert code == 2 and err.strip().splitlines() == [
        "error: http://127.0.0.1:9/corpus/: cannot reach http://127.0.0.1:9"
    ], err


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    """A byte-level BPE on the Bengali and English excerpts (the served tree's languages)."""
    from tests.bpe import byte_level_bpe

    lines = [x for lang in ("bn", "en") for x in (EXCERPT / f"{lang}.txt").read_text().split("\n")]
    path = tmp_path_factory.mktemp("t") / "tok.json"
    byte_level_bpe([x for x in lines if x.strip()], 800, path=path)
    return path


# Every verb that takes a corpus, with what else it needs; {tok} and {out} are filled in.
VERBS = {
    "report": ["-t", "{tok}"],
    "gate": ["-t", "{tok}"],
    "fix": ["--vocab-size", "300", "--out", "{out}"],
    "extend": ["{tok}", "--add", "10", "--out", "{out}"],  # BASE comes before the paths
    "tokenize": ["-t", "{tok}", "--out", "{out}"],
    "pretrain": ["-t", "{tok}", "--out", "{out}"],
}


def _argv(verb: str, url: str, tok, out) -> list[str]:
    extra = [a.format(tok=tok, out=out) for a in VERBS[verb]]
    if verb == "extend":  # fertility extend BASE PATHS...
        return [verb, extra[0], url, *extra[1:], "-q"]
    return [verb, url, *extra, "-q"]


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_that_takes_a_corpus_takes_a_url(verb, run, tok, tmp_path):
    """A dead host is that verb's one-line error (its corpus went through the URL reader, not
    the local walker's 'no such file'), in seconds, and no output is left: not even the
    folder a verb claimed before reading (fertility.outputs.release_unused_claims)."""
    t0 = time.monotonic()
    url = "http://127.0.0.1:9/corpus/"
    code, out, err = run(*_argv(verb, url, tok, tmp_path / "out"))
    assert time.monotonic() - t0 < 20
    assert code == 2 and err.strip().splitlines()[-1] == (
        f"error: {url}: cannot reach http://127.0.0.1:9"
    ), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("verb", ["gate", "tokenize"])
def test_gate_and_tokenize_read_a_served_tree(verb, run, tok, tree, server, tmp_path):
    """The served tree gives the gate and the shard writer what the local tree gives them."""
    url = f"http://127.0.0.1:{server.server_port}/data/"
    outs = {}
    for name, path in (("url", url), ("local", str(tree / "data"))):
        out = tmp_path / name
        code, stdout, err = (
            run(*_argv(verb, path, tok, out), "--format", "json")
            if verb == "gate"
            else run(*_argv(verb, path, tok, out))
        )
        assert code in (0, 1), err
        outs[name] = json.loads(stdout) if verb == "gate" else _split(out)
    if verb == "gate":
        assert outs["url"]["passed"] == outs["local"]["passed"]
        assert outs["url"]["checks"] == outs["local"]["checks"]
    else:  # the same documents held out: the split hashes each file's path inside the tree
        assert outs["url"] == outs["local"]
        train, heldout, held = outs["url"]
        en = (tree / "data/eng_Latn/train/000.jsonl").read_text(encoding="utf-8").count("\n")
        docs = sum(d for d, _ in train + heldout)
        assert docs == 400 * 20 + en and len(held) == sum(d for d, _ in heldout) > 0


def _split(out) -> tuple:
    """A tokenize output's split: (docs, tokens) of each train and held-out shard, and the
    held-out documents (text, language, line) in order."""
    index = json.loads((out / "index.json").read_text())
    shards = [[(s["docs"], s["tokens"]) for s in index[part]] for part in ("train", "heldout")]
    records = map(json.loads, (out / "heldout.jsonl").read_text(encoding="utf-8").splitlines())
    return *shards, [(r["text"], r["lang"], r["line"]) for r in records]
