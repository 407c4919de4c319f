"""The seeds of one link batch: positive edges, their negatives (PyG's ``"binary"`` and
``"triplet"`` modes, drawn by :func:`graphpipe.ops.negative.negative_sample`), the unique
seed nodes the sampler expands, and each edge's endpoints as local IDs of those seeds.

PyG's layout (``torch_geometric.sampler.neighbor_sampler.edge_sample``, non-disjoint):

- binary: ``ceil(P * amount)`` negatives, sources and destinations drawn independently;
  ``src = [pos_src, neg_src]``, ``dst = [pos_dst, neg_dst]``; ``edge_label`` is the
  positives' labels (1.0 when none were given) then zeros;
- triplet: ``P * amount`` negative destinations (``amount`` an integer);
- the seed nodes are ``unique([src, dst(, dst_neg)])`` (sorted), and
  ``edge_label_index`` / ``src_index`` / ``dst_pos_index`` / ``dst_neg_index`` index them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from graphpipe.ops._core.rng import U64_MASK, mix64_py
from graphpipe.ops.negative import degree_weight, negative_sample

__all__ = ["LinkSeeds", "NegativeSpec", "plan_link_batch", "resolve_negatives"]

NEG_MODES = ("binary", "triplet")


@dataclass
class NegativeSpec:
    """How negatives are drawn: ``mode``, ``amount`` per positive, node weights of the
    sources and destinations (None: uniform)."""

    mode: str
    amount: float = 1
    src_weight: np.ndarray | None = None
    dst_weight: np.ndarray | None = None


def _weight(value: Any, indptr: np.ndarray, num_nodes: int) -> np.ndarray | None:
    if value is None or (isinstance(value, str) and value == "uniform"):
        return None
    if isinstance(value, str):
        if value != "degree":
            raise ValueError(f"negative 'weight' must be 'uniform', 'degree' or an array (got {value!r})")
        return degree_weight(indptr)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    value = np.asarray(value, dtype=np.float64)
    if value.shape != (num_nodes,):
        raise ValueError(f"negative 'weight' must have shape ({num_nodes},) (got {value.shape})")
    return value


def resolve_negatives(neg_sampling: Any, indptr: np.ndarray, num_nodes: int) -> NegativeSpec | None:
    """A :class:`NegativeSpec` from ``None``, ``"binary"``, ``"triplet"``, a dict
    ``{"mode", "amount", "weight"}`` (weight ``"uniform"``, ``"degree"`` or an ``(N,)``
    array; or ``"src_weight"`` / ``"dst_weight"``) or a PyG ``NegativeSampling``."""
    if neg_sampling is None:
        return None
    if isinstance(neg_sampling, str):
        neg_sampling = {"mode": neg_sampling}
    elif not isinstance(neg_sampling, dict):  # PyG's NegativeSampling
        mode = getattr(neg_sampling, "mode", None)
        neg_sampling = {"mode": getattr(mode, "value", mode), "amount": neg_sampling.amount,
                        "src_weight": neg_sampling.src_weight, "dst_weight": neg_sampling.dst_weight}
    unknown = set(neg_sampling) - {"mode", "amount", "weight", "src_weight", "dst_weight"}
    if unknown:
        raise ValueError(f"'neg_sampling' has unknown key(s) {sorted(unknown)}")
    mode = neg_sampling.get("mode")
    if mode not in NEG_MODES:
        raise ValueError(f"'neg_sampling' mode must be 'binary' or 'triplet' (got {mode!r})")
    amount = neg_sampling.get("amount", 1)
    if isinstance(amount, bool) or not isinstance(amount, (int, float, np.integer, np.floating)) \
            or not amount > 0:
        raise ValueError(f"'neg_sampling' amount must be positive (got {amount!r})")
    if mode == "triplet" and amount != math.ceil(amount):
        raise ValueError(f"'neg_sampling' amount must be an integer for 'triplet' (got {amount})")
    both = neg_sampling.get("weight")
    return NegativeSpec(mode, int(amount) if mode == "triplet" else amount,
                        _weight(neg_sampling.get("src_weight", both), indptr, num_nodes),
                        _weight(neg_sampling.get("dst_weight", both), indptr, num_nodes))


@dataclass
class LinkSeeds:
    """One batch of a :class:`~graphpipe.loaders.LinkNeighborLoader` before sampling.

    Attributes:
        input_id: int64 ``(P,)`` positions of the positives in ``edge_label_index``.
        pos_src, pos_dst: int64 ``(P,)`` the positive edges (global IDs).
        nodes: int64 ``(B,)`` unique seed nodes, sorted (the sampler's seeds).
        edge_label_index: int64 ``(2, P + M)`` local IDs (binary / no negatives), or None.
        edge_label: ``(P + M,)`` labels, or None.
        src_index, dst_pos_index: int64 ``(P,)``; dst_neg_index: ``(P,)`` or ``(P, K)``
            (triplet), else None.
    """

    input_id: np.ndarray
    pos_src: np.ndarray
    pos_dst: np.ndarray
    nodes: np.ndarray
    edge_label_index: np.ndarray | None = None
    edge_label: torch.Tensor | None = None
    src_index: np.ndarray | None = None
    dst_pos_index: np.ndarray | None = None
    dst_neg_index: np.ndarray | None = None


def _draw(count: int, num_nodes: int, key: int, salt: int, weight: np.ndarray | None) -> np.ndarray:
    return negative_sample(count, num_nodes, seed=mix64_py((key + salt) & U64_MASK), weight=weight)


def plan_link_batch(input_id: np.ndarray, src: np.ndarray, dst: np.ndarray, label: torch.Tensor | None,
                    neg: NegativeSpec | None, num_nodes: int, key: int) -> LinkSeeds:
    """The :class:`LinkSeeds` of positives ``src[i] -> dst[i]`` (their ``input_id`` and
    ``label``), negatives drawn from ``key`` (a pure function of its arguments).

    >>> s = plan_link_batch(np.array([0, 1]), np.array([4, 2]), np.array([2, 7]), None,
    ...                     NegativeSpec("binary"), 10, key=1)
    >>> s.nodes.tolist(), s.edge_label_index.tolist(), s.edge_label.tolist()
    ([2, 3, 4, 6, 7], [[2, 0, 2, 3], [0, 4, 1, 1]], [1.0, 1.0, 0.0, 0.0])
    >>> t = plan_link_batch(np.array([0, 1]), np.array([4, 2]), np.array([2, 7]), None,
    ...                     NegativeSpec("triplet", 2), 10, key=1)
    >>> t.nodes[t.src_index].tolist(), t.nodes[t.dst_pos_index].tolist(), t.dst_neg_index.shape
    ([4, 2], [2, 7], (2, 2))
    """
    num_pos = int(src.shape[0])
    seeds = LinkSeeds(input_id, src, dst, np.empty(0, dtype=np.int64))
    if neg is not None and neg.mode == "triplet":
        dst_neg = _draw(num_pos * int(neg.amount), num_nodes, key, 2, neg.dst_weight)
        seeds.nodes, inverse = np.unique(np.concatenate([src, dst, dst_neg]), return_inverse=True)
        seeds.src_index, seeds.dst_pos_index = inverse[:num_pos], inverse[num_pos:2 * num_pos]
        rest = inverse[2 * num_pos:].reshape(num_pos, -1)
        seeds.dst_neg_index = rest[:, 0] if rest.shape[1] == 1 else rest
        return seeds
    if neg is not None:
        num_neg = math.ceil(num_pos * neg.amount)
        src = np.concatenate([src, _draw(num_neg, num_nodes, key, 1, neg.src_weight)])
        dst = np.concatenate([dst, _draw(num_neg, num_nodes, key, 2, neg.dst_weight)])
        label = torch.ones(num_pos) if label is None else label
        label = torch.cat([label, label.new_zeros((num_neg, *label.shape[1:]))])
    seeds.nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    seeds.edge_label_index = inverse.reshape(2, -1)
    seeds.edge_label = label
    return seeds
