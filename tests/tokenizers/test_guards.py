"""Guards of tokenizer loading and encoding (issue #20): declared counts capped before
anything is built, Rust panics as one TokenizerError with their stderr output held back, and
`hf:` bounded in wall time (name resolution, a hub that stalls after answering).

The hostile files themselves are run through the command in tests/cli/test_tokenizer_input.py;
these are the pieces that a child process cannot reach (a resolver that does not answer, the
bound shrunk to keep the test short) or that are cheaper in-process."""

from __future__ import annotations

import base64
import http.server
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from fertility.errors import TokenizerError
from fertility.tokenizers import hf, load_tokenizer
from fertility.tokenizers.guard import is_panic, rust_call


def _tekken(path, n_special: int, size: int):
    vocab = [
        {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
        for i in range(256)
    ]
    config = {
        "pattern": r"\S+|\s+",
        "default_vocab_size": size,
        "default_num_special_tokens": n_special,
        "version": "v3",
    }
    path.write_text(json.dumps({"config": config, "vocab": vocab}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "n_special, size, words",
    [
        # under the id cap, yet a million "<SPECIAL_i>" entries (about 150 MB) from 20 KB
        (1_000_000, 1_000_256, "default_num_special_tokens 1,000,000 is beyond any real"),
        (300, 290, "the config uses -10 (at least the 256 single bytes)"),
        (20, 16_777_217, "default_vocab_size 16,777,217 is beyond any real vocabulary"),
    ],
)
def test_tekken_declared_counts_are_capped(tmp_path, n_special, size, words):
    path = _tekken(tmp_path / "tekken.json", n_special, size)
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(str(path))
    assert str(err.value).startswith(f"{path}: Tekken ") and words in str(err.value)


def test_tekken_at_the_special_token_cap_loads(tmp_path):
    from fertility.tokenizers.tekken import MAX_SPECIAL_TOKENS

    path = _tekken(tmp_path / "tekken.json", MAX_SPECIAL_TOKENS, MAX_SPECIAL_TOKENS + 256)
    tok = load_tokenizer(str(path))
    assert tok.vocab_size == MAX_SPECIAL_TOKENS + 256
    (enc,) = tok.encode_batch(["ab"])
    assert enc.ids.tolist() == [MAX_SPECIAL_TOKENS + 97, MAX_SPECIAL_TOKENS + 98]


# -- panics ----------------------------------------------------------------------------


class PanicException(BaseException):
    """Stands for pyo3's pyo3_runtime.PanicException (matched by name, as each Rust
    extension has its own class)."""


def test_a_panic_is_one_tokenizer_error_and_its_stderr_is_dropped(capfd):
    assert is_panic(PanicException("x")) and not is_panic(ValueError("x"))
    with pytest.raises(TokenizerError) as err, rust_call("tok.json", "tokenizers"):
        os.write(2, b"thread '<unnamed>' panicked at src/lib.rs:1:1:\nboom\n")
        raise PanicException("boom")
    assert str(err.value) == (
        "tok.json: tokenizers panicked (boom) (a tokenizer this library cannot run)"
    )
    assert capfd.readouterr().err == ""


def test_stderr_written_during_a_call_without_panic_is_kept(capfd):
    with rust_call("tok.json", "tiktoken"):
        os.write(2, b"a warning\n")
    with pytest.raises(KeyError), rust_call("tok.json", "tiktoken"):
        os.write(2, b"another\n")
        raise KeyError("not a panic: passed through")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "a warning\nanother\nafter\n"


def test_calls_from_several_threads_share_the_redirection(capfd):
    """The last call to leave restores descriptor 2, whatever the order they leave in."""
    inside, leave = threading.Barrier(3), threading.Event()

    def call(i):
        with rust_call("tok.json", "tokenizers"):
            inside.wait()
            leave.wait()
            os.write(2, b"%d\n" % i)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    leave.set()
    for t in threads:
        t.join()
    os.write(2, b"end\n")
    assert sorted(capfd.readouterr().err.split()) == ["0", "1", "end"]


# -- hf: in bounded time -----------------------------------------------------------------


@pytest.fixture()
def hub(monkeypatch, tmp_path):
    """huggingface_hub pointed at `set_endpoint(url)` with an empty cache under tmp_path;
    its logger's level restored afterwards (a stalled download leaves it quiet)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "http_proxy", "https_proxy"):
        monkeypatch.delenv(key, raising=False)
        monkeypatch.delenv(key.upper(), raising=False)
    level = logging.getLogger("huggingface_hub").level
    yield lambda url: monkeypatch.setattr(constants, "ENDPOINT", url)
    logging.getLogger("huggingface_hub").setLevel(level)


def test_hf_with_a_resolver_that_does_not_answer(hub, monkeypatch):
    """getaddrinfo has no timeout (a resolver that never answered took 21 s, not 3)."""
    released = threading.Event()
    real = socket.getaddrinfo

    def silent_resolver(host, *args, **kwargs):
        if host == "hub.invalid":
            released.wait(30)
            raise socket.gaierror(socket.EAI_AGAIN, "no answer")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", silent_resolver)
    monkeypatch.setattr(hf, "HUB_ANSWER_S", 0.5)
    hub("http://hub.invalid")
    t0 = time.perf_counter()
    try:
        with pytest.raises(TokenizerError) as err:
            hf.download("hf:someone/tok")
    finally:
        released.set()
    assert time.perf_counter() - t0 < 0.5 + 2
    assert str(err.value) == (
        "hf:someone/tok: the Hugging Face hub (http://hub.invalid/) did not answer within "
        "0.5 s and no tokenizer.json or tokenizer.model for it in the local cache"
    )


@pytest.fixture()
def stalling_hub():
    """A hub that answers its front page and never finishes any other request."""
    release = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _reply(self):
            if self.path == "/":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                release.wait(30)

        do_HEAD = do_GET = _reply

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    release.set()
    server.shutdown()
    server.server_close()


def test_hf_hub_that_stalls_after_answering_is_bounded(hub, stalling_hub, monkeypatch, tmp_path):
    monkeypatch.setattr(hf, "HUB_TOTAL_S", 1.0)
    hub(stalling_hub)
    t0 = time.perf_counter()
    with pytest.raises(TokenizerError) as err:
        hf.download("hf:someone/tok")
    assert time.perf_counter() - t0 < 1.0 + 2
    assert str(err.value).startswith(
        "hf:someone/tok: the Hugging Face hub did not deliver tokenizer.json or tokenizer.model "
        "within 1 s and the local cache holds neither; download it once "
        "(`hf download someone/tok tokenizer.json`)"
    )

    # a copy in the cache is used when the hub stalls
    commit = "0" * 40
    repo = tmp_path / "hub" / "models--someone--tok"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    cached = repo / "snapshots" / commit / "tokenizer.json"
    cached.parent.mkdir(parents=True)
    cached.write_text("{}")
    t0 = time.perf_counter()
    assert hf.download("hf:someone/tok") == cached
    assert time.perf_counter() - t0 < 1.0 + 2


PYTHON_WRITES_GO_THROUGH = r"""
import os, sys, threading
import click
from fertility.tokenizers.guard import rust_call
from fertility.progress import Stages

stages = Stages(stream=None)  # made before the call, as the CLI makes its lines
inside, leave = threading.Event(), threading.Event()

def call():
    with rust_call("tok.json", "tokenizers"):
        os.write(2, b"held by the redirection\n")  # what a Rust panic hook writes
        inside.set()
        leave.wait()

worker = threading.Thread(target=call)
worker.start()
inside.wait()
sys.stderr.write("python\n")
click.echo("warning: click", err=True)
stages.stream.write("stages\n")
stages.stream.flush()
with open(sys.argv[1], encoding="utf-8") as fh:
    print(repr(fh.read()))  # what reached the real stderr while the call runs
leave.set()
worker.join()
"""


def test_python_writes_reach_stderr_while_a_call_holds_descriptor_2(tmp_path):
    """The pass keeps a Rust call running nearly all the time (several encoding threads), so
    what Python writes to stderr meanwhile (the progress line, warnings) goes straight to
    the real stderr; what is written to descriptor 2 itself is held, then copied back."""
    err = tmp_path / "stderr.txt"
    with err.open("wb") as fh:
        done = subprocess.run(
            [sys.executable, "-c", PYTHON_WRITES_GO_THROUGH, str(err)],
            stdout=subprocess.PIPE,
            stderr=fh,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, err.read_text()
    assert done.stdout.strip() == repr("python\nwarning: click\nstages\n")
    assert err.read_text() == "python\nwarning: click\nstages\nheld by the redirection\n"
