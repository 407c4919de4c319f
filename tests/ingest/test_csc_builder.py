"""Tests of graphpipe.ingest.csc_builder against its NumPy reference."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphpipe.ingest import csc_builder
from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.csc_builder import (
    CscOptions,
    CscStats,
    build_csc,
    indices_dtype,
    reference_csc,
)
from graphpipe.ingest.errors import IngestError
from graphpipe.store import GraphStore, StoreWriter
from graphpipe.store.arrays import read_array

TOPOLOGY = ("indptr", "indices", "edge_id")


def chunks_of(src, dst, size: int, source: str = "edges.csv", header_lines: int = 1):
    """Edge chunks of ``size`` edges; line numbers as if the file had a header line."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    for start in range(0, src.shape[0], size):
        yield EdgeChunk(src[start:start + size], dst[start:start + size], start, source,
                        start + 1 + header_lines)


def build_store(path: Path, src, dst, num_nodes: int, options: CscOptions, chunk_size: int = 7,
                progress=None) -> tuple[GraphStore, CscStats]:
    with StoreWriter(path, name="t") as writer:
        stats = build_csc(chunks_of(src, dst, chunk_size), num_nodes, writer, options, progress)
        writer.manifest.update(num_nodes=num_nodes, num_edges=stats.num_edges)
        writer.commit()
    return GraphStore.open(path), stats


def read_layout(store: GraphStore, prefix: str) -> list[np.ndarray]:
    out = []
    for name in TOPOLOGY:
        key = f"{prefix}/{name}"
        entry = store.manifest["arrays"][key]
        out.append(np.array(store.array(key)) if entry["shape"][0] else
                   np.zeros(0, dtype=entry["dtype"]))
    return out


def assert_layout_equal(got: list[np.ndarray], want: tuple[np.ndarray, ...]) -> None:
    for name, g, w in zip(TOPOLOGY, got, want):
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype}"
        np.testing.assert_array_equal(g, w, err_msg=name)


def checksums(store: GraphStore) -> dict[str, str]:
    return {key: entry["checksum"] for key, entry in store.manifest["arrays"].items()}


# -- reference -----------------------------------------------------------------------------------


def test_reference_on_a_hand_made_graph():
    # edges: 0:1->0, 1:2->0, 2:1->0 (dup), 3:0->0 (loop), 4:0->2
    src, dst = [1, 2, 1, 0, 0], [0, 0, 0, 0, 2]
    indptr, indices, eid = reference_csc(src, dst, 3, CscOptions())
    np.testing.assert_array_equal(indptr, [0, 4, 4, 5])
    np.testing.assert_array_equal(indices, [0, 1, 1, 2, 0])
    np.testing.assert_array_equal(eid, [3, 0, 2, 1, 4])
    opts = CscOptions(add_reverse_edges=True, remove_self_loops=True, deduplicate=True)
    indptr, indices, eid = reference_csc(src, dst, 3, opts)
    # reverse edges: 5:0->1, 6:0->2, 7:0->1, 8:0->0, 9:2->0
    np.testing.assert_array_equal(indptr, [0, 2, 3, 4])
    np.testing.assert_array_equal(indices, [1, 2, 0, 0])
    np.testing.assert_array_equal(eid, [0, 1, 5, 4])
    indptr, indices, eid = reference_csc(src, dst, 3, CscOptions(sort_neighbors=False))
    np.testing.assert_array_equal(indices, [1, 2, 1, 0, 0])
    np.testing.assert_array_equal(eid, [0, 1, 2, 3, 4])
    assert indices.dtype == np.int32
    assert indices_dtype(2**31) == np.int64


# -- property tests against the reference --------------------------------------------------------


@st.composite
def graphs(draw):
    num_nodes = draw(st.integers(1, 24))
    num_edges = draw(st.integers(1, 160))
    ids = st.integers(0, num_nodes - 1)
    src = draw(st.lists(ids, min_size=num_edges, max_size=num_edges))
    dst = draw(st.lists(ids, min_size=num_edges, max_size=num_edges))
    if draw(st.booleans()):  # a hub destination with repeated sources
        hub = draw(ids)
        for i in range(0, num_edges, 2):
            dst[i] = hub
            src[i] = src[i] % 3
    return num_nodes, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=graphs(), flags=st.tuples(*[st.booleans()] * 4),
       memory_limit=st.sampled_from([None, 1, 4096, 12000]), chunk_size=st.integers(1, 64),
       bucket_slots=st.sampled_from([4, 1 << 14]))
def test_matches_reference(tmp_path_factory, graph, flags, memory_limit, chunk_size,
                           bucket_slots):
    num_nodes, src, dst = graph
    reverse, loops, dedup, sort = flags
    options = CscOptions(add_reverse_edges=reverse, remove_self_loops=loops, deduplicate=dedup,
                         sort_neighbors=sort, build_csr=True, memory_limit=memory_limit)
    saved = csc_builder._IN_MEMORY_BUCKET_SLOTS
    csc_builder._IN_MEMORY_BUCKET_SLOTS = bucket_slots  # one bucket, or many small ones
    # no commit (its fsyncs dominate on a busy disk): read the arrays from the temp tree
    with StoreWriter(tmp_path_factory.mktemp("s") / "g", name="t") as writer:
        try:
            stats = build_csc(chunks_of(src, dst, chunk_size), num_nodes, writer, options)
        finally:
            csc_builder._IN_MEMORY_BUCKET_SLOTS = saved
        got = {key: np.array(read_array(writer.path, key)) for key in
               [f"{prefix}/{name}" for prefix in ("csc", "csr") for name in TOPOLOGY]}
        graph_flags = writer.manifest["graph"]
        assert not [p for p in writer.path.iterdir() if p.name.startswith(".csc-spill")]
    want = reference_csc(src, dst, num_nodes, options)
    assert_layout_equal([got[f"csc/{name}"] for name in TOPOLOGY], want)
    assert_layout_equal([got[f"csr/{name}"] for name in TOPOLOGY],
                        reference_csc(dst, src, num_nodes, options))
    mult = 2 if reverse else 1
    assert stats.num_edges == want[1].shape[0] == stats.csr_num_edges
    assert stats.num_input_edges == src.shape[0]
    assert stats.num_edges == (mult * src.shape[0] - stats.self_loops_removed
                               - stats.duplicates_removed)
    assert stats.self_loops_removed == (mult * int(np.sum(src == dst)) if loops else 0)
    assert graph_flags["has_csr"] and graph_flags["deduplicated"] == dedup


# -- out of core is byte-identical to in memory --------------------------------------------------


def _skewed_graph(num_nodes: int, num_edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = (num_nodes * rng.random(num_edges) ** 3).astype(np.int64)  # hubs at low IDs
    dst[: num_edges // 10] = 1  # one destination far over the budget ...
    src[: num_edges // 20] = 2  # ... with one (src, dst) pair repeated many times
    isolated = np.arange(num_nodes) % 7 == 3
    dst = np.where(isolated[dst], 0, dst)  # every 7th node has no in-edges
    return src, dst


@pytest.mark.parametrize("options", [
    CscOptions(build_csr=True),
    CscOptions(add_reverse_edges=True, remove_self_loops=True, deduplicate=True, build_csr=True),
    CscOptions(deduplicate=True, sort_neighbors=False),
    CscOptions(sort_neighbors=False, add_reverse_edges=True),
], ids=["sorted", "rev-loops-dedup", "dedup-unsorted", "rev-unsorted"])
def test_out_of_core_is_byte_identical(tmp_path, monkeypatch, options):
    src, dst = _skewed_graph(3000, 30000, seed=5)
    stores = {}
    # the in-memory path with many small buckets in its two-level sort
    monkeypatch.setattr(csc_builder, "_IN_MEMORY_BUCKET_SLOTS", 64)
    stores["buckets"], stats = build_store(tmp_path / "buckets", src, dst, 3000, options, 5000)
    assert not stats.out_of_core
    monkeypatch.undo()
    for label, limit, chunk in (("memory", None, 4096), ("medium", 250_000, 1000),
                                ("small", 64_000, 333)):
        opts = CscOptions(**{**options.__dict__, "memory_limit": limit})
        store, stats = build_store(tmp_path / label, src, dst, 3000, opts, chunk)
        stores[label] = store
        assert stats.out_of_core == (limit is not None)
        if label == "medium":
            assert stats.groups >= 10, stats
        if label == "small":
            assert stats.max_depth >= 1, stats  # the hub row was re-partitioned
        assert not any(p.name.startswith(".csc-spill") for p in (tmp_path / label).iterdir())
    reference = checksums(stores["memory"])
    assert set(reference) >= {"csc/indptr", "csc/indices", "csc/edge_id"}
    assert checksums(stores["medium"]) == reference
    assert checksums(stores["buckets"]) == reference
    assert checksums(stores["small"]) == reference
    assert_layout_equal(read_layout(stores["small"], "csc"), reference_csc(src, dst, 3000, options))


def test_out_of_core_small_graph_few_kb(tmp_path):
    src, dst = _skewed_graph(40, 600, seed=1)
    opts = CscOptions(add_reverse_edges=True, deduplicate=True, build_csr=True)
    a, _ = build_store(tmp_path / "a", src, dst, 40, opts, 50)
    b, stats = build_store(tmp_path / "b", src, dst, 40,
                           CscOptions(**{**opts.__dict__, "memory_limit": 3000}), 13)
    assert stats.out_of_core and stats.runs > 1
    assert checksums(a) == checksums(b)


@pytest.mark.parametrize("limit", [None, 4096])
def test_empty_chunks_and_narrow_dtypes(tmp_path, limit):
    src, dst = _skewed_graph(60, 900, seed=7)
    chunks, first = [], 0
    for size in (0, 300, 0, 0, 450, 150, 0):
        chunks.append(EdgeChunk(src[first:first + size].astype(np.int32),
                                dst[first:first + size].astype(np.uint16), first, "e.csv",
                                first + 2))
        first += size
    opts = CscOptions(add_reverse_edges=True, deduplicate=True, memory_limit=limit)
    with StoreWriter(tmp_path / "s", name="t") as writer:
        stats = build_csc(chunks, 60, writer, opts)
        got = [np.array(read_array(writer.path, f"csc/{name}")) for name in TOPOLOGY]
    assert stats.out_of_core == (limit is not None)
    assert_layout_equal(got, reference_csc(src, dst, 60, opts))


@pytest.mark.parametrize("limit", [None, 8192])
def test_int64_node_ids(tmp_path, monkeypatch, limit):
    """The int64 layout of graphs with >= 2**31 nodes, forced on a small graph."""
    monkeypatch.setattr(csc_builder, "indices_dtype", lambda num_nodes: np.dtype(np.int64))
    src, dst = _skewed_graph(200, 3000, seed=11)
    opts = CscOptions(add_reverse_edges=True, deduplicate=True, build_csr=True,
                      memory_limit=limit)
    with StoreWriter(tmp_path / "s", name="t") as writer:
        stats = build_csc(chunks_of(src, dst, 500), 200, writer, opts)
        got = [np.array(read_array(writer.path, f"csc/{name}")) for name in TOPOLOGY]
    assert stats.out_of_core == (limit is not None)
    want = reference_csc(src, dst, 200, opts)
    assert want[1].dtype == np.int64
    assert_layout_equal(got, want)


def test_all_edges_removed_gives_empty_topology(tmp_path):
    src = dst = np.array([0, 1, 1, 2], dtype=np.int64)
    for limit in (None, 1):
        opts = CscOptions(remove_self_loops=True, build_csr=True, memory_limit=limit)
        store, stats = build_store(tmp_path / f"s{limit}", src, dst, 4, opts, 2)
        assert stats.num_edges == 0 and stats.self_loops_removed == 4
        np.testing.assert_array_equal(store.indptr, np.zeros(5, dtype=np.int64))
        assert store.manifest["arrays"]["csc/indices"]["shape"] == [0]


def test_progress_reports_every_stage(tmp_path):
    src, dst = _skewed_graph(100, 2000, seed=3)
    for limit in (None, 8192):
        seen: dict[str, list[tuple[int, int]]] = {}

        def progress(stage: str, done: int, total: int, seen=seen) -> None:
            seen.setdefault(stage, []).append((done, total))

        build_store(tmp_path / f"p{limit}", src, dst, 100, CscOptions(memory_limit=limit), 100,
                    progress=progress)
        assert set(seen) == {"counting", "scattering", "sorting"}
        assert seen["counting"][-1][0] == 2000
        done, total = seen["sorting"][-1]
        assert done == total > 0


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [None, 4096])
@pytest.mark.parametrize("column,value,kind", [("src", -1, "source"), ("dst", 50, "destination")])
def test_out_of_range_id_names_file_and_line(tmp_path, limit, column, value, kind):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 50, 1000), rng.integers(0, 50, 1000)
    (src if column == "src" else dst)[777] = value
    (src if column == "src" else dst)[900] = value + 1000  # a later bad ID is not the one named
    dest = tmp_path / "s"
    with StoreWriter(dest, name="t") as writer:
        with pytest.raises(IngestError) as info:
            build_csc(chunks_of(src, dst, 100), 50, writer, CscOptions(memory_limit=limit))
        # spill files are gone even while the writer stays open
        assert [p.name for p in writer.path.iterdir() if p.name.startswith(".csc")] == []
    assert str(info.value) == f"edges.csv: line 779: {kind} node id {value} out of range [0, 50)"
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []  # the temp tree (and any spill files) are gone


def test_empty_edge_list_is_an_error(tmp_path):
    empty = np.zeros(0, dtype=np.int64)
    with StoreWriter(tmp_path / "s", name="t") as writer:
        with pytest.raises(IngestError, match=r"^edges.csv: edge list is empty$"):
            build_csc([EdgeChunk(empty, empty, 0, "edges.csv", 2)], 5, writer)
        with pytest.raises(IngestError, match="edge list is empty"):
            build_csc(iter(()), 5, writer)
        with pytest.raises(IngestError, match="edge list is empty"):
            build_csc(iter(()), 5, writer, CscOptions(memory_limit=1))


def test_chunks_out_of_order_are_refused(tmp_path):
    chunks = [EdgeChunk(np.array([0, 1]), np.array([1, 0]), 0, "a.csv", 2),
              EdgeChunk(np.array([0]), np.array([1]), 5, "a.csv", 4)]
    with StoreWriter(tmp_path / "s", name="t") as writer, pytest.raises(
            IngestError, match=r"a.csv: line 4: chunk starts at edge 5, expected 2"):
        build_csc(chunks, 2, writer)


def test_bad_arguments():
    with pytest.raises(ValueError, match="memory_limit"):
        CscOptions(memory_limit=0)


# -- bounded memory ------------------------------------------------------------------------------

_RSS_CHILD = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path
    import numpy as np
    from graphpipe.ingest.chunks import EdgeChunk
    from graphpipe.ingest.csc_builder import CscOptions, build_csc, warm_up
    from graphpipe.store import StoreWriter

    NUM_EDGES, NUM_NODES, LIMIT = 2_000_000, 100_000, 16 << 20
    warm_up()

    def status_kb(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1])

    def edges():
        rng = np.random.default_rng(0)
        step = 1 << 15
        for start in range(0, NUM_EDGES, step):
            n = min(step, NUM_EDGES - start)
            dst = (NUM_NODES * rng.random(n) ** 2).astype(np.int64)
            yield EdgeChunk(rng.integers(0, NUM_NODES, n), dst, start, "gen", start + 1)

    with tempfile.TemporaryDirectory(dir=sys.argv[1]) as tmp:
        with StoreWriter(Path(tmp) / "s", name="rss") as writer:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset the peak (VmHWM) to the current RSS
            base = status_kb("VmRSS:")
            opts = CscOptions(add_reverse_edges=True, deduplicate=True, build_csr=True,
                              memory_limit=LIMIT)
            stats = build_csc(edges(), NUM_NODES, writer, opts)
            peak = status_kb("VmHWM:")
    print(json.dumps({"growth": (peak - base) * 1024, "limit": LIMIT,
                      "out_of_core": stats.out_of_core, "slots": stats.num_edges,
                      "groups": stats.groups}))
""")


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_peak_rss_stays_under_the_limit(tmp_path):
    out = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(tmp_path)], check=False,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["out_of_core"] and result["groups"] > 4
    edge_bytes = 2_000_000 * 16
    assert edge_bytes > 1.5 * result["limit"]  # and 4x that in CSC + CSR records
    # the reader's own chunks (32K edges) and allocator slack: a few MB over the limit
    assert result["growth"] < result["limit"] + (6 << 20), result


@pytest.mark.parametrize("memory_limit", [None, 3000])
@pytest.mark.parametrize("opts", [{}, {"sort_neighbors": False}, {"deduplicate": True},
                                  {"add_reverse_edges": True, "remove_self_loops": True,
                                   "deduplicate": True, "sort_neighbors": False, "build_csr": True}])
def test_without_edge_ids_the_topology_is_the_same(tmp_path, memory_limit, opts):
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 40, 900), rng.integers(0, 40, 900)
    options = CscOptions(memory_limit=memory_limit, **opts)
    store, _ = build_store(tmp_path / "a", src, dst, 40, options)
    bare, stats = build_store(tmp_path / "b", src, dst, 40, CscOptions(memory_limit=memory_limit,
                                                                       edge_ids=False, **opts))
    assert stats.out_of_core == (memory_limit is not None)
    layouts = ("csc", "csr") if options.build_csr else ("csc",)
    assert sorted(bare.manifest["arrays"]) == sorted(f"{p}/{n}" for p in layouts for n in ("indices", "indptr"))
    want = reference_csc(src, dst, 40, options)
    for prefix in layouts:
        for name in ("indptr", "indices"):
            key = f"{prefix}/{name}"
            assert bare.manifest["arrays"][key]["checksum"] == store.manifest["arrays"][key]["checksum"]
    np.testing.assert_array_equal(bare.indices, want[1])
    assert not bare.has_edge_ids and store.has_edge_ids
