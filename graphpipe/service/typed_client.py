"""Typed sampling on the service: :func:`sample_typed` (one call) and
:class:`RemoteHeteroSampler` (the sampler :class:`graphpipe.loaders.HeteroNeighborLoader`
takes as ``sampler=``).

For the same seeds, fanouts and keys the service returns exactly what the local typed
sampler returns on the same graph, so a loader over the service yields the batches of
the local loader (features are gathered by the loader, from its own data). The loader's
graph must be the server's: :meth:`RemoteHeteroSampler.check_graph` compares node
counts and relations with the server's ``info()["typed"]`` and refuses a mismatch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphpipe.ops.sampling.types import EdgeType, HeteroSampleOutput, etype_str
from graphpipe.service import protocol
from graphpipe.service.client import Client
from graphpipe.service.typed_protocol import decode_typed_rows

__all__ = ["RemoteHeteroSampler", "sample_typed"]


def _fanouts_param(fanouts: Sequence[int] | Mapping[Any, Sequence[int]]) -> Any:
    if isinstance(fanouts, Mapping):
        return {(k if isinstance(k, str) else etype_str(tuple(k))): [int(f) for f in v]
                for k, v in fanouts.items()}
    return [int(f) for f in fanouts]


def sample_typed(client: Client, seed_batches: Sequence[np.ndarray], keys: Sequence[int], ntype: str,
                 fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *, replace: bool = False,
                 frontier: str = "new") -> list[HeteroSampleOutput]:
    """Sample typed seed batches (all of ``ntype``) on the service, one call.

    Returns one :class:`HeteroSampleOutput` per batch, equal to
    ``sample_hetero_neighbors(graph, {ntype: seeds}, fanouts, seed=key, ...)`` on the
    server's graph.
    """
    if not len(seed_batches):
        return []
    command = protocol.encode_command("sample_typed", ntype=ntype, fanouts=_fanouts_param(fanouts),
                                      replace=bool(replace), frontier=frontier)
    request = protocol.sample_request_batch([np.asarray(s, np.int64) for s in seed_batches], keys)
    responses = client._exchange(command, request)
    outs = [o for batch, _ in responses for o in decode_typed_rows(batch, frontier)]
    if len(outs) != len(seed_batches):
        raise RuntimeError(f"server returned {len(outs)} samples for {len(seed_batches)} batches")
    return outs


class RemoteHeteroSampler:
    """The typed loader's sampler that samples on a graphpipe service:
    ``HeteroNeighborLoader(store, fanouts, ..., sampler=RemoteHeteroSampler(url))``.

    Args:
        url: ``grpc://host:port`` of a ``graphpipe serve`` over the same typed store.
        token, timeout, tls_root_certs: see :class:`graphpipe.service.Client`.

    Over a served typed store, the remote loader's batches equal the local loader's:

    >>> import os, tempfile
    >>> import numpy as np, torch
    >>> from graphpipe.loaders import HeteroNeighborLoader
    >>> from graphpipe.service import SamplingServer
    >>> from graphpipe.store.writer import TypedStoreWriter
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with TypedStoreWriter(os.path.join(tmp.name, "t"), {"paper": 3, "author": 2},
    ...                       target_type="paper") as w:
    ...     w.add_relation(("author", "writes", "paper"), np.array([0, 1, 1]), np.array([0, 1, 2]))
    ...     w.write_node_array("paper", "feat", np.eye(3, dtype=np.float32))
    ...     path = w.commit()
    >>> server = SamplingServer(path, "grpc://127.0.0.1:0", threads=1)
    >>> remote = RemoteHeteroSampler(f"grpc://127.0.0.1:{server.port}")
    >>> kw = dict(input_nodes=("paper", None), batch_size=2, seed=3)
    >>> local_batches = list(HeteroNeighborLoader(remote.graph_data(path), [2], **kw))
    >>> remote_batches = list(HeteroNeighborLoader(remote.graph_data(path), [2], sampler=remote, **kw))
    >>> all(torch.equal(a.n_id[t], b.n_id[t]) for a, b in zip(local_batches, remote_batches)
    ...     for t in a.n_id)
    True
    >>> remote.close(); server.close(); tmp.cleanup()
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float | None = None,
                 tls_root_certs: bytes | str | None = None):
        self.client = Client(url, token, timeout=timeout, shared_memory=False,
                             tls_root_certs=tls_root_certs)
        typed = self.client.info().get("typed")
        if typed is None:
            raise ValueError(f"the service at {url} serves a one-type store: use RemoteSampler")
        self.node_types: dict[str, int] = dict(typed["node_types"])
        self.edge_types: list[str] = list(typed["edge_types"])
        self.reverse = bool(typed["reverse"])

    def graph_data(self, store: Any) -> Any:
        """The :class:`graphpipe.loaders.HeteroGraphData` of ``store`` (a typed store or
        its path) over the relations the server samples (its reverses added when the
        server adds them)."""
        from graphpipe.loaders.graph_data import (
            HeteroGraphData,
            add_reverse_relations,
            resolve_hetero_data,
        )

        data = resolve_hetero_data(store)
        if self.reverse and isinstance(data, HeteroGraphData) and data.store is not None:
            data = add_reverse_relations(data)
        self.check_graph(data.num_nodes_dict, data.edge_types)
        return data

    def check_graph(self, num_nodes: Mapping[str, int], edge_types: Sequence[EdgeType]) -> None:
        """Refuse a loader graph that is not the server's (counts, relations, order)."""
        mine = [etype_str(e) for e in edge_types]
        if dict(num_nodes) != self.node_types or mine != self.edge_types:
            raise ValueError(f"the loader's graph ({dict(num_nodes)}, {mine}) is not the one the "
                             f"service samples ({self.node_types}, {self.edge_types})")

    def sample(self, seed_batches: Sequence[Mapping[str, np.ndarray]],
               fanouts: Mapping[EdgeType, Sequence[int]], keys: Sequence[int], *,
               replace: bool = False, frontier: str = "new") -> list[HeteroSampleOutput]:
        """One window: per batch a ``{ntype: seeds}`` dict of one type."""
        types = {t for b in seed_batches for t in b}
        if len(types) > 1:
            raise ValueError(f"a remote window must seed one node type (got {sorted(types)})")
        if not types:
            return []
        ntype = types.pop()
        return sample_typed(self.client, [b[ntype] for b in seed_batches], keys, ntype,
                            dict(fanouts), replace=replace, frontier=frontier)

    def close(self) -> None:
        """Close the connection."""
        self.client.close()
