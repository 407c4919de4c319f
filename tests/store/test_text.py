"""Ragged token arrays and the text table: round trips, row counts, clean abort."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.store.arrays import read_array
from graphpipe.store.errors import StoreError
from graphpipe.store.text import RaggedWriter, TextTableWriter, check_field_name, token_keys


def test_ragged_round_trip_in_many_appends(tmp_path) -> None:
    rng = np.random.default_rng(0)
    rows = [rng.integers(0, 1000, rng.integers(0, 6)).astype(np.int32) for _ in range(500)]
    w = RaggedWriter(tmp_path, "abstract", 500)
    for s in range(0, 500, 37):
        part = rows[s:s + 37]
        w.append(np.array([len(r) for r in part]),
                 np.concatenate(part) if part else np.zeros(0, np.int32))
    w.close()
    keys = token_keys("abstract")
    offsets, ids = read_array(tmp_path, keys["offsets"]), read_array(tmp_path, keys["ids"])
    assert offsets.shape == (501,) and offsets[0] == 0
    for v, r in enumerate(rows):
        assert ids[offsets[v]:offsets[v + 1]].tolist() == r.tolist()
    assert not list(tmp_path.glob(".*tmp"))


def test_wrong_row_count_leaves_nothing(tmp_path) -> None:
    w = RaggedWriter(tmp_path, "t", 3)
    w.append(np.array([1]), np.array([5], dtype=np.int32))
    with pytest.raises(StoreError, match="1 rows written, expected 3"):
        w.close()
    assert not (tmp_path / "text").exists() and not list(tmp_path.glob(".*"))
    w = RaggedWriter(tmp_path, "t", 1)
    with pytest.raises(StoreError, match="lengths sum to 2"):
        w.append(np.array([2]), np.array([5], dtype=np.int32))
    w.abort()


def test_text_table_and_field_names(tmp_path) -> None:
    import pyarrow.parquet as pq

    w = TextTableWriter(tmp_path, ["title"])
    w.append({"title": ["a", None]})
    w.append({"title": ["c"]})
    w.close()
    table = pq.read_table(tmp_path / "tables" / "text.parquet")
    assert table.column("title").to_pylist() == ["a", None, "c"]
    assert str(table.schema.field("title").type) == "large_string"
    for bad in ("../x", "", "a/b", "1abc"):
        with pytest.raises(ValueError, match="text field name"):
            check_field_name(bad)
