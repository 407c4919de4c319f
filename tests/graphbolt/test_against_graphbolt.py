"""graphpipe.graphbolt against GraphBolt 2.1 in the DGL environment (``graphbolt_child.py``;
skipped without one): the same pipeline on the same graph, GraphBolt's on the store
exported as an on-disk dataset, ours on the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphpipe.export import write_graphbolt
from graphpipe.store import GraphStore

CHILD = str(Path(__file__).with_name("graphbolt_child.py"))


@pytest.fixture(scope="module")
def folder(gb_store: GraphStore, tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_graphbolt(gb_store, tmp_path_factory.mktemp("gb") / "dataset"))


@pytest.mark.parametrize("check", ["full", "sampled"])
def test_against_graphbolt(check: str, folder: str, gb_store: GraphStore, numpy1_env) -> None:
    assert numpy1_env(CHILD, check, folder, str(gb_store.path)).strip().endswith("ok")
