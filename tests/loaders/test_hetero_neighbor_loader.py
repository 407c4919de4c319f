"""HeteroNeighborLoader: batch layout (seeds first, typed local IDs valid, every edge a graph
edge), features and labels bit for bit, determinism (threads, prefetch, seeds), PyG's own
heterogeneous NeighborLoader as the oracle of the batch structure (and of the nodes and
edges reached where sampling draws nothing), input-node forms and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.loaders import GraphData, HeteroMiniBatch, HeteroNeighborLoader

COUNTS = {"paper": 300, "author": 200, "inst": 12}
RELS = [("author", "writes", "paper"), ("paper", "rev_writes", "author"),
        ("paper", "cites", "paper"), ("author", "affiliated", "inst"),
        ("inst", "rev_affiliated", "author")]
DIMS = {"paper": 8, "author": 3}


def make_edges(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for et in RELS[::2] + [RELS[3]]:
        n = 1500 if et[2] != "inst" else 300
        src = rng.integers(0, COUNTS[et[0]], n)
        dst = np.minimum((rng.pareto(1.3, n) * COUNTS[et[2]] / 10).astype(np.int64), COUNTS[et[2]] - 1)
        out[et] = (src, dst)
    out[RELS[1]] = out[RELS[0]][::-1]   # reverse relations, as PyG's ToUndirected adds
    out[RELS[4]] = out[RELS[3]][::-1]
    return {et: out[et] for et in RELS}


def make_data(seed: int = 0) -> tuple[GraphData, dict]:
    rng = np.random.default_rng(seed + 100)
    edges = make_edges(seed)
    x = {t: rng.standard_normal((COUNTS[t], d)).astype(np.float32) for t, d in DIMS.items()}
    y = {"paper": rng.integers(0, 5, COUNTS["paper"])}
    splits = {"paper": {"train": np.sort(rng.choice(300, 120, replace=False))}}
    return GraphData.from_dicts(COUNTS, edges, x=x, y=y, splits=splits), {"edges": edges, "x": x, "y": y}


def check_batch(batch: HeteroMiniBatch, raw: dict, seeds: np.ndarray) -> None:
    """Seeds first, typed local IDs valid, unique nodes per type, every edge a graph edge
    (through e_id into the input edge list), rows and labels equal to the data's."""
    assert batch.target_type == "paper" and batch.batch_size == seeds.shape[0]
    assert batch.n_id["paper"][:batch.batch_size].tolist() == seeds.tolist()
    for t, ids in batch.n_id.items():
        assert ids.dtype == torch.int64 and ids.unique().numel() == ids.numel()
        assert sum(batch.num_sampled_nodes[t]) == ids.numel()
    for t, x in raw["x"].items():
        assert torch.equal(batch.x[t], torch.from_numpy(x)[batch.n_id[t]])
    assert torch.equal(batch.y, torch.from_numpy(raw["y"]["paper"])[batch.n_id["paper"]])
    for et, ei in batch.edge_index.items():
        src, dst = raw["edges"][et]
        assert ei.shape == (2, batch.e_id[et].numel())
        assert ei.numel() == 0 or (ei[0].max() < batch.n_id[et[0]].numel() and
                                   ei[1].max() < batch.n_id[et[2]].numel() and ei.min() >= 0)
        e = batch.e_id[et].numpy()
        assert np.array_equal(batch.n_id[et[0]][ei[0]].numpy(), src[e])
        assert np.array_equal(batch.n_id[et[2]][ei[1]].numpy(), dst[e])
        assert sum(batch.num_sampled_edges[et]) == ei.shape[1]


def test_batches_cover_the_split_in_order():
    data, raw = make_data()
    loader = HeteroNeighborLoader(data, [4, 3], input_nodes=("paper", "train"), batch_size=32, seed=3)
    assert len(loader) == 4
    train = data.typed_split("paper", "train")
    seen = []
    for i, batch in enumerate(loader):
        seeds = train[i * 32:(i + 1) * 32]
        check_batch(batch, raw, seeds)
        assert batch.input_id.tolist() == list(range(i * 32, i * 32 + seeds.shape[0]))
        seen.append(batch.seeds)
    assert torch.cat(seen).tolist() == train.tolist()


def test_fanout_per_relation_and_shuffle():
    data, raw = make_data(1)
    fanouts = {et: [0 if et[1] == "cites" else 3, 2] for et in RELS}
    loader = HeteroNeighborLoader(data, fanouts, input_nodes="paper", batch_size=64, shuffle=True,
                                  drop_last=True, seed=5)
    assert len(loader) == 4
    seeds = []
    for batch in loader:
        check_batch(batch, raw, batch.seeds.numpy())
        assert batch.num_sampled_edges[("paper", "cites", "paper")][0] == 0
        seeds.append(batch.seeds)
    seeds = torch.cat(seeds)
    assert seeds.unique().numel() == 256 and seeds.tolist() != list(range(256))


def _batches(loader) -> list[HeteroMiniBatch]:
    return list(loader)


def assert_same_batches(a: list[HeteroMiniBatch], b: list[HeteroMiniBatch]) -> None:
    assert len(a) == len(b)
    for p, q in zip(a, b):
        for name in ("n_id", "x", "edge_index", "e_id"):
            d, e = getattr(p, name), getattr(q, name)
            assert list(d) == list(e) and all(torch.equal(d[k], e[k]) for k in d), name
        assert torch.equal(p.y, q.y) and p.num_sampled_nodes == q.num_sampled_nodes


def test_deterministic_across_threads_prefetch_and_cache():
    data, _ = make_data(2)
    kw = {"input_nodes": ("paper", "train"), "batch_size": 16, "shuffle": True, "seed": 9}
    base = _batches(HeteroNeighborLoader(data, [3, 3], num_threads=1, **kw))
    assert_same_batches(base, _batches(HeteroNeighborLoader(data, [3, 3], num_threads=2, window=3, **kw)))
    assert_same_batches(base, _batches(HeteroNeighborLoader(data, [3, 3], prefetch=2, **kw)))
    cached = HeteroNeighborLoader(data, [3, 3], cache="degree", cache_rows=0.25, **kw)
    assert set(cached.rows) == {"paper", "author"} and len(cached.rows["paper"]) == 75
    assert_same_batches(base, _batches(cached))
    other = _batches(HeteroNeighborLoader(data, [3, 3], **{**kw, "seed": 10}))
    assert any(not torch.equal(a.n_id["author"], b.n_id["author"]) for a, b in zip(base, other))


def test_prefetch_thread_stops_when_abandoned():
    data, _ = make_data()
    loader = HeteroNeighborLoader(data, [2], input_nodes="paper", batch_size=4, prefetch=2, seed=0)
    it = iter(loader)
    next(it)
    it.close()  # joins the thread; a hang here fails the run's timeout
    assert len(list(loader)) == 75


def test_memory_mapped_features(tmp_path):
    data, raw = make_data(4)
    path = tmp_path / "paper.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=raw["x"]["paper"].shape)
    mm[:] = raw["x"]["paper"]
    mm.flush()
    data.features["paper"] = np.memmap(path, dtype=np.float32, mode="r", shape=mm.shape)
    for batch in HeteroNeighborLoader(data, [3], input_nodes="paper", batch_size=100, seed=1):
        check_batch(batch, raw, batch.seeds.numpy())


def _pyg_data(raw: dict):
    from torch_geometric.data import HeteroData

    pyg = HeteroData()
    for t, n in COUNTS.items():
        if t in raw["x"]:
            pyg[t].x = torch.from_numpy(raw["x"][t])
        else:
            pyg[t].num_nodes = n
    pyg["paper"].y = torch.from_numpy(raw["y"]["paper"])
    for et, (s, d) in raw["edges"].items():
        pyg[et].edge_index = torch.from_numpy(np.stack([s, d]))
    return pyg


@pytest.mark.requires_pyg_sampler
@pytest.mark.parametrize("face", ["batch", "to_pyg"])
def test_typed_batch_has_pygs_layout(face):
    """The typed batch (HeteroData's face) and its to_pyg() hold what PyG's own hetero
    NeighborLoader yields for the same input (attribute by attribute, per node and edge
    type) and a PyG HeteroConv runs on both; with fanout -1 (no draws) the nodes and edges
    reached are PyG's."""
    from torch_geometric.loader import NeighborLoader as PyGLoader

    data, raw = make_data(5)
    pyg_data = _pyg_data(raw)
    seeds = torch.tensor([3, 17, 40, 2])
    for fanouts in ([3, 2], [-1, -1]):
        theirs = next(iter(PyGLoader(pyg_data, fanouts, input_nodes=("paper", seeds), batch_size=4)))
        ours = next(iter(HeteroNeighborLoader(data, fanouts, input_nodes=("paper", seeds.numpy()),
                                              batch_size=4, seed=0)))
        ours = ours.to_pyg() if face == "to_pyg" else ours
        assert ours.node_types == theirs.node_types and ours.edge_types == theirs.edge_types
        assert ours.metadata() == theirs.metadata()
        for key in theirs.node_types + theirs.edge_types:   # (PyG without pyg-lib: no num_sampled_*)
            missing = set(theirs[key].keys()) - set(ours[key].keys())
            assert not missing, (key, missing)
        for name in ("x", "y", "n_id", "batch_size", "edge_index", "e_id"):
            assert getattr(ours, f"{name}_dict").keys() == getattr(theirs, f"{name}_dict").keys(), name
        assert ours["paper"].batch_size == theirs["paper"].batch_size == 4
        assert ours["paper"].n_id[:4].tolist() == theirs["paper"].n_id[:4].tolist() == seeds.tolist()
        assert ours["paper"].input_id.tolist() == theirs["paper"].input_id.tolist()
        for t in COUNTS:
            assert ours[t].num_nodes == ours[t].n_id.numel()
            if t in raw["x"]:
                assert torch.equal(ours[t].x, pyg_data[t].x[ours[t].n_id])
        if fanouts[0] == -1:
            for t in COUNTS:
                assert sorted(ours[t].n_id.tolist()) == sorted(theirs[t].n_id.tolist()), t
            for et in RELS:
                s, _, d = et
                mine = {(a, b) for a, b in zip(ours[s].n_id[ours[et].edge_index[0]].tolist(),
                                               ours[d].n_id[ours[et].edge_index[1]].tolist())}
                pyg = {(a, b) for a, b in zip(theirs[s].n_id[theirs[et].edge_index[0]].tolist(),
                                              theirs[d].n_id[theirs[et].edge_index[1]].tolist())}
                assert mine == pyg, et
                assert sorted(ours[et].e_id.tolist()) == sorted(theirs[et].e_id.tolist())
        _run_hetero_conv(ours, theirs)


def test_typed_batch_moves_named_attributes_and_takes_new_ones():
    """PyG's ``batch.to(device, "edge_index")`` moves only the named attributes; attributes
    set on a type are kept (and travel in to_pyg()); None deletes."""
    data, _ = make_data(2)
    batch = next(iter(HeteroNeighborLoader(data, [2, 2], input_nodes=("paper", np.arange(8)),
                                           batch_size=8, seed=0)))
    moved = batch.to("meta", "edge_index")
    assert all(v.device.type == "meta" for v in moved.edge_index_dict.values())
    assert all(v.device.type == "cpu" for v in [*moved.x_dict.values(), *moved.n_id_dict.values()])
    assert moved["paper"].batch_size == 8 and moved.target_type == "paper"
    assert batch.edge_index_dict[RELS[0]].device.type == "cpu"   # a copy, the batch unchanged
    batch["author"].h = torch.ones(batch["author"].num_nodes)
    batch["paper"].y = batch["paper"].y + 1
    assert "h" in batch["author"] and batch.h_dict.keys() == {"author"}
    assert torch.equal(batch.y, batch["paper"].y) and torch.equal(batch.to_pyg()["author"].h, batch["author"].h)
    del batch["author"].x
    assert "x" not in batch["author"] and "author" not in batch.x_dict
    assert batch["author", "writes", "paper"].num_edges == batch.edge_index[RELS[0]].shape[1]
    with pytest.raises(KeyError, match="venue"):
        batch["venue"]


class _SAGE(torch.nn.Module):
    def __init__(self, linear, conv):
        super().__init__()
        self.conv1, self.conv2, self.lin = conv((-1, -1), 16), conv((-1, -1), 16), linear(-1, 2)

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index).relu()
        x = self.conv2(x, edge_index).relu()
        return self.lin(x)


def test_pygs_to_hetero_mag_loop_runs_unchanged():
    """The training and test loops of PyG's examples/hetero/to_hetero_mag.py (a
    ``to_hetero`` GraphSAGE on the typed NeighborLoader's batches), only the import changed:
    ``batch.to(device, 'edge_index')``, ``batch['paper'].batch_size``, ``batch.x_dict``,
    ``batch.edge_index_dict``; the loss falls. (The example's ``Sequential`` model is
    written as a Module: torch.fx in this torch cannot trace PyG's ``Sequential``.)"""
    import torch.nn.functional as F
    from torch_geometric.nn import Linear, SAGEConv, to_hetero

    from graphpipe.loaders import NeighborLoader

    _, raw = make_data(3)
    data = _pyg_data({**raw, "x": {**raw["x"], "inst": np.eye(12, dtype=np.float32)}})
    data["paper"].y = torch.from_numpy(raw["x"]["paper"][:, 0] > 0).long()   # learnable labels
    data["paper"].train_mask = torch.rand(300, generator=torch.Generator().manual_seed(0)) < 0.8
    device = torch.device("cpu")
    train_loader = NeighborLoader(data, num_neighbors=[10] * 2, shuffle=True, batch_size=64,
                                  input_nodes=("paper", data["paper"].train_mask), seed=0)
    torch.manual_seed(0)
    model = to_hetero(_SAGE(Linear, SAGEConv), data.metadata(), aggr="sum").to(device)
    with torch.no_grad():  # init_params()
        batch = next(iter(train_loader)).to(device, "edge_index")
        model(batch.x_dict, batch.edge_index_dict)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(8):   # train()
        total_examples = total_loss = 0
        for batch in train_loader:
            optimizer.zero_grad()
            batch = batch.to(device, "edge_index")
            batch_size = batch["paper"].batch_size
            out = model(batch.x_dict, batch.edge_index_dict)["paper"][:batch_size]
            loss = F.cross_entropy(out, batch["paper"].y[:batch_size])
            loss.backward()
            optimizer.step()
            total_examples += batch_size
            total_loss += float(loss) * batch_size
        losses.append(total_loss / total_examples)
    assert total_examples == int(data["paper"].train_mask.sum())
    assert losses[-1] < 0.7 * losses[0], losses


def _run_hetero_conv(ours, theirs) -> None:
    from torch_geometric.nn import HeteroConv, SAGEConv

    rels = [et for et in RELS if "inst" not in (et[0], et[2])]
    torch.manual_seed(0)
    conv = HeteroConv({et: SAGEConv((-1, -1), 4) for et in rels})
    for batch in (theirs, ours):
        out = conv({t: batch[t].x for t in DIMS}, {et: batch[et].edge_index for et in rels})
        assert out["paper"].shape == (batch["paper"].num_nodes, 4)


def test_input_node_forms_and_errors():
    data, _ = make_data()
    mask = np.zeros(300, dtype=bool)
    mask[[5, 9]] = True
    by_mask = HeteroNeighborLoader(data, [1], input_nodes=("paper", torch.from_numpy(mask)), batch_size=8)
    batch = next(iter(by_mask))
    assert batch.seeds.tolist() == [5, 9] and batch.input_id.tolist() == [5, 9]
    assert len(HeteroNeighborLoader(data, [1], batch_size=100)) == 3      # None: target type
    assert len(HeteroNeighborLoader(data, [1], input_nodes=("author", None), batch_size=50)) == 4
    ids = HeteroNeighborLoader(data, [1], input_nodes=("author", [7, 3]), batch_size=2, seed=0)
    assert next(iter(ids)).target_type == "author" and next(iter(ids)).y is None
    for bad, match in [(("venue", None), "unknown node type"), (("paper", [300]), r"\[0, 300\)"),
                       (("paper", [1, 1]), "distinct"), (("paper", np.ones(5, bool)), "300 entries"),
                       (("paper", "valid"), "no split 'valid'"), (5, "must be None")]:
        with pytest.raises(ValueError, match=match):
            HeteroNeighborLoader(data, [1], input_nodes=bad)
    with pytest.raises(ValueError, match="misses relations"):
        HeteroNeighborLoader(data, {RELS[0]: [2]}, input_nodes="paper")
    with pytest.raises(ValueError, match="batch_size"):
        HeteroNeighborLoader(data, [1], input_nodes="paper", batch_size=0)
    with pytest.raises(ValueError, match="not a torch device"):
        HeteroNeighborLoader(data, [1], input_nodes="paper", device="gpu9")
    with pytest.raises(ValueError, match="once"):
        HeteroNeighborLoader(data, [1], input_nodes="paper", fanouts=[1])
    with pytest.raises(ValueError, match="match_reorder"):
        HeteroNeighborLoader(data, [1], input_nodes="paper", match_reorder="often")
    # one loader: "auto" (NeighborLoader's default) is accepted, and is no reuse on typed graphs
    assert HeteroNeighborLoader(data, [1], input_nodes="paper", match_reorder="auto").match_reorder is False


def test_blocks_follow_edge_index():
    data, raw = make_data(6)
    batch = next(iter(HeteroNeighborLoader(data, [3, 2], input_nodes="paper", batch_size=10, seed=2)))
    blocks = batch.blocks()
    assert len(blocks) == 2
    for et, blk in blocks[-1].items():
        assert blk.num_dst == (10 if et[2] == "paper" else 0)
    for layer in blocks:
        for et, blk in layer.items():
            src, dst = raw["edges"][et]
            e = blk.edge_ids.numpy()
            assert np.array_equal(batch.n_id[et[0]][blk.indices].numpy(), src[e])
            assert np.array_equal(batch.n_id[et[2]][blk.dst_of_edges()].numpy(), dst[e])
            assert blk.indices.numel() == 0 or blk.indices.max() < blk.num_src
    assert batch.to("cpu").n_id["paper"].tolist() == batch.n_id["paper"].tolist()


def write_typed_store(path, raw: dict, edge_attr: dict | None = None) -> None:
    from graphpipe.store.writer import TypedStoreWriter

    with TypedStoreWriter(path, COUNTS, target_type="paper") as w:
        for et, (s, d) in raw["edges"].items():
            w.add_relation(et, s, d, edge_feat=(edge_attr or {}).get(et))
        for t, x in raw["x"].items():
            w.write_node_array(t, "feat", x)
        w.write_node_array("paper", "label", raw["y"]["paper"])
        w.write_split("paper", "train", np.arange(0, 300, 3))
        w.commit()


def test_typed_store_path_equals_in_memory(tmp_path):
    """A typed store (memory-mapped, checked by the store) gives the batches the same graph
    in memory gives, whatever its CSC order: equal edges per relation through e_id."""
    data, raw = make_data(7)
    write_typed_store(tmp_path / "typed", raw)
    loader = HeteroNeighborLoader(str(tmp_path / "typed"), [4, 2], input_nodes=("paper", "train"),
                                  batch_size=25, seed=4, cache="degree")
    assert loader.target_type == "paper" and len(loader) == 4
    assert loader.graph.store is not None and set(loader.rows) == {"paper", "author"}
    seeds = []
    for batch in loader:
        check_batch(batch, raw, batch.seeds.numpy())
        seeds.append(batch.seeds)
    assert torch.cat(seeds).tolist() == list(range(0, 300, 3))
    memory = HeteroNeighborLoader(data, [4, 2], input_nodes=("paper", np.arange(0, 300, 3)),
                                  batch_size=25, seed=4)
    loader.set_epoch(0)
    for a, b in zip(loader, memory):  # same CSC order (sources ascending per row): same batches
        assert all(torch.equal(a.n_id[t], b.n_id[t]) for t in COUNTS)
        assert all(torch.equal(a.e_id[et], b.e_id[et]) for et in RELS)


def test_homogeneous_store_is_served_as_one_relation(tmp_path):
    """HeteroNeighborLoader is NeighborLoader: a homogeneous store is not refused but served
    as NeighborLoader serves it (MiniBatch); GraphData.from_store reads it as the one-type
    graph (type _N, relation (_N, _E, _N)), not a typed one."""
    from torch_geometric.data import Data

    from graphpipe import from_pyg
    from graphpipe.loaders import MiniBatch, NeighborLoader

    store = from_pyg(Data(edge_index=torch.tensor([[1, 0], [0, 1]]), num_nodes=3),
                                tmp_path / "homo")
    alias = next(iter(HeteroNeighborLoader(store, [2], batch_size=3, seed=0, features=False)))
    plain = next(iter(NeighborLoader(store, [2], batch_size=3, seed=0, features=False)))
    assert isinstance(alias, MiniBatch) and torch.equal(alias.n_id, plain.n_id)
    graph = GraphData.from_store(store)
    assert not graph.is_typed and graph.edge_types == [("_N", "_E", "_N")] and graph.num_nodes == 3


def test_match_reorder_changes_no_batch_and_counts_rows():
    """Match copies rows the batch before held; Reorder permutes a shuffled window's batches.
    Every batch equals the one the plain loader gives for the same seeds, row for row, and
    the counters add up to the rows delivered."""
    data, raw = make_data(8)
    kw = {"input_nodes": "paper", "batch_size": 20, "shuffle": True, "seed": 2, "prefetch": 0,
          "cache": "degree", "cache_rows": 30}
    plain = HeteroNeighborLoader(data, [3, 2], **kw)
    base = {int(b.input_id[0]): b for b in plain}
    for mode in ("match", True):
        loader = HeteroNeighborLoader(data, [3, 2], match_reorder=mode, **kw)
        got = list(loader)
        assert sorted(int(b.input_id[0]) for b in got) == sorted(base)
        for b in got:
            want = base[int(b.input_id[0])]
            check_batch(b, raw, b.seeds.numpy())
            assert all(torch.equal(b.x[t], want.x[t]) for t in DIMS)
            assert all(torch.equal(b.n_id[t], want.n_id[t]) for t in COUNTS)
        stats = loader.stats
        for t in DIMS:
            assert stats.total(t) == sum(b.n_id[t].numel() for b in got)
            assert stats.reused[t] > 0 and stats.held[t] > 0
        assert plain.stats.reused == {t: 0 for t in DIMS}
        order = [int(b.input_id[0]) for b in got]
        if mode is True:
            assert order != [int(b.input_id[0]) for b in plain]  # reordered within windows


def test_match_refuses_rows_changed_in_place():
    data, _ = make_data()
    loader = HeteroNeighborLoader(data, [2], input_nodes="paper", batch_size=50, seed=0, prefetch=0,
                                  match_reorder="match")
    it = iter(loader)
    batch = next(it)
    batch.x["paper"].mul_(2)
    with pytest.raises(RuntimeError, match="modified in place"):
        next(it)


def test_typed_reorder_matches_the_reference():
    from graphpipe.loaders.stages.reorder import typed_reorder
    from graphpipe.ops.features.reorder import greedy_reorder_reference

    rng = np.random.default_rng(0)
    batches = [{"a": rng.choice(50, 12, replace=False), "b": rng.choice(30, 5, replace=False)}
               for _ in range(7)]
    weights = np.zeros((7, 7))
    for i in range(7):
        for j in range(7):
            if i != j:
                weights[i, j] = sum(len(set(batches[i][t].tolist()) & set(batches[j][t].tolist())) * w
                                    for t, w in {"a": 512, "b": 12}.items())
    assert typed_reorder(batches, {"a": 512, "b": 12}).tolist() == greedy_reorder_reference(weights)


def test_pyg_dataloader_options_are_ignored_with_a_warning():
    data, _ = make_data()
    with pytest.warns(UserWarning, match="num_workers"):
        loader = HeteroNeighborLoader(data, [2], input_nodes="paper", batch_size=100, num_workers=4)
    assert len(loader) == 3
    with pytest.raises(TypeError, match="unexpected keyword"):
        HeteroNeighborLoader(data, [2], input_nodes="paper", bogus=1)


def test_on_graphpipe_generate_mag_store(tmp_path):
    """`graphpipe generate mag` -> `graphpipe ingest` -> the loader on the store path, with
    the reverse relations PyG's ogbn-mag examples add: every sampled edge is an edge of the
    generated edge lists (through e_id), rows and labels are the store's."""
    from graphpipe.ingest import ingest
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

    gen = mag_dataset(papers=400, authors=500, institutions=20, fields=40, num_classes=4,
                      feature_dim=8, seed=1)
    write_ogb_mag(tmp_path / "raw", gen)
    ingest(tmp_path / "raw", tmp_path / "store")
    data = GraphData.open(tmp_path / "store").with_reverse_relations()
    assert data.target_type == "paper" and len(data.edge_types) == 8
    loader = HeteroNeighborLoader(data, [5, 3], input_nodes=("paper", "train"), batch_size=64,
                                  shuffle=True, seed=0)
    x, y = np.array(data.typed_features("paper")), np.asarray(gen.y)
    assert np.allclose(x, gen.x, atol=1e-6)  # the CSV holds 6 decimals
    seen = []
    for batch in loader:
        assert torch.equal(batch.x["paper"], torch.from_numpy(x)[batch.n_id["paper"]])
        assert torch.equal(batch.y, torch.from_numpy(y)[batch.n_id["paper"]])
        assert set(batch.x) == {"paper"} and len(batch.n_id) == 4
        for et, ei in batch.edge_index.items():
            fwd = (et[2], et[1][len("rev_"):], et[0]) if et[1].startswith("rev_") else et
            src, dst = (np.asarray(a) for a in gen.edges[fwd])
            if fwd != et:
                src, dst = dst, src
            e = batch.e_id[et].numpy()
            assert np.array_equal(batch.n_id[et[0]][ei[0]].numpy(), src[e])
            assert np.array_equal(batch.n_id[et[2]][ei[1]].numpy(), dst[e])
        seen.append(batch.seeds)
    assert sorted(torch.cat(seen).tolist()) == sorted(np.asarray(gen.splits["train"]).tolist())
    assert batch.num_sampled_nodes["author"][1] > 0 and batch.num_sampled_nodes["institution"][2] > 0


def test_neighbor_loader_serves_typed_graphs_as_pyg_does(tmp_path):
    """PyG's NeighborLoader takes Data and HeteroData alike; graphpipe's hands a typed graph
    (a HeteroData, a typed store or its path) to HeteroNeighborLoader with the same arguments."""
    from graphpipe.loaders import NeighborLoader

    _, raw = make_data(9)
    pyg = _pyg_data(raw)
    mask = torch.zeros(300, dtype=torch.bool)
    mask[:40] = True
    with pytest.warns(UserWarning, match="num_workers"):
        loader = NeighborLoader(pyg, num_neighbors=[3, 2], input_nodes=("paper", mask), batch_size=16,
                                shuffle=True, num_workers=2, seed=0)
    assert isinstance(loader, HeteroNeighborLoader) and len(loader) == 3
    for batch in loader:
        check_batch(batch, raw, batch.seeds.numpy())
    write_typed_store(tmp_path / "typed", raw)
    by_path = NeighborLoader(str(tmp_path / "typed"), fanouts=[2], input_nodes=("paper", "train"),
                             batch_size=50)
    assert isinstance(by_path, HeteroNeighborLoader) and len(by_path) == 2
    assert isinstance(NeighborLoader(by_path.graph.store, [2], ("paper", "train")), HeteroNeighborLoader)
    plain = NeighborLoader((np.array([0, 1, 2]), np.array([1, 0])), [1], batch_size=1, features=False)
    assert type(plain) is NeighborLoader and len(plain) == 2


@pytest.mark.parametrize(("replace", "frontier"), [(True, "new"), (False, "all")])
def test_replace_and_dgl_frontier_batches_are_the_samplers(replace, frontier):
    """The loader's batch is the typed sampler's output for its seeds and key, whatever the
    sampling options, with rows and labels gathered for it."""
    from graphpipe.ops.sampling import sample_hetero_neighbors

    data, raw = make_data(10)
    loader = HeteroNeighborLoader(data, [3, 2], input_nodes="paper", batch_size=30, seed=6,
                                  replace=replace, frontier=frontier, prefetch=0)
    keys = loader.batch_keys(0, len(loader))
    for batch, key in zip(loader, keys):
        out = sample_hetero_neighbors(data.graph, {"paper": batch.seeds.numpy()}, [3, 2], seed=key,
                                      replace=replace, frontier=frontier)
        assert all(np.array_equal(batch.n_id[t].numpy(), out.n_id[t]) for t in COUNTS)
        assert all(np.array_equal(batch.edge_index[et].numpy(), np.stack([out.row[et], out.col[et]]))
                   for et in RELS)
        check_batch(batch, raw, batch.seeds.numpy())


def test_edge_features_follow_their_edges(tmp_path):
    """Edge features given in edge-list order (dicts, a HeteroData, a typed store) reach each
    batch as rows of its sampled edges: edge_attr[et] == input edge_attr[et][e_id[et]], also
    for the reverse relations and in to_pyg()."""
    _, raw = make_data(11)
    rng = np.random.default_rng(0)
    attrs = {et: rng.standard_normal((raw["edges"][et][0].shape[0], 2)).astype(np.float32)
             for et in RELS[:3]}
    data = GraphData.from_dicts(COUNTS, raw["edges"], x=raw["x"], y=raw["y"], edge_attr=attrs)
    pyg = _pyg_data(raw)
    for et, a in attrs.items():
        pyg[et].edge_attr = torch.from_numpy(a)
    write_typed_store(tmp_path / "typed", raw, edge_attr=attrs)
    for source in (data, GraphData.from_pyg(pyg), GraphData.open(tmp_path / "typed"),
                   data.with_reverse_relations(prefix="back_")):
        loader = HeteroNeighborLoader(source, [4, 3], input_nodes="paper", batch_size=40, seed=1)
        for batch in loader:
            for et in batch.edge_types:
                fwd = (et[2], et[1][len("back_"):], et[0]) if et[1].startswith("back_") else et
                if fwd not in attrs:
                    assert et not in batch.edge_attr
                    continue
                want = torch.from_numpy(attrs[fwd])[batch.e_id[et]]
                assert torch.equal(batch.edge_attr[et], want), et
        pyg_batch = batch.to_pyg()
        assert torch.equal(pyg_batch[RELS[0]].edge_attr, batch.edge_attr[RELS[0]])
    merged = data.with_reverse_relations(merge=True)
    assert ("paper", "cites", "paper") not in merged.edge_features  # symmetrised: rows dropped
    assert RELS[0] in merged.edge_features


def test_loader_options_shared_with_one_relation_work_on_typed_graphs():
    """progress, fanout_order="dgl" (input layer first, per relation too, and DGL's
    frontier "all" as on one relation), len(dataset), the caller's data kept as
    loader.data; stats count the typed batches' rows."""
    data, raw = make_data(4)
    kw = {"input_nodes": ("paper", np.arange(40)), "batch_size": 16, "seed": 2}
    seed_first = _batches(HeteroNeighborLoader(data, [4, 2], frontier="all", **kw))
    dgl_order = HeteroNeighborLoader(data, {et: [2, 4] for et in RELS}, fanout_order="dgl",
                                     progress=True, **kw)
    assert dgl_order.fanouts == {et: [4, 2] for et in RELS} and dgl_order.data is data
    assert len(dgl_order.dataset) == 40
    assert_same_batches(seed_first, _batches(dgl_order))
    assert dgl_order.stats.total("paper") == sum(b.n_id["paper"].numel() for b in seed_first)
    for batch in seed_first:
        check_batch(batch, raw, batch.seeds.numpy())
