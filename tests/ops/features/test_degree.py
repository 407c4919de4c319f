"""Degree-centrality groups (thesis §8.6 oracles) and their storage in a store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from graphpipe.derive import write_centrality
from graphpipe.ops.features.degree import degree_groups, degree_order
from graphpipe.store import GraphStore, StoreWriter


def test_quartiles_on_distinct_degrees() -> None:
    groups = degree_groups(np.arange(1, 101))
    assert np.bincount(groups).tolist() == [25, 25, 25, 25]
    assert np.all(np.diff(groups) >= 0)


def test_star_and_two_valued() -> None:
    star = np.array([99] + [1] * 99)
    g = degree_groups(star)
    assert g[0] == 3 and np.all(g[1:] == 0)
    two = np.array([1] * 50 + [5] * 50)
    assert set(degree_groups(two).tolist()) == {0, 2}
    assert np.all(degree_groups(np.full(10, 7)) == 0)
    for method in ("log-bins", "equal-width"):
        assert np.all(degree_groups(np.full(10, 7), method) == 0)


@pytest.mark.parametrize("method", ["quartile", "log-bins", "equal-width"])
@pytest.mark.parametrize("bins", [1, 3, 4, 8])
def test_invariants(method: str, bins: int) -> None:
    rng = np.random.default_rng(bins)
    deg = rng.zipf(1.8, size=3000).clip(max=10_000) - 1
    g = degree_groups(deg, method, bins)
    assert g.dtype == np.int8 and g.min() >= 0 and g.max() <= bins - 1
    order = np.argsort(deg, kind="stable")
    assert np.all(np.diff(g[order].astype(int)) >= 0)  # monotone in degree
    assert np.all(g[deg == deg.min()] == 0)
    for d in np.unique(deg)[:20]:
        assert len(set(g[deg == d].tolist())) == 1
    if method == "log-bins" and bins > 1:
        assert g[deg == deg.max()].min() == bins - 1


def test_equal_width_power_law_mostly_group_zero() -> None:
    rng = np.random.default_rng(0)
    deg = rng.zipf(2.0, size=5000)
    assert (degree_groups(deg, "equal-width") == 0).mean() >= 0.9


def test_degree_order_hottest_first() -> None:
    deg = np.array([3, 9, 3, 0, 9])
    assert degree_order(deg).tolist() == [1, 4, 0, 2, 3]


def test_errors() -> None:
    with pytest.raises(ValueError, match="'method'"):
        degree_groups(np.arange(3), "median")
    with pytest.raises(ValueError, match="'bins'"):
        degree_groups(np.arange(3), bins=0)
    with pytest.raises(ValueError, match="'degrees'"):
        degree_groups(np.array([1, -1]))


def _tiny_store(path: Path) -> GraphStore:
    indptr = np.array([0, 0, 1, 3, 6], dtype=np.int64)   # in-degrees 0, 1, 2, 3
    indices = np.array([0, 0, 1, 0, 1, 2], dtype=np.int32)
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("csc/edge_id", np.arange(6, dtype=np.int64))
        w.manifest["num_nodes"], w.manifest["num_edges"] = 4, 6
        w.commit()
    return GraphStore.open(path)


def test_write_centrality_and_cli(tmp_path: Path) -> None:
    store = _tiny_store(tmp_path / "s")
    entry = write_centrality(store, "quartile", 4)
    reopened = GraphStore.open(tmp_path / "s")
    assert reopened.manifest["derived"]["centrality"] == entry
    assert reopened.array("derived/degree_group").tolist() == [0, 1, 2, 3]
    assert reopened.array("derived/degree_order").tolist() == [3, 2, 1, 0]
    from graphpipe.cli.centrality import command

    result = CliRunner().invoke(command, [str(tmp_path / "s"), "--method", "log-bins", "--bins", "2"])
    assert result.exit_code == 0, result.output
    reopened = GraphStore.open(tmp_path / "s")
    assert reopened.manifest["derived"]["centrality"]["method"] == "log-bins"
    # log1p(deg) = 0, .69, 1.10, 1.39: the midpoint .69 falls into the upper bin
    assert reopened.array("derived/degree_group").tolist() == [0, 1, 1, 1]
