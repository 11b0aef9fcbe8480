"""`fertility fix` on real Bengali (ROOT/text/bn.txt, and the committed excerpt when there is
one): by default every held-out document comes back as written, the ones with U+09DF (য়, as
keyboards type it) included; with --nfc fix says what NFC changes, by the same counts Python's
unicodedata gives, and the gate does not pass the lossy tokenizer.

Kept fast: the first DOCS lines, a small vocabulary.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from fertility.fix import fix
from fertility.fix.config import FixConfig
from fertility.report.fix import fix_text

pytestmark = pytest.mark.realworld

DOCS = 1200
YYA = "\u09df"
EXCERPT = Path(__file__).resolve().parent / "excerpt" / "bn.txt"
SOURCES = ["rw"] + (["excerpt"] if EXCERPT.is_file() else [])


@pytest.fixture(scope="module", params=SOURCES)
def bengali(request, tmp_path_factory) -> dict:
    """bn.txt (its first DOCS non-empty lines) fixed with no normaliser and with --nfc."""
    src = request.getfixturevalue("rw") / "text" / "bn.txt" if request.param == "rw" else EXCERPT
    lines = [t for t in src.read_text("utf-8").splitlines() if t.strip()][:DOCS]
    root = tmp_path_factory.mktemp(f"fix-{request.param}")
    (root / "corpus").mkdir()
    (root / "corpus" / "bn.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    runs = {
        n: fix(
            [root / "corpus"],
            root / n,
            FixConfig(vocab_size=2000, heldout_fraction=0.2, normalization=n),
        )
        for n in ("none", "nfc")
    }
    held = {int(x) for x in _held_lines(root / "none")}
    return {
        "runs": runs,
        "root": root,
        "held": [t for i, t in enumerate(lines, 1) if i in held],
        "train": [t for i, t in enumerate(lines, 1) if i not in held],
    }


def _held_lines(out: Path) -> list[int]:
    import json

    return [
        json.loads(x)["line"]
        for x in (out / "heldout" / "bn.jsonl").read_text("utf-8").splitlines()
    ]


def test_default_fix_round_trips_every_heldout_bengali_document(bengali):
    held, r = bengali["held"], bengali["runs"]["none"]
    assert sum(YYA in t for t in held) > 0, "no held-out line has U+09DF: nothing to prove"
    tok = Tokenizer.from_file(r.paths["tokenizer"])
    lost = [t for t in held if tok.decode(tok.encode(t).ids) != t]
    assert lost == []
    assert r.roundtrip["bn"]["checked"] == len(held) and r.roundtrip["bn"]["failures"] == 0


def test_nfc_names_what_it_changes_and_does_not_pass(bengali):
    train, held, r = bengali["train"], bengali["held"], bengali["runs"]["nfc"]
    yya = next(c for c in r.normalizer_preview["changes"] if c["from"] == "U+09DF")
    assert yya["occurrences"] == sum(t.count(YYA) for t in train)
    assert yya["documents"] == sum(YYA in t for t in train)
    assert r.normalizer_preview["changed_documents"] == sum(
        unicodedata.normalize("NFC", t) != t for t in train
    )
    lossy = sum(unicodedata.normalize("NFC", t) != t for t in held)
    assert r.roundtrip["bn"]["failures"] == lossy > 0
    text = fix_text(r)
    assert "NFC decomposed U+09DF BENGALI LETTER YYA" in text
    assert f"round trip bn: {lossy} of {len(held)}" in text
    assert not r.passed and r.gate.exit_code == 1
