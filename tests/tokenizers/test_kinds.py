"""The tokenizer-kind registry (fertility.tokenizers.kinds): every kind declared once; every
adapter satisfies the `Tokenizer` protocol (at run time here, and under mypy: `_typed` below
and the loaders of kinds.py, `.venv/bin/mypy fertility/tokenizers tests/tokenizers/test_kinds.py
--ignore-missing-imports`); a kind gets worker processes, extension and export by what it
declares, never by its name."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import get_args

import numpy as np
import pytest

from fertility.errors import TokenizerError
from fertility.measure import parallel
from fertility.tokenizers import kinds, load_tokenizer, reload_key, reload_tokenizer
from fertility.tokenizers.base import Kind, Tokenizer, concat_encoded
from fertility.tokenizers.convert import PROBE, write_hf_tokenizer
from fertility.tokenizers.hf import HFTokenizer
from fertility.tokenizers.pretokenizer import PretokenizerFamily
from fertility.tokenizers.sentencepiece import SPTokenizer
from fertility.tokenizers.tekken import TekkenTokenizer
from fertility.tokenizers.tiktoken import TiktokenTokenizer
from tests.tokenizers.test_tekken import tekken_file
from tests.tokenizers.test_tokenizers import (
    SAMPLES,
    rank_file_bytes,
    train_bytelevel,
    train_sentencepiece,
)

FILES = {
    "hf": "tokenizer.json",
    "sentencepiece": "bn_en.model",
    "tiktoken": "gpt2.tiktoken",
    "tekken": "tekken_test.json",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("kinds")
    train_bytelevel().save(str(d / FILES["hf"]))
    (d / FILES["sentencepiece"]).write_bytes(train_sentencepiece())
    (d / FILES["tiktoken"]).write_bytes(rank_file_bytes())
    tekken_file(d / FILES["tekken"])
    return d


@pytest.fixture(scope="module")
def toks(folder) -> dict[str, Tokenizer]:
    return {kind: load_tokenizer(str(folder / name)) for kind, name in FILES.items()}


def _typed(h: HFTokenizer, s: SPTokenizer, t: TiktokenTokenizer, k: TekkenTokenizer) -> list:
    """mypy checks that each adapter is a Tokenizer (an error here otherwise)."""
    checked: list[Tokenizer] = [h, s, t, k]
    return checked


def test_every_adapter_satisfies_the_protocol(toks):
    classes = {
        "hf": HFTokenizer,
        "sentencepiece": SPTokenizer,
        "tiktoken": TiktokenTokenizer,
        "tekken": TekkenTokenizer,
    }
    assert {k: type(t) for k, t in toks.items()} == classes
    for tok in _typed(*(toks[k] for k in classes)):
        assert isinstance(tok, Tokenizer)
        assert tok.path is not None and tok.path.name == FILES[tok.kind]


def test_every_kind_is_declared_once(toks):
    assert list(kinds.FORMATS) == [f.kind for f in kinds.FORMATS.values()]
    assert set(kinds.FORMATS) == set(get_args(Kind))
    for kind, tok in toks.items():
        assert tok.kind == kind and kinds.format_of(kind) is kinds.FORMATS[kind]
        assert tok.config()["kind"] == kind


def test_the_kind_of_a_file_is_read_from_its_content(folder, tmp_path):
    for kind, name in FILES.items():
        data = (folder / name).read_bytes()
        assert kinds.sniff(data, folder / name)[0].kind == kind
        # the extension says nothing: the same bytes under another name
        assert kinds.sniff(data, tmp_path / "renamed.bin")[0].kind == kind
    with pytest.raises(TokenizerError, match="neither a Hugging Face"):
        kinds.sniff(b'{"a": 1}', tmp_path / "x.json")
    with pytest.raises(TokenizerError, match="empty file"):
        kinds.sniff(b"  \n", tmp_path / "x")


def test_encode_flat_is_encode_batch_laid_end_to_end(toks):
    texts = [*SAMPLES, "", "  two  spaces"]
    for tok in toks.values():
        flat, ref = tok.encode_flat(texts), concat_encoded(tok.encode_batch(texts))
        assert all(np.array_equal(a, b) for a, b in zip(flat, ref)), tok.kind


def test_workers_reload_every_declared_kind(toks):
    family = PretokenizerFamily("gpt2")
    for tok in [*toks.values(), family]:
        assert kinds.can_reload(tok)
        again = reload_tokenizer(*reload_key(tok))
        assert (again.kind, again.fingerprint) == (tok.kind, tok.fingerprint)
    assert parallel.reloadable(["corpus"], [*toks.values(), family])


def test_a_kind_gets_workers_by_declaring_a_reload(toks, monkeypatch):
    new = SimpleNamespace(kind="newformat", spec="x.new", label="x")
    assert not parallel.reloadable(["corpus"], [new])  # an undeclared kind: one process
    declared = dataclasses.replace(kinds.FORMATS["hf"], kind="newformat")
    monkeypatch.setitem(kinds.FORMATS, "newformat", declared)
    assert parallel.reloadable(["corpus"], [new])
    # and a declared kind without a reload never gets workers
    monkeypatch.setitem(kinds.FORMATS, "hf", dataclasses.replace(declared, reload=None))
    assert not parallel.reloadable(["corpus"], [toks["hf"]])
    with pytest.raises(TokenizerError, match="cannot be loaded in a worker"):
        reload_tokenizer(*reload_key(toks["hf"]))


def test_capabilities_are_declared_per_kind(toks):
    caps = {k: kinds.capabilities(t) for k, t in toks.items()}
    assert [k for k, c in caps.items() if c.split_pattern] == ["tiktoken"]
    assert [k for k, c in caps.items() if c.batch_threads] == ["hf"]
    assert kinds.capabilities(PretokenizerFamily("gpt2")).vocabulary is False
    assert kinds.capabilities(SimpleNamespace(kind="test")) == kinds.NO_CAPABILITIES
    how = {k: kinds.extension(t) for k, t in toks.items()}
    assert {k: (e.method, e.also_writes) for k, e in how.items() if e} == {
        "hf": ("tokenizer_json", None),
        "sentencepiece": ("sp_model", None),
        "tiktoken": ("ranks", "tokenizer.tiktoken"),
        "tekken": ("ranks", "tekken.json"),
    }


def test_export_writes_what_the_kind_declares(toks, folder, tmp_path):
    for kind in ("hf", "tiktoken"):
        out = tmp_path / kind
        out.mkdir()
        note = write_hf_tokenizer(toks[kind], folder / FILES[kind], out, None, 64, [PROBE])
        assert note.startswith(f"{kind}: ") and (out / "tokenizer.json").is_file()
    assert kinds.hf_export(toks["tekken"]) is None
    with pytest.raises(TokenizerError, match="cannot export a 'tekken' tokenizer"):
        write_hf_tokenizer(toks["tekken"], folder / FILES["tekken"], tmp_path, None, 64, [PROBE])
