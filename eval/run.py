"""`fertility eval`: open a run folder, score held-out text and task files, render the result.

    result = evaluate("runs/bn-tiny", tasks=["examples/tasks/cloze_bn.jsonl"])
    print(render_text(result))            # or render_json(result): schema fertility.eval/1

The run folder is the one `fertility pretrain` writes (run.json, tokenizer/, data/heldout.jsonl,
checkpoints/). Every number is defined in docs/EVAL.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from fertility.corpus import Corpus, CorpusOptions
from fertility.errors import EvalError, FertilityError
from fertility.eval import base as base_compare
from fertility.eval import choice, nll
from fertility.shards.parts import choose_separator
from fertility.tokenizers import load_tokenizer
from fertility.trainer.checkpoint import load_model
from fertility.trainer.distributed import resolve_device
from fertility.trainer.model import Transformer
from fertility.trainer.rundir import RUN_SCHEMA, RunDir

if TYPE_CHECKING:  # eval's JSON (fertility/schemas/eval.py), for mypy only
    from fertility.schemas import eval as eval_json

SCHEMA: Final = "fertility.eval/1"
# A random-initialised model predicts close to uniformly: NLL ~ ln(V) plus half the variance
# of its logits. A twin this far above ln(V) (nats per token) means the init itself is off
# and beating the twin says little.
TWIN_MARGIN = 0.5


@dataclass
class Run:
    dir: Path
    meta: dict[str, Any]  # run.json
    model: Transformer  # eval mode
    manifest: dict[str, Any]  # the checkpoint's state.json
    tokenizer: Any  # fertility.tokenizers.base.Tokenizer
    tokenizer_path: Path
    separator: int | None  # id the trainer put between documents, None if none
    context: int  # tokens of context per window (the training seq_len)


def read_run_json(run_dir: str | Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise EvalError(f"{run_dir}: no such run folder")
    layout = RunDir(run_dir)
    path = layout.run_json
    try:
        meta = layout.read_run_json()
    except FileNotFoundError:
        raise EvalError(
            f"{path}: missing (not a run folder written by `fertility pretrain`)"
        ) from None
    except (OSError, ValueError) as e:
        raise EvalError(f"{path}: unreadable ({e})") from None
    if not isinstance(meta, dict) or meta.get("schema") != RUN_SCHEMA:
        raise EvalError(f"{path}: not a {RUN_SCHEMA} manifest")
    tok = meta.get("tokenizer")
    if not isinstance(tok, dict) or not (
        isinstance(tok.get("path"), str) or isinstance(tok.get("spec"), str)
    ):
        raise EvalError(f"{path}: names no tokenizer (tokenizer.path or tokenizer.spec)")
    return meta


def open_tokenizer(run_dir: str | Path, meta: dict[str, Any]) -> tuple[Any, Path]:
    """The run's own copy of its tokenizer (or, for a spec with no local file such as
    tiktoken:NAME, the spec itself), checked against the fingerprint in run.json."""

    info = meta["tokenizer"]
    if info.get("path"):
        path = Path(run_dir) / info["path"]
        if not path.exists():
            raise EvalError(f"{path}: the run's tokenizer is missing")
        spec = str(path)
    else:
        spec = info["spec"]
        path = Path(spec)
    try:
        tok = load_tokenizer(spec, pattern=info.get("pattern"))
    except FertilityError as e:
        raise EvalError(str(e)) from None
    want = meta["tokenizer"].get("fingerprint")
    if want and tok.fingerprint != want:
        raise EvalError(
            f"{path}: tokenizer fingerprint {tok.fingerprint[:12]} differs from "
            f"run.json's {str(want)[:12]} (the file was changed)"
        )
    return tok, path


def open_run(
    run_dir: str | Path, *, step: int | None = None, device: str = "cpu", context: int | None = None
) -> Run:
    """Everything evaluation and export need from a run folder; EvalError when unusable.

    `device` is "auto" (CUDA when available), "cpu", "cuda" or "cuda:N"; `context` overrides
    the training seq_len as the scoring window (capped by the model's max_seq_len)."""

    run_dir = Path(run_dir)
    meta = read_run_json(run_dir)
    tok, tok_path = open_tokenizer(run_dir, meta)
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise EvalError(f"{run_dir}: unknown device {device!r} (auto, cpu, cuda or cuda:N)")
    try:
        model, manifest = load_model(run_dir, step=step, device=resolve_device(device))
    except EvalError:
        raise
    except FertilityError as e:
        raise EvalError(str(e)) from None
    except (KeyError, TypeError) as e:
        raise EvalError(f"{RunDir(run_dir).checkpoints}: checkpoint manifest lacks {e}") from None
    fp = manifest.get("tokenizer_fingerprint")
    if isinstance(fp, str) and fp != tok.fingerprint:
        raise EvalError(
            f"{RunDir(run_dir).checkpoints}: checkpoint was trained with tokenizer "
            f"{fp[:12]}, the run's tokenizer is {tok.fingerprint[:12]}"
        )
    if tok.vocab_size > model.cfg.vocab_size:
        raise EvalError(
            f"{tok_path}: tokenizer has {tok.vocab_size} ids, the model only {model.cfg.vocab_size}"
        )
    train = meta.get("train") or {}
    data = meta.get("data")
    if isinstance(data, dict) and "separator" in data:  # what the shards were built with
        sep = data["separator"]
    else:  # a run folder assembled by hand: the rule the trainer would have applied (an
        # id reserved past the vocabulary only if the model has a row for it)
        reserve = tok.vocab_size if model.cfg.vocab_size > tok.vocab_size else None
        sep = choose_separator(dict(tok.special_tokens), train.get("separator", "auto"), reserve)
    seq_len = int(train.get("seq_len") or model.cfg.max_seq_len)
    ctx = min(context or seq_len, model.cfg.max_seq_len)
    return Run(run_dir, meta, model, manifest, tok, tok_path, sep, ctx)


def heldout_documents(run_dir: Path, limit: int | None = None) -> tuple[list[str], list[str], str]:
    """(texts, langs, source) of the run's own held-out split, the first `limit` if given."""
    path = RunDir(run_dir).heldout
    if not path.is_file():
        raise EvalError(f"{path}: missing (no held-out split in this run); pass --corpus")
    texts: list[str] = []
    langs: list[str] = []
    try:
        # newline="\n": lines end at \n only (a \r is JSON whitespace, never a line break)
        with open(path, encoding="utf-8", newline="\n") as f:
            for n, line in enumerate(f, 1):
                if limit is not None and len(texts) >= limit:
                    break
                if not line.strip(choice.JSON_SPACE):
                    continue
                try:
                    rec = json.loads(line)
                    text, lang = rec["text"], rec.get("lang") or "und"
                    if not isinstance(text, str) or not isinstance(lang, str):
                        raise TypeError
                except RecursionError:
                    raise EvalError(f"{path}:{n}: JSON nested too deeply to read") from None
                except (ValueError, KeyError, TypeError, AttributeError):
                    raise EvalError(
                        f'{path}:{n}: not a held-out record {{"text": str, "lang": str}}'
                    ) from None
                texts.append(text)
                langs.append(lang)
    except (OSError, UnicodeDecodeError) as e:
        raise EvalError(f"{path}: unreadable ({e})") from None
    if not texts:
        raise EvalError(f"{path}: the held-out split is empty; pass --corpus")
    return texts, langs, str(path)


def corpus_documents(
    corpus: str | Path | Iterable[str | Path], options: CorpusOptions | None
) -> tuple[list[str], list[str], str]:
    paths = [str(corpus)] if isinstance(corpus, (str, Path)) else [str(p) for p in corpus]
    texts, langs = [], []
    for doc in Corpus(paths, options).documents():
        texts.append(doc.text)
        langs.append(doc.lang)
    return texts, langs, ", ".join(paths)


def evaluate(
    run_dir: str | Path,
    corpus: str | Path | Sequence[str | Path] | None = None,
    tasks: Sequence[str | Path] = (),
    *,
    step: int | None = None,
    device: str = "cpu",
    context: int | None = None,
    lm: bool = True,
    twin_seed: int = 0,
    bootstrap: int = 1000,
    seed: int = 0,
    max_docs: int | None = None,
    corpus_options: CorpusOptions | None = None,
    batch_tokens: int | None = None,
    progress: Callable[[str], None] | None = None,
    base: str | Path | None = None,
) -> eval_json.Eval:
    """Evaluate a run folder; returns the `fertility.eval/1` dict (docs/EVAL.md).

    `base`: a Hugging Face model folder to compare per-language bits per byte with (eval/base.py);
    default: the folder a continued run started from (run.json's init), when it is there.
    The stages: the run and what it is (_header), the language-modelling scores against the
    twin (_score_lm), the base model (_compare_base), the tasks (_score_tasks)."""
    say = progress or (lambda msg: None)
    task_items = [(Path(t), choice.load_items(t)) for t in tasks]  # bad files fail first
    if base is not None and not Path(base).is_dir():
        raise EvalError(f"--base {base}: no such model folder")
    run = open_run(run_dir, step=step, device=device, context=context)
    result = _header(run)
    if lm:
        if corpus is None:
            texts, langs, source = heldout_documents(run.dir, max_docs)
        else:
            opts = corpus_options or CorpusOptions()
            if max_docs:
                opts = dataclasses.replace(opts, max_docs=max_docs)
            texts, langs, source = corpus_documents(corpus, opts)
        _score_lm(result, run, texts, langs, source, twin_seed, bootstrap, seed, batch_tokens, say)
        _compare_base(result, run, base, texts, langs, bootstrap, seed, batch_tokens, say)
    result["tasks"] = _score_tasks(run, task_items, batch_tokens, say)
    return result


def _header(run: Run) -> eval_json.Eval:
    """The result's frame: which run, step, tokenizer and model, and how tokens are scored."""
    model = run.model
    tok = run.meta["tokenizer"]
    return {
        "schema": SCHEMA,
        "run": {
            "dir": str(run.dir),
            "step": run.manifest.get("step"),
            "tokens_seen": run.manifest.get("tokens_seen"),
            "tokenizer": {
                "spec": tok.get("spec"),
                "kind": tok.get("kind"),
                "fingerprint": tok.get("fingerprint"),
                "vocab_size": tok.get("vocab_size"),
            },
            "model": model.cfg.to_dict(),
            "forced": bool(run.meta.get("forced", False)),
            "mix": run.meta.get("mix"),  # the training mix per language (docs/TRAIN.md)
        },
        "reference": {
            "vocab_size": model.cfg.vocab_size,
            "ln_vocab": math.log(model.cfg.vocab_size),
        },
        "scoring": {
            "context": run.context,
            "separator": run.separator,
            "first_token": (
                "separator prepended; every token scored"
                if run.separator is not None
                else "no separator: each document's first token is not scored"
            ),
        },
        "heldout": None,
        "lm": [],
        "base": None,
        "flags": [],
        "tasks": [],
    }


def _score_lm(
    result: eval_json.Eval,
    run: Run,
    texts: list[str],
    langs: list[str],
    source: str,
    twin_seed: int,
    bootstrap: int,
    seed: int,
    batch_tokens: int | None,
    say: Callable[[str], None],
) -> None:
    """The model and its random twin on the same windows: result's heldout, lm and flags."""
    if not texts:
        raise EvalError(f"{source}: no documents to score")
    model = run.model
    say(f"tokenizing {len(texts):,} held-out documents")
    prep = nll.prepare(texts, run.tokenizer, run.context, run.separator)
    if prep.n_tokens == 0:
        raise EvalError(
            f"{source}: no token to score (documents of one token each and no separator)"
        )
    done = [0]

    def tick(name: str) -> Callable[[int], None]:
        def f(k: int) -> None:
            done[0] += k
            say(f"scoring {name}: {done[0]:,}/{len(prep.windows):,} windows")

        return f

    ours = nll.score(model, prep, batch_tokens=batch_tokens, on_batch=tick("model"))
    done[0] = 0
    twin = nll.fresh_twin(model, twin_seed)
    theirs = nll.score(twin, prep, batch_tokens=batch_tokens, on_batch=tick("twin"))
    del twin
    result["heldout"] = {
        "source": source,
        "documents": prep.n_docs,
        "scored_documents": prep.n_docs - prep.unscored_docs,
        "unscored_documents": prep.unscored_docs,
        "windowed_documents": prep.windowed_docs,
        "windows": len(prep.windows),
        "tokens": prep.n_tokens,
        "twin_seed": twin_seed,
        "bootstrap": bootstrap,
    }
    # summarize names its columns per model scored (f"{model}_nll_per_token", ...); with the
    # model and its twin every LmRow column is there
    result["lm"] = cast(
        "list[eval_json.LmRow]",
        nll.summarize(prep, langs, {"model": ours, "twin": theirs}, bootstrap=bootstrap, seed=seed),
    )
    result["flags"] = lm_flags(result["lm"], result["reference"]["ln_vocab"])


def _compare_base(
    result: eval_json.Eval,
    run: Run,
    base: str | Path | None,
    texts: list[str],
    langs: list[str],
    bootstrap: int,
    seed: int,
    batch_tokens: int | None,
    say: Callable[[str], None],
) -> None:
    """Per-language bits per byte against the base model (`base`, else the one a continued
    run started from, when it is there; a flag when it is not): result's base."""
    recorded = (run.meta.get("init") or {}).get("model_dir")
    if base is None and recorded and Path(recorded).is_dir():
        base = recorded
    elif base is None and recorded:
        result["flags"].append(
            {
                "code": "base_model_missing",
                "group": "all",
                "key": "all",
                "message": f"the base model {recorded} (run.json init) is not there: "
                "no comparison with it (--base MODEL_DIR names another copy)",
            }
        )
    if base is None:
        return
    say(f"scoring the base model {base}")
    result["base"] = base_compare.compare(
        base,
        texts,
        langs,
        result["lm"],
        context=run.context,
        device=next(run.model.parameters()).device,
        bootstrap=bootstrap,
        seed=seed,
        batch_tokens=batch_tokens,
    )


def _score_tasks(
    run: Run,
    task_items: list[tuple[Path, list]],
    batch_tokens: int | None,
    say: Callable[[str], None],
) -> list[eval_json.TaskResult]:
    """Multiple-choice accuracy per task file."""
    rows: list[eval_json.TaskResult] = []
    for path, items in task_items:
        say(f"scoring task {path.name}: {len(items)} items")
        scorer = choice.ModelScorer(
            run.model,
            run.tokenizer,
            context=run.context,
            prefix_id=run.separator,
            batch_tokens=batch_tokens,
        )
        scores = choice.score_task(items, scorer, name=path.stem)
        rows.append({**scores, "file": str(path), "truncated": scorer.truncated})
    return rows


def lm_flags(
    rows: Sequence[Mapping[str, Any]], ln_v: float, margin: float = TWIN_MARGIN
) -> list[dict]:
    flags = []
    for r in rows:
        where = "all text" if r["group"] == "all" else f"{r['group']} {r['key']}"
        if r["group"] == "all" and r["twin_nll_per_token"] > ln_v + margin:
            flags.append(
                {
                    "code": "twin_far_above_ln_vocab",
                    "group": r["group"],
                    "key": r["key"],
                    "message": f"the random-initialised twin scores "
                    f"{r['twin_nll_per_token']:.3f} nats/token, more than {margin} above "
                    f"ln(V) = {ln_v:.3f}: its init is far from uniform, so beating it "
                    "proves little; compare with ln(V)",
                }
            )
        ci = r.get("twin_minus_model_ci95")
        if r["nll_per_token"] >= r["twin_nll_per_token"]:
            flags.append(
                {
                    "code": "not_below_twin",
                    "group": r["group"],
                    "key": r["key"],
                    "message": f"{where}: the trained model ({r['nll_per_token']:.3f} "
                    f"nats/token) is not below its random twin "
                    f"({r['twin_nll_per_token']:.3f})",
                }
            )
        elif ci is not None and ci[0] <= 0:
            flags.append(
                {
                    "code": "not_below_twin",
                    "group": r["group"],
                    "key": r["key"],
                    "message": f"{where}: the trained model is below its twin by "
                    f"{r['twin_minus_model']:.3f} nats/token, but the 95% interval of "
                    f"the difference [{ci[0]:.3f}, {ci[1]:.3f}] includes 0",
                }
            )
    return flags


# -- rendering ----------------------------------------------------------------------------
