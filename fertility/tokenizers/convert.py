"""A run's tokenizer as Hugging Face files, for `fertility export --to hf` (eval/export.py):

    tokenizer.json           the tokenizer as `tokenizers` reads it: each kind's conversion,
                             declared in fertility.tokenizers.kinds (HFExport) and written in
                             its adapter module (`to_hf`), checked on real text there
    tokenizer.model          instead of tokenizer.json, when a SentencePiece model has no
                             tokenizer.json equivalent: the .model itself (LlamaTokenizer)
    tokenizer_config.json    the tokenizer class, max length, special tokens
    special_tokens_map.json

The run's document separator (the tokenizer's end-of-text token, or the id the trainer reserved
past the vocabulary when the tokenizer has none, written here as the special token
SEPARATOR_TOKEN) is bos_token and eos_token, and the tokenizer adds nothing: `tokenizer(text)`
gives the bare ids (eval/export.py says why).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from fertility.errors import TokenizerError
from fertility.tokenizers.base import Tokenizer
from fertility.tokenizers.hf_json import special_added_token
from fertility.tokenizers.kinds import hf_export

# Text used to check a converted tokenizer against the run's own: several scripts, digits,
# runs of spaces, a ZWJ and an emoji, so byte-level and regex-split differences show.
PROBE = (
    "The river rose 12 cm  overnight;  it's   rising!\n বর্ষার বৃষ্টিতে নদী ভরে উঠল। "
    "र‍्य नमस्ते  дождь 雨が降る ฝนตก 😀 ১২৩"
)
# The text of a separator the trainer reserved past the vocabulary (the tokenizer has no
# end-of-text token of its own): the name GPT-2 and tiktoken give a document separator.
SEPARATOR_TOKEN = "<|endoftext|>"


def write_hf_tokenizer(
    tok: Tokenizer,
    src: Path,
    out: Path,
    sep_id: int | None,
    context: int,
    probes: list[str],
    error: type[Exception] = TokenizerError,
) -> str:
    """Write the tokenizer files of `tok` (loaded from `src`) into the folder `out`; returns
    the note the export's summary shows. `error`: the class of the errors raised (a kind
    with no HF conversion, a conversion that changes the ids, a reserved separator's name
    already in the vocabulary)."""
    sep_token = separator_text(tok, sep_id)
    reserved = sep_id is not None and sep_id == tok.vocab_size
    if reserved and sep_token in _vocab_strings(tok):
        raise error(
            f"{src}: {sep_token!r}, the name for the reserved separator "
            f"id {sep_id}, is already a token of the vocabulary"
        )
    export = hf_export(tok)
    if export is None:
        raise error(f"{src}: cannot export a {tok.kind!r} tokenizer")
    specials = _special_map(tok, sep_token, reserved, export.unk_special)
    common = {"model_max_length": context, "clean_up_tokenization_spaces": False, **specials}
    done = export.convert(tok, Path(src), probes, error)
    obj = done.tokenizer_json
    if obj is None:  # the model file itself, which transformers' LlamaTokenizer reads
        shutil.copyfile(src, out / "tokenizer.model")
        extra = (
            {"added_tokens_decoder": {str(sep_id): special_added_token(sep_id, sep_token)}}
            if reserved and sep_id is not None and sep_token is not None
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
        return done.note + _separator_note(sep_token, reserved)
    obj["truncation"] = None
    obj["padding"] = None
    # The run's own post-processor is dropped and none added: training and `fertility eval`
    # never add specials ([CLS]/[SEP] templates would change what the model sees), and the
    # separator is the evaluator's prefix to add (bos_token), not the tokenizer's.
    obj["post_processor"] = None
    if reserved and sep_id is not None and sep_token is not None:
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
    return done.note + _separator_note(sep_token, reserved)


def separator_text(tok: Tokenizer, sep_id: int | None) -> str | None:
    """The separator's text: a special token's own, SEPARATOR_TOKEN for a reserved id."""
    if sep_id is not None and sep_id == tok.vocab_size:
        return SEPARATOR_TOKEN
    return _token_text(tok, sep_id)


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _token_text(tok: Tokenizer, token_id: int | None) -> str | None:
    if token_id is None:
        return None
    for text, i in tok.special_tokens.items():
        if i == token_id:
            return text
    return tok.token_bytes(token_id).decode("utf-8", "replace") or None


def _special_map(
    tok: Tokenizer, sep_token: str | None, reserved: bool, unk_special: bool
) -> dict[str, str]:
    """bos/eos/unk for tokenizer_config.json, only for tokens the tokenizer marks special
    (naming any other string there would make transformers add it as a new token)."""
    out = {}
    if sep_token is not None and (reserved or sep_token in tok.special_tokens):
        out["bos_token"] = out["eos_token"] = sep_token
    unk = _token_text(tok, tok.unk_id)
    if unk is not None and (unk in tok.special_tokens or unk_special):
        out["unk_token"] = unk
    return out


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


def _vocab_strings(tok: Tokenizer) -> set[str]:
    """Every token's text as the tokenizer spells it, to keep a new token's name unique."""
    return {tok.token_bytes(i).decode("utf-8", "replace") for i in range(tok.vocab_size)} | set(
        tok.special_tokens
    )
