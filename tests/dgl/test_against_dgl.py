"""graphpipe.dgl against DGL 2.1's dgl.dataloading in the DGL environment (``dgl_child.py``;
skipped without one): identical batches with every in-neighbour (order, shuffle, edges and
edge IDs), DGL's sampling rule with fanouts, real DGLBlocks that DGL layers take."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphpipe.store import GraphStore

CHILD = str(Path(__file__).with_name("dgl_child.py"))


@pytest.mark.parametrize("check", ["full", "sampled"])
def test_against_dgl(check: str, dgl_store: GraphStore, numpy1_env) -> None:
    assert numpy1_env(CHILD, check, str(dgl_store.path)).strip().endswith("ok")
