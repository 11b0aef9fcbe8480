"""fertility/schemas/: one JSON Schema (draft 2020-12) per versioned JSON output, each checked
against real outputs of the code as it is: a report and a gate of a real tokenizer on real
text, a fix and an extend on a slice of the example corpus, and a tiny pretraining run with
its eval and export. A `"fertility.NAME/N"` id written anywhere in the source without a
schema file fails here, and so does a schema whose `schema` constant says another version."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from fertility.findings import diagnose
from fertility.gate import evaluate
from fertility.measure import analyze
from fertility.policy import default_policy
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "fertility" / "schemas"
EXAMPLES = REPO / "examples"
# versioned ids that are not JSON files a user reads, with the reason
NOT_JSON = {"fertility.checkpoint/1": "a key inside a PyTorch checkpoint (torch.save), not JSON"}


def schema_of(doc: dict) -> dict:
    """The schema file named by the document's own `schema` id ("fertility.gate/1" ->
    gate.schema.json), checked to describe that very version."""
    name = re.fullmatch(r"fertility\.([a-z-]+)/\d+", doc["schema"]).group(1)
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert schema["properties"]["schema"]["const"] == doc["schema"]
    return schema


def check(doc: dict) -> None:
    jsonschema.validate(doc, schema_of(doc), cls=jsonschema.Draft202012Validator)


def test_every_versioned_id_in_the_source_has_a_valid_schema():
    ids = set()
    for folder in ("fertility", "trainer", "eval"):
        for py in (REPO / folder).rglob("*.py"):
            ids |= set(re.findall(r"\"(fertility\.[a-z-]+/\d+)\"", py.read_text(encoding="utf-8")))
    assert len(ids) >= 10  # the search finds them (report, gate, fix, extend, eval, ...)
    files = {p.name for p in SCHEMAS.glob("*.schema.json")}
    for sid in sorted(ids - set(NOT_JSON)):
        name = sid.split(".", 1)[1].split("/")[0]
        assert f"{name}.schema.json" in files, sid
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["schema"]["const"] == sid
    # and no schema file of an id the code no longer writes
    assert {f.split(".")[0] for f in files} == {
        s.split(".", 1)[1].split("/")[0] for s in ids - set(NOT_JSON)
    }


def test_a_schema_refuses_a_document_that_breaks_it(tmp_path):
    """The check can fail: a wrong version, a missing key, a wrong type."""
    schema = schema_of({"schema": "fertility.gate/1"})
    good = {
        "schema": "fertility.gate/1",
        "passed": True,
        "exit_code": 0,
        "checks": [],
        "blocking_findings": [],
        "findings": [],
        "skipped": [],
        "premium_note": None,
        "subset": None,
        "policy": default_policy().to_dict(),
    }
    v = jsonschema.Draft202012Validator(schema)
    assert v.is_valid(good)
    for bad in (
        {**good, "schema": "fertility.gate/2"},
        {k: x for k, x in good.items() if k != "checks"},
        {**good, "passed": "yes"},
        {**good, "findings": [{"rule": "unk", "severity": "fatal"}]},
    ):
        assert not v.is_valid(bad), bad


@pytest.mark.realworld
def test_report_and_gate_of_a_real_tokenizer(rw, tmp_path):  # noqa: F811
    text = rw / "text"
    # 60 lines of each of four languages in four scripts: small, and every rule has rows
    corpus = tmp_path
    for lang in ("bn", "en", "ja", "ar"):
        lines = (text / f"{lang}.txt").read_text(encoding="utf-8").splitlines()[:60]
        (corpus / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rep = analyze([corpus], [str(rw / "tokenizers/bpe-gpt2/tokenizer.json")], detail_docs=20)
    rep.findings = diagnose(rep)
    check(json.loads(rep.to_json()))
    check(evaluate(rep, default_policy(), findings=rep.findings).to_dict())


def _slice(dst: Path, n: int = 40) -> Path:
    """The first n lines of three example languages (Bengali among them)."""
    dst.mkdir()
    for lang in ("bn", "en", "hi"):
        lines = (EXAMPLES / "corpus" / f"{lang}.txt").read_text(encoding="utf-8").splitlines()
        (dst / f"{lang}.txt").write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    return dst


def test_fix_and_its_manifest(tmp_path):
    from fertility.fix import fix
    from fertility.fix.config import FixConfig

    fix(_slice(tmp_path / "corpus"), tmp_path / "out", FixConfig(vocab_size=400))
    check(json.loads((tmp_path / "out" / "fix-report.json").read_text(encoding="utf-8")))
    check(json.loads((tmp_path / "out" / ".fertility-manifest.json").read_text(encoding="utf-8")))


@pytest.mark.realworld
def test_extend_and_its_ids_map(rw, tmp_path):  # noqa: F811
    from fertility.extend import extend

    base = str(rw / "tokenizers/bpe-gpt2/tokenizer.json")
    extend(base, [_slice(tmp_path / "corpus")], tmp_path / "out", 40, langs=["bn"])
    for name in ("extend-report.json", "ids-map.json"):
        check(json.loads((tmp_path / "out" / name).read_text(encoding="utf-8")))


def test_pretrain_eval_and_export(tmp_path):
    torch = pytest.importorskip("torch")
    from fertility.eval.export import export_hf
    from fertility.eval.render import render_json
    from fertility.eval.run import evaluate as evaluate_run
    from fertility.trainer.options import PretrainOptions
    from fertility.trainer.run import pretrain
    from tests.bpe import byte_level_bpe
    from tests.trainer.tokfixture import PassingGate

    corpus = _slice(tmp_path / "corpus", 30)
    lines = [x for p in sorted(corpus.glob("*.txt")) for x in p.read_text("utf-8").splitlines()]
    byte_level_bpe(lines, 300, specials=["<|endoftext|>"], path=tmp_path / "tokenizer.json")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is fastest
    try:
        options = PretrainOptions(
            [str(corpus)],
            str(tmp_path / "tokenizer.json"),
            tmp_path / "run",
            preset="tiny",
            steps=2,
            device="cpu",
            quiet=True,
            settings={
                "seq_len": 32,
                "micro_batch": 2,
                "warmup_steps": 1,
                "heldout_fraction": 0.2,
                "checkpoint_every": 2,
                "tokenize_workers": 1,
            },
        )
        pretrain(options, gate=lambda p, t: PassingGate())
        result = evaluate_run(
            tmp_path / "run", tasks=[EXAMPLES / "tasks" / "cloze_en.jsonl"], bootstrap=20
        )
        export_hf(tmp_path / "run", tmp_path / "hf", step=None, overwrite=False)
    finally:
        torch.set_num_threads(threads)
    check(json.loads(render_json(result)))
    for path in (
        "run/run.json",
        "run/data/index.json",
        "run/.fertility-manifest.json",
        "hf/fertility_export.json",
    ):
        check(json.loads((tmp_path / path).read_text(encoding="utf-8")))
