"""Mistral Tekken files (tekken_*.json): ids checked against mistral-common's own Tekkenizer.

The files are written here from a small hand-made vocabulary; the real tekken_240911.json is
checked in tests/realworld/test_loaders.py.
"""

from __future__ import annotations

import base64
import json

import pytest
from mistral_common.tokens.tokenizers.tekken import Tekkenizer

from fertility.errors import TokenizerError
from fertility.tokenizers import load_tokenizer
from fertility.tokenizers.patterns import FAMILIES

# The 256 bytes, then merges; the last two lie beyond default_vocab_size in `tekken_file`.
MERGES = [
    b"\xe0\xa6",
    b"\xe0\xa6\xac",
    b"\xe0\xa6\xbe",
    b"\xe0\xa6\xac\xe0\xa6\xbe",
    b" t",
    b"he",
    b" the",
    b"th",
    b"the",
]
VOCAB = [bytes([b]) for b in range(256)] + MERGES
TEXTS = ["বাংলা the then", "the theme [INST] <s> hello", "", "  \n x", "😀 Zoë €5", "thethe"]


def tekken_file(path, *, n_special=25, cut=2, specials=None, version="v3", **config):
    """A Tekken JSON as mistral-common reads it; `cut` vocab entries beyond the size used."""
    obj = {
        "config": {
            "pattern": FAMILIES["o200k"],
            "num_vocab_tokens": len(VOCAB),
            "default_vocab_size": len(VOCAB) - cut + n_special,
            "default_num_special_tokens": n_special,
            "version": version,
            **config,
        },
        "vocab": [
            {"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": None}
            for i, t in enumerate(VOCAB)
        ],
    }
    if specials is not None:
        obj["special_tokens"] = [
            {"rank": i, "token_str": s, "is_control": True} for i, s in enumerate(specials)
        ]
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "kwargs",
    [
        {},  # v3: no special_tokens list, mistral-common's twenty legacy names and fillers
        {"version": "v11", "n_special": 10, "specials": ["<unk>", "<s>", "</s>"], "cut": 0},
    ],
)
def test_ids_and_decoding_equal_mistral_common(tmp_path, kwargs):
    path = tekken_file(tmp_path / "tekken_test.json", **kwargs)
    ours, ref = load_tokenizer(str(path)), Tekkenizer.from_file(path)
    assert ours.kind == "tekken" and ours.label == "tekken_test"
    assert ours.vocab_size == ref.n_words and len(ours.special_tokens) == ref.num_special_tokens
    assert all(ref.get_special_token(name) == i for name, i in ours.special_tokens.items())
    for text, enc in zip(TEXTS, ours.encode_batch(TEXTS)):
        expected = ref.encode(text, bos=False, eos=False)
        assert enc.ids.tolist() == expected
        assert ours.decode(enc.ids) == ref.decode(expected) == text
    ids, _, _, counts = ours.encode_flat(TEXTS)
    assert ids.tolist() == [i for t in TEXTS for i in ref.encode(t, bos=False, eos=False)]
    assert ours.decode([1, 2] + ref.encode("the", bos=False, eos=False)) == ref.decode(
        [1, 2] + ref.encode("the", bos=False, eos=False)
    )  # special tokens dropped by both


def test_cut_vocabulary_and_spans(tmp_path):
    tok = load_tokenizer(str(tekken_file(tmp_path / "t.json")))  # "th", "the" cut off
    (enc,) = tok.encode_batch(["বা the"])
    # o200k keeps "বা" whole: rank 259 + 25 specials; " the" is rank 262
    assert enc.ids.tolist() == [259 + 25, 262 + 25]
    assert list(zip(enc.starts.tolist(), enc.ends.tolist())) == [(0, 2), (2, 6)]
    assert tok.token_bytes(262 + 25) == b" the" and tok.token_bytes(0) == b""
    assert tok.unk_id is None and tok.config()["pattern_regex"] == FAMILIES["o200k"]


def test_detected_by_content_in_a_folder(tmp_path):
    (tmp_path / "m").mkdir()
    tekken_file(tmp_path / "m" / "tokenizer.json")
    assert load_tokenizer(str(tmp_path / "m")).kind == "tekken"


def test_pattern_suffix_is_refused(tmp_path):
    path = tekken_file(tmp_path / "tekken.json")
    with pytest.raises(TokenizerError, match="its own pre-tokenizer"):
        load_tokenizer(f"{path}#gpt2")


def _broken(obj):
    obj["vocab"][3]["token_bytes"] = base64.b64encode(b"x").decode()


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda o: o["config"].update(default_vocab_size=10), "at least the 256"),
        (lambda o: o["config"].update(default_vocab_size=len(VOCAB) + 99), "config uses"),
        (lambda o: o["vocab"][300 - 40].update(rank=7), "entry 260"),
        (_broken, "entry 3"),
        (lambda o: o["config"].update(default_num_special_tokens="many"), "integer"),
        (lambda o: o["config"].update(pattern="(["), "pattern"),
        (lambda o: o.update(special_tokens=[{"rank": 0, "token_str": "<s>"}] * 2), "repeat"),
    ],
)
def test_bad_tekken_files_are_one_line_errors(tmp_path, run, edit, words):
    path = tekken_file(tmp_path / "tekken.json")
    obj = json.loads(path.read_text(encoding="utf-8"))
    edit(obj)
    path.write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(str(path))
    assert words in str(err.value) and str(path) in str(err.value)
    (tmp_path / "en.txt").write_text("hello\n", encoding="utf-8")
    code, _, stderr = run("report", tmp_path / "en.txt", "-t", path)
    assert code == 2 and stderr.startswith(f"error: {path}: ") and stderr.count("\n") == 1


def test_report_names_the_kind(tmp_path, run):
    path = tekken_file(tmp_path / "tekken.json")
    (tmp_path / "bn.txt").write_text("বা the\n", encoding="utf-8")
    code, out, _ = run(
        "report", tmp_path / "bn.txt", "-t", f"mistral={path}", "--format", "json", "--no-diagnose"
    )
    (entry,) = json.loads(out)["tokenizers"]
    assert code == 0 and entry["kind"] == "tekken" and entry["vocab_size"] == len(VOCAB) - 2 + 25
    row = next(r for r in entry["rows"] if r["group"] == "all")
    assert row["tokens"] == 2  # [বা][ the], as in test_cut_vocabulary_and_spans


def test_workers_rebuild_it_from_its_spec(tmp_path):
    """Processes that share the batches load the same Tekken file and count the same."""
    from fertility.measure import analyze

    path = tekken_file(tmp_path / "tekken.json")
    (tmp_path / "bn.txt").write_text("বা the then\n" * 50 + "বাংলা\n" * 50, encoding="utf-8")
    one, two = (analyze([str(tmp_path / "bn.txt")], [str(path)], workers=n) for n in (1, 2))
    assert two.settings["workers"] == 2
    assert one.frame.equals(two.frame)
