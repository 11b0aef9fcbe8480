"""Import `fertility` from this checkout as it installs, without installing it.

pyproject.toml installs trainer/ and eval/ as `fertility.trainer` and `fertility.eval` (its
package-dir); a plain checkout has no such mapping, so `import fertility.trainer` fails there.
A script under benchmarks/ calls `use_checkout()` before its first `fertility` import:

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/, for this module
    from checkout import use_checkout
    ROOT = use_checkout()

It puts the checkout's root first on sys.path (so `fertility` is this checkout's, not an
installed copy's) and registers `fertility.trainer` and `fertility.eval` as packages read
from the checkout's own trainer/ and eval/: the same files under the same names as the wheel
installs them, nothing else renamed or added. Always from the checkout, even where an install
(an editable one of another checkout, say) could map them: one script, one source tree.

Run as a script, it is the `fertility` command from the checkout (what benchmarks/gpu_check.sh
falls back to where `pip install` is not possible):

    python benchmarks/checkout.py pretrain CORPUS -t tokenizer.json ...
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# subpackage -> its folder in the checkout (pyproject.toml's [tool.setuptools.package-dir])
FOLDERS = {"fertility.trainer": "trainer", "fertility.eval": "eval"}


def use_checkout() -> Path:
    """Make `fertility`, `fertility.trainer` and `fertility.eval` this checkout's; its root."""
    if sys.path[:1] != [str(ROOT)]:
        sys.path.insert(0, str(ROOT))
    import fertility

    if Path(fertility.__file__).resolve().parent != ROOT / "fertility":
        raise ImportError(f"fertility was already imported from {fertility.__file__}")
    for name, folder in FOLDERS.items():
        if name in sys.modules:
            where = Path(sys.modules[name].__file__ or "").resolve().parent
            if where != ROOT / folder:
                raise ImportError(f"{name} was already imported from {where}")
            continue
        spec = importlib.util.spec_from_file_location(
            name, ROOT / folder / "__init__.py", submodule_search_locations=[str(ROOT / folder)]
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        setattr(fertility, name.rsplit(".", 1)[1], module)
    return ROOT


if __name__ == "__main__":
    use_checkout()
    from fertility.cli import main

    main(sys.argv[1:])
