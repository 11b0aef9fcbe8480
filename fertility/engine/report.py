"""merge: the Report of the counts datatrove tasks wrote (every task's, in task order),
built with fertility.measure.build_report, the code analyze() ends with."""

from __future__ import annotations

import numpy as np

from fertility.engine.step import COUNTS_FOLDER, load_keys
from fertility.errors import FertilityError
from fertility.measure import Report, build_report
from fertility.measure.counters import TokenizerAccumulator
from fertility.measure.passes import PassState


def merge(
    output,
    keys=None,
    *,
    toks=None,
    tasks: int | None = None,
    settings: dict | None = None,
) -> Report:
    """The Report of the counts the tasks of a MeasureCorpus, MeasureDocuments or
    TokenizeCorpus step wrote into `output` (every task's, in task order; `tasks`: how many
    there must be), for the tokenizers of `keys` (reloaded here) or `toks` (loaded already).
    Counts of other tokenizers are refused: by fingerprint (by label in counts written before
    fingerprints were). Languages are numbered in order of first appearance, task by task."""
    from fertility.engine import codec

    names = codec.saved(output, COUNTS_FOLDER)
    if not names or (tasks is not None and len(names) != tasks):
        raise FertilityError(
            f"{output}: {len(names)} task counts, expected {tasks or 'some'}; "
            "run the unfinished tasks first"
        )
    toks = toks if toks is not None else load_keys(keys)
    accs = [TokenizerAccumulator(t) for t in toks]
    settings = settings or {}
    state = PassState(
        settings.get("seed", 0), settings.get("detail_docs"), settings.get("keep_docs", 0)
    )
    summary: dict | None = None
    for rank, name in enumerate(names):
        where = f"{output}/{name}"  # name: counts/NNNNN
        part = codec.load(output, name, where=where)
        theirs = part.get("fingerprints", part["labels"])
        ours = [t.fingerprint if "fingerprints" in part else t.label for t in toks]
        if theirs != ours:
            raise FertilityError(
                f"{where}: counts of tokenizers {part['labels']}, "
                f"not of {[t.label for t in toks]} (another tokenizer file)"
            )
        ids = [
            state.langs.setdefault(lang, len(state.langs))
            for lang in sorted(part["langs"], key=part["langs"].get)
        ]
        for acc, exported in zip(accs, part["accs"]):
            acc.merge(_renumber(exported, ids, len(state.langs)))
        rows = part["doc_rows"]  # a list: counts written before rows were packed
        rows = rows if isinstance(rows, list) else codec.unpack_rows(rows, where)
        for row in rows:
            state.doc_rows.append(
                {**row, "order": (rank if "engine" in part["summary"] else 0, row["order"])}
            )
        state.docs_table_full |= part["docs_table_full"]
        summary = _summary(summary, part["summary"])
    assert summary is not None, "names is not empty"
    return build_report(accs, state, summary, toks, settings)


def _renumber(exported: dict, ids: list[int], n_langs: int) -> dict:
    """A task's accumulator export with its language ids replaced by the merged ones
    (ids[task's id] = merged id): the rows of the per-language tables and the keys of the
    per-language dicts."""
    out = dict(exported)
    for name in ("counts", "boot", "boot_running"):
        tables = out[name]
        lang = np.zeros((n_langs, tables.lang.shape[1]), np.int64)
        lang[ids[: len(tables.lang)]] = tables.lang
        tables.lang = lang
    out["vocab_lang"] = {ids[k]: v for k, v in exported["vocab_lang"].items()}
    out["roundtrip"] = {ids[k]: v for k, v in exported["roundtrip"].items()}
    return out


def _summary(merged: dict | None, part: dict) -> dict:
    """The corpus object: a MeasureCorpus task read the whole corpus, so task 0's is the
    run's; a MeasureDocuments task's counts are its own share, so they add up."""
    if "engine" not in part:
        return merged or part
    if merged is None:
        return dict(part)
    return {k: merged[k] + part[k] if k != "engine" else v for k, v in part.items()}
