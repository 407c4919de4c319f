"""R-GCN / heterogeneous SAGE / R-GAT models: shapes, embeddings of featureless types, learning."""

from types import SimpleNamespace

import pytest
import torch

from graphpipe.train.hetero_models import build_hetero_model

ET = [("author", "writes", "paper"), ("paper", "rev_writes", "author"),
      ("paper", "cites", "paper")]


def _batch(seed=0, papers=40, authors=30, edges=120):
    g = torch.Generator().manual_seed(seed)
    ei = {ET[0]: torch.stack([torch.randint(authors, (edges,), generator=g),
                              torch.randint(papers, (edges,), generator=g)])}
    ei[ET[1]] = ei[ET[0]].flip(0)
    ei[ET[2]] = torch.randint(papers, (2, edges), generator=g)
    return SimpleNamespace(x={"paper": torch.randn(papers, 6, generator=g)}, batch_size=10,
                           n_id={"paper": torch.arange(papers), "author": torch.arange(authors)},
                           edge_index=ei)


@pytest.mark.parametrize("name", ["rgcn", "hetero-sage", "rgat"])
def test_logits_for_the_seeds_and_config(name):
    model = build_hetero_model(name, {"paper": 6, "author": None}, {"paper": 40, "author": 30},
                               16, 3, 2, ET, "paper", dropout=0.0)
    assert model(_batch()).shape == (10, 3)
    assert model.config["target_type"] == "paper" and model.config["name"] == name


@pytest.mark.parametrize("name", ["rgcn", "hetero-sage", "rgat"])
def test_learns_a_label_carried_by_authors_only(name):
    """Paper labels = their first author's class; paper features are noise: only a model
    that passes messages through the author embeddings can fit them."""
    torch.manual_seed(0)
    batch = _batch(1)
    batch.batch_size = 40
    first = {}
    for a, p in batch.edge_index[ET[0]].t().tolist():
        first.setdefault(p, a)
    y = torch.tensor([first.get(p, 0) % 2 for p in range(40)])
    model = build_hetero_model(name, {"paper": 6, "author": None}, {"paper": 40, "author": 30},
                               16, 2, 2, ET, "paper", dropout=0.0)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(150):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch), y)
        loss.backward()
        opt.step()
    acc = (model(batch).argmax(1) == y).float().mean().item()
    assert acc > 0.9


def test_unknown_model_and_target_are_refused():
    with pytest.raises(ValueError, match="unknown typed model"):
        build_hetero_model("gcn", {"paper": 6}, {"paper": 4}, 8, 2, 2, ET, "paper")
    with pytest.raises(ValueError, match="target type"):
        build_hetero_model("rgcn", {"paper": 6}, {"paper": 4}, 8, 2, 2, ET, "venue")


def test_rgat_options():
    dims, counts = {"paper": 6, "author": None}, {"paper": 40, "author": 30}
    model = build_hetero_model("rgat", dims, counts, 16, 3, 2, ET, "paper", heads=2)
    assert model.config["heads"] == 2
    assert [c.heads for c in model.convs] == [2, 2] and model.convs[0].out_dim == 8
    assert not model.convs[1].concat and model.convs[1].out_dim == 3
    with pytest.raises(ValueError, match="multiple of heads=3"):
        build_hetero_model("rgat", dims, counts, 16, 3, 2, ET, "paper", heads=3)
    with pytest.raises(ValueError, match="unknown option"):
        build_hetero_model("rgcn", dims, counts, 16, 3, 2, ET, "paper", heads=2)


def _loader_batch(frontier):
    """A real two-hop typed batch (PyG's layout, hop counts per type)."""
    import numpy as np

    from graphpipe.loaders import GraphData, NeighborLoader

    rng = np.random.default_rng(0)
    counts = {"paper": 60, "author": 40}
    edges = {ET[0]: (rng.integers(0, 40, 150), rng.integers(0, 60, 150)),
             ET[2]: (rng.integers(0, 60, 150), rng.integers(0, 60, 150))}
    edges[ET[1]] = edges[ET[0]][::-1]
    data = GraphData.from_dicts(counts, edges, x={"paper": rng.standard_normal((60, 6),
                                                                                dtype=np.float32)},
                                target_type="paper")
    loader = NeighborLoader(data, [4, 3], input_nodes=("paper", np.arange(8)), batch_size=8,
                            seed=0, prefetch=0, frontier=frontier)
    return next(iter(loader))


@pytest.mark.parametrize("name", ["rgcn", "hetero-sage", "rgat"])
@pytest.mark.parametrize("frontier", ["new", "all"])
def test_trimmed_layers_give_the_seeds_the_untrimmed_logits_and_gradients(name, frontier):
    """Each layer computes only the rows the next one reads (PyG's trim_to_layer); the
    seeds' logits and every gradient are the full graph's. With frontier="all" (the
    seeds re-sampled at every hop) trimming applies only where the rows needed are a
    prefix."""
    from graphpipe.train.hetero_layers import TypedGraph
    from graphpipe.train.hetero_models import layer_graphs

    batch = _loader_batch(frontier)
    torch.manual_seed(0)
    model = build_hetero_model(name, {"paper": 6, "author": None}, {"paper": 60, "author": 40},
                               8, 3, 2, ET, "paper", dropout=0.0).double()
    counts = {t: int(v.shape[0]) for t, v in batch.n_id.items()}
    graph = TypedGraph.from_edge_index(batch.edge_index, counts)
    trimmed = layer_graphs(graph, batch.num_sampled_nodes, 2)
    assert trimmed is not None or frontier == "all"
    results = []
    for layers in (None, trimmed):
        model.zero_grad(set_to_none=True)
        h = model.forward_graph(model.inputs(batch.x, batch.n_id), graph, layers)
        logits = h["paper"][: batch.batch_size]
        logits.pow(2).sum().backward()
        results.append((logits.detach(), [torch.zeros_like(p) if p.grad is None else p.grad.clone()
                                          for p in model.parameters()]))
    if trimmed is not None:
        assert trimmed[-1].dst_rows("paper") == batch.batch_size
    torch.testing.assert_close(results[0][0], results[1][0])
    for a, b in zip(results[0][1], results[1][1], strict=True):
        torch.testing.assert_close(a, b)
