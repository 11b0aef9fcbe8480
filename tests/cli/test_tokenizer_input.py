"""Hostile tokenizer files, split patterns and `hf:` without a network: each is one line
`error: <file>: <what>` and exit 2, in bounded time, never a traceback or a hang."""

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import regex

from tests.textdata import SENTENCE


@pytest.fixture()
def corpus(tmp_path):
    (tmp_path / "bn.txt").write_text((SENTENCE + "\n") * 3, encoding="utf-8")
    return tmp_path / "bn.txt"


@pytest.fixture()
def byte_ranks(tmp_path):
    """A tiktoken rank file of the 256 single bytes (no merges)."""
    path = tmp_path / "bytes.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)))
    return path


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_deeply_nested_tokenizer_json(run, corpus, tmp_path):
    deep = tmp_path / "tokenizer.json"
    deep.write_text('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run("report", corpus, "-t", deep, "-q")
    assert (
        code == 2
        and _one_error_line(err) == f"error: {deep}: JSON nested too deeply to be a tokenizer"
    )


def test_huge_token_id_is_refused_before_any_table_is_built(run, corpus, tmp_path):
    wl = tmp_path / "wordlevel.json"
    wl.write_text(
        json.dumps(
            {
                "version": "1.0",
                "truncation": None,
                "padding": None,
                "added_tokens": [],
                "normalizer": None,
                "pre_tokenizer": {"type": "Whitespace"},
                "post_processor": None,
                "decoder": None,
                "model": {
                    "type": "WordLevel",
                    "vocab": {"a": 0, "[UNK]": 2_000_000_000},
                    "unk_token": "[UNK]",
                },
            }
        )
    )
    t0 = time.perf_counter()
    code, _, err = run("report", corpus, "-t", wl, "-q")
    assert code == 2 and "token id 2,000,000,000 is beyond" in _one_error_line(err)
    assert time.perf_counter() - t0 < 30


def test_huge_rank_in_a_rank_file(run, corpus, byte_ranks):
    with byte_ranks.open("ab") as f:
        f.write(base64.b64encode(b"ab") + b" 2000000000\n")
    code, _, err = run("report", corpus, "-t", f"{byte_ranks}#o200k", "-q")
    assert code == 2 and f"{byte_ranks}: line 257: token id 2,000,000,000" in _one_error_line(err)


@pytest.mark.parametrize("make", ["/dev/zero", "fifo"])
def test_non_regular_file_is_refused_not_read(run, corpus, tmp_path, make):
    path = make
    if make == "fifo":
        path = tmp_path / "tokenizer.fifo"
        os.mkfifo(path)  # opening it to read would wait for a writer forever
    code, _, err = run("report", corpus, "-t", path, "-q")
    assert code == 2 and _one_error_line(err) == f"error: {path}: not a regular file"


def test_pattern_matching_the_empty_string(run, corpus, byte_ranks):
    # tiktoken's Rust core panics on such a pattern (and prints a Rust backtrace)
    code, _, err = run("report", corpus, "-t", f"{byte_ranks}#re:x*", "-q")
    assert code == 2 and "split pattern 're:x*' matches the empty string" in _one_error_line(err)


def test_catastrophic_backtracking_is_stopped(run, tmp_path, monkeypatch):
    import fertility.tokenizers.patterns

    monkeypatch.setattr(fertility.tokenizers.patterns, "TIMEOUT_S", 0.5)
    line = "a" * 35 + "c"  # (a|a)+ tries 2^35 ways to fail before the fallback matches
    (tmp_path / "x.txt").write_text(line + "\n")
    # the same pattern without the ambiguous alternative cuts the line in one match
    assert [m.span() for m in regex.finditer(r"\S+|\s+", line)] == [(0, 36)]
    t0 = time.perf_counter()
    code, _, err = run("report", tmp_path / "x.txt", "--pretokenizers", r"re:(a|a)+b|\S+|\s+", "-q")
    assert code == 2 and "catastrophic backtracking" in _one_error_line(err)
    assert time.perf_counter() - t0 < 30


def _fertility(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "fertility.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in {**os.environ, **env}.items() if v is not None},
    )


def _unreachable_hub(tmp_path) -> dict:
    # port 9 (discard) on localhost: refused at once, no network involved
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        env[key] = None  # unset
    for key in ("http_proxy", "https_proxy", "all_proxy"):  # 127.0.0.1 directly, not a proxy
        env[key] = env[key.upper()] = None
    return env


def test_hf_without_hub_or_cache_is_one_quick_line(corpus, tmp_path):
    t0 = time.perf_counter()
    proc = _fertility(
        "report", corpus, "-t", "hf:someone/tok", "-q", env=_unreachable_hub(tmp_path)
    )
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 2 and _one_error_line(proc.stderr) == (
        "error: hf:someone/tok: cannot reach the Hugging Face hub and no tokenizer.json or "
        "tokenizer.model for it in the local cache"
    )
    assert elapsed < 20  # the library's own retries took 47 s


def test_hf_without_hub_reads_the_cache(corpus, tmp_path):
    from tests.bpe import byte_level_bpe

    env = _unreachable_hub(tmp_path)
    repo = tmp_path / "hf" / "hub" / "models--someone--tok"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit / "tokenizer.json"
    tok = byte_level_bpe([SENTENCE] * 20, 300, path=snapshot)
    proc = _fertility("report", corpus, "-t", "hf:someone/tok", "--format", "json", "-q", env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    (row,) = [r for r in json.loads(proc.stdout)["tokenizers"][0]["rows"] if r["group"] == "all"]
    assert row["tokens"] == 3 * len(tok.encode(SENTENCE).ids)


# -- issue #20: declared counts, library panics, a hub that does not answer ---------------


def _tekken(path, pattern=r"\S+|\s+", n_special=20, size=None):
    """A Tekken file of the 256 single bytes (a few KB); `size`: default_vocab_size."""
    vocab = [
        {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
        for i in range(256)
    ]
    config = {
        "pattern": pattern,
        "default_vocab_size": 256 + n_special if size is None else size,
        "default_num_special_tokens": n_special,
        "version": "v3",
    }
    path.write_text(json.dumps({"config": config, "vocab": vocab}), encoding="utf-8")
    return path


# A refusal at load needs the interpreter and the imports of `fertility report`: 77 MB peak
# RSS measured; a real Tekken file (131,072 ids) measured in full peaks at 207 MB. Before the
# cap, this 20 KB file grew to 5.7 GB before running out of memory.
_REFUSAL_RSS_KB = 200_000


# The child reports its own high-water mark (VmHWM) when it exits. Not wait4's ru_maxrss:
# Linux keeps there the RSS of the image the child was forked from (this pytest process, 200
# MB and more once other tests loaded tokenizers), recorded when it exec'd Python.
_PEAK_AT_EXIT = (
    "import atexit, os, runpy, sys\n"
    "def peak():\n"
    "    with open('/proc/self/status') as fh:\n"
    "        kb = next(x.split()[1] for x in fh if x.startswith('VmHWM:'))\n"
    "    with open(os.environ['PEAK_FILE'], 'w') as out:\n"
    "        out.write(kb)\n"
    "atexit.register(peak)\n"
    "sys.argv[0] = 'fertility'\n"
    "runpy.run_module('fertility.cli', run_name='__main__', alter_sys=True)\n"
)


def _run_measured(args, limit_kb, tmp_path, timeout=60):
    """(exit code, stderr, peak RSS in KB) of `fertility ARGS` in a child process, which is
    killed as soon as its RSS passes `limit_kb` (so a regression fails without exhausting the
    machine's memory; its peak is then None)."""
    peak_file = tmp_path / "peak-kb"
    proc = subprocess.Popen(
        [sys.executable, "-c", _PEAK_AT_EXIT, *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PEAK_FILE": str(peak_file)},
    )
    stop = threading.Event()

    def watch():
        t0 = time.monotonic()
        while not stop.wait(0.02):
            try:
                with open(f"/proc/{proc.pid}/status", encoding="ascii") as fh:
                    rss = next((int(x.split()[1]) for x in fh if x.startswith("VmRSS:")), 0)
            except (OSError, ValueError):
                return
            if rss > limit_kb or time.monotonic() - t0 > timeout:
                proc.kill()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    err = proc.stderr.read().decode()
    proc.wait()
    stop.set()
    watcher.join()
    proc.stderr.close()
    peak = int(peak_file.read_text()) if peak_file.exists() else None
    return proc.returncode, err, peak


def test_tekken_declaring_300m_special_tokens_is_refused_before_allocating(corpus, tmp_path):
    path = _tekken(tmp_path / "tekken.json", n_special=300_000_000, size=300_000_256)
    code, err, peak_kb = _run_measured(
        ["report", corpus, "-t", path, "-q", "--workers", "1"], _REFUSAL_RSS_KB, tmp_path
    )
    assert code == 2 and _one_error_line(err) == (
        f"error: {path}: Tekken default_vocab_size 300,000,256 is beyond any real vocabulary "
        "(ids at most 16,777,215)"
    ), (code, err, peak_kb)
    assert peak_kb is not None and peak_kb < _REFUSAL_RSS_KB


def test_tekken_pattern_matching_the_empty_string_is_refused_at_load(corpus, tmp_path):
    # tiktoken's engine panicked on the first empty piece (110 lines with RUST_BACKTRACE=1)
    path = _tekken(tmp_path / "tekken.json", pattern=r"x*|\S+|\s+")
    proc = _fertility(
        "report", corpus, "-t", path, "-q", "--workers", "1", env={"RUST_BACKTRACE": "1"}
    )
    assert proc.returncode == 2 and _one_error_line(proc.stderr) == (
        f"error: {path}: Tekken config.pattern 'x*|\\\\S+|\\\\s+' matches the empty string"
    )


def test_tiktoken_panic_is_one_line_naming_the_file(tmp_path):
    # An empty match only before "§", which the load-time probe lacks: tiktoken panics on
    # the text, in several threads; Rust's messages stay off stderr.
    path = _tekken(tmp_path / "tekken.json", pattern=r"(?=§)|[^§]+|§")
    (tmp_path / "x.txt").write_text("a § b\n" * 3, encoding="utf-8")
    proc = _fertility(
        "report", tmp_path / "x.txt", "-t", path, "-q", "--workers", "1",
        env={"RUST_BACKTRACE": "1"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert regex.fullmatch(
        rf"error: {regex.escape(str(path))}: tiktoken panicked \(.+\): its split pattern "
        r"matches the empty string in this text",
        _one_error_line(proc.stderr),
    )


def _split_tokenizer(path, pattern: str, fast: bool):
    """A tokenizer.json split by `pattern`: a byte-level BPE (the measuring path's
    encode_batch_fast) or a WordLevel (encode_batch with offsets)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    from tests.bpe import byte_level_bpe

    split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    if fast:
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        pre = pre_tokenizers.Sequence([split, byte_level])
        return byte_level_bpe(["hello world"] * 5, 270, pre_tokenizer=pre, path=path)
    tok = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = split
    tok.save(str(path))
    return tok


@pytest.mark.parametrize("fast, workers", [(False, 1), (True, 2)])
def test_backtracking_split_regex_is_one_line_naming_the_file(tmp_path, fast, workers):
    # Oniguruma gives up after 10,000,000 retries and tokenizers panics, in every thread
    # (with 2 workers: in a worker process, whose error the parent prints)
    path = tmp_path / "tokenizer.json"
    _split_tokenizer(path, r"(a|a)+b|\S+|\s+", fast)
    (tmp_path / "x.txt").write_text("hello\n" + "a" * 40 + "\n", encoding="utf-8")
    proc = _fertility(
        "report", tmp_path / "x.txt", "-t", path, "-q", "--workers", workers,
        env={"RUST_BACKTRACE": "1"},
    )  # fmt: skip
    assert proc.returncode == 2 and _one_error_line(proc.stderr) == (
        f"error: {path}: tokenizers panicked (Onig: Regex search error: retry-limit-in-match "
        "over): its split pattern backtracks catastrophically on this text; simplify it"
    )


def test_split_regex_backtracking_on_ordinary_text_is_refused_at_load(run, tmp_path, monkeypatch):
    # Before, the report's findings cut their 70-character probe with it (`regex`, no clock
    # there): still running after 6 minutes. Oniguruma panics on a 25-character line.
    import fertility.tokenizers.patterns as patterns

    monkeypatch.setattr(patterns, "TIMEOUT_S", 0.2)
    path = tmp_path / "tokenizer.json"
    _split_tokenizer(path, r"(?:.|.)*(?!)|\S+|\s+", fast=False)
    (tmp_path / "x.txt").write_text("hello\n", encoding="utf-8")
    code, _, err = run("report", tmp_path / "x.txt", "-t", path, "-q", "--workers", "1")
    assert code == 2 and _one_error_line(err) == (
        f"error: {path}: Split pattern '(?:.|.)*(?!)|\\\\S+|\\\\s+' took over 0.2 s on a "
        f"{len(patterns._PROBE)}-character probe (catastrophic backtracking): simplify it"
    )


@pytest.fixture()
def silent_hub():
    """http://127.0.0.1:PORT that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_hf_hub_that_never_answers_is_one_line_within_the_bound(corpus, tmp_path, silent_hub):
    from fertility.tokenizers.hf import HUB_ANSWER_S

    env = {**_unreachable_hub(tmp_path), "HF_ENDPOINT": silent_hub}
    t0 = time.perf_counter()
    proc = _fertility("report", corpus, "-t", "hf:someone/tok", "-q", "--workers", "1", env=env)
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 2 and _one_error_line(proc.stderr) == (
        f"error: hf:someone/tok: the Hugging Face hub ({silent_hub}/) did not answer within "
        "3 s and no tokenizer.json or tokenizer.model for it in the local cache"
    )
    # the bound, plus starting Python and the imports; it was still retrying at 300 s
    assert elapsed < HUB_ANSWER_S + 10


# -- issue #35: a tokenizer with nothing to encode with ------------------------------------


def _empty_bpe(path):
    """A byte-level BPE with an empty vocabulary and no merges, one special token added."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab={}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(str(path))
    return path


def _empty_tekken(path):
    """A Tekken file whose config is a real one's and whose vocab list is empty."""
    _tekken(path)
    obj = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**obj, "vocab": []}), encoding="utf-8")


def _empty_sentencepiece(path):
    """A SentencePiece ModelProto with its trainer and normaliser settings and no piece."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = pb.ModelProto()
    model.trainer_spec.model_type = pb.TrainerSpec.BPE
    model.trainer_spec.vocab_size = 8
    model.normalizer_spec.name = "identity"
    path.write_bytes(model.SerializeToString())


@pytest.mark.parametrize(
    "make, what",
    [
        (_empty_bpe, "has no vocabulary (its BPE vocab is empty)"),
        (_empty_tekken, "has no vocabulary (Tekken 'vocab' is empty)"),
        (_empty_sentencepiece, "has no vocabulary (a SentencePiece model with no pieces)"),
    ],
    ids=["bpe", "tekken", "sentencepiece"],
)
def test_a_tokenizer_without_a_vocabulary_is_refused(run, corpus, tmp_path, make, what):
    # (before: an empty BPE was measured anyway, exit 0, or died with a TypeError)
    path = tmp_path / "tokenizer.json"
    make(path)
    out = tmp_path / "report.txt"
    code, _, err = run("report", corpus, "-t", path, "-q", "-o", out)
    assert code == 2 and _one_error_line(err).startswith(f"error: {path}: {what}")
    assert not out.exists()
