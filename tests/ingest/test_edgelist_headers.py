"""Edge lists without a header row, or separated by whitespace (SNAP, KONECT): the header
is detected, runs of spaces and tabs are one separator, and no row is ever dropped
silently (issue 28, point 4)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from graphpipe.ingest import IngestError, ingest
from graphpipe.ingest.edgelist import read_edge_list


def _edges(source) -> Counter:
    pairs = Counter()
    for chunk in source.edge_chunks():
        pairs.update(zip(chunk.src.tolist(), chunk.dst.tolist()))
    return pairs


def _store_edges(store) -> Counter:
    indptr, indices = np.asarray(store.indptr), np.asarray(store.indices)
    dst = np.repeat(np.arange(store.num_nodes), np.diff(indptr))
    return Counter(zip(indices.tolist(), dst.tolist()))


SNAP = "# Directed graph (each unordered pair of nodes is saved once)\n# Nodes: 4 Edges: 4\n" \
       "# FromNodeId\tToNodeId\n0\t1\n0\t2\n1\t2\n3\t0\n"


def test_snap_file_ingests_every_edge(tmp_path: Path) -> None:
    path = tmp_path / "web-Tiny.txt"
    path.write_text(SNAP)
    store = ingest(path, tmp_path / "s")
    assert _store_edges(store) == Counter([(0, 1), (0, 2), (1, 2), (3, 0)])


def test_runs_of_spaces_and_tabs_are_one_separator(tmp_path: Path) -> None:
    path = tmp_path / "out.konect"
    path.write_text("  5   3 \n3\t \t4\n\n4 5\n")
    assert _edges(read_edge_list(path)) == Counter([(5, 3), (3, 4), (4, 5)])


def test_headerless_csv_keeps_its_first_edge(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("5,3\n1,2\n2,0\n")
    assert _edges(read_edge_list(path)) == Counter([(5, 3), (1, 2), (2, 0)])
    # columns by position, as the error hint used to suggest: the first edge stays
    assert _edges(read_edge_list(path, src=1, dst=0)) == Counter([(3, 5), (2, 1), (0, 2)])


def test_a_named_header_is_still_a_header(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("from,to\n5,3\n1,2\n")
    assert _edges(read_edge_list(path, src=0, dst=1)) == Counter([(5, 3), (1, 2)])
    assert _edges(read_edge_list(path, src="to", dst="from")) == Counter([(3, 5), (2, 1)])


def test_a_numeric_header_asked_for_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("5,3\n1,2\n")
    with pytest.raises(IngestError, match=r"e\.csv: the header line '5,3' holds only numbers.*--no-header"):
        read_edge_list(path, header=True, src=0, dst=1)


def test_zero_one_first_line_is_ambiguous_unless_told(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("0,1\n1,2\n2,0\n")
    with pytest.raises(IngestError, match=r"e\.csv: line '0,1' is either a header .* --header or --no-header"):
        read_edge_list(path)
    assert _edges(read_edge_list(path, header=False)) == Counter([(0, 1), (1, 2), (2, 0)])
    assert _edges(read_edge_list(path, header=True, src="0", dst="1")) == Counter([(1, 2), (2, 0)])


def test_parts_must_agree_on_the_header(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "a.csv").write_text("src,dst\n5,3\n")
    (tmp_path / "parts" / "b.csv").write_text("4,2\n")
    with pytest.raises(IngestError, match=r"b\.csv: has no header line, but .*a\.csv has a header line"):
        read_edge_list(tmp_path / "parts")


def test_missing_column_hints_at_no_header(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("alice,bob\nbob,carol\n")
    with pytest.raises(IngestError, match=r"no source column 'src'.*if line 1 is an edge, pass --no-header"):
        read_edge_list(path)
    assert sum(_edges(read_edge_list(path, header=False)).values()) == 2


@pytest.mark.parametrize("layout", ["{a}\t{b}\n", "{a} {b}\n", "  {a}   {b} \n", "{a}\t \t{b}\r\n"])
def test_whitespace_files_read_as_the_csv(tmp_path: Path, layout: str) -> None:
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 5000, 20000), rng.integers(0, 5000, 20000)
    (tmp_path / "e.csv").write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in zip(src, dst)))
    (tmp_path / "e.txt").write_text("# comment\n" + "".join(layout.format(a=a, b=b) for a, b in zip(src, dst)))
    expected = read_edge_list(tmp_path / "e.csv", block_rows=3000)
    got = read_edge_list(tmp_path / "e.txt", block_rows=3000)
    assert got.num_nodes == expected.num_nodes and _edges(got) == _edges(expected)
    first = next(iter(got.edge_chunks()))
    assert (first.first_line, first.src[0], first.dst[0]) == (2, src[0], dst[0])
