"""`export_hf`: the folder loads in Hugging Face transformers as LlamaForCausalLM, its logits
match ours, its tokenizer encodes like the run's; a tiktoken vocabulary converts exactly;
bad inputs are one-line EvalErrors."""

import base64
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fertility.errors import EvalError
from fertility.eval.export import export_hf
from fertility.tokenizers import load_tokenizer
from fertility.tokenizers.convert import PROBE
from fertility.trainer.checkpoint import save_checkpoint
from fertility.trainer.model import Transformer, config_from_preset
from tests.bpe import byte_level_bpe

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
SEP = "<|endoftext|>"


def corpus_lines(langs=("en", "bn", "hi", "ru", "zh")):
    return [
        l for g in langs for l in (CORPUS / f"{g}.txt").read_text("utf-8").splitlines() if l.strip()
    ]


def train_bpe(path: Path, vocab: int = 400, specials=(SEP,)) -> Path:
    byte_level_bpe(corpus_lines(), vocab, specials=list(specials), path=path)
    return path


def make_run(
    root: Path, tok_file: Path, *, tie: bool = True, pattern: str | None = None, extra_ids: int = 0
) -> Path:
    """A run folder in the layout `fertility pretrain` writes, with random weights made
    large enough that the logits are far from uniform (a weak comparison otherwise)."""
    run = root / "run"
    (run / "tokenizer").mkdir(parents=True)
    shutil.copyfile(tok_file, run / "tokenizer" / tok_file.name)
    tok = load_tokenizer(str(run / "tokenizer" / tok_file.name), pattern=pattern)
    cfg = config_from_preset(
        "tiny",
        tok.vocab_size + extra_ids,
        {"max_seq_len": 64, "tie_embeddings": tie, "n_kv_heads": 2},
    )
    torch.manual_seed(1)
    model = Transformer(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0) if p.dim() > 1 else p.add_(0.3 * torch.randn_like(p))
    save_checkpoint(
        run,
        5,
        model.state_dict(),
        {"note": torch.zeros(1)},
        {"model": cfg.to_dict(), "tokens_seen": 0, "tokenizer_fingerprint": tok.fingerprint},
    )
    meta = {
        "schema": "fertility.run/1",
        "tokenizer": {
            "spec": str(tok_file),
            "kind": tok.kind,
            "pattern": pattern,
            "fingerprint": tok.fingerprint,
            "vocab_size": tok.vocab_size,
            "path": f"tokenizer/{tok_file.name}",
        },
        "model": cfg.to_dict(),
        "train": {"seq_len": 64, "separator": "auto"},
        "gate": None,
        "forced": False,
        "corpus": {},
        "created": "now",
    }
    (run / "run.json").write_text(json.dumps(meta))
    return run


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    return make_run(root, train_bpe(root / "tokenizer.json"))


def test_export_writes_llama_names_and_shapes(hf_run, tmp_path):
    out = tmp_path / "hf"
    summary = export_hf(hf_run, out)
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    } <= set(summary["files"])
    assert summary["step"] == 5
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama"
    assert cfg["num_key_value_heads"] == 2 and cfg["hidden_size"] == 64
    tok = load_tokenizer(str(hf_run / "tokenizer" / "tokenizer.json"))
    assert cfg["bos_token_id"] == cfg["eos_token_id"] == tok.special_tokens[SEP]
    weights = load_file(str(out / "model.safetensors"))
    # tied: lm_head.weight is left to HF to re-tie; 2 layers x 9 tensors + embed + norm
    assert "lm_head.weight" not in weights
    assert len(weights) == 2 * 9 + 2
    assert weights["model.embed_tokens.weight"].shape == (tok.vocab_size, 64)
    assert weights["model.layers.1.self_attn.k_proj.weight"].shape == (2 * 16, 64)
    assert not [p for p in out.parent.iterdir() if ".partial" in p.name]  # temp folder gone


def test_export_refuses_a_non_empty_folder_and_missing_runs(hf_run, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(EvalError, match="taken: already exists"):
        export_hf(hf_run, out)
    assert (out / "keep.txt").read_text() == "x"
    with pytest.raises(EvalError, match="no such run folder"):
        export_hf(tmp_path / "nope", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _transformers():
    try:
        from transformers import AutoTokenizer, LlamaForCausalLM
    except ImportError as e:  # the only reason to skip: the package cannot be imported
        pytest.skip(f"transformers cannot be imported ({e}); pip install transformers")
    return AutoTokenizer, LlamaForCausalLM


@pytest.mark.parametrize("tie", [True, False])
def test_transformers_loads_the_export_and_its_logits_match_ours(tmp_path, tie):
    AutoTokenizer, LlamaForCausalLM = _transformers()
    run = make_run(tmp_path, train_bpe(tmp_path / "tokenizer.json"), tie=tie)
    out = tmp_path / "hf"
    export_hf(run, out)
    hf_model = LlamaForCausalLM.from_pretrained(
        str(out), local_files_only=True, dtype=torch.float32
    ).eval()
    hf_tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)

    ours_tok = load_tokenizer(str(run / "tokenizer" / "tokenizer.json"))
    from fertility.trainer.checkpoint import load_model

    ours, _ = load_model(run)
    sep = ours_tok.special_tokens[SEP]
    texts = [
        "The monsoon rains filled the river.",
        "বর্ষার বৃষ্টিতে নদী ভরে উঠল।",
        "Дождь 雨 and ১২৩ mixed",
        PROBE,
    ]
    for text in texts:
        ids = ours_tok.encode_batch([text])[0].ids.tolist()
        # the tokenizer adds nothing: the separator is bos_token, for the evaluator to put in
        # front (lm-eval's prefix token), as `fertility eval` does
        assert hf_tok(text)["input_ids"] == ids
        assert hf_tok(text, add_special_tokens=False)["input_ids"] == ids
        assert hf_tok.bos_token_id == hf_tok.eos_token_id == sep
        x = torch.tensor([([sep] + ids)[:64]])
        with torch.no_grad():
            a = ours(x)
            b = hf_model(x).logits
        assert a.std() > 0.5  # far from uniform: the comparison means something
        # Two float32 implementations of the same ops (ours, transformers'): measured bitwise
        # equal, each up to 7.5e-6 from float64 (the x8 weights, |logits| <= 5.5). Where a CPU
        # orders a sum differently they part by about twice that, 1.5e-5: atol + rtol x |x|
        # >= 1e-4 leaves 7x. A wrongly mapped weight (rotary permutation, rope theta) moves
        # logits by 1e-3 even at init scale (test_model), more at this one.
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    assert hf_model.config.tie_word_embeddings is tie


def test_a_separator_reserved_past_the_vocabulary_is_exported_as_a_token(tmp_path):
    AutoTokenizer, LlamaForCausalLM = _transformers()
    # no end-of-text token: the model has one id more, the trainer's reserved separator
    run = make_run(tmp_path, train_bpe(tmp_path / "tokenizer.json", specials=()), extra_ids=1)
    out = tmp_path / "hf"
    summary = export_hf(run, out)
    assert "<|endoftext|> (added: the trainer reserved its id)" in summary["tokenizer"]
    ours_tok = load_tokenizer(str(run / "tokenizer" / "tokenizer.json"))
    sep = ours_tok.vocab_size
    hf_tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    assert len(hf_tok) == sep + 1 and hf_tok.bos_token_id == hf_tok.eos_token_id == sep
    assert hf_tok.convert_ids_to_tokens(sep) == "<|endoftext|>"
    hf_model = LlamaForCausalLM.from_pretrained(
        str(out), local_files_only=True, dtype=torch.float32
    ).eval()
    from fertility.trainer.checkpoint import load_model

    ours, _ = load_model(run)
    ids = ours_tok.encode_batch([PROBE])[0].ids.tolist()
    assert hf_tok(PROBE)["input_ids"] == ids
    x = torch.tensor([([sep] + ids)[:64]])
    with torch.no_grad():  # as above: measured equal, 5.5e-6 from float64
        torch.testing.assert_close(hf_model(x).logits, ours(x), rtol=1e-4, atol=1e-4)


def _rank_file_from_bpe(bpe_json: Path, out: Path) -> Path:
    """A tiktoken rank file whose ranks are the byte-level BPE ids (256 bytes, then merges)."""
    tok = load_tokenizer(str(bpe_json))
    lines = []
    for i in range(tok.vocab_size):
        if i in tok.special_tokens.values():
            continue
        lines.append((base64.b64encode(tok.token_bytes(i)).decode(), len(lines)))
    out.write_text("".join(f"{b} {r}\n" for b, r in lines))
    return out


def test_tiktoken_run_converts_to_a_tokenizer_json_that_encodes_identically(tmp_path):
    from tokenizers import Tokenizer as HF

    # a rank file carries no split pattern: run.json's tokenizer.pattern names it
    ranks = _rank_file_from_bpe(train_bpe(tmp_path / "bpe.json"), tmp_path / "ranks.tiktoken")
    run = make_run(tmp_path, ranks, pattern="gpt2")
    out = tmp_path / "hf"
    summary = export_hf(run, out)
    assert summary["tokenizer"].startswith("tiktoken: converted")
    ours = load_tokenizer(str(run / "tokenizer" / "ranks.tiktoken"), pattern="gpt2")
    hf = HF.from_file(str(out / "tokenizer.json"))
    texts = corpus_lines(("en", "bn", "zh", "ru")) + [PROBE, "  two  spaces\t\ttabs\n\nend"]
    for text, enc in zip(texts, ours.encode_batch(texts)):
        assert hf.encode(text, add_special_tokens=False).ids == enc.ids.tolist()
        assert hf.decode(enc.ids.tolist()) == text


def _train_sp(tmp_path, model_type, **extra) -> Path:
    spm = pytest.importorskip("sentencepiece")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus_lines(("en", "bn"))),
        model_prefix=str(tmp_path / "sp"),
        vocab_size=500,
        model_type=model_type,
        character_coverage=0.995,
        byte_fallback=True,
        minloglevel=2,
        **extra,
    )
    return tmp_path / "sp.model"


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_sentencepiece_run_converts_to_a_tokenizer_json_that_encodes_identically(
    tmp_path, model_type
):
    from tokenizers import Tokenizer as HF

    run = make_run(tmp_path, _train_sp(tmp_path, model_type))
    out = tmp_path / "hf"
    summary = export_hf(run, out)
    assert summary["tokenizer"].startswith("sentencepiece: converted")
    ours = load_tokenizer(str(run / "tokenizer" / "sp.model"))
    hf = HF.from_file(str(out / "tokenizer.json"))
    # unseen scripts go through byte fallback; whitespace runs, tabs and full-width forms
    # through the normaliser
    texts = corpus_lines(("en", "bn", "hi", "zh", "th")) + [
        PROBE,
        "  lead and trail  ",
        "a\tb\nc",
        "x  \u3000 y",
        "ｆｕｌｌ width ①",
        "",
    ]
    for text, enc in zip(texts, ours.encode_batch(texts)):
        assert hf.encode(text, add_special_tokens=False).ids == enc.ids.tolist(), text
    assert hf.encode("hello").ids == hf.encode("hello", add_special_tokens=False).ids
    conf = json.loads((out / "tokenizer_config.json").read_text())
    assert conf["bos_token"] == conf["eos_token"] == "</s>"  # the run's separator


def test_sentencepiece_without_an_equivalent_is_copied_and_says_so(tmp_path):
    # whitespace as suffix has no tokenizer.json counterpart: the model file goes as is
    run = make_run(tmp_path, _train_sp(tmp_path, "unigram", treat_whitespace_as_suffix=True))
    out = tmp_path / "hf"
    summary = export_hf(run, out)
    assert "no tokenizer.json written" in summary["tokenizer"]
    assert (out / "tokenizer.model").read_bytes() == (run / "tokenizer" / "sp.model").read_bytes()
    assert not (out / "tokenizer.json").exists()
    conf = json.loads((out / "tokenizer_config.json").read_text())
    assert conf["tokenizer_class"] == "LlamaTokenizer" and conf["add_bos_token"] is False


def test_corrupt_checkpoint_is_an_eval_error(hf_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(hf_run, run)
    weights = next((run / "checkpoints").glob("step-*")) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(EvalError, match="no valid checkpoint"):
        export_hf(run, tmp_path / "out")


def test_the_export_command_writes_the_folder_and_refuses_to_overwrite(hf_run, tmp_path, run):
    out = tmp_path / "hf"
    rc, stdout, _ = run("export", hf_run, "--to", "hf", out)
    assert rc == 0 and "model.safetensors" in stdout and "tokenizer: hf:" in stdout
    assert json.loads((out / "fertility_export.json").read_text())["step"] == 5
    rc, stdout, err = run("export", hf_run, "--to", "hf", out)
    assert rc == 2 and stdout == "" and err.count("\n") == 1
    assert err.startswith("error: ") and "already exists" in err
    # --overwrite replaces a previous export's own files; the user's own file stays
    (out / "notes.txt").write_text("x")
    rc, _, _ = run("export", hf_run, "--to", "hf", out, "--overwrite")
    assert rc == 0 and (out / "notes.txt").read_text() == "x"
    assert (out / "config.json").is_file()
