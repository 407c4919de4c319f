"""Typed layers against PyG's RGCNConv, HeteroConv(SAGEConv) and HeteroConv(GATConv) with
copied weights."""

import pytest
import torch

from graphpipe.train.hetero_layers import (
    HeteroGATConv,
    HeteroSAGEConv,
    RelGraphConv,
    TypedGraph,
    etype_key,
)

pyg_nn = pytest.importorskip("torch_geometric.nn")

ETYPES = [("author", "writes", "paper"), ("paper", "cites", "paper"),
          ("paper", "rev_writes", "author"), ("author", "knows", "author")]


def _graph(seed, n_author=7, n_paper=11, edges=30):
    g = torch.Generator().manual_seed(seed)
    counts = {"author": n_author, "paper": n_paper}
    ei = {}
    for s, r, d in ETYPES:
        ei[(s, r, d)] = torch.stack([torch.randint(counts[s], (edges,), generator=g),
                                     torch.randint(counts[d], (edges,), generator=g)])
    return counts, ei


@pytest.mark.parametrize(("seed", "dim", "out"), [(0, 5, 3), (1, 5, 3), (2, 5, 3), (0, 3, 8)])
def test_rgcn_equals_pyg_rgcnconv(seed, dim, out):
    """Forward and gradients; (5, 3): every relation transforms first, two per source
    type in one GEMM; (3, 8): every relation gathers first."""
    counts, ei = _graph(seed)
    x = {t: torch.randn(n, dim, dtype=torch.float64) for t, n in counts.items()}
    ours = RelGraphConv({t: dim for t in counts}, out, ETYPES).double()
    theirs = pyg_nn.RGCNConv(dim, out, num_relations=len(ETYPES), aggr="mean").double()
    with torch.no_grad():
        for r, e in enumerate(ETYPES):
            ours.rel[etype_key(e)].weight.copy_(theirs.weight[r].t())
        for t in ours.root:
            ours.root[t].weight.copy_(theirs.root.t())
        ours.bias.copy_(theirs.bias)
    # PyG's input is homogeneous: authors first, then papers, relations as edge types
    offset = {"author": 0, "paper": counts["author"]}
    edge_index = torch.cat([torch.stack([ei[e][0] + offset[e[0]], ei[e][1] + offset[e[2]]])
                            for e in ETYPES], 1)
    edge_type = torch.cat([torch.full((ei[e].shape[1],), r) for r, e in enumerate(ETYPES)])
    want = theirs(torch.cat([x["author"], x["paper"]]), edge_index, edge_type)
    got = ours(x, TypedGraph.from_edge_index(ei, counts))
    torch.testing.assert_close(got["author"], want[: counts["author"]])
    torch.testing.assert_close(got["paper"], want[counts["author"]:])
    seed_grad = torch.randn(want.shape, dtype=torch.float64)
    (want * seed_grad).sum().backward()
    ((got["author"] * seed_grad[: counts["author"]]).sum()
     + (got["paper"] * seed_grad[counts["author"]:]).sum()).backward()
    for r, e in enumerate(ETYPES):
        torch.testing.assert_close(ours.rel[etype_key(e)].weight.grad, theirs.weight.grad[r].t())
    torch.testing.assert_close(sum(ours.root[t].weight.grad for t in ours.root),
                               theirs.root.grad.t())
    torch.testing.assert_close(ours.bias.grad, theirs.bias.grad)


@pytest.mark.parametrize("seed", [0, 3])
def test_hetero_sage_equals_pyg_heteroconv(seed):
    counts, ei = _graph(seed, n_author=13, n_paper=4)  # more authors than papers: padded path
    dims, out = {"author": 3, "paper": 6}, 4
    x = {t: torch.randn(n, dims[t], dtype=torch.float64) for t, n in counts.items()}
    ours = HeteroSAGEConv(dims, out, ETYPES).double()
    theirs = pyg_nn.HeteroConv({e: pyg_nn.SAGEConv((dims[e[0]], dims[e[2]]), out)
                                for e in ETYPES}, aggr="sum").double()
    with torch.no_grad():
        for e in ETYPES:
            conv, key = theirs.convs[e], etype_key(e)
            ours.lin_l[key].weight.copy_(conv.lin_l.weight)
            ours.lin_l[key].bias.copy_(conv.lin_l.bias)
            ours.lin_r[key].weight.copy_(conv.lin_r.weight)
    want = theirs(x, ei)
    got = ours(x, TypedGraph.from_edge_index(ei, counts))
    for t in counts:
        torch.testing.assert_close(got[t], want[t])


def _gat_pair(dims, out, heads, concat, self_loops, residual):
    """Our HeteroGATConv and PyG's HeteroConv(GATConv) with the same weights (float64)."""
    ours = HeteroGATConv(dims, out, ETYPES, heads=heads, concat=concat,
                         add_self_loops=self_loops, residual=residual).double()
    theirs = pyg_nn.HeteroConv({e: pyg_nn.GATConv((dims[e[0]], dims[e[2]]), out, heads,
                                                  concat=concat, residual=residual,
                                                  add_self_loops=self_loops and e[0] == e[2])
                                for e in ETYPES}, aggr="sum").double()
    with torch.no_grad():
        for e in ETYPES:
            conv, key = theirs.convs[e], etype_key(e)
            conv.bias.normal_()  # PyG starts at zero: make the bias count
            ours.lin_src[key].weight.copy_(conv.lin_src.weight)
            ours.lin_dst[key].weight.copy_(conv.lin_dst.weight)
            ours.att_src[key].copy_(conv.att_src)
            ours.att_dst[key].copy_(conv.att_dst)
            ours.bias[key].copy_(conv.bias)
            if residual:
                ours.res[key].weight.copy_(conv.res.weight)
    return ours, theirs


@pytest.mark.parametrize(("seed", "heads", "concat", "self_loops", "residual"),
                         [(0, 1, True, False, False), (1, 3, True, False, False),
                          (2, 4, False, True, False), (3, 2, True, True, True),
                          (4, 2, False, False, True)])
def test_rgat_equals_pyg_heteroconv_gatconv_forward_and_gradients(seed, heads, concat,
                                                                  self_loops, residual):
    counts, ei = _graph(seed, n_author=13, n_paper=5)  # more authors than papers: padded path
    ei[("author", "knows", "author")] = ei[("author", "knows", "author")][:, :0]  # no edges
    dims, out = {"author": 3, "paper": 6}, 4
    ours, theirs = _gat_pair(dims, out, heads, concat, self_loops, residual)
    x = {t: torch.randn(n, dims[t], dtype=torch.float64) for t, n in counts.items()}
    xo = {t: v.clone().requires_grad_() for t, v in x.items()}
    xt = {t: v.clone().requires_grad_() for t, v in x.items()}
    got = ours(xo, TypedGraph.from_edge_index(ei, counts))
    want = theirs(xt, ei)
    assert set(got) == set(want) == set(counts)
    weights = {t: torch.randn_like(want[t]) for t in want}
    for t in counts:
        torch.testing.assert_close(got[t], want[t])
    sum((got[t] * weights[t]).sum() for t in got).backward()
    sum((want[t] * weights[t]).sum() for t in want).backward()
    for t in counts:
        torch.testing.assert_close(xo[t].grad, xt[t].grad)
    for e in ETYPES:
        conv, key = theirs.convs[e], etype_key(e)
        pairs = [(ours.lin_src[key].weight, conv.lin_src.weight),
                 (ours.lin_dst[key].weight, conv.lin_dst.weight),
                 (ours.att_src[key], conv.att_src), (ours.att_dst[key], conv.att_dst),
                 (ours.bias[key], conv.bias)]
        pairs += [(ours.res[key].weight, conv.res.weight)] if residual else []
        for mine, pyg in pairs:
            torch.testing.assert_close(mine.grad, pyg.grad)


def test_rgat_attention_dropout_only_while_training():
    counts, ei = _graph(7)
    conv = HeteroGATConv({"author": 4, "paper": 4}, 2, ETYPES, heads=2, dropout=0.5)
    x = {t: torch.randn(n, 4) for t, n in counts.items()}
    g = TypedGraph.from_edge_index(ei, counts)
    conv.eval()
    torch.testing.assert_close(conv(x, g)["paper"], conv(x, g)["paper"])
    conv.train()
    torch.manual_seed(0)
    assert not torch.equal(conv(x, g)["paper"], conv.eval()(x, g)["paper"])
    with pytest.raises(ValueError, match="heads"):
        HeteroGATConv({"author": 4, "paper": 4}, 2, ETYPES, heads=0)


def test_gradients_flow_to_every_relation():
    counts, ei = _graph(5)
    conv = RelGraphConv({"author": 4, "paper": 4}, 2, ETYPES)
    x = {t: torch.randn(n, 4, requires_grad=True) for t, n in counts.items()}
    out = conv(x, TypedGraph.from_edge_index(ei, counts))
    (out["paper"].sum() + out["author"].sum()).backward()
    assert all(lin.weight.grad is not None and lin.weight.grad.abs().sum() > 0
               for lin in conv.rel.values())


def test_bad_inputs_are_refused():
    counts, ei = _graph(6)
    conv = RelGraphConv({"author": 4, "paper": 4}, 2, ETYPES)
    g = TypedGraph.from_edge_index(ei, counts)
    with pytest.raises(ValueError, match="x_dict\\['paper'\\]"):
        conv({"author": torch.ones(7, 4), "paper": torch.ones(11, 3)}, g)
    bad = {ETYPES[0]: torch.tensor([[7], [0]])}
    with pytest.raises(ValueError, match="source IDs"):
        TypedGraph.from_edge_index(bad, {"author": 7, "paper": 11})
