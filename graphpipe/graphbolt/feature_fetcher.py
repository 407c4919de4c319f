"""GraphBolt's ``fetch_feature`` stage: each batch's node features (rows of its
``input_nodes``, or of its seeds when nothing was sampled) and edge features (per layer,
rows of its edge IDs) read from a :class:`~graphpipe.graphbolt.FeatureStore`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from graphpipe.graphbolt.base import Datapipe, functional_datapipe
from graphpipe.graphbolt.feature_store import FeatureStore
from graphpipe.graphbolt.minibatch import MiniBatch

__all__ = ["FeatureFetcher"]


def _names(keys: Sequence[str] | None, what: str) -> list[str]:
    if keys is None:
        return []
    if isinstance(keys, dict):
        raise ValueError(f"'{what}' per type (heterogeneous graphs) is not supported")  # noqa: TRY004 - the project reports bad arguments as ValueError
    return [keys] if isinstance(keys, str) else list(keys)


@functional_datapipe("fetch_feature")
class FeatureFetcher(Datapipe):
    """``datapipe.fetch_feature(features, node_feature_keys=["feat"])``: sets each batch's
    ``node_features`` (``{name: rows}``) and ``edge_features`` (per layer).

    >>> import numpy as np, torch
    >>> from graphpipe.graphbolt import ItemSampler, ItemSet
    >>> features = FeatureStore({("node", None, "feat"): np.arange(6.0).reshape(3, 2)})
    >>> pipe = ItemSampler(ItemSet(torch.tensor([2, 0]), names="seed_nodes"), batch_size=2)
    >>> next(iter(pipe.fetch_feature(features, node_feature_keys=["feat"]))).node_features["feat"].tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """

    def __init__(self, datapipe: Iterable[MiniBatch], feature_store: FeatureStore,
                 node_feature_keys: Sequence[str] | None = None,
                 edge_feature_keys: Sequence[str] | None = None, overlap_fetch: bool = False):
        self.datapipe, self.feature_store = datapipe, feature_store
        self.node_feature_keys = _names(node_feature_keys, "node_feature_keys")
        self.edge_feature_keys = _names(edge_feature_keys, "edge_feature_keys")

    def fetch(self, batch: MiniBatch) -> MiniBatch:
        ids = batch.input_nodes if batch.input_nodes is not None else batch.seed_nodes
        read: Any = self.feature_store.read
        batch.node_features = {k: read("node", None, k, ids) for k in self.node_feature_keys}
        if self.edge_feature_keys and batch.sampled_subgraphs:
            batch.edge_features = [{k: read("edge", None, k, sub.original_edge_ids)
                                    for k in self.edge_feature_keys} for sub in batch.sampled_subgraphs]
        return batch

    def __iter__(self) -> Iterator[MiniBatch]:
        return map(self.fetch, self.datapipe)
