"""`--weight` / edge value columns keep the source's dtype: integer weights above 2**24 stay
exact (float32 would round them), decimals and Parquet floats as before / as stored."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.ingest.edgelist import read_edge_list
from graphpipe.store import GraphStore

BIG = np.array([2**24 + 1, 2**40 + 3, 7, -(2**31) - 5], dtype=np.int64)


def _csv(path, weights: list[str]) -> None:
    rows = [f"{i},{(i + 1) % len(weights)},{w}" for i, w in enumerate(weights)]
    path.write_text("src,dst,w\n" + "\n".join(rows) + "\n")


def test_integer_csv_weights_stay_exact_int64(tmp_path):
    _csv(tmp_path / "e.csv", [str(v) for v in BIG])
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "e.csv"), str(tmp_path / "s"),
                                      "--weight", "w", "-q"])
    assert result.exit_code == 0, result.output
    store = GraphStore.open(tmp_path / "s")
    assert store.edge_features.dtype == np.int64
    np.testing.assert_array_equal(store.edge_features[:, 0], BIG)
    assert np.float32(BIG[0]) != BIG[0]  # what float32 storage did to it
    assert store.manifest["edge_features"]["dtype"] == "int64"


def test_decimal_csv_weights_are_float32_after_integer_rows(tmp_path):
    # the first rows are integers: the column is re-read as numbers at the first decimal
    _csv(tmp_path / "e.csv", ["1", "2", "3", "0.25"])
    source = read_edge_list(tmp_path / "e.csv", weight="w")
    assert source.edge_feature_dtype == np.float32
    store = ingest(source, tmp_path / "s")
    np.testing.assert_array_equal(store.edge_features[:, 0],
                                  np.array([1, 2, 3, 0.25], dtype=np.float32))


@pytest.mark.parametrize(("arrow_type", "dtype"), [(pa.int32(), np.int64), (pa.int64(), np.int64),
                                                   (pa.float32(), np.float32),
                                                   (pa.float64(), np.float64)])
def test_parquet_weights_keep_their_type(tmp_path, arrow_type, dtype):
    values = BIG[:3] if pa.types.is_integer(arrow_type) and arrow_type.bit_width == 64 else \
        np.array([1, 5, 9])
    if pa.types.is_floating(arrow_type):
        values = np.array([0.1, 2**24 + 1, 3.5])
    table = pa.table({"src": [0, 1, 2], "dst": [1, 2, 0], "w": pa.array(values).cast(arrow_type)})
    pq.write_table(table, tmp_path / "e.parquet")
    store = ingest(read_edge_list(tmp_path / "e.parquet", weight="w"), tmp_path / "s")
    assert store.edge_features.dtype == dtype
    np.testing.assert_array_equal(store.edge_features[:, 0],
                                  table.column("w").to_numpy().astype(dtype))


def test_int_and_float_columns_together_are_float64(tmp_path):
    (tmp_path / "e.csv").write_text("src,dst,w,x\n0,1,16777217,0.5\n1,0,3,1.5\n")
    source = read_edge_list(tmp_path / "e.csv", weight="w", edge_feature_columns=["x"])
    store = ingest(source, tmp_path / "s")
    assert store.edge_features.dtype == np.float64
    np.testing.assert_array_equal(store.edge_features, [[16777217, 0.5], [3, 1.5]])


def test_float16_request_applies_to_float_weights_only(tmp_path):
    from graphpipe.ingest import IngestOptions

    _csv(tmp_path / "e.csv", ["1", "70000"])
    store = ingest(read_edge_list(tmp_path / "e.csv", weight="w"), tmp_path / "s",
                   IngestOptions(feature_dtype="float16"))
    assert store.edge_features.dtype == np.int64  # 70000 does not fit float16; ints stay ints
    np.testing.assert_array_equal(store.edge_features[:, 0], [1, 70000])
