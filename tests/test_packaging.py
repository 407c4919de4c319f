"""pyproject.toml lists packages explicitly (``graphpipe.cli`` lives in ``cli/``): every package
directory under ``graphpipe/`` must be listed, or a non-editable install would leave it out."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "graphpipe").rglob("__init__.py")}
    assert found - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - found == {"graphpipe.cli"}
