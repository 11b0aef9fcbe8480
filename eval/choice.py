"""Multiple choice from JSONL: each choice scored by its summed log-likelihood given the context.

One item per line: {"context": str, "choices": [str, ...], "label": int, "id"?: str, "lang"?: str}
(docs/EVAL.md). A choice is appended to the context exactly as written.

Scoring a choice (ModelScorer)
    The text context + choice is encoded once, as the model would see it in running text, and
    the tokens whose span ends after the context's last character are the choice's tokens (a
    token that straddles the boundary belongs to the choice, so every character of the choice
    is inside a scored token). As lm-evaluation-harness conditions (docs/EVAL.md), a non-empty
    context is given as it stands, and an empty one is the run's document separator alone
    (without a separator, a token at position 0 has no context and is not scored). A
    sequence longer than the model's context keeps its last context + 1 tokens.

Metrics (`score_task`)
    acc              argmax of the summed log-likelihood is the label (first index wins ties)
    acc_norm_chars   argmax of log-likelihood / the choice's length in characters (code points)
    acc_norm_bytes   argmax of log-likelihood / the choice's length in UTF-8 bytes
                     (both lengths without the choice's leading whitespace: lm-eval's target
                     delimiter, which it leaves out of the length it divides by)
    chance           mean over items of 1 / number of choices
    ci95             Wilson score interval of acc over items (binomial, 95%)
    verdict          from acc's interval against chance (VERDICTS)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from fertility.errors import EvalError
from fertility.eval import nll
from fertility.stats import wilson

if TYPE_CHECKING:  # a task's row of eval's JSON (fertility/schemas/eval.py), for mypy only
    from fertility.schemas.eval import TaskScores

# A verdict is one of these; the last is followed by the item count, "(40 items)": an
# interval that includes chance says only that these items cannot tell, not that the model
# is at chance.
VERDICTS = ("above chance", "below chance", "not distinguishable from chance")


@dataclass(frozen=True)
class Item:
    context: str
    choices: tuple[str, ...]
    label: int
    id: str | None = None
    lang: str | None = None
    line: int = 0  # 1-based line of the task file, for messages


# The whitespace JSON allows between values; a line of only these is blank.
JSON_SPACE = " \t\r\n"


def jsonl_lines(text: str) -> list[str]:
    """The lines of JSON Lines text: split on \n only (a \r before it is JSON whitespace).
    Not str.splitlines(), which also splits at U+2028, U+2029, U+0085, \x1c-\x1e, \v and
    \f: JSON allows the first three unescaped inside a string, so a valid line would be cut
    in two. A trailing newline ends the last line rather than starting an empty one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def load_items(path: str | Path) -> list[Item]:
    """Read and validate a task file; any bad line raises EvalError naming file and line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise EvalError(f"{path}: task file not found") from None
    except OSError as e:
        raise EvalError(f"{path}: cannot read task file ({e.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise EvalError(f"{path}: not UTF-8 (byte {e.start})") from None
    items: list[Item] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(jsonl_lines(text), 1):
        if not line.strip(JSON_SPACE):
            continue
        item = parse_item(line, f"{path}:{n}", n)
        if item.id is not None:
            if item.id in seen:
                raise EvalError(f"{path}:{n}: id {item.id!r} repeats line {seen[item.id]}")
            seen[item.id] = n
        items.append(item)
    if not items:
        raise EvalError(f"{path}: no items (one JSON object per line expected)")
    return items


def parse_item(line: str, where: str, n: int = 0) -> Item:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise EvalError(f"{where}: not valid JSON ({e.msg})") from None
    except RecursionError:  # the decoder recurses per nesting level: [[[[...]]]]
        raise EvalError(f"{where}: JSON nested too deeply to read") from None
    except ValueError:  # Python refuses to convert an integer of over 4300 digits
        raise EvalError(
            f"{where}: JSON number with too many digits (over {sys.get_int_max_str_digits()})"
        ) from None
    if not isinstance(rec, dict):
        raise EvalError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    context, choices, label = rec.get("context"), rec.get("choices"), rec.get("label")
    if not isinstance(context, str):
        raise EvalError(f'{where}: "context" must be a string')
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise EvalError(f'{where}: "choices" must be a list of strings')
    if len(choices) < 2:
        raise EvalError(f"{where}: {len(choices)} choice(s); at least 2 are needed")
    empty = [i for i, c in enumerate(choices) if not c]
    if empty:
        raise EvalError(f"{where}: choice {empty[0]} is empty")
    if isinstance(label, bool) or not isinstance(label, int):
        raise EvalError(f'{where}: "label" must be an integer index into "choices", got {label!r}')
    if not 0 <= label < len(choices):
        raise EvalError(
            f"{where}: label {label} is out of range for {len(choices)} choices (0-based)"
        )
    for key in ("id", "lang"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            raise EvalError(f'{where}: "{key}" must be a string')
    return Item(context, tuple(choices), label, rec.get("id"), rec.get("lang"), n)


class Scorer(Protocol):
    def loglikelihoods(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Summed log-probability (nats) of each continuation given its context."""
        ...


class ModelScorer:
    """Scores (context, continuation) pairs with a Transformer and the run's tokenizer."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        context: int,
        prefix_id: int | None,
        batch_tokens: int | None = None,
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.context, self.prefix_id = context, prefix_id
        self.batch_tokens = batch_tokens
        self.truncated = 0  # pairs that lost tokens to the context limit

    def loglikelihoods(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        encs = self.tokenizer.encode_batch([c + x for c, x in pairs])
        seqs, masks = [], []
        for (ctx, _), enc in zip(pairs, encs):
            prefix = [] if ctx or self.prefix_id is None else [self.prefix_id]
            ids = np.concatenate((np.array(prefix, np.int64), np.asarray(enc.ids, np.int64)))
            mask = np.concatenate((np.zeros(len(prefix), bool), np.asarray(enc.ends) > len(ctx)))
            if len(ids) > self.context + 1:
                self.truncated += 1
                ids, mask = ids[-(self.context + 1) :], mask[-(self.context + 1) :]
            seqs.append(ids)
            masks.append(mask[1:])  # position 0 is never a prediction
        logps = nll.token_logprobs(self.model, seqs, batch_tokens=self.batch_tokens)
        return [float(lp[m].sum()) for lp, m in zip(logps, masks)]


def verdict(ci: tuple[float, float], chance: float, n: int) -> str:
    lo, hi = ci
    if n > 0 and lo > chance:
        return VERDICTS[0]
    if n > 0 and hi < chance:
        return VERDICTS[1]
    return f"{VERDICTS[2]} ({n} items)"


def score_task(items: Sequence[Item], scorer: Scorer, name: str = "task") -> TaskScores:
    """The task's row: n, acc, acc_norm_chars, acc_norm_bytes, chance, ci95, verdict."""
    pairs = [(it.context, c) for it in items for c in it.choices]
    ll = np.asarray(scorer.loglikelihoods(pairs), dtype=float)
    if len(ll) != len(pairs):
        raise ValueError(f"scorer returned {len(ll)} values for {len(pairs)} pairs")
    k = max(len(it.choices) for it in items)
    # [items, k] tables padded with -inf (never the argmax) for items with fewer choices
    LL = np.full((len(items), k), -np.inf)
    chars = np.ones((len(items), k))
    nbytes = np.ones((len(items), k))
    pos = 0
    for i, it in enumerate(items):
        m = len(it.choices)
        LL[i, :m] = ll[pos : pos + m]
        # lengths without the leading whitespace: lm-eval's target delimiter, which it puts
        # before each choice and leaves out of the length (an all-space choice keeps its own)
        bare = [c.lstrip() or c for c in it.choices]
        chars[i, :m] = [len(c) for c in bare]
        nbytes[i, :m] = [len(c.encode("utf-8")) for c in bare]
        pos += m
    labels = np.array([it.label for it in items])
    n = len(items)
    right = {
        "acc": LL.argmax(1) == labels,
        "acc_norm_chars": (LL / chars).argmax(1) == labels,
        "acc_norm_bytes": (LL / nbytes).argmax(1) == labels,
    }
    chance = float(np.mean([1.0 / len(it.choices) for it in items]))
    acc = {key: float(ok.mean()) for key, ok in right.items()}
    ci = wilson(int(right["acc"].sum()), n)
    return {
        "task": name,
        "n": n,
        "chance": chance,
        "acc": acc["acc"],
        "acc_norm_chars": acc["acc_norm_chars"],
        "acc_norm_bytes": acc["acc_norm_bytes"],
        "ci95": list(ci),
        "ci95_norm_chars": list(wilson(int(right["acc_norm_chars"].sum()), n)),
        "ci95_norm_bytes": list(wilson(int(right["acc_norm_bytes"].sum()), n)),
        "verdict": verdict(ci, chance, n),
        "langs": sorted({it.lang for it in items if it.lang}),
    }
