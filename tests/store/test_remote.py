"""A store on object storage (``s3://``) against a real S3 server on loopback (moto, see
conftest.py): ingest, open, a loader epoch equal to the local store's bit for bit, validate,
the CLI, the chunk cache (each object read once), no half-written store, and a server
restart in the middle of a read."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.loaders import NeighborLoader
from graphpipe.store import GraphStore, StoreError, StoreWriter, open_store
from graphpipe.store import remote as remote_mod
from graphpipe.store.object_store import RemotePrefix
from graphpipe.store.upload import upload_store
from graphpipe.store.validate import validate
from tests.store.conftest import assert_cache_whole


@pytest.fixture(scope="module")
def local_store(ogb_raw_folder, tmp_path_factory) -> GraphStore:
    folder, _meta = ogb_raw_folder
    return ingest(folder, tmp_path_factory.mktemp("local") / "g")


def _rechunked(store: GraphStore, dest: Path, feat_chunk_rows: int) -> GraphStore:
    """A copy of ``store`` whose feature matrix is cut into chunks of ``feat_chunk_rows`` rows."""
    with StoreWriter(dest, name=store.name) as w:
        for key in store.manifest["arrays"]:
            a = np.asarray(store.array(key))
            w.write_array(key, a, chunk_rows=feat_chunk_rows if a.ndim > 1 else None)
        for key in store.manifest["tables"]:
            w.write_table(key, store.table(key))
        for field in ("num_nodes", "num_edges", "graph", "node_features", "edge_features",
                      "labels", "splits", "id_map"):
            w.manifest[field] = store.manifest[field]
        w.commit()
    return GraphStore.open(dest)


def _epoch(store: GraphStore) -> list:
    loader = NeighborLoader(store, [5, 3], "train", batch_size=300, shuffle=True, seed=7)
    return [(b.n_id.clone(), b.x.clone(), b.y.clone(), b.edge_index.clone()) for b in loader]


def _assert_same_epoch(a: list, b: list) -> None:
    assert len(a) == len(b) > 1
    for left, right in zip(a, b):
        for u, v in zip(left, right):
            assert u.dtype == v.dtype and torch.equal(u, v)


def test_ingest_open_epoch_validate(s3_server, local_store, ogb_raw_folder, tmp_path) -> None:
    url = f"s3://{s3_server.bucket}/ingested/g"
    store = ingest(ogb_raw_folder[0], url)
    assert repr(store).startswith(f"GraphStore('{url}'")
    remote = open_store(url, cache_dir=tmp_path / "cache")
    assert remote.manifest["arrays"].keys() == local_store.manifest["arrays"].keys()
    for key in local_store.manifest["arrays"]:
        got, want = remote.array(key), local_store.array(key)
        assert got.dtype == want.dtype and np.array_equal(got, want), key
    for name in local_store.split_names:
        assert np.array_equal(remote.split(name), local_store.split(name))
    _assert_same_epoch(_epoch(remote), _epoch(local_store))
    assert validate(url) == []


def test_cache_reads_each_object_once(s3_server, local_store, tmp_path) -> None:
    url = f"s3://{s3_server.bucket}/cached/g"
    upload_store(_rechunked(local_store, tmp_path / "chunked", 100).path, url)
    first = open_store(url, cache_dir=tmp_path / "cache")
    listing = RemotePrefix(url).list()          # all but the zarr groups' own metadata:
    objects = {k: n for k, n in listing.items() if k == "manifest.json" or k in first.manifest["tables"]
               or any(k.startswith(a + "/") for a in first.manifest["arrays"])}
    first.prefetch()
    assert first.requests.gets == len(objects)              # the manifest + every object once
    assert first.requests.get_bytes == sum(objects.values())
    again = open_store(url, cache_dir=tmp_path / "cache")
    _assert_same_epoch(_epoch(again), _epoch(local_store))
    assert again.requests.gets == 1                          # the manifest only


def test_concurrent_readers_share_the_cache(s3_server, local_store, tmp_path) -> None:
    """Two readers of one cache (as two ranks of a machine): each chunk downloaded once."""
    url = f"s3://{s3_server.bucket}/shared/g"
    upload_store(_rechunked(local_store, tmp_path / "chunked", 50).path, url)
    feat_chunks = [k for k in RemotePrefix(url).list() if k.startswith("node/feat/c/")]
    stores = [open_store(url, cache_dir=tmp_path / "cache") for _ in range(2)]
    before = sum(s.cache.fetched_files for s in stores)         # the manifest, once
    gate = threading.Barrier(2)

    def read(store: GraphStore) -> None:
        gate.wait()
        store.features(np.arange(store.num_nodes))

    threads = [threading.Thread(target=read, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(s.cache.fetched_files for s in stores) - before == len(feat_chunks) + 1  # + zarr.json
    for s in stores:
        assert np.array_equal(s.features(np.arange(s.num_nodes)), local_store.feat)


def test_server_restart_mid_read(s3_server, local_store, tmp_path, monkeypatch) -> None:
    """The server goes away after the third chunk of a cold read and comes back on the same
    port a second later: the read waits (obstore's retries), resumes, and the bytes match."""
    url = f"s3://{s3_server.bucket}/restart/g"
    upload_store(_rechunked(local_store, tmp_path / "chunked", 40).path, url)
    store = open_store(url, cache_dir=tmp_path / "cache")
    real_write, outage, chunks = remote_mod.ChunkCache._write, {}, []

    def write_then_stop(self, key: str, data) -> None:
        real_write(self, key, data)
        chunks.append(key) if key.startswith("node/feat/c/") else None
        if len(chunks) == 3 and not outage:
            s3_server.stop()
            outage["stopped"] = time.perf_counter()
            threading.Timer(1.0, s3_server.start_again).start()

    monkeypatch.setattr(remote_mod.ChunkCache, "_write", write_then_stop)
    started = time.perf_counter()
    rows = store.features(np.arange(store.num_nodes))
    assert outage and time.perf_counter() - started >= 1.0      # the read did wait for the server
    assert np.array_equal(rows, local_store.feat)
    assert len(store.feature_chunks()[0]) == -(-local_store.num_nodes // 40)
    assert validate(url) == []


def test_no_manifest_no_store(s3_server, local_store, tmp_path) -> None:
    """An upload that stopped before its manifest is not a store: readers refuse it."""
    url = f"s3://{s3_server.bucket}/partial/g"
    root = local_store.path
    files = [p for p in root.rglob("*") if p.is_file() and p.name != "manifest.json"]
    RemotePrefix(url, read_only=False).put_many(
        [(p.relative_to(root).as_posix(), p.read_bytes()) for p in files])
    with pytest.raises(StoreError, match="no manifest.json"):
        open_store(url, cache_dir=tmp_path / "cache")
    assert validate(url)[0].startswith(f"{url}: no manifest.json")
    with pytest.raises(StoreError, match="already exists"):
        upload_store(root, url)
    upload_store(root, url, overwrite=True)                 # an unfinished upload is replaced
    assert open_store(url, cache_dir=tmp_path / "cache").num_nodes == local_store.num_nodes


def test_hostile_manifest_keys_are_refused(s3_server, local_store, tmp_path) -> None:
    url = f"s3://{s3_server.bucket}/hostile/g"
    manifest = dict(local_store.manifest)
    manifest["tables"] = {"../../escape.parquet": {"rows": 1, "columns": {}, "checksum": "x"}}
    RemotePrefix(url, read_only=False).put_many([("manifest.json", json.dumps(manifest).encode())])
    with pytest.raises(StoreError, match="not allowed"):
        open_store(url, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "escape.parquet").exists()


def test_remote_store_is_read_only(s3_server, local_store, tmp_path) -> None:
    url = f"s3://{s3_server.bucket}/readonly/g"
    upload_store(local_store.path, url)
    store = open_store(url, cache_dir=tmp_path / "cache")
    with pytest.raises(StoreError, match="read only"):
        store.add_derived("x", {"derived/x": np.zeros(3)}, {})


def test_cli_ingest_validate_info(s3_server, ogb_raw_folder, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GRAPHPIPE_CACHE_DIR", str(tmp_path / "cache"))
    url = f"s3://{s3_server.bucket}/cli/g"
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(ogb_raw_folder[0]), url, "--quiet"])
    assert result.exit_code == 0, result.output
    assert url in result.output
    result = runner.invoke(cli, ["validate", url])
    assert result.exit_code == 0 and f"{url}: valid" in result.output, result.output
    result = runner.invoke(cli, ["info", url, "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["path"] == url and info["total_bytes"] == sum(RemotePrefix(url).list().values())
    result = runner.invoke(cli, ["ingest", str(ogb_raw_folder[0]), url, "--quiet"])
    assert result.exit_code == 2 and "already exists" in result.output
    result = runner.invoke(cli, ["info", f"s3://{s3_server.bucket}/nothing-here"])
    assert result.exit_code == 2 and result.output.startswith("error: s3://") \
        and len(result.output.strip().splitlines()) == 1


def test_credentials_come_from_the_environment_only(s3_server, monkeypatch) -> None:
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(StoreError, match="AWS_SECRET_ACCESS_KEY"):
        open_store(f"s3://{s3_server.bucket}/cli/g")


def test_cli_train_on_a_store_on_s3(s3_server, ogb_raw_folder, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GRAPHPIPE_CACHE_DIR", str(tmp_path / "cache"))
    url = f"s3://{s3_server.bucket}/train/g"
    ingest(ogb_raw_folder[0], url)
    result = CliRunner().invoke(cli, ["train", url, "--epochs", "1", "--hidden", "16"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{url}: 2000 nodes") and "test acc" in result.output


def test_large_objects_come_in_ranged_parts(s3_server, local_store, tmp_path, monkeypatch) -> None:
    """Objects above RANGED_BYTES are fetched in ranged GETs written at their offsets."""
    url = f"s3://{s3_server.bucket}/ranged/g"
    upload_store(local_store.path, url)
    monkeypatch.setattr(remote_mod, "RANGED_BYTES", 4096)
    monkeypatch.setattr(remote_mod, "PART_BYTES", 5000)
    store = open_store(url, cache_dir=tmp_path / "cache")
    before = store.requests.gets
    feat = store.feat
    nbytes = local_store.feat.nbytes
    assert store.requests.gets - before == 1 + -(-nbytes // 5000)     # zarr.json + the parts
    assert np.array_equal(feat, local_store.feat)
    assert validate(url) == []


def test_a_truncated_object_is_an_error_naming_it(s3_server, local_store, tmp_path, monkeypatch) -> None:
    url = f"s3://{s3_server.bucket}/truncated/g"
    upload_store(local_store.path, url)
    RemotePrefix(url, read_only=False).put_many([("node/feat/c/0/0", b"\0" * 100)])
    monkeypatch.setattr(remote_mod, "RANGED_BYTES", 4096)
    store = open_store(url, cache_dir=tmp_path / "cache")
    with pytest.raises(StoreError, match="node/feat/c/0/0"):
        store.features(np.array([0]))
    assert not list((tmp_path / "cache").rglob("node/feat/c/0/0"))       # nothing half written


_RANK = """
import os, sys, time
import numpy as np
from graphpipe.store import open_store
url, cache, go = sys.argv[1:4]
store = open_store(url, cache_dir=cache)
open(go + "." + str(os.getpid()), "w").close()            # ready
while not os.path.exists(go):
    time.sleep(0.01)
rows = store.features(np.arange(store.num_nodes))
print(store.requests.gets, store.requests.get_bytes, float(rows.sum()))
"""


def test_two_processes_fetch_each_object_once(s3_server, local_store, tmp_path) -> None:
    """Two processes (as two ranks of one machine) read the features through one cache at
    the same moment: together they GET each feature chunk once."""
    url = f"s3://{s3_server.bucket}/ranks/g"
    upload_store(_rechunked(local_store, tmp_path / "chunked", 50).path, url)
    listing = RemotePrefix(url).list()
    feat = {k: n for k, n in listing.items() if k.startswith("node/feat/")}
    cache, go = tmp_path / "cache", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _RANK, url, str(cache), str(go)],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    deadline = time.monotonic() + 240
    while len(list(tmp_path.glob("go.*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)                                       # both opened: start together
    go.touch()
    outs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    gets = sum(int(o[0]) for o in outs) - 2                   # each process: its manifest GET
    fetched = sum(int(o[1]) for o in outs) - 2 * listing["manifest.json"]
    assert (gets, fetched) == (len(feat), sum(feat.values()))  # zarr.json + chunks, once
    assert {o[2] for o in outs} == {str(float(local_store.feat.sum()))}
    assert_cache_whole(cache)                                  # no torn file, every one verified


def test_a_typed_store_on_s3(s3_server, tmp_path) -> None:
    """The typed face (issue 17) reads through the same cache: every typed array equal."""
    from graphpipe.store.writer import TypedStoreWriter

    rng = np.random.default_rng(3)
    with TypedStoreWriter(tmp_path / "typed", {"paper": 50, "author": 30}) as w:
        w.add_relation(("author", "writes", "paper"), rng.integers(0, 30, 200), rng.integers(0, 50, 200))
        w.add_relation(("paper", "cites", "paper"), rng.integers(0, 50, 300), rng.integers(0, 50, 300))
        w.write_node_array("paper", "feat", rng.standard_normal((50, 4)).astype(np.float32))
        w.write_node_array("author", "feat", rng.standard_normal((30, 2)).astype(np.float32))
        w.write_node_array("paper", "label", rng.integers(0, 3, 50))
        w.write_split("paper", "train", np.arange(0, 50, 2))
        w.commit()
    local = GraphStore.open(tmp_path / "typed")
    url = f"s3://{s3_server.bucket}/typed/g"
    upload_store(local.path, url)
    remote = open_store(url, cache_dir=tmp_path / "cache")
    assert remote.is_typed and remote.node_types == local.node_types
    for etype in local.edge_types:
        for got, want in zip(remote.typed_csc(etype), local.typed_csc(etype)):
            assert np.array_equal(got, want)
    for ntype in local.node_types:
        assert np.array_equal(remote.typed_features(ntype), local.typed_features(ntype))
    assert np.array_equal(remote.typed_split("paper", "train"), local.typed_split("paper", "train"))
    assert validate(url) == []


def test_serve_a_store_on_s3(s3_server, local_store, tmp_path) -> None:
    """``graphpipe serve s3://...`` (a subprocess with the AWS_* variables): a RemoteSampler
    over it yields the local loader's epoch."""
    from types import SimpleNamespace

    from graphpipe.service import RemoteSampler
    from tests.service.test_service import start_server

    url = f"s3://{s3_server.bucket}/served/g"
    upload_store(local_store.path, url)
    server = start_server(SimpleNamespace(path=url), tmp_path / "serve.log")
    try:
        sampler = RemoteSampler(server.url, shared_memory=False)
        remote = NeighborLoader(local_store, [5, 3], "train", batch_size=300, shuffle=True, seed=7,
                                sampler=sampler)
        _assert_same_epoch([(b.n_id, b.x, b.y, b.edge_index) for b in remote], _epoch(local_store))
        sampler.close()
    finally:
        assert server.stop() == 0


def test_graphstore_open_reads_local_stores_only() -> None:
    """A URL goes through ``graphpipe.store.open``; ``GraphStore.open`` says so in one line."""
    with pytest.raises(StoreError, match=r"graphpipe\.store\.open\('s3://graphs/g'\)"):
        GraphStore.open("s3://graphs/g")
