"""fertility: measure, diagnose and fix tokenizer fertility per Unicode script and language.

    import fertility
    report = fertility.analyze(["corpus/"], ["bpe=tokenizer.json"])
    report.table          # the measurement: a row per (tokenizer, group, key), each a dict
    report.frame          # the same as one tidy pandas DataFrame (made on first use)
    report.findings       # diagnosed with the same policy `fertility report` uses (None
                          # with findings=False: not diagnosed)
    report.to_json()      # the same document as `fertility report --format json`

The public names load on first use (`__getattr__`) so `fertility --help` never imports numpy
or pandas; type checkers read them from the TYPE_CHECKING imports below.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fertility import gate
    from fertility.errors import FertilityError
    from fertility.findings import diagnose
    from fertility.measure import Report
    from fertility.tokenizers import load_tokenizer

__version__ = "0.1.0"
__all__ = ["analyze", "load_tokenizer", "diagnose", "gate", "Report", "FertilityError"]

_WHERE = {
    "Report": ("fertility.measure", "Report"),
    "load_tokenizer": ("fertility.tokenizers", "load_tokenizer"),
    "diagnose": ("fertility.findings", "diagnose"),
    "gate": ("fertility.gate", None),  # the module: fertility.gate.gate_corpus / evaluate
    "FertilityError": ("fertility.errors", "FertilityError"),
}


def analyze(
    paths,
    tokenizers=(),
    *,
    policy: str | os.PathLike | None = None,
    reference: str | None = None,
    findings: bool = True,
    **options,
) -> Report:
    """`fertility report`'s Report: measure (fertility.measure.analyze, same keywords), then
    diagnose with the policy the command uses (`policy` file, else fertility.toml [gate] or
    pyproject.toml [tool.fertility.gate] of the working directory, else the built-in one).
    findings=False is the command's --no-diagnose."""
    from fertility import measure  # deferred: numpy and pandas load on first use
    from fertility.findings import diagnose_under as run_rules  # deferred: as above
    from fertility.gate import verdicts  # deferred: as above
    from fertility.policy import load_policy  # deferred: as above

    report = measure.analyze(paths, tokenizers, **options)
    pol = load_policy(policy)
    if reference:
        pol = dataclasses.replace(pol, reference=reference)
    report.policy = pol  # the JSON's Gini under the policy's reference, as the command's
    if findings:
        report.findings = run_rules(report, pol)
    # the JSON's per-tokenizer verdict, as `fertility report --format json` gives it
    report.verdicts = verdicts(report, pol)
    return report


def __getattr__(name: str):
    if name in _WHERE:
        module, attr = _WHERE[name]
        mod = importlib.import_module(module)
        value = mod if attr is None else getattr(mod, attr)
        globals()[name] = value
        return value
    # A submodule (`fertility.policy`, `fertility.options`) is reachable as an attribute
    # after `import fertility`, loaded on first use like the public names.
    if importlib.util.find_spec(f"fertility.{name}") is not None:
        return importlib.import_module(f"fertility.{name}")
    raise AttributeError(f"module 'fertility' has no attribute {name!r}")
