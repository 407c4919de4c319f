"""One protocol over every store: sample_typed equals the local typed sampler (on a one-type
store the one-relation case, drawing exactly what sample draws), the remote typed loader
equals the local one, and hostile requests are refused early."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.ingest import ingest
from graphpipe.loaders import NeighborLoader
from graphpipe.ops.sampling import sample_neighbors_batches
from graphpipe.service import Client, RemoteHeteroSampler, SamplingServer
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag


@pytest.fixture(scope="module")
def typed_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("typed_svc")
    data = mag_dataset(papers=300, authors=400, institutions=20, fields=40, num_classes=3,
                       feature_dim=4, seed=2)
    return ingest(write_ogb_mag(root / "src", data), root / "store")


@pytest.fixture(scope="module")
def server(typed_store):
    srv = SamplingServer(typed_store, "grpc://127.0.0.1:0", threads=2)
    yield srv
    srv.close()


def _url(server):
    return f"grpc://127.0.0.1:{server.port}"


def test_remote_loader_yields_the_local_loaders_batches(server, typed_store):
    remote = RemoteHeteroSampler(_url(server))
    data = remote.graph_data(typed_store)
    kw = {"input_nodes": ("paper", "train"), "batch_size": 64, "shuffle": True, "seed": 7}
    local = list(NeighborLoader(data, [4, 3], **kw))
    over = list(NeighborLoader(data, [4, 3], sampler=remote, **kw))
    assert len(local) == len(over) > 2
    for a, b in zip(local, over):
        assert all(torch.equal(a.n_id[t], b.n_id[t]) for t in a.n_id)
        assert all(torch.equal(a.edge_index[e], b.edge_index[e]) for e in a.edge_index)
        assert all(torch.equal(a.e_id[e], b.e_id[e]) for e in a.e_id)
        assert torch.equal(a.x["paper"], b.x["paper"]) and torch.equal(a.y, b.y)
    remote.close()


def test_sample_typed_with_per_relation_fanouts(server):
    remote = RemoteHeteroSampler(_url(server))
    fanouts = {e: [2 if "cites" in e else 1] for e in remote.edge_types}
    seeds = [np.array([0, 5, 9]), np.array([3])]
    outs = remote.client.sample_typed(seeds, [11, 12], "paper", fanouts)
    graph = server.typed.graph
    per_rel = {tuple(k.split("___")): v for k, v in fanouts.items()}
    want = sample_neighbors_batches(graph, [{"paper": s} for s in seeds], per_rel, seeds=[11, 12])
    for got, exp in zip(outs, want):
        assert all(np.array_equal(got.n_id[t], exp.n_id[t]) for t in exp.n_id)
        assert all(np.array_equal(got.row[e], exp.row[e]) and np.array_equal(got.col[e], exp.col[e])
                   for e in exp.row)
        assert got.num_sampled_nodes == exp.num_sampled_nodes
    remote.close()


@pytest.mark.parametrize("params, seeds, message", [
    ({"ntype": "venue", "fanouts": [2]}, [0], "'ntype' must be one of"),
    ({"ntype": "paper", "fanouts": [2]}, [300], "(batch 0, paper) must be dense node IDs in [0, 300)"),
    ({"ntype": "paper", "fanouts": [2]}, [1, 1], "must be unique"),
    ({"ntype": "paper", "fanouts": [-2]}, [0], "'fanouts' entries must be integers >= -1"),
    ({"ntype": "paper", "fanouts": {"a___b___c": [1]}}, [0], "must name every relation"),
    ({"ntype": "paper", "fanouts": [2], "evil": 1}, [0], "unknown sample_typed parameter"),
])
def test_hostile_requests_are_refused_and_the_server_keeps_serving(server, params, seeds, message):
    from graphpipe.service import protocol

    client = Client(_url(server), shared_memory=False)
    request = protocol.sample_request_batch([np.array(seeds)], [0])
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)").replace("(", r"\(")):
        client._exchange(protocol.encode_command("sample_typed", **params), request)
    assert client.health()["status"] == "ready"
    client.close()


def test_request_bound_is_checked_before_sampling(typed_store):
    srv = SamplingServer(typed_store, "grpc://127.0.0.1:0", threads=1, max_request_bytes=4096)
    client = Client(_url(srv), shared_memory=False)
    with pytest.raises(ValueError, match="--max-request-bytes 4096"):
        client.sample_typed([np.arange(200)], [0], "paper", [-1, -1])
    client.close()
    srv.close()


def test_a_typed_store_refuses_the_one_relation_ops(server):
    client = Client(_url(server), shared_memory=False)
    with pytest.raises(ValueError, match="serves 'sample_typed' only"):
        client.sample(np.array([0]), [2])
    assert client.info()["typed"]["edge_types"][0] == "author___affiliated_with___institution"
    client.close()


@pytest.mark.parametrize("fanouts, replace, frontier", [([3, 2], False, "new"), ([2, 2], True, "new"),
                                                        ([-1, 2], False, "all")])
def test_a_one_type_store_is_the_one_relation_case(tmp_path, fanouts, replace, frontier):
    """sample_typed on a one-type store samples the relation _N____E____N, and draws exactly
    what sample draws (its relation key is the hop key)."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "g.npz", src=rng.integers(0, 40, 300), dst=rng.integers(0, 40, 300))
    plain = SamplingServer(ingest(tmp_path / "g.npz", tmp_path / "g"), "grpc://127.0.0.1:0", threads=2)
    client = Client(_url(plain), shared_memory=False)
    assert client.info()["typed"] == {"node_types": {"_N": 40}, "edge_types": ["_N____E____N"],
                                      "reverse": False}
    seeds, keys = [np.array([0, 7, 3]), np.array([12])], [5, 6]
    typed = client.sample_typed(seeds, keys, "_N", fanouts, replace=replace, frontier=frontier)
    if frontier == "new":
        homogeneous = client.sample_batches(seeds, keys, fanouts, replace=replace)
        for got, want in zip(typed, homogeneous):
            assert np.array_equal(got.n_id["_N"], want.output.n_id)
            for layer, block in zip(got.blocks(), want.output.blocks):
                b = layer[("_N", "_E", "_N")]
                assert np.array_equal(b.indptr, block.indptr) and np.array_equal(b.indices, block.indices)
                assert np.array_equal(b.edge_ids, block.edge_ids)
    local = sample_neighbors_batches(plain.typed.graph, [{"_N": s} for s in seeds], fanouts, seeds=keys,
                                     replace=replace, frontier=frontier)
    for got, want in zip(typed, local):
        assert np.array_equal(got.n_id["_N"], want.n_id["_N"])
        assert got.num_sampled_edges == want.num_sampled_edges
    with pytest.raises(ValueError, match=r"'ntype' must be one of \['_N'\]"):
        client.sample_typed([np.array([0])], [0], "paper", [2])
    remote = RemoteHeteroSampler(_url(plain))
    assert remote.node_types == {"_N": 40} and remote.edge_types == ["_N____E____N"]
    remote.close()
    client.close()
    plain.close()


def test_a_loader_over_another_graph_is_refused(server, typed_store):
    remote = RemoteHeteroSampler(_url(server))
    with pytest.raises(ValueError, match="is not the one the service samples"):
        NeighborLoader(typed_store, [2], input_nodes=("paper", None), batch_size=8,
                       sampler=remote)  # the stored relations only: no reverses
    remote.close()
