"""NeighborLoader as a drop-in for PyG's: its signature and defaults, a ``Data`` as input,
batches with what PyG's carry, PyG's node set per hop, and PyG's script idiom run with only
the import changed. Every batch property is checked on PyG's own ``NeighborLoader`` too, on
the same graph (its sampler draws other edges, so the checks are invariants)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader as PygNeighborLoader

from graphpipe import from_pyg
from graphpipe.loaders import NeighborLoader

N, E = 300, 2400


def make_data(seed: int = 0) -> Data:
    """A random directed graph with duplicate edges, isolated nodes and every kind of
    attribute: x, y, edge_attr, split masks, one more node and one more edge tensor."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, N - 10, (E,), generator=g)   # nodes N-10.. have no out-edges
    dst = torch.randint(0, N - 5, (E,), generator=g)    # nodes N-5.. have no in-edges
    src[:20], dst[:20] = src[20:40], dst[20:40]          # duplicate edges
    perm = torch.randperm(N, generator=g)
    masks = {name: torch.zeros(N, dtype=torch.bool) for name in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][perm[:150]] = True
    masks["val_mask"][perm[150:200]] = True
    masks["test_mask"][perm[200:]] = True
    return Data(x=torch.randn(N, 8, generator=g), y=torch.randint(0, 5, (N,), generator=g),
                edge_index=torch.stack([src, dst]),
                edge_attr=torch.arange(E * 3, dtype=torch.float32).reshape(E, 3),
                node_score=torch.rand(N, generator=g), edge_weight=torch.rand(E, generator=g),
                **masks)


@pytest.fixture(scope="module")
def data() -> Data:
    return make_data()


def check_pyg_batch(batch, data: Data, fanouts: list[int], input_nodes: torch.Tensor) -> None:
    """What a PyG user reads from a batch, checked against ``data`` (PyG's convention).
    ``input_id`` indexes the loader's ``input_nodes`` as given (a mask: by node ID). The
    per-hop checks need ``num_sampled_nodes``, which PyG's torch-sparse sampler (the one
    installed here) does not report."""
    n_id, e_id, bs = batch.n_id, batch.e_id, batch.batch_size
    if getattr(batch, "batch", None) is None:  # disjoint trees may share nodes
        assert torch.unique(n_id).numel() == n_id.numel()
    seeds = batch.input_id if input_nodes.dtype == torch.bool else input_nodes[batch.input_id]
    assert torch.equal(n_id[:bs], seeds)                                 # seeds first
    assert torch.equal(batch.x, data.x[n_id])
    assert torch.equal(batch.y, data.y[n_id])                          # every node
    assert torch.equal(batch.node_score, data.node_score[n_id])
    assert torch.equal(batch.train_mask, data.train_mask[n_id])
    assert torch.equal(batch.edge_attr, data.edge_attr[e_id])
    assert torch.equal(batch.edge_weight, data.edge_weight[e_id])
    # every edge is a real edge, oriented source -> target
    assert torch.equal(data.edge_index[:, e_id], n_id[batch.edge_index])
    if getattr(batch, "num_sampled_nodes", None) is None:
        return
    assert sum(batch.num_sampled_nodes) == n_id.numel()
    assert sum(batch.num_sampled_edges) == e_id.numel()
    assert len(batch.num_sampled_nodes) == len(fanouts) + 1
    # PyG's node set per hop: hop h's edges go into the nodes hop h-1 reached first
    # (the seeds for hop 1), from nodes known after hop h; each node expanded once
    starts = np.cumsum([0] + list(batch.num_sampled_nodes))
    e_starts = np.cumsum([0] + list(batch.num_sampled_edges))
    dst, src = batch.edge_index[1].numpy(), batch.edge_index[0].numpy()
    for h, fanout in enumerate(fanouts):
        d, s = dst[e_starts[h]:e_starts[h + 1]], src[e_starts[h]:e_starts[h + 1]]
        assert ((d >= starts[h]) & (d < starts[h + 1])).all()
        assert (s < starts[h + 2]).all()
        if fanout >= 0:
            assert np.bincount(d, minlength=starts[-1]).max(initial=0) <= fanout
    # nodes first reached by hop h are sources of hop h's edges
    for h in range(len(fanouts)):
        new = np.arange(starts[h + 1], starts[h + 2])
        assert np.isin(new, src[e_starts[h]:e_starts[h + 1]]).all()


def both_loaders(data: Data, **kwargs):
    return {"graphpipe": NeighborLoader(data, **kwargs), "pyg": PygNeighborLoader(data, **kwargs)}


@pytest.mark.requires_pyg_sampler
@pytest.mark.parametrize("fanouts", [[5, 3], [4, 3, 2], [-1]])
def test_batches_carry_what_pyg_batches_carry(data: Data, fanouts: list[int]) -> None:
    input_nodes = data.train_mask.nonzero().view(-1)
    for name, loader in both_loaders(data, num_neighbors=fanouts, batch_size=32,
                                     input_nodes=data.train_mask).items():
        seeds = []
        for batch in loader:
            check_pyg_batch(batch, data, fanouts, data.train_mask)
            seeds.append(batch.n_id[:batch.batch_size])
        assert torch.equal(torch.cat(seeds), input_nodes), name   # shuffle=False: input order


@pytest.mark.requires_pyg_sampler
def test_to_pyg_is_a_pyg_batch(data: Data) -> None:
    input_nodes = torch.arange(N - 1, 0, -3)
    batch = next(iter(NeighborLoader(data, [4, 2], input_nodes=input_nodes, batch_size=16)))
    out = batch.to_pyg()
    assert isinstance(out, Data)
    check_pyg_batch(out, data, [4, 2], input_nodes)
    theirs = set(next(iter(PygNeighborLoader(data, [4, 2], input_nodes=input_nodes,
                                             batch_size=16))).keys())
    # PyG's torch-sparse sampler (installed here) does not report the per-hop counts
    assert set(out.keys()) == theirs | {"num_sampled_nodes", "num_sampled_edges"}


def bfs_layers(data: Data, seeds: list[int], hops: int) -> tuple[list[set[int]], list[int]]:
    """PyG's node set per hop with every neighbour taken: layer ``h+1`` = in-neighbours of
    layer ``h`` not seen before; and the edges (columns of ``edge_index``) into layers
    ``0 .. hops-1``."""
    src, dst = data.edge_index.numpy()
    layers, seen, edges = [set(seeds)], set(seeds), []
    for _ in range(hops):
        into = np.flatnonzero(np.isin(dst, list(layers[-1])))
        edges += into.tolist()
        layers.append(set(src[into].tolist()) - seen)
        seen |= layers[-1]
    return layers, edges


@pytest.mark.requires_pyg_sampler
def test_full_neighbourhoods_are_pygs_node_and_edge_sets(data: Data) -> None:
    """With every neighbour taken nothing is random: per hop, graphpipe reaches exactly
    the breadth-first layers (PyG's frontier convention), and the same nodes over the
    same edges as PyG's own loader."""
    kwargs = {"num_neighbors": [-1, -1, -1], "batch_size": 7, "input_nodes": torch.arange(40, 82)}
    ours, theirs = (list(loader) for loader in both_loaders(data, **kwargs).values())
    assert len(ours) == len(theirs) == 6
    for a, b in zip(ours, theirs):
        seeds = a.n_id[:a.batch_size].tolist()
        assert seeds == b.n_id[:b.batch_size].tolist()
        layers, edges = bfs_layers(data, seeds, 3)
        starts = np.cumsum([0] + a.num_sampled_nodes)
        for h, layer in enumerate(layers):
            assert set(a.n_id[starts[h]:starts[h + 1]].tolist()) == layer
        assert sorted(a.e_id.tolist()) == sorted(edges) == sorted(b.e_id.tolist())
        assert set(a.n_id.tolist()) == set(b.n_id.tolist())


def test_frontier_all_reexpands_earlier_nodes(data: Data) -> None:
    """``frontier="all"`` (DGL's): the seeds are expanded again in hop 2, so the input
    layer holds nodes only those re-draws reached; ``"new"`` never has them."""
    kw = {"num_neighbors": [2, 2], "batch_size": 64, "input_nodes": None, "seed": 3}
    new = list(NeighborLoader(data, **kw))
    full = list(NeighborLoader(data, frontier="all", **kw))
    assert sum(b.num_nodes for b in full) > sum(b.num_nodes for b in new)
    for a, b in zip(new, full):
        inner_new = a.blocks[0].indptr[1:] - a.blocks[0].indptr[:-1]
        inner_all = b.blocks[0].indptr[1:] - b.blocks[0].indptr[:-1]
        assert not inner_new[:a.batch_size].any() and inner_all[:b.batch_size].any()


def test_disjoint_trees(data: Data) -> None:
    """``disjoint=True``: each seed's tree is the one-seed sample under its tree key, laid
    out hop by hop, tree by tree; ``batch.batch`` names each node's tree. (PyG's
    torch-sparse sampler, installed here, has no disjoint mode to compare with.)"""
    from graphpipe.loaders.disjoint import tree_key
    from graphpipe.ops.sampling import sample_neighbors

    fanouts = [3, 2]
    loader = NeighborLoader(data, fanouts, batch_size=16, input_nodes=data.train_mask,
                            disjoint=True, seed=4)
    keys = loader.batch_keys(0, len(loader))
    batches = list(loader)
    assert len(batches) == len(keys)
    shared = 0
    for batch, key in zip(batches, keys):
        check_pyg_batch(batch, data, fanouts, data.train_mask)
        tree = batch.batch
        assert torch.equal(tree[:batch.batch_size], torch.arange(batch.batch_size))
        src, dst = batch.edge_index
        assert torch.equal(tree[src], tree[dst])                  # no edge between trees
        shared += batch.n_id.numel() - torch.unique(batch.n_id).numel()
        starts = np.cumsum([0] + batch.num_sampled_nodes)
        for t in range(batch.batch_size):
            alone = sample_neighbors(loader.graph.indptr, loader.graph.indices,
                                     batch.n_id[t:t + 1].numpy(), fanouts, seed=tree_key(key, t))
            mine = (tree == t).numpy()
            for h in range(len(starts) - 1):  # hop h of tree t, in the tree's own order
                got = batch.n_id.numpy()[starts[h]:starts[h + 1]][mine[starts[h]:starts[h + 1]]]
                lo = sum(alone.num_sampled_nodes[:h])
                assert got.tolist() == alone.n_id[lo:lo + alone.num_sampled_nodes[h]].tolist()
            edges = mine[batch.edge_index[1].numpy()]
            assert sorted(batch.e_id[edges].tolist()) == sorted(
                loader.graph.attrs.edge_order[np.concatenate([b.edge_ids for b in alone.blocks])].tolist())
    assert shared > 0                                             # trees do overlap here


def epoch_seeds(loader) -> list[list[int]]:
    return [b.n_id.tolist() for b in loader]


def test_unseeded_loader_follows_torchs_rng(data: Data) -> None:
    def run(s: int) -> list[list[int]]:
        torch.manual_seed(s)
        loader = NeighborLoader(data, [3, 2], batch_size=50, shuffle=True)
        return epoch_seeds(loader) + epoch_seeds(loader)   # two epochs

    first, again, other = run(0), run(0), run(1)
    assert first == again
    assert first != other
    assert first[:6] != first[6:]                          # epochs differ
    gen = torch.Generator().manual_seed(5)
    a = epoch_seeds(NeighborLoader(data, [3, 2], batch_size=50, shuffle=True, generator=gen))
    gen.manual_seed(5)
    b = epoch_seeds(NeighborLoader(data, [3, 2], batch_size=50, shuffle=True, generator=gen))
    assert a == b


def test_defaults_are_pygs(data: Data) -> None:
    loader = NeighborLoader(data, [2])
    assert loader.batch_size == 1 and not loader.shuffle and len(loader) == N
    assert loader.input_nodes.tolist() == list(range(N))
    assert NeighborLoader(data, fanouts=[3, 1]).fanouts == [3, 1]
    assert NeighborLoader(data, [2], input_nodes="valid").input_nodes.tolist() == \
        data.val_mask.nonzero().view(-1).tolist()


def test_data_loader_options(data: Data) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = NeighborLoader(data, [2], batch_size=8, num_workers=4, persistent_workers=True,
                                pin_memory=True, prefetch_factor=3)
    ours = [w for w in caught if "NeighborLoader ignores" in str(w.message)]
    assert len(ours) == 1
    assert all(k in str(ours[0].message) for k in ("num_workers", "persistent_workers", "pin_memory"))
    assert loader.prefetch == 12
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NeighborLoader(data, [2], num_workers=0, pin_memory=False)   # no-op values: no warning


@pytest.mark.parametrize("kwargs,error,match", [
    ({"num_neighbors": [2], "fanouts": [2]}, ValueError, "not both"),
    ({}, ValueError, "'num_neighbors' is required"),
    ({"num_neighbors": [2], "transform": lambda b: b}, ValueError, "transform"),
    ({"num_neighbors": [2], "subgraph_type": "induced"}, ValueError, "subgraph_type"),
    ({"num_neighbors": [2], "directed": False}, ValueError, "directed=False"),
    ({"num_neighbors": [2], "frontier": "old"}, ValueError, "'frontier' must be one of"),
    ({"num_neighbors": [2], "bogus": 1}, TypeError, "bogus"),
])
def test_refuses_what_it_cannot_honour(data: Data, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        NeighborLoader(data, **kwargs)


def test_store_from_pyg_gives_the_same_batches(data: Data, tmp_path) -> None:
    """A store written by graphpipe.from_pyg carries every attribute into the batches."""
    store = from_pyg(data, tmp_path / "store")
    kw = {"num_neighbors": [4, 3], "batch_size": 40, "input_nodes": "train", "seed": 9}
    input_nodes = data.train_mask.nonzero().view(-1)
    for a, b in zip(NeighborLoader(store, **kw), NeighborLoader(data, **kw), strict=True):
        check_pyg_batch(a, data, [4, 3], input_nodes)
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.e_id, b.e_id)


# -- PyG's script idiom, only the import changed ---------------------------------------------
class SAGE(torch.nn.Module):
    """PyG's example GraphSAGE (examples/ogbn_products_sage.py), unchanged in substance."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.convs = torch.nn.ModuleList([SAGEConv(in_channels, hidden), SAGEConv(hidden, out_channels)])

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = x.relu()
        return x

    @torch.no_grad()
    def inference(self, x_all, subgraph_loader):
        for i, conv in enumerate(self.convs):
            xs = []
            for batch in subgraph_loader:
                x = x_all[batch.n_id]
                x = conv(x, batch.edge_index)
                if i < len(self.convs) - 1:
                    x = x.relu()
                xs.append(x[:batch.batch_size])
            x_all = torch.cat(xs, dim=0)
        return x_all


def pyg_script(NeighborLoader, data: Data) -> tuple[list[float], torch.Tensor, SAGE]:
    """The body of PyG's example: a training epoch, then layer-wise inference."""
    torch.manual_seed(12345)
    train_loader = NeighborLoader(data, num_neighbors=[10, 5], batch_size=32, shuffle=True,
                                  input_nodes=data.train_mask, num_workers=0)
    subgraph_loader = NeighborLoader(data, input_nodes=None, num_neighbors=[-1], batch_size=64,
                                     shuffle=False, num_workers=0)
    model = SAGE(data.num_features, 16, 5)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _epoch in range(3):
        for batch in train_loader:
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            loss = torch.nn.functional.cross_entropy(out, batch.y[:batch.batch_size])
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
    model.eval()
    return losses, model.inference(data.x, subgraph_loader), model


@pytest.mark.requires_pyg_sampler
def test_pygs_script_runs_with_the_import_changed(data: Data) -> None:
    losses, out, model = pyg_script(NeighborLoader, data)
    assert all(np.isfinite(losses)) and len(losses) == 3 * 5
    with torch.no_grad():
        full = model(data.x, data.edge_index)      # full-batch forward: the ground truth
    assert out.shape == full.shape
    torch.testing.assert_close(out, full, rtol=1e-5, atol=1e-5)   # node order kept
    _, pyg_out, pyg_model = pyg_script(PygNeighborLoader, data)
    with torch.no_grad():
        torch.testing.assert_close(pyg_out, pyg_model(data.x, data.edge_index), rtol=1e-5, atol=1e-5)


def test_bad_data_is_refused() -> None:
    from torch_geometric.data import HeteroData

    with pytest.raises(ValueError, match="'input_nodes' is needed"):  # HeteroNeighborLoader's check
        NeighborLoader(HeteroData(), [2])
    with pytest.raises(ValueError, match="edge_index"):
        NeighborLoader(Data(x=torch.zeros(3, 2)), [2])


@pytest.mark.parametrize("order", ["sorted", "unsorted", "split"])
def test_input_id_indexes_input_nodes_as_given(data: Data, order: str) -> None:
    """``input_id`` is each seed's position in ``input_nodes`` (sorted, unsorted or a split
    name), found without an N-length table; shuffled batches too."""
    ids = {"sorted": torch.arange(1, N, 2), "unsorted": torch.randperm(N, generator=torch.Generator().manual_seed(4))[:90],
           "split": "train"}[order]
    loader = NeighborLoader(data, [2], input_nodes=ids, batch_size=16, shuffle=True, seed=1)
    given = torch.from_numpy(loader.input_nodes)
    seen = []
    for batch in loader:
        assert torch.equal(given[batch.input_id], batch.n_id[:batch.batch_size])
        seen.append(batch.input_id)
    assert sorted(torch.cat(seen).tolist()) == list(range(len(given)))


class RedditSAGE(torch.nn.Module):
    """PyG's examples/reddit.py model, its layer-wise ``inference()`` copied unchanged."""

    def __init__(self, in_channels, hidden_channels, out_channels):
        from torch_geometric.nn import SAGEConv

        super().__init__()
        self.convs = torch.nn.ModuleList()
        self.convs.append(SAGEConv(in_channels, hidden_channels))
        self.convs.append(SAGEConv(hidden_channels, out_channels))

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = x.relu_()
                x = torch.nn.functional.dropout(x, p=0.5, training=self.training)
        return x

    @torch.no_grad()
    def inference(self, x_all, subgraph_loader):
        from tqdm import tqdm

        device = torch.device("cpu")
        pbar = tqdm(total=len(subgraph_loader.dataset) * len(self.convs))
        pbar.set_description('Evaluating')

        # Compute representations of nodes layer by layer, using *all*
        # available edges. This leads to faster computation in contrast to
        # immediately computing the final representations of each batch:
        for i, conv in enumerate(self.convs):
            xs = []
            for batch in subgraph_loader:
                x = x_all[batch.n_id.to(x_all.device)].to(device)
                x = conv(x, batch.edge_index.to(device))
                if i < len(self.convs) - 1:
                    x = x.relu_()
                xs.append(x[:batch.batch_size].cpu())
                pbar.update(batch.batch_size)
            x_all = torch.cat(xs, dim=0)
        pbar.close()
        return x_all


@pytest.mark.parametrize("Loader", [NeighborLoader, pytest.param(PygNeighborLoader, marks=pytest.mark.requires_pyg_sampler)],
                         ids=["graphpipe", "pyg"])
def test_pygs_reddit_layerwise_inference_runs_unchanged(data: Data, Loader) -> None:
    """PyG's examples/reddit.py evaluation set-up with only the import changed: the loader
    keeps the caller's ``data`` (``del subgraph_loader.data.x, ...``, ``num_nodes`` and
    ``n_id`` set on it), ``len(loader.dataset)`` sizes the progress bar, and the
    layer-wise inference equals a full-graph forward pass (fanout -1, node order kept).
    Batch size and workers scaled down; PyG's own loader runs the same code as the oracle."""
    import copy

    kwargs = {'batch_size': 64, 'num_workers': 0}
    subgraph_loader = Loader(copy.copy(data), input_nodes=None,
                             num_neighbors=[-1], shuffle=False, **kwargs)

    # No need to maintain these features during evaluation:
    del subgraph_loader.data.x, subgraph_loader.data.y
    # Add global node index information.
    subgraph_loader.data.num_nodes = data.num_nodes
    subgraph_loader.data.n_id = torch.arange(data.num_nodes)

    assert len(subgraph_loader.dataset) == data.num_nodes
    batch = next(iter(subgraph_loader))
    assert getattr(batch, "x", None) is None and getattr(batch, "y", None) is None  # deleted: left out
    assert "x" in data and "y" in data                                              # a copy lost them
    torch.manual_seed(0)
    model = RedditSAGE(data.num_features, 16, 5).eval()
    out = model.inference(data.x, subgraph_loader)
    with torch.no_grad():
        torch.testing.assert_close(out, model(data.x, data.edge_index), rtol=1e-5, atol=1e-5)


def test_deleted_features_come_back_when_put_back(data: Data) -> None:
    """Deleting ``x`` from ``loader.data`` drops it from the next epoch's batches; setting it
    again brings the same rows back (the Match state restarts, nothing stale is reused)."""
    import copy

    loader = NeighborLoader(copy.copy(data), [3], batch_size=50, seed=0, match_reorder="match")
    first = [b.x.clone() for b in loader]
    del loader.data.x
    loader.set_epoch(0)
    assert all(b.x is None and b.y is not None for b in loader)
    loader.data.x = data.x
    loader.set_epoch(0)
    again = [b.x for b in loader]
    assert len(again) == len(first) and all(torch.equal(a, b) for a, b in zip(first, again))
    assert loader.graph.num_nodes == data.num_nodes and loader.data is not data


def test_minibatch_moves_named_attributes(data: Data) -> None:
    """PyG's ``batch.to(device, "x", "y")`` moves only the named attributes."""
    batch = next(iter(NeighborLoader(data, [3], batch_size=16, seed=0)))
    moved = batch.to("meta", "x", "y")
    assert moved.x.device.type == moved.y.device.type == "meta"
    assert moved.edge_index.device.type == moved.n_id.device.type == moved.blocks[0].indptr.device.type == "cpu"
    assert batch.x.device.type == "cpu"
