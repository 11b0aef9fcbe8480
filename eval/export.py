"""`fertility export --to hf`: a folder Hugging Face transformers loads as LlamaForCausalLM.

    OUT_DIR/config.json               LlamaConfig (trainer.model.hf_llama_config) + special ids
    OUT_DIR/model.safetensors         weights under Llama's names (trainer.model.hf_llama_state_dict)
    OUT_DIR/generation_config.json    bos/eos ids
    OUT_DIR/tokenizer.json            the run's tokenizer as a `tokenizers` file (see below)
    OUT_DIR/tokenizer_config.json     PreTrainedTokenizerFast, max length, special tokens
    OUT_DIR/special_tokens_map.json
    OUT_DIR/fertility_export.json     provenance: run folder, step, tokenizer fingerprint;
                                      marks the folder as an export (see _check_output)

The tokenizer, by the run's tokenizer kind:
    hf             the run's tokenizer.json, truncation and padding off.
    tiktoken       converted to a byte-level BPE tokenizer.json (ranks become the vocabulary,
                   merges derived from the ranks, the split regex becomes a Split pre-tokenizer;
                   the conversion transformers itself uses for Llama 3), then checked: the
                   export is refused if the converted tokenizer encodes a probe text
                   differently.
    sentencepiece  the .model is copied as tokenizer.model and tokenizer_config.json names
                   LlamaTokenizer with add_bos_token/add_eos_token false; no tokenizer.json is
                   written (transformers converts the .model on load, which needs the
                   `sentencepiece` and `protobuf` packages).
The run's document separator (the tokenizer's end-of-text token, or the id the trainer reserved
past the vocabulary when the tokenizer has none, written here as the special token
SEPARATOR_TOKEN) is bos_token and eos_token, and the tokenizer adds nothing: `tokenizer(text)`
gives the bare ids. Evaluators put the separator in front themselves: lm-evaluation-harness
takes bos_token_id as its prefix token, so its rolling log-likelihood of a document is exactly
`fertility eval`'s (docs/EVAL.md); a tokenizer that prepended it too would have lm-eval
score the separator as a token of every document. max_position_embeddings is the run's
training context, which lm-evaluation-harness and generation tools read as the model's
context length.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from eval.run import heldout_documents, open_run
from fertility.errors import EvalError, one_line
from fertility.files import PARTIAL
from fertility.outputs import Inputs, check_folder, read_manifest, record, remove
from fertility.tokenizers.base import merges_from_ranks
from fertility.tokenizers.hf_json import byte_level_bpe, special_added_token
from fertility.tokenizers.sentencepiece import model_settings
from trainer.model import hf_llama_config, hf_llama_state_dict

# Text used to check a converted tokenizer against the run's own: several scripts, digits,
# runs of spaces, a ZWJ and an emoji, so byte-level and regex-split differences show.
PROBE = (
    "The river rose 12 cm  overnight;  it's   rising!\n বর্ষার বৃষ্টিতে নদী ভরে উঠল। "
    "र‍्य नमस्ते  дождь 雨が降る ฝนตก 😀 ১২৩"
)
# The text of a separator the trainer reserved past the vocabulary (the tokenizer has no
# end-of-text token of its own): the name GPT-2 and tiktoken give a document separator.
SEPARATOR_TOKEN = "<|endoftext|>"
# The provenance file marks a folder as an export: `--overwrite` replaces only such a folder.
MARKER = "fertility_export.json"
EXPORT_SCHEMA = "fertility.export/1"
# Every file an export may write; `--overwrite` touches these and nothing else.
EXPORT_FILES = frozenset(
    {
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
        MARKER,
    }
)


def export_hf(
    run_dir: str | Path, out_dir: str | Path, *, step: int | None = None, overwrite: bool = False
) -> dict[str, Any]:
    """Write the Hugging Face folder; returns {"out_dir", "step", "files", "tokenizer"}."""
    # deferred: safetensors is the optional train extra
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    real, previous = _check_output(Path(run_dir), out_dir, overwrite)
    run = open_run(run_dir, step=step, device="cpu")
    tok, cfg = run.tokenizer, run.model.cfg
    sep_token = _separator_text(tok, run.separator)

    # A fresh hidden folder beside the output, never an existing one: a fixed name such as
    # OUT.partial could be the user's (or the run's own) folder, and it was deleted first.
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{real.name}{PARTIAL}", dir=real.parent))
        umask = os.umask(0o22)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would become the export folder's mode
    except OSError as e:
        raise EvalError(f"{out_dir}: cannot create the export folder ({e.strerror or e})") from e
    files: dict[str, Any] = {}
    try:
        weights = {k: v.detach().contiguous() for k, v in hf_llama_state_dict(run.model).items()}
        try:
            save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        except OSError:
            raise
        except Exception as e:  # safetensors' own error (a full disk among them) names no file
            raise EvalError(f"{out_dir}: cannot write model.safetensors ({one_line(e)})") from None
        # safetensors creates its file 0600; the export's files all get the umask's mode
        (tmp / "model.safetensors").chmod(0o666 & ~umask)
        config = hf_llama_config(cfg)
        config.update(
            {
                "bos_token_id": run.separator,
                "eos_token_id": run.separator,
                "pad_token_id": None,
                "max_position_embeddings": run.context,
            }
        )
        _write_json(tmp / "config.json", config)
        _write_json(
            tmp / "generation_config.json",
            {"bos_token_id": run.separator, "eos_token_id": run.separator},
        )
        probes = [PROBE, *_heldout_sample(run.dir)]
        note = _write_tokenizer(tok, run.tokenizer_path, tmp, run.separator, run.context, probes)
        _write_json(
            tmp / MARKER,
            {
                "schema": EXPORT_SCHEMA,
                "run_dir": str(run.dir),
                "step": run.manifest.get("step"),
                "tokenizer": run.meta.get("tokenizer"),
                "separator": run.separator,
                "separator_token": sep_token,
                "context": run.context,
                "tokenizer_note": note,
            },
        )
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir())}
        record(real if previous else tmp, sorted(EXPORT_FILES), made_by="export")
        if previous:
            _replace_export(tmp, real)
        else:
            if real.is_dir():  # empty (checked above): rename needs it gone or empty
                real.rmdir()
            tmp.replace(real)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise EvalError(f"{out_dir}: cannot write the export ({e.strerror or e})") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {
        "out_dir": str(out_dir),
        "step": run.manifest.get("step"),
        "files": files,
        "tokenizer": note,
    }


def _check_output(run_dir: Path, out_dir: Path, overwrite: bool) -> tuple[Path, bool]:
    """The real output folder and whether it holds a previous export to replace; EvalError
    for an output the export must not touch (fertility.outputs.check_folder, the one policy).

    A symlinked output is resolved and the rules apply to the folder it points to (the link
    stays a link). The output may not be, contain or lie inside the run folder: replacing it
    would delete the run. `--overwrite` replaces only a previous export (its manifest, or the
    MARKER of an export made before manifests), and then only EXPORT_FILES: anything else in
    it is the user's and is kept."""
    real = out_dir.resolve()
    shown = out_dir if real == out_dir.absolute() else Path(f"{out_dir} (-> {real})")
    inputs = Inputs.of(roles={"run folder": run_dir})
    occupied = f"{shown}: already exists and is not an empty folder (choose another, or --overwrite to replace a previous export)"
    try:
        real, state = check_folder(real, "export", EXPORT_FILES, inputs, error=EvalError)
    except EvalError as e:
        if "was not made by" not in str(e):
            raise EvalError(str(e).replace(str(real), str(shown), 1)) from None
        if not overwrite:
            raise EvalError(occupied) from None
        if read_manifest(real) is not None or not _is_export(real / MARKER):
            raise EvalError(
                f"{shown}: is not a previous export (no valid {MARKER}); --overwrite "
                "replaces only an export, choose another folder"
            ) from None
        # an export made before manifests: its files are the ones EXPORT_FILES names
        record(real, sorted(n for n in EXPORT_FILES if (real / n).exists()), made_by="export")
        state = "ours"
    if state == "ours" and not overwrite:
        raise EvalError(occupied)
    return real, state == "ours"


def _is_export(marker: Path) -> bool:
    """Whether `marker` is an export's provenance file (exports before EXPORT_SCHEMA was
    written are known by their run_dir and step)."""
    try:
        obj = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(obj, dict) and (
        obj.get("schema") == EXPORT_SCHEMA or {"run_dir", "step"} <= obj.keys()
    )


def _replace_export(tmp: Path, out: Path) -> None:
    """Move the new export's files from `tmp` into the previous export `out`: first remove
    the previous export's files the new one does not write (a tokenizer.model beside a new
    tokenizer.json would change what transformers loads), then rename each new file over
    its old one, the marker last, so a folder interrupted midway is still an export."""
    new = {p.name for p in tmp.iterdir()}
    for name in EXPORT_FILES - new:
        remove(out, name)  # fertility.outputs: only what the export's manifest lists
    for name in sorted(new - {MARKER}) + [MARKER]:
        (tmp / name).replace(out / name)
    tmp.rmdir()


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _token_text(tok, token_id: int | None) -> str | None:
    if token_id is None:
        return None
    for text, i in tok.special_tokens.items():
        if i == token_id:
            return text
    return tok.token_bytes(token_id).decode("utf-8", "replace") or None


def _separator_text(tok, sep_id: int | None) -> str | None:
    """The separator's text: a special token's own, SEPARATOR_TOKEN for a reserved id."""
    if sep_id is not None and sep_id == tok.vocab_size:
        return SEPARATOR_TOKEN
    return _token_text(tok, sep_id)


def _special_map(tok, sep_token: str | None, reserved: bool) -> dict[str, str]:
    """bos/eos/unk for tokenizer_config.json, only for tokens the tokenizer marks special
    (naming any other string there would make transformers add it as a new token)."""
    out = {}
    if sep_token is not None and (reserved or sep_token in tok.special_tokens):
        out["bos_token"] = out["eos_token"] = sep_token
    unk = _token_text(tok, tok.unk_id)
    if unk is not None and (unk in tok.special_tokens or tok.kind == "sentencepiece"):
        out["unk_token"] = unk
    return out


def _write_tokenizer(
    tok, src: Path, out: Path, sep_id: int | None, context: int, probes: list[str]
) -> str:
    sep_token = _separator_text(tok, sep_id)
    reserved = sep_id is not None and sep_id == tok.vocab_size
    if reserved and sep_token in _vocab_strings(tok):
        raise EvalError(
            f"{src}: {sep_token!r}, the name for the reserved separator "
            f"id {sep_id}, is already a token of the vocabulary"
        )
    specials = _special_map(tok, sep_token, reserved)
    common = {"model_max_length": context, "clean_up_tokenization_spaces": False, **specials}
    if tok.kind == "sentencepiece":
        obj = sentencepiece_to_hf(tok, src)
        bad = _mismatches(tok, obj, probes) if obj is not None else -1
        if bad:
            shutil.copyfile(src, out / "tokenizer.model")
            extra = (
                {"added_tokens_decoder": {str(sep_id): special_added_token(sep_id, sep_token)}}
                if reserved
                else {}
            )
            _write_json(
                out / "tokenizer_config.json",
                {
                    "tokenizer_class": "LlamaTokenizer",
                    "add_bos_token": False,
                    "add_eos_token": False,
                    "legacy": True,
                    **common,
                    **extra,
                },
            )
            _write_json(out / "special_tokens_map.json", specials)
            why = (
                "its settings have no tokenizer.json equivalent"
                if bad < 0
                else f"the conversion encoded {bad} of {len(probes)} check texts differently"
            )
            return (
                f"sentencepiece: tokenizer.model copied, no tokenizer.json written ({why}); "
                "tokenizer_config.json names LlamaTokenizer with no BOS added"
                + _separator_note(sep_token, reserved)
            )
        note = f"sentencepiece: converted to tokenizer.json, same ids on {len(probes)} check texts"
    elif tok.kind == "hf":
        obj = json.loads(Path(src).read_text(encoding="utf-8"))
        note = "hf: the run's tokenizer.json"
    elif tok.kind == "tiktoken":
        obj = tiktoken_to_hf(tok)
        bad = _mismatches(tok, obj, probes)
        if bad < 0:
            raise EvalError(
                f"{src}: the tokenizer.json converted from the tiktoken vocabulary "
                "does not load in `tokenizers` (its split regex?)"
            )
        if bad:
            raise EvalError(
                f"{src}: converting the tiktoken vocabulary to tokenizer.json "
                f"changed how {bad} of {len(probes)} check texts are encoded"
            )
        note = (
            f"tiktoken: converted to a byte-level BPE tokenizer.json, same ids on "
            f"{len(probes)} check texts"
        )
    else:
        raise EvalError(f"{src}: cannot export a {tok.kind!r} tokenizer")
    obj["truncation"] = None
    obj["padding"] = None
    # The run's own post-processor is dropped and none added: training and `fertility eval`
    # never add specials ([CLS]/[SEP] templates would change what the model sees), and the
    # separator is the evaluator's prefix to add (bos_token), not the tokenizer's.
    obj["post_processor"] = None
    if reserved:
        obj["added_tokens"] = [
            *(obj.get("added_tokens") or []),
            special_added_token(sep_id, sep_token),
        ]
    text = json.dumps(obj, ensure_ascii=False)
    (out / "tokenizer.json").write_text(text, encoding="utf-8")
    _write_json(
        out / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast", **common}
    )
    _write_json(out / "special_tokens_map.json", specials)
    return note + _separator_note(sep_token, reserved)


def _separator_note(sep_token: str | None, reserved: bool) -> str:
    if sep_token is None:
        return (
            '; the run has no document separator (separator = "none"): no bos/eos '
            "token, so lm-evaluation-harness, which needs a prefix token, cannot score it"
        )
    added = " (added: the trainer reserved its id)" if reserved else ""
    return (
        f"; {sep_token}{added}, the run's document separator, is bos/eos and is not "
        "added by the tokenizer"
    )


def _vocab_strings(tok) -> set[str]:
    """Every token's text as the tokenizer spells it, to keep a new token's name unique."""
    return {tok.token_bytes(i).decode("utf-8", "replace") for i in range(tok.vocab_size)} | set(
        tok.special_tokens
    )


# -- tiktoken -> tokenizer.json -------------------------------------------------------------


def tiktoken_to_hf(tok) -> dict[str, Any]:
    """A byte-level BPE tokenizer.json equivalent to a tiktoken tokenizer.

    tiktoken merges the adjacent pair whose concatenation has the lowest rank; the same
    greedy order is HF BPE with the merges of `merges_from_ranks`: every split of each token
    into two tokens, ranked like the token (the same list `fertility extend` writes).
    """
    special_ids = set(tok.special_tokens.values())
    ranks: dict[bytes, int] = {}
    for i in range(tok.vocab_size):
        if i not in special_ids:
            b = tok.token_bytes(i)
            if b:
                ranks[b] = i
    tokens = {r: b for b, r in ranks.items()}
    merges = merges_from_ranks(ranks)  # every split, as tiktoken can reach it
    return byte_level_bpe(tokens, merges, tok.config()["pattern_regex"], tok.special_tokens)


def _mismatches(tok, obj: dict, texts: list[str]) -> int:
    """How many `texts` the tokenizer.json `obj` encodes differently from `tok` (-1: it does
    not load)."""
    # deferred: the Rust tokenizers library only when used
    from tokenizers import Tokenizer as HFTokenizer

    try:
        hf = HFTokenizer.from_str(json.dumps(obj, ensure_ascii=False))
    except Exception:  # the binding raises plain Exception (e.g. a regex Onig rejects)
        return -1
    theirs = hf.encode_batch(texts, add_special_tokens=False)
    ours = tok.encode_batch(texts)
    return sum(a.ids != b.ids.tolist() for a, b in zip(theirs, ours))


def _heldout_sample(run_dir: Path, limit: int = 200) -> list[str]:
    """Up to `limit` held-out documents of the run: real text to check a conversion on.

    A run without a readable held-out split is still exported, checked on PROBE alone."""

    try:
        return heldout_documents(run_dir, limit)[0]
    except EvalError:
        return []


# -- sentencepiece -> tokenizer.json ---------------------------------------------------------


def sentencepiece_to_hf(tok, src: Path) -> dict[str, Any] | None:
    """A tokenizer.json mirroring a SentencePiece model (unigram or BPE), or None when its
    settings have no equivalent. The caller checks the result on real text before use."""

    # deferred: sentencepiece only for its files
    import sentencepiece as spm

    conf = tok.config()
    norm, pre = conf["normalizer"], conf["pre_tokenizer"]
    if (
        conf["model"] not in ("unigram", "bpe")
        or pre.get("treat_whitespace_as_suffix")
        or not norm.get("escape_whitespaces", True)
    ):
        return None

    # the model already loaded through the adapter, which read these same settings
    charsmap = model_settings(Path(src).read_bytes())[1].get(2, b"")
    sp = spm.SentencePieceProcessor(model_file=str(src))
    n = sp.get_piece_size()
    pieces = [sp.id_to_piece(i) for i in range(n)]
    normalizers: list[dict] = []
    if isinstance(charsmap, bytes) and charsmap:
        normalizers.append(
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()}
        )
    if norm.get("remove_extra_whitespaces", True):
        normalizers += [
            {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]
    normalizers.append({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})
    if norm.get("add_dummy_prefix", True):
        normalizers.append({"type": "Prepend", "prepend": "▁"})
    unk = tok.unk_id if tok.unk_id is not None else 0
    if conf["model"] == "unigram":
        model = {
            "type": "Unigram",
            "unk_id": unk,
            "byte_fallback": conf["byte_fallback"],
            "vocab": [[p, float(sp.get_score(i))] for i, p in enumerate(pieces)],
        }
    else:
        vocab = {p: i for i, p in enumerate(pieces)}
        merges = []
        for i, p in enumerate(pieces):
            for k in range(1, len(p)):
                a, b = vocab.get(p[:k]), vocab.get(p[k:])
                if a is not None and b is not None:
                    merges.append((i, a, b, p[:k], p[k:]))
        merges.sort()
        model = {
            "type": "BPE",
            "dropout": None,
            "unk_token": pieces[unk],
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": conf["byte_fallback"],
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[m[3], m[4]] for m in merges],
        }
    specials = [i for i in range(n) if sp.is_control(i) or sp.is_unknown(i)]
    decoders = [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]
    if norm.get("add_dummy_prefix", True):
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": pieces[i],
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i in specials
        ],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": (
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}
            if pre.get("split_by_whitespace", True)
            else None
        ),
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": model,
    }
