"""Every public entry point keeps a runnable ``>>>`` example in its docstring.

``make test`` runs the examples themselves (``pytest --doctest-modules graphpipe``);
this test fails when one of them is deleted, which the doctest run cannot see.
"""

from __future__ import annotations

import doctest

import pytest

import graphpipe.dgl as gp_dgl
import graphpipe.graphbolt as gp_gb
from graphpipe.ingest import ingest
from graphpipe.ingest.generated import read_generated
from graphpipe.ingest.ogb_link import read_link_pt, read_ogb_link
from graphpipe.ingest.splitfiles import read_split_files
from graphpipe.interop.pyg_backend import to_pyg_backend
from graphpipe.interop.pyg_data import from_pyg
from graphpipe.loaders import (
    ClusterLoader,
    GraphData,
    HeteroMiniBatch,
    MiniBatch,
    NeighborLoader,
    PartitionShard,
    SeedShard,
)
from graphpipe.loaders.disjoint import DisjointSampler
from graphpipe.loaders.link_exclude import exclude_seed_edges
from graphpipe.loaders.link_loader import LinkNeighborLoader
from graphpipe.loaders.link_seeds import plan_link_batch
from graphpipe.loaders.link_temporal import exclude_edges_anywhere, plan_temporal_link_batch
from graphpipe.loaders.temporal import TemporalSampler
from graphpipe.ops.aggregate import aggregate
from graphpipe.ops.attention import sparse_attention
from graphpipe.ops.negative import degree_weight, negative_sample
from graphpipe.ops.sampling import HeteroCSC, sample_neighbors
from graphpipe.ops.sampling.temporal import sample_temporal, temporal_graph
from graphpipe.service import Client
from graphpipe.service.replicas import ReplicaSet
from graphpipe.store import GraphStore
from graphpipe.store.link import read_link_split
from graphpipe.store.open import open_store
from graphpipe.store.remote import open_remote
from graphpipe.store.types import TypedFace
from graphpipe.store.writer import TypedStoreWriter
from graphpipe.synthetic.link import link_dataset, write_ogb_link
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
from graphpipe.synthetic.mag240m import mag240m_dataset
from graphpipe.synthetic.npz_stream import NpzStreamWriter
from graphpipe.synthetic.papers import write_papers100m_bin
from graphpipe.train import Trainer
from graphpipe.train.distributed import DistributedTrainer
from graphpipe.train.link import LinkPredictor, LinkTrainer, common_neighbours
from graphpipe.train.partition_parallel import (
    HaloExchange,
    PartitionTrainer,
    RowCodec,
    StalenessClock,
    auto_bits,
    local_partition,
    run_partition_parallel,
)

ENTRY_POINTS = [GraphStore.open, ingest, NeighborLoader, MiniBatch.to_pyg, ClusterLoader,
                sample_neighbors, aggregate, sparse_attention, Client, Trainer, from_pyg, to_pyg_backend,
                DisjointSampler, GraphStore.labels_for_evaluator, write_papers100m_bin,
                NpzStreamWriter, read_generated, read_split_files,
                HeteroMiniBatch.to_pyg, GraphData, HeteroCSC, SeedShard, PartitionShard, DistributedTrainer,
                TypedStoreWriter, TypedFace, mag_dataset, write_ogb_mag, mag240m_dataset,
                sample_temporal, temporal_graph, TemporalSampler, GraphStore.node_time,
                LinkNeighborLoader, plan_link_batch, exclude_seed_edges, negative_sample, degree_weight,
                read_link_split, read_ogb_link, read_link_pt, link_dataset, write_ogb_link,
                LinkPredictor, LinkTrainer, common_neighbours, plan_temporal_link_batch, exclude_edges_anywhere,
                local_partition, auto_bits, RowCodec, HaloExchange, StalenessClock, PartitionTrainer,
                run_partition_parallel,
                open_remote, open_store, ReplicaSet,
                gp_dgl.DataLoader, gp_dgl.NeighborSampler, gp_dgl.Block, gp_gb.OnDiskDataset, gp_gb.ItemSampler,
                gp_gb.NeighborSampler, gp_gb.FeatureFetcher, gp_gb.DataLoader]


@pytest.mark.parametrize("obj", ENTRY_POINTS, ids=lambda obj: obj.__qualname__)
def test_entry_point_has_an_example(obj) -> None:
    examples = doctest.DocTestParser().get_examples(obj.__doc__ or "")
    assert len(examples) >= 3, f"{obj.__qualname__}: add a runnable >>> example to its docstring"
    assert not any(ex.options.get(doctest.SKIP) for ex in examples), "no +SKIP in examples"
