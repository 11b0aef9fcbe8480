"""Gate policy: what a tokenizer must reach on a corpus before it is used for pretraining.

A policy is TOML. Where it comes from, first match wins:
    1. the file given to `load_policy(path)` (`--policy FILE`): the whole file is the policy,
       except `pyproject.toml` (its `[tool.fertility.gate]` table) and `fertility.toml`
       (its `[gate]` table);
    2. `[gate]` in `fertility.toml` of the working directory;
    3. `[tool.fertility.gate]` in `pyproject.toml` of the working directory;
    4. the built-in default, `fertility/default_policy.toml`.
A user policy is merged over the built-in default key by key (a `[floors.script]` table that
names only Beng keeps every other script's floor); `false` switches a floor or ceiling off.
docs/GATE.md explains every key and every default number.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from fertility.config import read_toml, tomllib
from fertility.errors import PolicyError
from fertility.options import Group, Severity, Uncertain


def _floors(name: str) -> Any:
    pass

    return default_floors()[name]


@dataclass
class Thresholds:
    """Every number a rule compares with. Defaults and reasons: docs/GATE.md; which rule reads
    which: its `@rule(thresholds=...)` declaration (fertility/findings/rules.py)."""

    min_tokens: int = 100  # rows with fewer tokens are too small to judge
    mark_initial_rate: float = 0.02  # mark-split: share of the tokenizer's own pre-tokens
    mark_initial_token_rate: float = 0.25  # share of tokens: merge-starvation (split clean)
    script_floors: dict = field(default_factory=lambda: _floors("script_floors"))
    language_floors: dict = field(default_factory=lambda: _floors("language_floors"))
    default_floor: float | None = field(default_factory=lambda: _floors("default_floor"))
    exempt_scripts: tuple = field(default_factory=lambda: _floors("exempt_scripts"))
    ceiling_headroom: float = 1.25  # ceiling < floor * this: warning
    starvation_bytes_per_token: float = 1.5
    starvation_graphemes_per_token: float = 1.1
    starvation_ceiling_share: float = 0.6  # below this share of the ceiling: vocabulary limits
    byte_fallback_rate: float = 0.01
    unk_rate: float = 0.001
    top_chars: int = 5
    grapheme_split_rate: float = 0.10
    overrepresentation: float = 2.0  # tokens per character against the rest
    flip_margin: float = 0.10  # relative gap both ways for a ranking flip
    premium: float = 2.0
    parity_min_lines: int = 10
    parity_min_overlap: float = 0.9  # share of lines two parallel files must share
    bootstrap: int = 1000
    seed: int = 0
    # label-script: a FineWeb-2 / FLORES label's script under this share of its running text
    label_script_share: float = 0.5

    def floor_for(self, group: Group, key: str) -> float | None:
        """Chars-per-token floor of a frame row; None when the row has none."""
        if group == "language":
            return self.language_floors.get(key)
        if group != "script" or key in self.exempt_scripts:
            return None
        if key in self.script_floors:  # a floor switched off (None) stays off
            return self.script_floors[key]
        return self.default_floor


SEVERITIES: tuple[Severity, ...] = typing.get_args(Severity)  # fertility.options
_TOP_KEYS = {
    "fail_on",
    "uncertain",
    "min_documents",
    "min_chars",
    "min_share",
    "baseline_margin",
    "reference",
    "parallel",
    "allow_lossy",
    "floors",
    "ceilings",
    "rules",
}
_FLOOR_KEYS = {"default", "exempt", "script", "language"}
_CEILING_KEYS = {"byte_fallback_rate", "unk_rate", "premium"}


_FLOOR_FIELDS = ("script_floors", "language_floors", "default_floor", "exempt_scripts")


def judges_running(
    running_share: float,
    language_share: float,
    chars: int,
    documents: int,
    min_share: float,
    min_chars: int,
    min_documents: int,
) -> bool:
    """Whether a script's running text is judged (docs/GATE.md, "Running text"): it is
    `min_share` of the corpus's characters, or `min_share` of some language's own characters
    (`language_share`) and large enough on its own for an interval (`min_chars` characters in
    `min_documents` documents), so a language's prose stays judged whatever unrelated text
    the corpus adds elsewhere. fertility.findings.not_judged and --precision's stopping rule
    (fertility.measure.precision) both ask it."""
    big = chars >= min_chars and documents >= min_documents
    return running_share >= min_share or (language_share >= min_share and big)


@dataclass
class Policy:
    byte_fallback_rate: float | None  # ceilings (None: not checked)
    unk_rate: float | None
    premium: float | None
    fail_on: tuple[Severity, ...] = ("error",)  # finding severities that fail the gate
    uncertain: Uncertain = "fail"  # verdict of the gate when a check is uncertain
    baseline_margin: float = 0.05
    min_documents: int = 10
    min_chars: int = 1000
    min_share: float = 0.01
    reference: str = "en"
    # the corpus's files are translations line by line (`--parallel`): the premium's layout
    # evidence (fertility.measure.parity)
    parallel: bool = False
    allow_lossy: bool = False  # a tokenizer that does not give the text back passes
    # The diagnose thresholds, floors included: the gate's floor checks and the
    # pretokenizer-ceiling rule read the same numbers, so they live in one place.
    thresholds: Thresholds = field(default_factory=Thresholds)
    source: str = "built-in"  # where it was read from, for messages

    def floor_for(self, group: Group, key: str) -> float | None:
        """The chars-per-token floor of a frame row, or None when the row is not checked."""
        return self.thresholds.floor_for(group, key)

    def to_dict(self) -> dict:
        """The `policy` object of the gate's JSON: floors, ceilings and keys, then `rules`."""
        d = dataclasses.asdict(self)
        rules = d.pop("thresholds")
        floors = {k: rules.pop(k) for k in _FLOOR_FIELDS}
        floors["exempt_scripts"] = list(floors["exempt_scripts"])
        d["fail_on"] = list(self.fail_on)
        source = d.pop("source")
        return {**floors, **d, "rules": rules, "source": source}


@functools.lru_cache(maxsize=1)
def _default_table() -> dict:
    text = resources.files("fertility").joinpath("default_policy.toml").read_text("utf-8")
    return tomllib.loads(text)


def default_policy() -> Policy:
    return _build(_default_table(), {}, "built-in")


def default_floors() -> dict:
    """The built-in floors, for Thresholds' defaults (read without building a Policy)."""
    floors = _default_table()["floors"]
    return {
        "script_floors": dict(floors["script"]),
        "language_floors": dict(floors["language"]),
        "default_floor": floors["default"],
        "exempt_scripts": tuple(floors["exempt"]),
    }


def load_policy(
    path: str | os.PathLike[str] | None, *, cwd: str | os.PathLike[str] | None = None
) -> Policy:
    """The policy from `path`, else from the working directory's config, else the default."""
    if path is not None:
        p = Path(path)
        whole = _read(p)
        table: dict | None
        if p.name == "pyproject.toml":
            table = _subtable(whole, ("tool", "fertility", "gate"), p)
            if table is None:
                raise PolicyError(f"{p}: no [tool.fertility.gate] table")
        elif p.name == "fertility.toml":
            table = _subtable(whole, ("gate",), p)
            if table is None:
                raise PolicyError(f"{p}: no [gate] table")
        else:
            table = whole
        return _build(_default_table(), table, str(p))
    base = Path(cwd) if cwd is not None else Path.cwd()
    for name, keys in (
        ("fertility.toml", ("gate",)),
        ("pyproject.toml", ("tool", "fertility", "gate")),
    ):
        p = base / name
        if p.is_file():
            table = _subtable(_read(p), keys, p)
            if table is not None:
                return _build(_default_table(), table, f"{p} [{'.'.join(keys)}]")
    return default_policy()


def _read(p: Path) -> dict:
    return read_toml(p, PolicyError, "policy file")


def _subtable(table: dict, keys: tuple[str, ...], p: Path) -> dict | None:
    for k in keys:
        if k not in table:
            return None
        table = table[k]
        if not isinstance(table, dict):
            raise PolicyError(f"{p}: {'.'.join(keys)} must be a table")
    return table


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _build(default: dict, user: dict, source: str) -> Policy:
    _check_keys(user, source)
    t = _merge(default, user)
    floors, ceilings = t.get("floors", {}), t.get("ceilings", {})
    where = lambda key: f"{source}: {key}"

    def number(
        value: Any,
        key: str,
        *,
        allow_off: bool = False,
        lo: float = 0.0,
        hi: float = math.inf,
        integer: bool = False,
    ) -> float:
        """`value` checked as a number (allow_off: the message says false is taken too)."""
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        # nan compares false with everything and inf passes an open upper bound: neither
        # is a threshold a user means, so both are refused by name
        if (
            isinstance(value, bool)
            or not ok_type
            or not math.isfinite(value)
            or not (lo <= value <= hi)
        ):
            kind = "an integer" if integer else "a number"
            rng = f" in [{lo:g}, {hi:g}]" if hi != math.inf else f" >= {lo:g}"
            off = " (or false)" if allow_off else ""
            raise PolicyError(f"{where(key)} must be {kind}{rng}{off}, got {value!r}")
        return value

    def number_or_off(value: Any, key: str, *, hi: float = math.inf) -> float | None:
        """`number`, or None for false (TOML's way to turn a check off)."""
        return None if value is False else number(value, key, allow_off=True, hi=hi)

    def floor_table(name: str) -> dict[str, float | None]:
        table = floors.get(name, {})
        if not isinstance(table, dict):
            raise PolicyError(f"{where('floors.' + name)} must be a table")
        out: dict[str, float | None] = {}
        for k, v in table.items():  # None (false in TOML): this row has no floor at all
            val = number_or_off(v, f"floors.{name}.{k}")
            out[str(k)] = None if val is None else float(val)
        return out

    fail_on = t.get("fail_on", ["error"])
    if not isinstance(fail_on, list) or any(s not in SEVERITIES for s in fail_on):
        raise PolicyError(
            f"{where('fail_on')} must be a list of {', '.join(SEVERITIES)}, got {fail_on!r}"
        )
    uncertain = t.get("uncertain", "fail")
    if uncertain not in typing.get_args(Uncertain):
        raise PolicyError(f'{where("uncertain")} must be "fail" or "pass", got {uncertain!r}')
    exempt = floors.get("exempt", [])
    if not isinstance(exempt, list) or not all(isinstance(s, str) for s in exempt):
        raise PolicyError(f"{where('floors.exempt')} must be a list of script codes")
    reference = t.get("reference", "en")
    if not isinstance(reference, str) or not reference:
        raise PolicyError(f"{where('reference')} must be a language label, got {reference!r}")
    parallel = t.get("parallel", False)
    if not isinstance(parallel, bool):
        raise PolicyError(f"{where('parallel')} must be true or false, got {parallel!r}")
    allow_lossy = t.get("allow_lossy", False)
    if not isinstance(allow_lossy, bool):
        raise PolicyError(f"{where('allow_lossy')} must be true or false, got {allow_lossy!r}")
    default_floor = number_or_off(floors.get("default", False), "floors.default")
    thresholds = _rules(
        t.get("rules", {}),
        source,
        {
            "script_floors": floor_table("script"),
            "language_floors": floor_table("language"),
            "default_floor": None if default_floor is None else float(default_floor),
            "exempt_scripts": tuple(exempt),
        },
    )
    return Policy(
        byte_fallback_rate=number_or_off(
            ceilings.get("byte_fallback_rate", False), "ceilings.byte_fallback_rate", hi=1.0
        ),
        unk_rate=number_or_off(ceilings.get("unk_rate", False), "ceilings.unk_rate", hi=1.0),
        premium=number_or_off(ceilings.get("premium", False), "ceilings.premium"),
        fail_on=tuple(fail_on),
        uncertain=uncertain,
        baseline_margin=float(number(t.get("baseline_margin", 0.05), "baseline_margin", hi=1.0)),
        min_documents=int(number(t.get("min_documents", 10), "min_documents", integer=True)),
        min_chars=int(number(t.get("min_chars", 1000), "min_chars", integer=True)),
        min_share=float(number(t.get("min_share", 0.01), "min_share", hi=1.0)),
        reference=reference,
        parallel=parallel,
        allow_lossy=allow_lossy,
        thresholds=thresholds,
        source=source,
    )


def _check_keys(user: dict, source: str) -> None:
    def unknown(table: Any, allowed: set[str], prefix: str) -> None:
        if not isinstance(table, dict):
            raise PolicyError(f"{source}: {prefix.rstrip('.')} must be a table")
        for k in table:
            if k not in allowed:
                raise PolicyError(
                    f"{source}: unknown key {prefix}{k} "
                    f"(expected one of {', '.join(sorted(allowed))})"
                )

    unknown(user, _TOP_KEYS, "")
    if "floors" in user:
        unknown(user["floors"], _FLOOR_KEYS, "floors.")
    if "ceilings" in user:
        unknown(user["ceilings"], _CEILING_KEYS, "ceilings.")
    if "rules" in user:
        unknown(user["rules"], _RULE_FIELDS, "rules.")


# [rules] may set every Thresholds field except the floors, which live in [floors].
_RULE_FIELDS = {f.name for f in dataclasses.fields(Thresholds) if f.name not in _FLOOR_FIELDS}


def _rules(table: dict, source: str, floors: dict) -> Thresholds:
    values = {}
    defaults = Thresholds(**floors)
    for k, v in table.items():
        want = type(getattr(defaults, k))
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        if want is int:
            ok = ok and isinstance(v, int)
        # `not v >= 0` rather than `v < 0`: nan compares false, and a nan bound would
        # silently switch its rule off
        if not ok or not math.isfinite(v) or not v >= 0:
            kind = "an integer" if want is int else "a number"
            raise PolicyError(f"{source}: rules.{k} must be {kind} >= 0, got {v!r}")
        values[k] = want(v)
    return dataclasses.replace(defaults, **values)
