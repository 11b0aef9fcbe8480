"""An exported run, evaluated by lm-evaluation-harness (`--model hf`, default settings, offline,
on local task files), gives `fertility eval`'s multiple-choice log-likelihoods, accuracies and
bits per byte: for a tokenizer with its own end-of-text token and for one without, whose
separator the trainer reserved past the vocabulary.

lm-eval is the second method here: its own task loading, tokenization, prefix token, rolling
windows, log-softmax and metrics, run on the folder `fertility export` wrote."""

import json
import math
import os
from pathlib import Path

import pytest
import torch

from fertility.eval import choice, nll
from fertility.eval.convert import convert_file
from fertility.eval.export import SEPARATOR_TOKEN, export_hf
from fertility.eval.run import evaluate, heldout_documents, open_run
from fertility.trainer.checkpoint import load_model, save_checkpoint
from tests.bpe import byte_level_bpe
from tests.trainer.tokfixture import PassingGate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASK = EXAMPLES / "tasks" / "cloze_en.jsonl"
SEP = "<|endoftext|>"
SEQ_LEN = 64  # below the tiny preset's max_seq_len 128: the export must say 64 to lm-eval


def sharpen(run_dir: Path) -> None:
    """A newer checkpoint with the weights scaled up: logits far from uniform, so that a
    token scored twice or a context conditioned differently moves every log-likelihood."""
    model, manifest = load_model(run_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(6.0) if p.dim() > 1 else p.add_(0.3 * torch.randn_like(p))
    save_checkpoint(
        run_dir,
        manifest["step"] + 1,
        model.state_dict(),
        {"note": torch.zeros(1)},
        {k: v for k, v in manifest.items() if k not in ("step", "files")},
    )


@pytest.fixture(scope="module", params=["eot", "reserved"])
def exported(request, tmp_path_factory):
    """(run folder, export folder) of a run trained briefly by the real pretraining path."""
    from fertility.trainer.options import PretrainOptions
    from fertility.trainer.run import pretrain

    root = tmp_path_factory.mktemp(f"lmeval-{request.param}")
    lines = [
        x
        for f in sorted((EXAMPLES / "corpus").glob("*.txt"))
        for x in f.read_text("utf-8").splitlines()
        if x.strip()
    ]
    specials = [SEP] if request.param == "eot" else []
    byte_level_bpe(lines, 400, specials=specials, path=root / "tokenizer.json")
    options = PretrainOptions(
        [str(EXAMPLES / "corpus")],
        str(root / "tokenizer.json"),
        root / "run",
        preset="tiny",
        steps=2,
        device="cpu",
        quiet=True,
        settings={
            "seq_len": SEQ_LEN,
            "micro_batch": 4,
            "warmup_steps": 1,
            "heldout_fraction": 0.05,
            "checkpoint_every": 2,
            "tokenize_workers": 1,
        },
    )
    pretrain(options, gate=lambda p, t: PassingGate())
    run_dir = root / "run"
    data = json.loads((run_dir / "run.json").read_text())["data"]
    assert (data["separator"] == 400) is (request.param == "reserved")  # as the trainer says
    sharpen(run_dir)
    export_hf(run_dir, root / "hf")
    return run_dir, root / "hf"


def lm_eval_tasks(folder: Path, heldout: list[str], items: list[dict]) -> Path:
    """Two local lm-eval tasks: a rolling log-likelihood over `heldout` (bits per byte, as
    lm-eval's wikitext task) and multiple choice over `items` (its query/choices/gold)."""
    folder.mkdir()
    (folder / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in heldout))
    (folder / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    common = {"dataset_path": "json", "test_split": "test"}
    tasks = {
        "fert_rolling": {
            **common,
            "dataset_kwargs": {"data_files": {"test": str(folder / "docs.jsonl")}},
            "output_type": "loglikelihood_rolling",
            "doc_to_text": "",
            "doc_to_target": "{{text}}",
            "metric_list": [{"metric": "bits_per_byte"}],
        },
        "fert_mc": {
            **common,
            "dataset_kwargs": {"data_files": {"test": str(folder / "mc.jsonl")}},
            "output_type": "multiple_choice",
            "doc_to_text": "{{query}}",
            "doc_to_choice": "{{choices}}",
            "doc_to_target": "{{gold}}",
            "metric_list": [{"metric": m} for m in ("acc", "acc_norm", "acc_bytes")],
        },
    }
    for name, spec in tasks.items():  # JSON is YAML
        (folder / f"{name}.yaml").write_text(json.dumps({"task": name, **spec}))
    return folder


def run_lm_eval(hf_dir: Path, task_dir: Path, monkeypatch) -> dict:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(task_dir / "cache"))
    import lm_eval
    from lm_eval.tasks import TaskManager

    out = lm_eval.simple_evaluate(
        model="hf",
        model_args={"pretrained": str(hf_dir)},
        device="cpu",
        tasks=["fert_rolling", "fert_mc"],
        log_samples=True,
        bootstrap_iters=0,
        # only these two tasks: indexing lm-eval's thousands of built-in tasks takes ~30 s
        task_manager=TaskManager(include_path=str(task_dir), include_defaults=False),
    )
    return out


def test_lm_eval_gives_fertility_evals_numbers(exported, tmp_path, monkeypatch):
    run_dir, hf_dir = exported
    # the bundled cloze items as lm-eval records (its choices carry no delimiter), converted
    # back by eval.convert: the same file the project ships
    ours = [json.loads(x) for x in TASK.read_text("utf-8").splitlines() if x.strip()]
    assert all(c.startswith(" ") for r in ours for c in r["choices"])
    records = [
        {
            "id": r["id"],
            "query": r["context"],
            "choices": [c[1:] for c in r["choices"]],
            "gold": r["label"],
        }
        for r in ours
    ]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    convert_file(tmp_path / "records.jsonl", tmp_path / "task.jsonl", lang="en")
    converted = choice.load_items(tmp_path / "task.jsonl")
    assert [(i.context, i.choices, i.label) for i in converted] == [
        (r["context"], tuple(r["choices"]), r["label"]) for r in ours
    ]

    texts, _, _ = heldout_documents(run_dir)
    res = evaluate(run_dir, tasks=[tmp_path / "task.jsonl"], bootstrap=0)
    assert res["heldout"]["windowed_documents"] > 0  # the rolling windows are exercised
    theirs = run_lm_eval(hf_dir, lm_eval_tasks(tmp_path / "tasks", texts, records), monkeypatch)

    # bits per byte over the whole held-out split, and the log-likelihood of each document
    (row,) = [r for r in res["lm"] if r["group"] == "all"]
    # float32 forwards on both sides (transformers', ours), summed over 2633 tokens of 28
    # documents: a document's sum is about 5e-8 relative off either way (measured: 5e-5 on
    # sums up to 1000 nats, below), and those average over the split: measured 4e-9 relative
    # apart. rel=1e-5 leaves 200x on the per-document error; bytes counted as characters or
    # nats as bits would be 10% off or more.
    assert theirs["results"]["fert_rolling"]["bits_per_byte,none"] == pytest.approx(
        row["bits_per_byte"], rel=1e-5
    )
    run = open_run(run_dir)
    prep = nll.prepare(texts, run.tokenizer, run.context, run.separator)
    per_doc = torch.zeros(len(texts), dtype=torch.float64).index_add_(
        0, torch.from_numpy(prep.doc), torch.from_numpy(-nll.score(run.model, prep))
    )
    samples = sorted(theirs["samples"]["fert_rolling"], key=lambda s: s["doc_id"])
    got = [s["filtered_resps"][0] for s in samples]
    # A document's log-likelihood sums ~100 tokens of ~10 nats (the weights are sharpened),
    # each a float32 log-softmax of logits up to ~50: ~6e-8 x 50 = 3e-6 per token in another
    # order, 3e-5 over 100 tokens at random and 3e-4 if aligned (measured: 5e-5 apart, each
    # side 1e-5 and 6e-5 from float64). The old abs=2e-4 left 4x on the measurement and sat
    # under the aligned case, so abs=2e-3 (was 2e-4): 40x the measurement, 7x the aligned
    # case, and still 5000x below one token scored twice or conditioned differently (~10 nats).
    assert got == pytest.approx(per_doc.tolist(), abs=2e-3)

    # every choice's log-likelihood, and acc / acc_norm / acc_bytes
    scorer = choice.ModelScorer(
        run.model, run.tokenizer, context=run.context, prefix_id=run.separator
    )
    want = scorer.loglikelihoods([(i.context, c) for i in converted for c in i.choices])
    samples = sorted(theirs["samples"]["fert_mc"], key=lambda s: s["doc_id"])
    got = [ll for s in samples for ll, _ in s["filtered_resps"]]
    # The same float32 error on a few tokens per choice, up to 211 nats (float32's ulp there is
    # 1.5e-5): measured 2.3e-5 apart. abs=2e-3 (was 2e-4) as above: 90x the measurement; a
    # choice scored without its delimiter or context is nats off.
    assert got == pytest.approx(want, abs=2e-3)
    (task,) = res["tasks"]
    mc = theirs["results"]["fert_mc"]
    assert (mc["acc,none"], mc["acc_norm,none"], mc["acc_bytes,none"]) == (
        task["acc"],
        task["acc_norm_chars"],
        task["acc_norm_bytes"],
    )


def test_the_export_names_the_separator_and_adds_nothing(exported):
    from transformers import AutoTokenizer

    run_dir, hf_dir = exported
    run = open_run(run_dir)
    tok = AutoTokenizer.from_pretrained(str(hf_dir), local_files_only=True)
    text = "The monsoon rains filled the river."
    ids = run.tokenizer.encode_batch([text])[0].ids.tolist()
    assert tok(text)["input_ids"] == ids  # lm-eval adds its prefix token itself
    assert tok.bos_token_id == tok.eos_token_id == run.separator
    assert len(tok) == run.model.cfg.vocab_size  # a reserved separator is a token too
    if run.separator == run.tokenizer.vocab_size:
        assert tok.bos_token == SEPARATOR_TOKEN
    cfg = json.loads((hf_dir / "config.json").read_text())
    assert cfg["max_position_embeddings"] == SEQ_LEN and cfg["vocab_size"] == len(tok)
    assert math.isfinite(cfg["rms_norm_eps"]) and os.path.isfile(hf_dir / "model.safetensors")
