"""SentencePiece extension: new pieces appended to the base's model proto, every id kept.

New pieces are learned by training a SentencePiece model of the base's type (BPE or Unigram)
on the target text (already normalised by the base's normaliser, so trained with the identity
rule and the base's dummy-prefix setting). Its pieces that the base lacks and that are made of
the target scripts' letters, combining marks, joiners and ``▁`` are appended in the order the
trained model ranks them, at ids after the base's:

- BPE: SentencePiece merges the adjacent pair whose joined piece has the highest score, so
  every new piece gets a score below all of the base's (base merges first), in the trained
  order; the target script's single characters the base lacks come first, since a BPE piece
  can only be built from pieces the vocabulary holds.
- Unigram: the trained model's log-probabilities, as trained.

Pieces are appended as extra ``pieces`` fields (field 1) of the ModelProto: protobuf merges
repeated fields in the order they appear, so the base's pieces keep their ids.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from fertility.errors import ExtendError, one_line
from fertility.tokenizers.patterns import compile_pattern

BOUNDARY = "\u2581"  # ▁, SentencePiece's whitespace


@dataclass
class Learned:
    model: bytes  # the extended ModelProto
    new: dict[int, str]  # new id -> piece
    spelling: dict[int, list[int]]  # new id -> the base ids that spell its text
    pieces: int  # pieces the trained model offered


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _piece_field(piece: str, score: float) -> bytes:
    raw = piece.encode("utf-8")
    body = b"\x0a" + _varint(len(raw)) + raw + b"\x15" + struct.pack("<f", score)
    return b"\x0a" + _varint(len(body)) + body


def learn(base, texts: list[str], add: int, scripts: list[str]) -> Learned:
    # deferred: sentencepiece only for its files
    import sentencepiece as spm

    cfg = base.config()
    kind = cfg["model"]
    if kind not in ("bpe", "unigram"):
        raise ExtendError(
            f"{base.spec}: a SentencePiece {kind} model; extend takes BPE or "
            "Unigram SentencePiece models"
        )
    data = base.path.read_bytes()
    sp = spm.SentencePieceProcessor(model_file=str(base.path))
    have = {sp.id_to_piece(i) for i in range(sp.get_piece_size())}
    letters = "".join(f"\\p{{sc={s}}}" for s in scripts)
    ok = compile_pattern(f"{BOUNDARY}?[{letters}][{letters}\\p{{M}}\\u200c\\u200d]*").fullmatch

    buf = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=buf,
            model_type=kind,
            vocab_size=add + add // 4 + 64,
            hard_vocab_limit=False,
            character_coverage=1.0,
            normalization_rule_name="identity",
            add_dummy_prefix=cfg["normalizer"]["add_dummy_prefix"],
            remove_extra_whitespaces=False,
            split_by_unicode_script=True,
            max_sentencepiece_length=16,
            input_sentence_size=0,
            bos_id=-1,
            eos_id=-1,
            pad_id=-1,
            unk_id=0,
            minloglevel=2,
        )
    except Exception as e:  # sentencepiece raises RuntimeError with its log line
        raise ExtendError(
            f"SentencePiece training on the target text failed: {one_line(e)[-300:]}"
        ) from None
    trained = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    offered = [
        (trained.id_to_piece(i), trained.get_score(i))
        for i in range(trained.get_piece_size())
        if not (trained.is_unknown(i) or trained.is_control(i) or trained.is_byte(i))
    ]
    fresh = [(p, s) for p, s in offered if p not in have and ok(p)]
    if kind == "bpe":  # characters first (pieces are built from them), then merges in order
        fresh = [x for x in fresh if len(x[0]) == 1] + [x for x in fresh if len(x[0]) > 1]
    else:
        fresh.sort(key=lambda x: -x[1])
    fresh = fresh[:add]
    floor = min(sp.get_score(i) for i in range(sp.get_piece_size()))
    first = sp.get_piece_size()
    tail = b"".join(
        _piece_field(p, floor - 1.0 - k if kind == "bpe" else s) for k, (p, s) in enumerate(fresh)
    )
    new = {first + k: p for k, (p, _) in enumerate(fresh)}
    spelling = {}
    for i, p in new.items():
        ids = sp.encode(p.replace(BOUNDARY, " "))
        if not p.startswith(BOUNDARY) and ids and sp.id_to_piece(ids[0]) == BOUNDARY:
            ids = ids[1:]  # the dummy prefix the encoder adds to a word-internal piece
        spelling[i] = ids
    return Learned(data + tail, new, spelling, len(offered))
