"""fertility: measure, diagnose and fix tokenizer fertility per Unicode script and language.

    import fertility
    report = fertility.analyze(["corpus/"], ["bpe=tokenizer.json"])
    report.frame          # one tidy DataFrame: a row per (tokenizer, language|script)
    report.findings       # diagnosed with the same policy `fertility report` uses
    report.to_json()      # the same document as `fertility report --format json`

The public names are imported lazily so `fertility --help` stays fast.
"""

from __future__ import annotations

import importlib
import os
import sys
import types

__version__ = "0.1.0"
__all__ = ["analyze", "load_tokenizer", "diagnose", "gate", "Report", "FertilityError"]

_WHERE = {
    "Report": ("fertility.measure", "Report"),
    "load_tokenizer": ("fertility.tokenizers", "load_tokenizer"),
    "diagnose": ("fertility.diagnose", None),  # the module, callable (see _Package)
    "gate": ("fertility.gate", None),  # the module: fertility.gate.gate_corpus / evaluate
    "FertilityError": ("fertility.errors", "FertilityError"),
}


def analyze(paths, tokenizers=(), *, policy: str | os.PathLike | None = None,
            reference: str | None = None, findings: bool = True, **options):
    """`fertility report`'s Report: measure (fertility.measure.analyze, same keywords), then
    diagnose with the policy the command uses (`policy` file, else fertility.toml [gate] or
    pyproject.toml [tool.fertility.gate] of the working directory, else the built-in one).
    findings=False is the command's --no-diagnose."""
    from fertility import measure

    report = measure.analyze(paths, tokenizers, **options)
    if findings:
        from fertility.diagnose import diagnose as _diagnose
        from fertility.policy import load_policy

        pol = load_policy(policy)
        report.findings = _diagnose(report, pol.thresholds, reference=reference or pol.reference)
    return report


def __getattr__(name: str):
    if name in _WHERE:
        module, attr = _WHERE[name]
        mod = importlib.import_module(module)
        return mod if attr is None else getattr(mod, attr)
    raise AttributeError(f"module 'fertility' has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """The module fertility.diagnose, callable as its function diagnose()."""

    def __call__(self, *args, **kwargs):
        return self.diagnose(*args, **kwargs)


class _Package(types.ModuleType):
    """Importing a submodule binds it on its package under its own name, so once anything
    imported fertility.diagnose, `fertility.diagnose` would be that module instead of the
    public function. The module is made callable as the function instead: both
    `fertility.diagnose(report)` and `fertility.diagnose.Thresholds` work in any import order."""

    def __setattr__(self, name: str, value) -> None:
        if name == "diagnose" and isinstance(value, types.ModuleType):
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
