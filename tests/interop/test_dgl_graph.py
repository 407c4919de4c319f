"""``graphpipe.from_dgl`` / ``graphpipe.interop.dgl_graph``: a ``DGLGraph`` written as a store
keeps every node and edge feature. DGL itself runs in the DGL environment
(``dgl_graph_child.py``; skipped without one); here, the message without DGL."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import graphpipe

CHILD = str(Path(__file__).with_name("dgl_graph_child.py"))
HAS_DGL = importlib.util.find_spec("dgl") is not None


@pytest.mark.skipif(HAS_DGL, reason="checks the message given without DGL")
def test_from_dgl_without_dgl_says_how_to_get_it(tmp_path) -> None:
    with pytest.raises(ImportError, match="graphpipe beside DGL"):
        graphpipe.from_dgl(object(), tmp_path / "g")
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("check", ["store", "single_edge_feature", "refusals"])
def test_against_dgl(check: str, tmp_path, numpy1_env) -> None:
    assert numpy1_env(CHILD, check, str(tmp_path)).strip() == "ok"
