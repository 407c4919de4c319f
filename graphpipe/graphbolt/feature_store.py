"""GraphBolt's feature store face over a graphpipe store: ``read`` / ``size`` / ``update``
of node (``feat``, ``label``, ``node/<name>``) and edge (``edge/<name>``) features,
addressed as GraphBolt does, ``(domain, type_name, feature_name)`` with ``type_name``
None for homogeneous graphs. Rows are read from the store (memory maps) per request;
``update`` keeps the new values in memory (the store is never written)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from graphpipe.dgl.block import as_tensor

__all__ = ["FeatureStore"]


class FeatureStore:
    """Node and edge features of a store, GraphBolt's ``FeatureStore`` interface.

    >>> features = FeatureStore({("node", None, "feat"): np.eye(3, dtype=np.float32)})
    >>> features.read("node", None, "feat", torch.tensor([2, 0])).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    >>> features.size("node", None, "feat")
    torch.Size([3])
    >>> features.update("node", None, "feat", torch.zeros(3, 2))
    >>> features.read("node", None, "feat", torch.tensor([1])).tolist()
    [[0.0, 0.0]]
    """

    def __init__(self, arrays: dict[tuple[str, Any, str], Any]):
        self._arrays = dict(arrays)       # key -> array (memory map) or a callable reading one
        self._memory: dict[tuple[str, Any, str], torch.Tensor] = {}

    @classmethod
    def from_store(cls, store: Any) -> FeatureStore:
        """Every ``node/*`` and ``edge/*`` array of ``store`` (``node/feat`` as ``feat``)."""
        keys = [k for k in store.manifest.get("arrays", {}) if k.split("/")[0] in ("node", "edge")]
        return cls({(k.split("/")[0], None, k.split("/", 1)[1]): _Lazy(store, k) for k in keys})

    def _key(self, domain: str, type_name: Any, feature_name: str) -> tuple[str, Any, str]:
        key = (domain, type_name, feature_name)
        if key not in self._arrays and key not in self._memory:
            raise KeyError(f"no feature {key} (have {sorted(self.keys(), key=str)})")
        return key

    def _rows(self, key: tuple[str, Any, str], ids: np.ndarray | None) -> np.ndarray:
        value = self._arrays[key]
        if isinstance(value, _Lazy):
            return value.rows(ids)
        return np.asarray(value) if ids is None else np.asarray(value)[ids]

    def read(self, domain: str, type_name: Any, feature_name: str, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``ids`` (all rows when None) of a feature, as a tensor."""
        key = self._key(domain, type_name, feature_name)
        if key in self._memory:
            full = self._memory[key]
            return full if ids is None else full[ids.to(full.device)]
        return as_tensor(self._rows(key, None if ids is None else ids.cpu().numpy()))

    def size(self, domain: str, type_name: Any, feature_name: str) -> torch.Size:
        """The shape of one row."""
        key = self._key(domain, type_name, feature_name)
        shape = self._memory[key].shape if key in self._memory else self._arrays[key].shape
        return torch.Size(shape[1:])

    def update(self, domain: str, type_name: Any, feature_name: str, value: torch.Tensor,
               ids: torch.Tensor | None = None) -> None:
        """Replace a feature (``ids`` None) or some of its rows; kept in memory."""
        key = (domain, type_name, feature_name)
        if ids is None:
            self._memory[key] = value
            return
        full = self._memory.get(key)
        if full is None:
            full = self._memory[key] = self.read(domain, type_name, feature_name).clone()
        full[ids.to(full.device)] = value.to(full.device, full.dtype)

    def keys(self) -> list[tuple[str, Any, str]]:
        return list(dict.fromkeys([*self._arrays, *self._memory]))

    def metadata(self, domain: str, type_name: Any, feature_name: str) -> dict:
        self._key(domain, type_name, feature_name)
        return {}

    def to(self, device: Any) -> FeatureStore:
        """The store itself: rows are read on the host and moved by ``copy_to``."""
        return self

    def pin_memory_(self) -> FeatureStore:
        return self

    def __repr__(self) -> str:
        return f"FeatureStore({[k[0] + '/' + k[2] for k in self.keys()]})"


class _Lazy:
    """A store array opened on first use; ``node/feat`` rows through the store's chunked
    gather (:meth:`graphpipe.store.GraphStore.features`)."""

    def __init__(self, store: Any, key: str):
        self.store, self.key = store, key

    @property
    def shape(self) -> tuple[int, ...]:
        if self.key == "node/feat":
            return (self.store.num_nodes, self.store.feature_dim)
        return tuple(self.store.array(self.key).shape)

    def rows(self, ids: np.ndarray | None) -> np.ndarray:
        if self.key == "node/feat":
            return self.store.features(ids)
        array = self.store.array(self.key)
        return np.asarray(array) if ids is None else np.asarray(array)[ids]
