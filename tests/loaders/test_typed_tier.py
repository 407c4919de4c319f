"""The feature tier per node type of a typed graph (issue 25): the disk tier, its hot set
and CLOCK cache per type and quantized transfer per type, through NeighborLoader on a
typed store. Oracle: the store's own arrays, ``X_t[n_id[t]]`` bit for bit (float32 and
float16), and ``quantize`` of those rows for ``feature_bits``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.loaders import GraphData, NeighborLoader
from graphpipe.loaders.rows import CachedRows, DiskRows
from graphpipe.loaders.rows.tiers import tier_counters
from graphpipe.loaders.typed_tier import (
    share_typed_disk_tier,
    split_cache,
    typed_feature_sources,
    typed_tiers,
)
from graphpipe.ops.features.quantize import dequantize, quantize
from graphpipe.store import GraphStore

COUNTS = {"paper": 400, "author": 250, "inst": 9}
RELS = [("author", "writes", "paper"), ("paper", "cites", "paper"), ("author", "affiliated", "inst"),
        ("paper", "rev_writes", "author")]
DTYPES = {"paper": np.float16, "author": np.float32}   # inst: no features
DIMS = {"paper": 12, "author": 5}


def write_store(path) -> dict:
    from graphpipe.store.writer import TypedStoreWriter

    rng = np.random.default_rng(3)
    edges = {}
    for et in RELS[:3]:
        n = 2000 if et[2] != "inst" else 300
        edges[et] = (rng.integers(0, COUNTS[et[0]], n),
                     np.minimum((rng.pareto(1.2, n) * COUNTS[et[2]] / 8).astype(np.int64), COUNTS[et[2]] - 1))
    edges[RELS[3]] = edges[RELS[0]][::-1]
    x = {t: (rng.standard_normal((COUNTS[t], DIMS[t])) * 3).astype(d) for t, d in DTYPES.items()}
    with TypedStoreWriter(path, COUNTS, target_type="paper") as w:
        for et, (s, d) in edges.items():
            w.add_relation(et, s, d)
        for t, v in x.items():
            w.write_node_array(t, "feat", v)
        w.write_node_array("paper", "label", rng.integers(0, 4, COUNTS["paper"]))
        w.write_split("paper", "train", np.arange(0, 400, 2))
        w.commit()
    return x


def same_bits(a: torch.Tensor, b: np.ndarray) -> bool:
    a = a.numpy()
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_disk_tier_per_type_delivers_the_stored_rows_bit_for_bit(tmp_path):
    """features="disk": every type with features reads O_DIRECT rows behind its hot set and
    CLOCK cache (small caches here, so batches read from disk); x[t] == X_t[n_id[t]] byte
    for byte in float16 and float32; the featureless type has no x; the batches equal the
    memory tier's."""
    x = write_store(tmp_path / "s")
    store = GraphStore.open(tmp_path / "s")
    data = GraphData.from_store(store)
    tiers = share_typed_disk_tier(data, {"paper": 40, "author": 10})   # 36 / 9 hot rows, 4 / 1 CLOCK
    kw = {"input_nodes": ("paper", "train"), "batch_size": 32, "seed": 5, "shuffle": True}
    disk = NeighborLoader(data, [5, 3], features="disk", **kw)
    assert disk.feature_tier == {"paper": "disk", "author": "disk"}
    assert all(disk.rows[t] is tiers[t] for t in tiers)     # the shared tier of this store
    memory = NeighborLoader(tmp_path / "s", [5, 3], features="memory", **kw)
    assert memory.feature_tier == {"paper": "memory", "author": "memory"}
    batches = 0
    for a, b in zip(disk, memory):
        assert set(a.x_dict) == {"paper", "author"}
        for t in ("paper", "author"):
            assert torch.equal(a.n_id[t], b.n_id[t])
            assert same_bits(a.x[t], x[t][a.n_id[t].numpy()])
            assert same_bits(b.x[t], x[t][b.n_id[t].numpy()])
        batches += 1
    assert batches == len(disk) == 7
    for t in ("paper", "author"):
        counters = tier_counters(disk.rows[t])
        assert counters.disk_rows > 0 and counters.cache_hits >= 0   # misses went to disk
    assert disk.stats.total("paper") == memory.stats.total("paper") > 0


def test_typed_sources_read_the_same_rows_whatever_the_cache(tmp_path):
    """The tier alone: any cache size (none, CLOCK only, hot set + CLOCK, everything),
    repeated and unordered IDs, the rows are the stored bytes."""
    x = write_store(tmp_path / "s")
    data = GraphData.from_store(GraphStore.open(tmp_path / "s"))
    ids = np.random.default_rng(0).integers(0, 250, 600)
    for rows in (0, 3, 50, 250):
        src = typed_feature_sources(data, "disk", cache_rows={"paper": rows, "author": rows})
        assert set(src) == {"paper", "author"}
        for t in src:
            got = src[t].gather(ids[ids < COUNTS[t]])
            assert got.tobytes() == x[t][ids[ids < COUNTS[t]]].tobytes()
            assert src[t].gather(ids[ids < COUNTS[t]]).tobytes() == got.tobytes()  # second pass: cached


def test_auto_plans_the_tiers_across_types(tmp_path):
    """"auto": the smaller tables stay in memory while they fit the budget, the rest go to
    disk; a mapping picks per type; a store opened with its features in memory, or arrays in
    memory, are memory tier; bad choices are one-line ValueErrors."""
    write_store(tmp_path / "s")
    data = GraphData.from_store(GraphStore.open(tmp_path / "s"))
    paper, author = 400 * 12 * 2, 250 * 5 * 4
    from graphpipe.store.reader import AUTO_MEMORY_FRACTION

    assert typed_tiers(data, "auto", usable=10 ** 9) == {"paper": "memory", "author": "memory"}
    budget = int((author + 10) / AUTO_MEMORY_FRACTION)        # room for author only
    assert typed_tiers(data, True, usable=budget) == {"paper": "disk", "author": "memory"}
    assert typed_tiers(data, "auto", usable=0) == {"paper": "disk", "author": "disk"}
    assert typed_tiers(data, {"author": "disk"}, usable=10 ** 9) == {"paper": "memory", "author": "disk"}
    assert paper > author
    arrays = GraphData.from_dicts(COUNTS, {RELS[0]: (np.array([0]), np.array([1]))},
                                        x={"paper": np.zeros((400, 2), np.float32)})
    assert typed_tiers(arrays, "auto", usable=0) == {"paper": "memory"}
    with pytest.raises(ValueError, match=r"^features='disk' needs a typed store[^\n]*$"):
        NeighborLoader(arrays, [2], input_nodes="paper", features="disk")
    with pytest.raises(ValueError, match=r"^'features' names node types without features: inst$"):
        typed_tiers(data, {"inst": "disk"})
    with pytest.raises(ValueError, match=r"^'features' of node type 'paper' must be[^\n]*$"):
        typed_tiers(data, {"paper": "ssd"})
    rows = split_cache(data, ["paper", "author"], 10 ** 6)
    assert rows == {"paper": 400, "author": 250}                 # a large budget holds every row


@pytest.mark.parametrize("features", ["memory", "disk"])
def test_feature_bits_per_type(tmp_path, features):
    """feature_bits on a typed graph: each type's rows are its stored rows quantized with
    the batch's rounding seed (the oracle: ``quantize`` of X_t[n_id[t]]), float32 out,
    within one step of the row's scale; equal seeds give equal batches; Match reuses codes
    (same rows as without it)."""
    x = write_store(tmp_path / "s")
    data = GraphData.from_store(GraphStore.open(tmp_path / "s"))
    if features == "disk":
        share_typed_disk_tier(data, {"paper": 30, "author": 20})
    kw = {"input_nodes": ("paper", "train"), "batch_size": 40, "seed": 9, "features": features,
          "match_reorder": False}
    loader = NeighborLoader(data, [4, 2], feature_bits=4, **kw)
    keys = loader.batch_keys(0, len(loader))
    batches = list(loader)
    for i, b in enumerate(batches):
        assert "inst" not in b.x_dict
        for t in ("paper", "author"):
            ids = b.n_id[t].numpy()
            rows = torch.from_numpy(x[t][ids])
            seed = loader.gather.rounding_seed(keys[i], t)
            held = loader.rows[t].source.held_positions(ids)     # the disk tier's hot set
            held = np.full(ids.shape[0], -1) if held is None else held
            read = torch.from_numpy(held < 0)                     # rows read: quantized together
            want = torch.empty(rows.shape, dtype=torch.float32)
            want[read] = dequantize(quantize(rows[read], 4, seed=seed))
            if (held >= 0).any():                                 # hot rows: quantized once, loader seed
                hot = loader.rows[t].source.ids
                codes = dequantize(quantize(torch.from_numpy(x[t][hot]), 4, seed=9))
                want[~read] = codes[torch.from_numpy(held[held >= 0])]
            assert b.x[t].dtype == torch.float32 and torch.equal(b.x[t], want)
            r32 = rows.float()
            scale = (r32.max(1).values - r32.min(1).values) / 15
            assert bool(((b.x[t] - r32).abs() <= scale[:, None] + 1e-3).all())
    again = list(NeighborLoader(data, [4, 2], feature_bits=4, **kw))
    match = NeighborLoader(data, [4, 2], feature_bits=4, **{**kw, "match_reorder": "match"})
    for a, b, c in zip(batches, again, match):
        for t in ("paper", "author"):
            assert torch.equal(a.x[t], b.x[t])
            r32 = torch.from_numpy(x[t][c.n_id[t].numpy()]).float()
            scale = (r32.max(1).values - r32.min(1).values) / 15
            assert bool(((c.x[t] - r32).abs() <= scale[:, None] + 1e-3).all())
    assert match.stats.reused["author"] > 0 and match.stats.total("author") == sum(
        b.n_id["author"].numel() for b in batches)


def test_disk_tier_is_disk_rows_under_clock(tmp_path):
    """The chain of a disk type: hot set -> CLOCK -> DiskRows over typed/<t>/feat."""
    write_store(tmp_path / "s")
    data = GraphData.from_store(GraphStore.open(tmp_path / "s"))
    src = typed_feature_sources(data, "disk", cache_rows={"paper": 20, "author": 0})
    chain, s = [], src["paper"]
    while s is not None:
        chain.append(type(s).__name__)
        s = getattr(s, "source", None)
    assert chain == ["DegreeCachedRows", "CachedRows", "DiskRows"]
    assert isinstance(src["author"], CachedRows) and isinstance(src["author"].source, DiskRows)
    assert "typed/paper/feat" in src["paper"].source.source.paths[0].as_posix()
