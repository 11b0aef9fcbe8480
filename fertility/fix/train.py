"""The training backends of `fertility fix` (fertility/fix/run.py decides what to train; this
module trains it and stages the artifact under a temporary name until the run commits)."""

from __future__ import annotations

import io
import json
import os
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fertility.errors import FertilityError, FixError, one_line
from fertility.files import partial_path
from fertility.outputs import inside, open_inside, remove, replace_inside

if TYPE_CHECKING:
    from fertility.fix.config import FixConfig

BYTES = 256  # the base alphabet every backend starts from


@dataclass
class Trained:
    path: Path  # the final artifact: DIR/tokenizer.json, or DIR/tokenizer.model
    staged: Path  # its temporary name until commit()
    stale: Path  # the other backend's artifact from an earlier run in DIR
    is_model: bool  # a SentencePiece .model
    trainer_s: float  # seconds inside the trainer call (it also pulls the stream)

    def commit(self) -> None:
        # renamed onto the entry itself; a symbolic link there is refused (fertility.outputs)
        replace_inside(self.staged, self.path.parent, self.path.name, FixError)
        # a folder spec loads tokenizer.json before tokenizer.model: an earlier run's other
        # artifact goes (outputs.remove: only when the folder's manifest lists it)
        remove(self.stale.parent, self.stale.name, FixError)


def train(
    config: FixConfig,
    regex: str,
    specials: list[tuple[str, int | None]],
    unk: str | None,
    stream: Iterator[list[str]],
    out: Path,
    temps: list[Path],
    *,
    max_doc_bytes: int,
    show_progress: bool,
) -> Trained:
    """Train, then stage the artifact under a temporary name in `out` (see Trained)."""
    if config.trainer.native_model:  # SentencePiece's own model file
        assert unk is not None, "fix plans an UNK for SentencePiece, which needs an UNK id"
        data, secs = _train_sp(config, specials, unk, stream, max_doc_bytes, show_progress)
        final = out / config.trainer.artifact
        tmp = _stage(final, temps)
        with open_inside(out, tmp.name, binary=True, error=FixError) as f:
            f.write(data)
        return Trained(final, tmp, out / "tokenizer.json", True, secs)
    # deferred: the Rust tokenizers library only when used
    from tokenizers import Tokenizer

    tok, secs = _train_hf(config, regex, specials, unk, stream, show_progress)
    wanted = {t: i for t, i in specials if i is not None}
    final = out / config.trainer.artifact
    tmp = _stage(final, temps)
    if config.model == "unigram" or wanted:  # edit the JSON; from_str checks it is still valid
        obj = json.loads(tok.to_str())
        if config.model == "unigram":
            _add_byte_pieces(obj, len(specials))
        _pin_ids(obj, wanted)
        tok = Tokenizer.from_str(json.dumps(obj))
    tok.save(str(inside(out, tmp.name, FixError)))
    return Trained(final, tmp, out / "tokenizer.model", False, secs)


def _stage(final: Path, temps: list[Path]) -> Path:
    tmp = partial_path(final)
    temps.append(tmp)
    return tmp


def _train_hf(config: FixConfig, regex: str, specials, unk, stream, show_progress):
    """A trained `tokenizers.Tokenizer` and the seconds its trainer took."""
    # deferred: the Rust tokenizers library only when used
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    split = pre_tokenizers.Split(Regex(regex), behavior="isolated")
    names = [t for t, _ in specials]
    trainer: trainers.Trainer
    if config.model == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=config.vocab_size,
            special_tokens=names,
            show_progress=show_progress,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
    else:
        # Unigram: characters as they are, the 256 <0xNN> pieces added after training as the
        # byte fallback of characters the vocabulary lacks (what SentencePiece does).
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = split
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
        trainer = trainers.UnigramTrainer(
            vocab_size=config.vocab_size - BYTES,
            special_tokens=names,
            unk_token=unk,
            show_progress=show_progress,
            max_piece_length=16,
        )
    if config.normalization != "none":
        tok.normalizer = normalizers.NFKC() if config.normalization == "nfkc" else normalizers.NFC()
    t = time.perf_counter()
    try:
        tok.train_from_iterator(stream, trainer)
    except FertilityError:
        raise
    except Exception as e:  # the trainer's own errors are Rust panics or plain Exceptions
        raise FixError(f"training failed: {one_line(e)}") from None
    return tok, time.perf_counter() - t


def _add_byte_pieces(obj: dict, k: int) -> None:
    """The 256 <0xNN> pieces of a Unigram model's byte fallback, right after its k special
    tokens (where SentencePiece puts them), scored below every trained piece."""
    model = obj["model"]
    floor = min((score for _, score in model["vocab"]), default=0.0) - 10.0
    model["vocab"][k:k] = [[f"<0x{b:02X}>", floor] for b in range(BYTES)]
    if model.get("unk_id") is not None and model["unk_id"] >= k:
        model["unk_id"] += BYTES
    model["byte_fallback"] = True
    for a in obj["added_tokens"]:
        if a["id"] >= k:
            a["id"] += BYTES


def _pin_ids(obj: dict, wanted: dict[str, int]) -> None:
    """Give each special token its old id where it lies inside the new vocabulary.

    Ids are positions; BPE merges are pairs of strings and Unigram pieces carry their own
    scores, so permuting ids changes no tokenization. Unpinned tokens keep their order.
    """
    model = obj["model"]
    is_bpe = model["type"] == "BPE"
    entries = sorted(model["vocab"].items(), key=lambda kv: kv[1]) if is_bpe else model["vocab"]
    pos = {e[0]: i for i, e in enumerate(entries)}
    size = len(entries)
    pinned = {old: pos[t] for t, old in wanted.items() if t in pos and 0 <= old < size}
    taken = set(pinned.values())
    rest = iter(i for i in range(size) if i not in taken)
    perm = [pinned[j] if j in pinned else next(rest) for j in range(size)]  # new j <- old perm[j]
    new_id = {old: j for j, old in enumerate(perm)}
    if is_bpe:
        model["vocab"] = {entries[old][0]: j for j, old in enumerate(perm)}
    else:
        model["vocab"] = [entries[old] for old in perm]
        if model.get("unk_id") is not None:
            model["unk_id"] = new_id[model["unk_id"]]
    for a in obj["added_tokens"]:
        a["id"] = new_id[a["id"]]
    obj["added_tokens"].sort(key=lambda a: a["id"])


def _train_sp(
    config: FixConfig, specials, unk: str, stream, max_doc_bytes: int, show_progress: bool
) -> tuple[bytes, float]:
    """A SentencePiece model with byte fallback; specials are control symbols.

    SentencePiece has no NFC rule: with "nfc" the training text is NFC-normalised here and the
    model's rule is identity (it round-trips any text; give it NFC text for the figures the
    report shows). "nfkc" uses SentencePiece's own nfkc rule.
    """

    # deferred: sentencepiece only for its files
    import sentencepiece as spm

    old = dict(specials)
    control = [t for t, _ in specials if t != unk]
    unk_id = old.get(unk)
    if unk_id is None or unk_id >= config.vocab_size:
        unk_id = len(control)  # the specials fill the lowest ids in order, around the UNK
    nfc = config.normalization == "nfc"
    sentences = (unicodedata.normalize("NFC", t) if nfc else t for batch in stream for t in batch)
    buf = io.BytesIO()
    t = time.perf_counter()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences,
            model_writer=buf,
            model_type=config.model,
            vocab_size=config.vocab_size,
            hard_vocab_limit=False,
            byte_fallback=True,
            character_coverage=0.9995,
            normalization_rule_name="nfkc" if config.normalization == "nfkc" else "identity",
            split_by_unicode_script=True,
            split_by_number=True,
            split_digits=True,
            split_by_whitespace=True,
            allow_whitespace_only_pieces=True,
            remove_extra_whitespaces=False,
            add_dummy_prefix=True,
            max_sentencepiece_length=16,
            max_sentence_length=min(max(4192, max_doc_bytes + 16), 1 << 22),
            input_sentence_size=0,
            num_threads=os.cpu_count() or 1,
            unk_id=unk_id,
            unk_piece=unk,
            bos_id=-1,
            eos_id=-1,
            pad_id=-1,
            control_symbols=control,
            minloglevel=0 if show_progress else 2,
        )
    except FertilityError:
        raise
    except Exception as e:
        msg = one_line(e)
        raise FixError(f"SentencePiece training failed: {msg[-300:]}") from None
    return buf.getvalue(), time.perf_counter() - t
