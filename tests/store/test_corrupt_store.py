"""A corrupt store is untrusted input (issue 14, items 3 and 7).

A corpus of damaged copies of one small store: flipped bytes in every array's chunks,
truncated and missing chunk files, edited ``zarr.json`` (dtype, shape) and edited
manifests (counts raised and lowered, the recorded index range, torn JSON). For each,
``GraphStore.open`` and the reads after it, ``validate`` (library and CLI), the
``NeighborLoader`` and ``graphpipe serve`` with a client give a clean one-line error (or
the right answer when the damage is benign: a flipped feature byte is a checksum
finding for ``validate``, not an error for a reader), and no signal ever kills a
process: loader and server run in subprocesses whose return code must not be negative.

The every-byte corpus (each byte of the topology chunks flipped in turn) is marked
``slow``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from graphpipe.ops.sampling import sample_neighbors
from graphpipe.store import CorruptStoreError, GraphStore, StoreError, StoreWriter
from graphpipe.store.checks import check_topology
from graphpipe.store.validate import validate

N, E, DIM, CHUNK_ROWS = 64, 512, 8, 16
SUBPROCESS_TIMEOUT_S = 240


def _build(dest: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N, E), rng.integers(0, N, E)
    order = np.lexsort((src, dst))
    indptr = np.zeros(N + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=N), out=indptr[1:])
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    y = rng.integers(0, 4, N)
    perm = rng.permutation(N)
    with StoreWriter(dest, name="corpus") as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", src[order].astype(np.int32))
        w.write_array("csc/edge_id", order.astype(np.int64))
        w.write_array("node/feat", x, chunk_rows=CHUNK_ROWS)
        w.write_array("node/label", y)
        w.write_splits({"train": perm[:32], "valid": perm[32:48], "test": perm[48:]})
        w.manifest.update(num_nodes=N, num_edges=E, node_features={"dim": DIM, "dtype": "float32"})
        w.commit()
    return {"indptr": indptr, "indices": src[order].astype(np.int32), "x": x, "y": y}


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    path = tmp_path_factory.mktemp("clean") / "store"
    return path, _build(path)


# -- the corpus ---------------------------------------------------------------------------------
def _chunks(store: Path, key: str) -> list[Path]:
    return sorted(p for p in (store / key / "c").rglob("*") if p.is_file())


def _flip(key: str, byte: int, chunk: int = 0, mask: int = 0xFF) -> Callable[[Path], None]:
    def mutate(store: Path) -> None:
        path = _chunks(store, key)[chunk]
        data = bytearray(path.read_bytes())
        data[byte] ^= mask
        path.write_bytes(bytes(data))
    return mutate


def _truncate(key: str, chunk: int = 0) -> Callable[[Path], None]:
    def mutate(store: Path) -> None:
        path = _chunks(store, key)[chunk]
        path.write_bytes(path.read_bytes()[:-3])
    return mutate


def _remove(key: str, chunk: int = 0) -> Callable[[Path], None]:
    return lambda store: _chunks(store, key)[chunk].unlink()


def _edit_json(relpath: str, edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def mutate(store: Path) -> None:
        path = store / relpath
        doc = json.loads(path.read_text())
        edit(doc)
        path.write_text(json.dumps(doc))
    return mutate


def _set(*path_and_value) -> Callable[[dict], None]:
    *keys, value = path_and_value

    def edit(doc: dict) -> None:
        for k in keys[:-1]:
            doc = doc[k]
        doc[keys[-1]] = value(doc[keys[-1]]) if callable(value) else value
    return edit


def _tear(relpath: str) -> Callable[[Path], None]:
    def mutate(store: Path) -> None:
        path = store / relpath
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    return mutate


MANIFEST, ZARR = "manifest.json", "zarr.json"
CASES: dict[str, tuple[Callable[[Path], None], bool]] = {
    # name: (mutation, benign for readers)
    "indices-flipped-high-byte": (_flip("csc/indices", 4 * 10 + 3), False),
    "indices-flipped-low-bit": (_flip("csc/indices", 4 * 200, mask=0x02), True),  # stays in range
    "indptr-flipped": (_flip("csc/indptr", 8 * 20 + 2), False),
    "indptr-flipped-last": (_flip("csc/indptr", 8 * N), False),
    "edge_id-flipped": (_flip("csc/edge_id", 8 * 7 + 1), True),
    "feat-flipped": (_flip("node/feat", 4 * DIM * 3 + 1, chunk=1), True),
    "label-flipped": (_flip("node/label", 8 * 5), True),
    "indices-truncated": (_truncate("csc/indices"), False),
    "indptr-truncated": (_truncate("csc/indptr"), False),
    "feat-truncated": (_truncate("node/feat", chunk=2), False),
    "label-truncated": (_truncate("node/label"), False),
    "indices-missing": (_remove("csc/indices"), False),
    "indptr-missing": (_remove("csc/indptr"), False),
    "feat-missing": (_remove("node/feat", chunk=3), False),
    "indices-zarr-dtype": (_edit_json(f"csc/indices/{ZARR}", _set("data_type", "uint32")), False),
    "indptr-zarr-dtype": (_edit_json(f"csc/indptr/{ZARR}", _set("data_type", "float64")), False),
    "feat-zarr-dtype": (_edit_json(f"node/feat/{ZARR}", _set("data_type", "int32")), False),
    "indptr-zarr-shape": (_edit_json(f"csc/indptr/{ZARR}", _set("shape", [N - 9])), False),
    "feat-zarr-shape": (_edit_json(f"node/feat/{ZARR}", _set("shape", [N + 16, DIM])), False),
    "indices-zarr-torn": (_tear(f"csc/indices/{ZARR}"), False),
    "num_nodes-lowered": (_edit_json(MANIFEST, _set("num_nodes", N - 10)), False),
    "num_nodes-raised": (_edit_json(MANIFEST, _set("num_nodes", N + 10)), False),
    "num_edges-lowered": (_edit_json(MANIFEST, _set("num_edges", E - 1)), False),
    "num_nodes-negative": (_edit_json(MANIFEST, _set("num_nodes", -1)), False),
    "indices-range-outside": (_edit_json(MANIFEST, _set("arrays", "csc/indices", "range", [0, N])), False),
    "indices-range-wrong": (_edit_json(MANIFEST, _set("arrays", "csc/indices", "range", [1, N - 2])),
                            False),
    "indices-dtype-in-manifest": (_edit_json(MANIFEST, _set("arrays", "csc/indices", "dtype", "float32")),
                                  False),
    "manifest-torn": (_tear(MANIFEST), False),
    "splits-missing": (lambda store: (store / "tables" / "splits.parquet").unlink(), False),
    "splits-torn": (_tear("tables/splits.parquet"), False),
}
LOADER_CASES = ["indices-flipped-high-byte", "num_nodes-lowered", "indptr-truncated",
                "indices-zarr-dtype", "feat-flipped"]
SERVE_CASES = ["indices-flipped-high-byte", "num_nodes-lowered", "feat-missing", "feat-flipped"]


def _damaged(clean: tuple[Path, dict], tmp_path: Path, case: str) -> Path:
    store = tmp_path / case
    shutil.copytree(clean[0], store)
    CASES[case][0](store)
    return store


def _one_line(message: str) -> None:
    assert message and "\n" not in message.strip() and "Traceback" not in message, message


# -- open and read (in process: the checks come before any kernel) ----------------------------
def _read_everything(store_path: Path) -> GraphStore:
    store = GraphStore.open(store_path)
    store.topology()
    store.features(np.arange(store.num_nodes))
    store.labels  # noqa: B018 - the read is the test
    for name in store.split_names:
        store.split(name)
    return store


@pytest.mark.parametrize("case", sorted(CASES))
def test_open_and_read(clean, tmp_path, case):
    store_path = _damaged(clean, tmp_path, case)
    benign = CASES[case][1]
    try:
        store = _read_everything(store_path)
    except StoreError as exc:
        assert not benign, f"{case}: a benign corruption was refused: {exc}"
        _one_line(str(exc))
        assert str(tmp_path) in str(exc)
        return
    assert benign, f"{case}: a corrupt store was read without an error"
    ref = clean[1]
    indptr, indices = store.topology()
    np.testing.assert_array_equal(indptr, ref["indptr"])
    assert ((indices >= 0) & (indices < N)).all()
    if case != "feat-flipped":
        np.testing.assert_array_equal(store.features(np.arange(N)), ref["x"])


def test_dtype_edit_is_named(clean, tmp_path):
    store = GraphStore.open(_damaged(clean, tmp_path, "indices-zarr-dtype"))
    with pytest.raises(CorruptStoreError, match=r"csc/indices/zarr.json: dtype uint32 does not match "
                                                r"the manifest's int32"):
        store.indices  # noqa: B018
    with pytest.raises(CorruptStoreError, match=r"num_nodes = 54"):
        GraphStore.open(_damaged(clean, tmp_path, "num_nodes-lowered"))


# -- validate --------------------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_reports_every_corruption(clean, tmp_path, case):
    from graphpipe.cli.main import cli

    store_path = _damaged(clean, tmp_path, case)
    problems = validate(store_path)
    assert problems, f"{case}: validate found nothing"
    for problem in problems:
        _one_line(problem)
    result = CliRunner().invoke(cli, ["validate", str(store_path)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert lines and all(line.startswith("invalid: ") for line in lines), result.output


def test_validate_names_missing_and_truncated_chunks(clean, tmp_path):
    problems = validate(_damaged(clean, tmp_path, "feat-missing"))
    assert any("chunk file missing for array 'node/feat'" in p for p in problems), problems
    problems = validate(_damaged(clean, tmp_path, "indices-truncated"), checksums=False)
    assert any("csc/indices" in p and "expected 2048" in p for p in problems), problems
    problems = validate(_damaged(clean, tmp_path, "feat-zarr-dtype"))
    assert any("dtype int32 does not match the manifest's float32" in p for p in problems), problems


def test_clean_store_is_valid(clean):
    assert validate(clean[0]) == []
    assert GraphStore.open(clean[0]).manifest["arrays"]["csc/indices"]["range"] == [
        int(clean[1]["indices"].min()), int(clean[1]["indices"].max())]


# -- the topology check on arrays given directly ---------------------------------------------
@pytest.mark.parametrize("damage,message", [
    (lambda p, i: i.__setitem__(3, N), "entry 3 = 64 is outside [0, 64)"),
    (lambda p, i: i.__setitem__(0, -1), "entry 0 = -1 is outside"),
    (lambda p, i: p.__setitem__(5, p[6] + 1), "indptr decreases at node 5"),
    (lambda p, i: p.__setitem__(0, 1), "indptr starts at 1"),
    (lambda p, i: p.__setitem__(N, E - 1), f"indptr ends at {E - 1}"),
])
def test_check_topology_and_loader_arrays(clean, damage, message):
    from graphpipe.loaders import NeighborLoader

    indptr, indices = clean[1]["indptr"].copy(), clean[1]["indices"].copy()
    check_topology(indptr, indices, N)
    damage(indptr, indices)
    with pytest.raises(CorruptStoreError, match=re.escape(message)):
        check_topology(indptr, indices, N)
    with pytest.raises(ValueError, match="'data'"):
        NeighborLoader({"indptr": indptr, "indices": indices}, [2], batch_size=8, input_nodes=np.arange(8), shuffle=True)


def test_skip_env_turns_the_checks_off(clean, tmp_path, monkeypatch):
    store_path = _damaged(clean, tmp_path, "num_nodes-lowered")
    monkeypatch.setenv("GRAPHPIPE_SKIP_STORE_CHECKS", "1")
    assert GraphStore.open(store_path).num_nodes == N - 10
    monkeypatch.setenv("GRAPHPIPE_SKIP_STORE_CHECKS", "0")
    with pytest.raises(CorruptStoreError):
        GraphStore.open(store_path)


# -- the loader and the server, in subprocesses -------------------------------------------------
LOADER_SCRIPT = textwrap.dedent("""
    import sys
    from graphpipe.loaders import NeighborLoader
    from graphpipe.store import StoreError
    try:
        loader = NeighborLoader(sys.argv[1], [3, 2], batch_size=8, input_nodes="train", seed=0)
        batches = sum(1 for _ in loader)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 1))
    print(f"ok {batches}")
""")


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S,
                          check=False, **kw)


def _assert_clean_exit(proc: subprocess.CompletedProcess, benign: bool, case: str) -> None:
    assert proc.returncode >= 0, f"{case}: killed by signal {-proc.returncode}: {proc.stderr[-2000:]}"
    if benign:
        assert proc.returncode == 0, f"{case}: {proc.stderr[-2000:]}"
    else:
        assert proc.returncode == 2, f"{case}: exit {proc.returncode}: {proc.stderr[-2000:]}"
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr


@pytest.mark.parametrize("case", LOADER_CASES)
def test_neighbor_loader_in_a_subprocess(clean, tmp_path, case):
    proc = _run([sys.executable, "-c", LOADER_SCRIPT, str(_damaged(clean, tmp_path, case))])
    _assert_clean_exit(proc, CASES[case][1], case)
    if CASES[case][1]:
        assert proc.stdout.strip() == "ok 4"


def _serve(store: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "graphpipe.cli.serve", str(store), "--port", "0",
                             "--threads", "2", "--shared-memory-mib", "0", "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("case", SERVE_CASES)
def test_serve_and_a_client_request(clean, tmp_path, case):
    from graphpipe.service.client import Client

    proc = _serve(_damaged(clean, tmp_path, case))
    try:
        line = proc.stdout.readline()  # the address, or nothing once the server exits
        if not line.startswith("serving "):
            proc.wait(timeout=SUBPROCESS_TIMEOUT_S)
            stderr = proc.stderr.read()
            _assert_clean_exit(subprocess.CompletedProcess(proc.args, proc.returncode, line, stderr),
                               CASES[case][1], case)
            return
        assert CASES[case][1], f"{case}: the server started on a corrupt store"
        with Client(line.split(" on ", 1)[1].strip()) as client:
            got = client.sample(np.arange(4), [3, 2], seed=5).output
            want = sample_neighbors(clean[1]["indptr"], clean[1]["indices"], np.arange(4), [3, 2], seed=5)
            np.testing.assert_array_equal(got.n_id, want.n_id)
            rows = client.features(np.arange(N))  # one flipped byte in row 16 + 3: the rest intact
            assert np.array_equal(np.delete(rows, 19, 0), np.delete(clean[1]["x"], 19, 0))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=SUBPROCESS_TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


# -- every byte flipped in turn (slow) ---------------------------------------------------------
FUZZ_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from graphpipe.loaders import NeighborLoader
    from graphpipe.store import StoreError
    target = Path(sys.argv[1]) / sys.argv[2]
    original = target.read_bytes()
    refused = 0
    for i in range(len(original)):
        data = bytearray(original)
        data[i] ^= 0xFF
        target.write_bytes(bytes(data))
        try:
            for _ in NeighborLoader(sys.argv[1], [3, 2], batch_size=16, input_nodes="train", seed=i,
                                    match_reorder=False, prefetch=0):
                pass
        except (StoreError, ValueError, KeyError) as exc:  # a clean, one-line refusal
            assert "\\n" not in str(exc), (i, str(exc))
            refused += 1
    target.write_bytes(original)
    print(len(original), refused)
""")
FUZZ_FILES = ["csc/indptr/c/0", "csc/indices/c/0", "node/label/c/0", "csc/indices/zarr.json",
              "manifest.json", "tables/splits.parquet"]


@pytest.mark.slow
@pytest.mark.parametrize("relpath", FUZZ_FILES)
def test_every_flipped_byte(clean, tmp_path, relpath):
    """Each byte of the file flipped in turn, a loader epoch each: a clean refusal or a
    finished epoch, never a signal (the corpus above picks the interesting cases)."""
    store = tmp_path / "fuzz"
    shutil.copytree(clean[0], store)
    proc = _run([sys.executable, "-c", FUZZ_SCRIPT, str(store), relpath],
                env={**os.environ, "NUMBA_NUM_THREADS": "2"})
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    total, refused = map(int, proc.stdout.split())
    assert total == (clean[0] / relpath).stat().st_size
    assert refused == 0 if relpath.startswith("node/label") else refused > 0  # labels: benign


def test_damaged_compressed_chunk(tmp_path):
    """A flipped byte inside a zstd chunk: the read refuses (naming the array) or returns
    rows of the right shape; validate reports the checksum either way."""
    rng = np.random.default_rng(1)
    with StoreWriter(tmp_path / "s") as w:
        w.write_array("csc/indptr", np.zeros(N + 1, np.int64))
        w.write_array("csc/indices", np.zeros(0, np.int32))
        w.write_array("node/feat", rng.standard_normal((N, DIM)).astype(np.float32), chunk_rows=CHUNK_ROWS,
                      compression="zstd")
        w.manifest.update(num_nodes=N, num_edges=0, node_features={"dim": DIM, "dtype": "float32"})
        w.commit()
    for i, at in enumerate((20, 40, 80)):
        store_path = tmp_path / f"c{i}"
        shutil.copytree(tmp_path / "s", store_path)
        _flip("node/feat", at, chunk=1)(store_path)
        try:
            rows = GraphStore.open(store_path, in_memory=True).features(np.arange(N))
        except CorruptStoreError as exc:
            _one_line(str(exc))
            assert "node/feat" in str(exc)
        else:
            assert rows.shape == (N, DIM)
        assert any("node/feat: checksum" in p for p in validate(store_path))
