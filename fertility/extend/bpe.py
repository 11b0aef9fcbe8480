"""Byte-level BPE extension: new merges appended after the base's, every base id kept.

The base (a tiktoken rank file or a byte-level BPE tokenizer.json) is read into one form,
`ByteBPE`: the bytes of every id, the merges in rank order, the special tokens and the split
regex. A rank file lists no merges; they are listed as every split of each token into two
tokens, in rank order (`merges_from_ranks`), so the tokenizer.json written for a rank-file base
gives tiktoken's ids, and the rank file written beside it the same.

Learning (`learn`): the target text is cut with the (widened) split, each piece is encoded with
the base as it is (base merges first), and a BPE trainer learns new merges greedily over those
base tokens: each base token is one symbol, so every new token is a pair of base or earlier new
tokens and its spelling in base ids is known. Only pieces made of the target scripts' letters,
combining marks, joiners and one leading space are learned from, so every new token holds
bytes of a target-script character and never matches text without one.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from fertility.errors import ExtendError, one_line
from fertility.tokenizers.base import merges_from_ranks, whole_chars
from fertility.tokenizers.hf import byte_level_bytes, byte_level_texts
from fertility.tokenizers.hf_json import byte_level_bpe, special_added_token, split_then_bytes
from fertility.tokenizers.kinds import extension

# Base tokens become private-use characters (planes 15-16) for the trainer: one symbol each.
_SYMBOL0 = 0xF0000
_SYMBOLS = 0x10FFFE - _SYMBOL0

# Published rank-file encodings keep their special tokens outside the file; a rank file of
# exactly that size with that split reserves them (new ids start after the last), so
# `<|endoftext|>` or Llama 3's `<|begin_of_text|>` keeps its id.
# {(split family, number of ranks): {special: id}}
_LLAMA3 = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|step_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    "<|image|>",
]
_LLAMA3 += [f"<|reserved_special_token_{i}|>" for i in range(2, 2 + 256 - len(_LLAMA3))]
KNOWN_SPECIALS = {
    ("gpt2", 50256): {"<|endoftext|>": 50256},
    ("cl100k", 100256): {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    ("cl100k", 128000): {t: 128000 + i for i, t in enumerate(_LLAMA3)},  # Llama 3
    ("o200k", 199998): {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}


@dataclass
class ByteBPE:
    tokens: dict[int, bytes]  # id -> bytes of every BPE token (no specials)
    merges: list[tuple[bytes, bytes]]  # in rank order
    specials: dict[str, int]
    regex: str  # the split, as the base has it
    hf: dict | None = field(default=None, repr=False)  # the base tokenizer.json (hf only)

    @property
    def end(self) -> int:
        """The first id after every base id (BPE tokens and specials)."""
        return max([*self.tokens, *self.specials.values()], default=-1) + 1


# ---------------------------------------------------------------- reading the base


def from_tokenizer(tok) -> ByteBPE:
    """The base as a ByteBPE; ExtendError naming what is not supported otherwise."""
    cfg = tok.config() or {}
    how = extension(tok)  # what the base's kind declares (fertility.tokenizers.kinds)
    if how is not None and how.method == "ranks":  # Tekken: tiktoken ranks after its specials
        return _from_ranks(tok, cfg)
    if (
        how is not None
        and how.method == "tokenizer_json"
        and cfg.get("model") in ("bpe", "BPE")
        and cfg.get("byte_level")
    ):
        return _from_hf(tok)
    what = (
        "SentencePiece"
        if how is not None and how.method == "sp_model"
        else f"{tok.kind} {cfg.get('model') or ''}".strip()
    )
    raise ExtendError(
        f"{tok.spec}: extending a {what} tokenizer is not supported; extend "
        "takes byte-level BPE (tiktoken rank files, byte-level BPE tokenizer.json)"
    )


def _from_ranks(tok, cfg: dict) -> ByteBPE:
    specials = dict(tok.special_tokens)
    # a set: `in specials.values()` searches the values one by one, and for Tekken's 1,000
    # specials and 131,072 ids that was 2.9 s of extend's 16
    special_ids = set(specials.values())
    table = tok.vocabulary_bytes()
    ranks = {b: i for i, b in enumerate(table) if b and i not in special_ids}
    if not specials:
        specials = dict(KNOWN_SPECIALS.get((str(cfg.get("pattern")), len(ranks)), {}))
    return ByteBPE(
        dict((i, b) for b, i in ranks.items()),
        merges_from_ranks(ranks),
        specials,
        cfg["pattern_regex"],
    )


def _from_hf(tok) -> ByteBPE:
    obj = json.loads(tok.path.read_text(encoding="utf-8"))
    model = obj["model"]
    try:
        tokens = {int(i): byte_level_bytes(s) for s, i in model["vocab"].items()}
        pairs: list[tuple[str, str]] = [
            tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)  # type: ignore[misc]
            for m in model.get("merges") or []
        ]
        merges = [(byte_level_bytes(a), byte_level_bytes(b)) for a, b in pairs]
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise ExtendError(f"{tok.path}: not a byte-level BPE vocabulary ({one_line(e)})") from None
    added = {a["id"]: a["content"] for a in obj.get("added_tokens") or []}
    for i in added:
        tokens.pop(i, None)
    return ByteBPE(tokens, merges, {c: i for i, c in added.items()}, _hf_regex(obj), obj)


def _hf_regex(obj: dict) -> str:
    """The split regex of a byte-level tokenizer.json: its Split's, or GPT-2's when ByteLevel
    itself splits (use_regex)."""
    pre = obj.get("pre_tokenizer") or {}
    for p in [pre, *(pre.get("pretokenizers") or [])]:
        if (
            p.get("type") == "Split"
            and isinstance(p.get("pattern"), dict)
            and "Regex" in p["pattern"]
        ):
            return p["pattern"]["Regex"]
        if p.get("type") == "ByteLevel" and p.get("use_regex", True):
            return BYTELEVEL_REGEX
    raise ExtendError("tokenizer.json: its pre-tokenizer has no split regex extend can widen")


# The split ByteLevel(use_regex=true) applies (tokenizers' byte_level.rs).
BYTELEVEL_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


# ---------------------------------------------------------------- writing


def hf_json(
    bpe: ByteBPE, regex: str, new: dict[int, bytes], merges: list[tuple[bytes, bytes]]
) -> dict:
    """tokenizer.json of the base with `regex` as its split and the `new` tokens appended, made
    by the learned `merges` (a tokenizer.json base) or, for a rank-file base, by every split
    of each new token (as the base's merges are; see merges_from_ranks)."""

    if bpe.hf is not None:
        obj = json.loads(json.dumps(bpe.hf))
        model = obj["model"]
        pairs = model.get("merges") or []
        as_str = bool(pairs) and isinstance(pairs[0], str)
        obj["pre_tokenizer"] = _patched_pre(obj.get("pre_tokenizer"), regex)
    else:
        obj = byte_level_bpe(bpe.tokens, bpe.merges, regex, bpe.specials)
        model, as_str = obj["model"], False
    model["vocab"].update(zip(byte_level_texts(new.values()), new))
    if bpe.hf is None:  # rank semantics: every split of each new token, as for the base's
        ranks = {b: i for i, b in [*bpe.tokens.items(), *new.items()]}
        merges = merges_from_ranks(ranks, [new[i] for i in sorted(new)])
    halves = byte_level_texts(x for pair in merges for x in pair)
    pairs = zip(halves[0::2], halves[1::2])
    model["merges"] = list(model["merges"]) + [f"{a} {b}" if as_str else [a, b] for a, b in pairs]
    _close_ids(obj)
    return obj


def _close_ids(obj: dict) -> None:
    """Make the model's ids 0..n-1 without a gap: `tokenizers` numbers added tokens that the
    model's vocabulary lacks from its size, so new ids after the specials would move them.
    Each special goes into the model's vocabulary at its own id (the split never yields a
    piece that is a whole special token, so BPE never produces one), and an id nobody holds
    (tiktoken's unpublished reserved ids) becomes the special token ``<|reserved_ID|>``."""
    vocab, added = obj["model"]["vocab"], obj.setdefault("added_tokens", [])
    for a in added:
        vocab.setdefault(a["content"], a["id"])
    held = set(vocab.values())
    for i in range(max(held, default=-1) + 1):
        if i not in held:
            name = f"<|reserved_{i}|>"
            vocab[name] = i
            added.append(special_added_token(i, name))
    added.sort(key=lambda a: a["id"])


def _patched_pre(pre: dict | None, regex: str) -> dict | None:
    """The base's pre-tokenizer with its split regex replaced (ByteLevel's own split becomes
    a Split with the widened regex in front of a non-splitting ByteLevel)."""
    if pre is None:
        return None
    if (
        pre.get("type") == "Split"
        and isinstance(pre.get("pattern"), dict)
        and "Regex" in pre["pattern"]
    ):
        return {**pre, "pattern": {"Regex": regex}}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        return split_then_bytes(regex, bool(pre.get("add_prefix_space")))
    if pre.get("type") == "Sequence":
        return {
            **pre,
            "pretokenizers": [_patched_pre(p, regex) for p in pre.get("pretokenizers") or []],
        }
    return pre


def tekken_json(path, bpe: ByteBPE, new: dict[int, bytes]) -> dict:
    """The base's Tekken file with the new tokens as vocab entries after the ones in use.

    mistral-common reads the first ``default_vocab_size - default_num_special_tokens``
    entries as ranks (id = rank + specials); the entries past them, unused, are dropped so the
    new ranks follow the used ones, and ``default_vocab_size`` grows by the new tokens."""
    obj = json.loads(path.read_text(encoding="utf-8"))
    cfg = obj["config"]
    k = int(cfg["default_num_special_tokens"])
    used = int(cfg["default_vocab_size"]) - k
    vocab = obj["vocab"][:used]
    for i, b in sorted(new.items()):
        vocab.append(
            {
                "rank": i - k,
                "token_bytes": base64.b64encode(b).decode(),
                "token_str": b.decode("utf-8") if _whole(b) else None,
            }
        )
    obj["vocab"] = vocab
    cfg["default_vocab_size"] = used + k + len(new)
    cfg["num_vocab_tokens"] = len(vocab)
    return obj


def _whole(b: bytes) -> bool:
    return whole_chars(b)


def rank_file(bpe: ByteBPE, new: dict[int, bytes]) -> str:
    """tiktoken's ``base64 rank`` lines: the base's ranks, then the new tokens'."""
    items = sorted([*bpe.tokens.items(), *new.items()])
    return "".join(f"{base64.b64encode(b).decode()} {i}\n" for i, b in items)


# ---------------------------------------------------------------- learning


@dataclass
class Learned:
    new: dict[int, bytes]  # new id -> bytes
    merges: list[tuple[bytes, bytes]]  # appended after the base's
    spelling: dict[int, list[int]]  # new id -> the base ids it replaces
    pieces: int  # distinct pieces learned from


def learn(bpe: ByteBPE, base_ids: dict[str, list[int]], counts: Counter, add: int) -> Learned:
    """`add` new tokens over the base encoding `base_ids` of the pieces in `counts`."""
    # deferred: the Rust tokenizers library only when used
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    used = sorted({i for ids in base_ids.values() for i in ids})
    if len(used) > _SYMBOLS:
        raise ExtendError(f"the target text uses {len(used)} base tokens; at most {_SYMBOLS}")
    symbol = {i: chr(_SYMBOL0 + k) for k, i in enumerate(used)}
    back = {s: i for i, s in symbol.items()}
    words = {p: "".join(symbol[i] for i in ids) for p, ids in base_ids.items()}

    def stream() -> Iterable[list[str]]:
        batch: list[str] = []
        for p, n in counts.items():
            batch.extend([words[p]] * n)
            if len(batch) >= 4096:
                yield batch
                batch = []
        yield batch

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # Some learned merges give bytes the base already has, or an earlier new token's: ask for
    # more and keep merges until `add` distinct new tokens are made.
    trainer = trainers.BpeTrainer(
        vocab_size=len(used) + add + add // 4 + 16,
        show_progress=False,
        initial_alphabet=list(symbol.values()),
    )
    tok.train_from_iterator(stream(), trainer)
    raw = json.loads(tok.to_str())["model"]["merges"]
    pairs = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in raw]

    have = {b: i for i, b in bpe.tokens.items()}
    new: dict[int, bytes] = {}
    spelling: dict[int, list[int]] = {}
    merges: list[tuple[bytes, bytes]] = []
    next_id = bpe.end
    for a, b in pairs:
        if len(new) >= add:
            break
        ab, bb = (b"".join(bpe.tokens[back[c]] for c in s) for s in (a, b))
        merges.append((ab, bb))
        if ab + bb in have:
            continue
        have[ab + bb] = next_id
        new[next_id] = ab + bb
        spelling[next_id] = [back[c] for c in a + b]
        next_id += 1
    return Learned(new, merges, spelling, len(counts))
