"""Dual-interleaved attention: the graph structure search and the periodic schedule
(TorchGT §3.3, digest [P]/[C]/[R]).

**Structure search** (:class:`StructureSearch`) on one step's sparse pattern (a CSR
over queries; query ``i`` receives information from its keys). The paper uses the
sparse pattern only when three conditions hold:

- **C1** ``self_loops``: every position attends to itself;
- **C2** ``hamiltonian``: a Hamiltonian path through the real nodes, by a sufficient
  Dirac-type test on the undirected simple graph of the pattern's real nodes (no
  self-loops, no global token), chosen by ``hamiltonian=``:

  - ``"dirac"`` (classical): ``n <= 1``, or ``n == 2`` with the edge, or min degree
    ``δ >= n/2``;
  - ``"random-graph"`` (Lee–Sudakov style): ``n·p̂ >= c·ln n`` and ``δ >= n·p̂/2``
    with ``p̂ = 2|E| / (n(n-1))``;
  - ``"none"``: not tested (reported as passed);
- **C3** ``reachable``: every position receives every other position's information
  within ``num_layers`` attention layers (BFS over the pattern). Exact (a bounded BFS
  from every position) up to ``exact_limit`` positions; beyond, BFS from
  ``samples`` positions: any eccentricity above ``L`` fails, ``2·ecc <= L`` proves it,
  otherwise passed on the sample (``result.exact`` says which). With a global token
  that every position attends to and that attends to every position, the diameter is
  at most 2, so C3 holds for ``L >= 2`` without a BFS.

Padding positions (``real`` False and not the token) are left out of every test.

**Schedule** (:func:`full_iterations`, the artifact's ``attn_type="hybrid"``): in an
epoch of ``n`` iterations, the 1-based iterations ``int(n·(i+1)/switch_freq)``,
``i < switch_freq``, use full attention — exactly ``min(switch_freq, n)`` of them,
spread evenly (10 iterations, ``switch_freq`` 5: iterations 2, 4, 6, 8, 10).

:class:`InterleaveScheduler` combines them: a step is ``"full"`` when it is a
scheduled point or when an *enforced* condition of the search fails (default C1 and
C3, what the artifact's ``check_conditions`` tests; add ``"hamiltonian"`` for the
paper's full rule — the Dirac tests essentially never hold on sparse real graphs,
which would make every step full), else ``"sparse"``. Every decision is logged at
DEBUG with its reason (the trainer logs the mode it ran at INFO).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

__all__ = [
    "CONDITIONS",
    "HAMILTONIAN_TESTS",
    "InterleaveScheduler",
    "SearchResult",
    "StepDecision",
    "StructureSearch",
    "full_iterations",
]

log = logging.getLogger(__name__)

HAMILTONIAN_TESTS = ("dirac", "random-graph", "none")
CONDITIONS = ("self_loops", "hamiltonian", "reachable")


def full_iterations(num_batches: int, switch_freq: int) -> set[int]:
    """0-based iterations of an epoch of ``num_batches`` that use full attention:
    exactly ``min(switch_freq, num_batches)`` of them (``switch_freq`` 0: none)."""
    if isinstance(num_batches, bool) or not isinstance(num_batches, (int, np.integer)) \
            or num_batches < 0:
        raise ValueError(f"'num_batches' must be a non-negative integer (got {num_batches!r})")
    if isinstance(switch_freq, bool) or not isinstance(switch_freq, (int, np.integer)) \
            or switch_freq < 0:
        raise ValueError(f"'switch_freq' must be a non-negative integer (got {switch_freq!r})")
    points = {int(num_batches * (i + 1) // switch_freq) for i in range(int(switch_freq))}
    return {p - 1 for p in points if 1 <= p <= num_batches}


@dataclass
class SearchResult:
    """One structure search: the three conditions, whether C3 was exact, and details."""

    self_loops: bool
    hamiltonian: bool
    reachable: bool
    exact: bool
    num_nodes: int
    min_degree: int
    detail: str

    def failed(self) -> list[str]:
        """Names of the failed conditions."""
        return [c for c in CONDITIONS if not getattr(self, c)]

    def as_dict(self) -> dict[str, Any]:
        return {"self_loops": self.self_loops, "hamiltonian": self.hamiltonian,
                "reachable": self.reachable, "exact": self.exact, "num_nodes": self.num_nodes,
                "min_degree": self.min_degree}


@numba.njit(cache=True, nogil=True)
def _eccentricity(indptr, indices, active, source, limit, seen, frontier, nxt):
    """A BFS from ``source`` over active positions, at most ``limit`` levels deep; returns
    (levels expanded, positions reached within them, ``source`` included)."""
    stamp = source + 1
    seen[source] = stamp
    frontier[0] = source
    size = 1
    reached = 1
    level = 0
    while size > 0 and level < limit:
        nsize = 0
        for f in range(size):
            u = frontier[f]
            for e in range(indptr[u], indptr[u + 1]):
                w = indices[e]
                if active[w] and seen[w] != stamp:
                    seen[w] = stamp
                    nxt[nsize] = w
                    nsize += 1
        if nsize == 0:
            break
        level += 1
        reached += nsize
        for f in range(nsize):
            frontier[f] = nxt[f]
        size = nsize
    return level, reached


class StructureSearch:
    """The structure search of one pattern (module docstring).

    Args:
        num_layers: L, the attention layers information may travel through.
        hamiltonian: ``"dirac"``, ``"random-graph"`` or ``"none"``.
        random_graph_c: ``c`` of the random-graph test.
        exact_limit: exact all-sources BFS up to this many positions.
        samples: BFS sources beyond it (seeded, plus the max-degree position).
        seed: the sampling seed.
    """

    def __init__(self, num_layers: int, *, hamiltonian: str = "dirac", random_graph_c: float = 1.0,
                 exact_limit: int = 2048, samples: int = 16, seed: int = 0) -> None:
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"'num_layers' must be a positive integer (got {num_layers!r})")
        if hamiltonian not in HAMILTONIAN_TESTS:
            raise ValueError(f"'hamiltonian' must be one of {', '.join(HAMILTONIAN_TESTS)} "
                             f"(got {hamiltonian!r})")
        if not random_graph_c > 0:
            raise ValueError(f"'random_graph_c' must be positive (got {random_graph_c!r})")
        if exact_limit < 0 or samples < 1:
            raise ValueError(f"'exact_limit' must be >= 0 and 'samples' >= 1 "
                             f"(got {exact_limit}, {samples})")
        self.num_layers, self.hamiltonian = num_layers, hamiltonian
        self.random_graph_c, self.exact_limit = float(random_graph_c), int(exact_limit)
        self.samples, self.seed = int(samples), int(seed)

    def __call__(self, indptr: Any, indices: Any, *, real: Any = None,
                 token: int | None = None) -> SearchResult:
        """Search one sequence's pattern.

        Args:
            indptr: int ``(S + 1,)`` CSR over queries.
            indices: int ``(nnz,)`` keys in ``[0, S)``.
            real: bool ``(S,)``: real node positions (default: all but ``token``).
            token: the global token's position, or None.
        """
        indptr = _np(indptr)
        indices = _np(indices)
        s = indptr.shape[0] - 1
        if s < 0 or indptr[0] != 0 or indptr[-1] != indices.shape[0]:
            raise ValueError(f"'indptr' must rise from 0 to len(indices)={indices.shape[0]}")
        if indices.size and (indices.min() < 0 or indices.max() >= s):
            raise ValueError(f"'indices' must lie in [0, {s})")
        if real is None:
            real = np.ones(s, dtype=bool)
            if token is not None:
                real[token] = False
        real = np.asarray(real.cpu().numpy() if hasattr(real, "cpu") else real, dtype=bool)
        if real.shape != (s,):
            raise ValueError(f"'real' must have shape ({s},) (got {real.shape})")
        if token is not None and not 0 <= token < s:
            raise ValueError(f"'token' must be a position in [0, {s}) (got {token})")
        active = real.copy()
        if token is not None:
            active[token] = True
        rows = np.repeat(np.arange(s, dtype=np.int64), np.diff(indptr))
        live = active[rows] & active[indices]
        rows_a, cols_a = rows[live], indices[live]

        has_loop = np.zeros(s, dtype=bool)
        has_loop[rows_a[rows_a == cols_a]] = True
        self_loops = bool(np.all(has_loop[active]))

        # undirected simple graph of the real nodes
        und = real[rows_a] & real[cols_a] & (rows_a != cols_a)
        u, v = np.minimum(rows_a[und], cols_a[und]), np.maximum(rows_a[und], cols_a[und])
        pairs = np.unique(u * s + v) if u.size else np.zeros(0, np.int64)
        deg = np.bincount(np.concatenate([pairs // s, pairs % s]), minlength=s)
        n = int(real.sum())
        min_degree = int(deg[real].min()) if n else 0
        hamiltonian, h_detail = self._hamiltonian(n, min_degree, int(pairs.shape[0]))

        reachable, exact, r_detail = self._reachable(indptr, indices, active, token, s)
        detail = (f"C1 self-loops {'ok' if self_loops else 'missing'}; C2 {h_detail}; "
                  f"C3 {r_detail}")
        return SearchResult(self_loops, hamiltonian, reachable, exact, n, min_degree, detail)

    def _hamiltonian(self, n: int, min_degree: int, edges: int) -> tuple[bool, str]:
        if self.hamiltonian == "none":
            return True, "not tested"
        if n <= 1:
            return True, f"n={n}"
        if n == 2:
            return edges >= 1, f"n=2, {edges} edge"
        if self.hamiltonian == "dirac":
            ok = 2 * min_degree >= n
            return ok, f"dirac: min degree {min_degree} {'>=' if ok else '<'} n/2={n / 2:g}"
        p_hat = 2.0 * edges / (n * (n - 1))
        ok = n * p_hat >= self.random_graph_c * math.log(n) and min_degree >= n * p_hat / 2
        return ok, (f"random-graph: n·p={n * p_hat:.3g} (c·ln n={self.random_graph_c * math.log(n):.3g}), "
                    f"min degree {min_degree} vs n·p/2={n * p_hat / 2:.3g}")

    def _reachable(self, indptr: np.ndarray, indices: np.ndarray, active: np.ndarray,
                   token: int | None, s: int) -> tuple[bool, bool, str]:
        limit = self.num_layers
        count = int(active.sum())
        if count <= 1:
            return True, True, "trivial"
        if token is not None and limit >= 2 and _token_hub(indptr, indices, active, token):
            return True, True, f"global token hub, diameter <= 2 <= L={limit}"
        seen = np.zeros(s, dtype=np.int64)
        frontier = np.empty(s, dtype=np.int64)
        nxt = np.empty(s, dtype=np.int64)
        act = np.flatnonzero(active)
        exact = count <= self.exact_limit
        if exact:
            sources = act
        else:
            rng = np.random.default_rng(self.seed)
            deg = np.diff(indptr)[act]
            sources = np.unique(np.concatenate([rng.choice(act, min(self.samples, count),
                                                           replace=False), act[[np.argmax(deg)]]]))
        worst = 0
        for src in sources:
            ecc, reached = _eccentricity(indptr, indices, active, int(src), limit, seen, frontier, nxt)
            if reached < count:
                return False, exact, (f"position {int(src)} receives {reached} of {count} "
                                      f"positions within L={limit} layers")
            worst = max(worst, ecc)
        if exact or 2 * worst <= limit:
            return True, True, f"max eccentricity {worst} <= L={limit}"
        return True, False, f"sampled eccentricity {worst} <= L={limit} ({len(sources)} sources)"


def _token_hub(indptr: np.ndarray, indices: np.ndarray, active: np.ndarray, token: int) -> bool:
    """The token attends to every active position and every active position to it."""
    row = np.zeros(active.shape[0], dtype=bool)
    row[indices[indptr[token]:indptr[token + 1]]] = True
    if not np.all(row[active]):
        return False
    rows = np.repeat(np.arange(active.shape[0], dtype=np.int64), np.diff(indptr))
    to_token = np.zeros(active.shape[0], dtype=bool)
    to_token[rows[indices == token]] = True
    return bool(np.all(to_token[active]))


def _np(a: Any) -> np.ndarray:
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(a, dtype=np.int64))


@dataclass
class StepDecision:
    """The attention of one iteration: ``mode`` ``"full"`` or ``"sparse"`` and why."""

    iteration: int
    mode: str
    reason: str
    search: SearchResult | None = None


class InterleaveScheduler:
    """Chooses full or sparse attention for each training iteration (module docstring).

    Args:
        switch_freq: full-attention iterations per epoch (spread evenly).
        search: the structure search run on sparse iterations, or None (schedule only).
        enforce: conditions whose failure forces full attention (names from
            :data:`CONDITIONS`); the others are only logged.
    """

    def __init__(self, switch_freq: int = 5, *, search: StructureSearch | None = None,
                 enforce: tuple[str, ...] = ("self_loops", "reachable")) -> None:
        if isinstance(switch_freq, bool) or not isinstance(switch_freq, int) or switch_freq < 0:
            raise ValueError(f"'switch_freq' must be a non-negative integer (got {switch_freq!r})")
        bad = [c for c in enforce if c not in CONDITIONS]
        if bad:
            raise ValueError(f"'enforce' entries must be in {CONDITIONS} (got {bad})")
        self.switch_freq, self.search, self.enforce = switch_freq, search, tuple(enforce)
        self._points: set[int] = set()
        self._num_batches = -1

    def start_epoch(self, num_batches: int) -> set[int]:
        """Fix the epoch's scheduled full iterations (0-based); returns them."""
        self._num_batches = int(num_batches)
        self._points = full_iterations(num_batches, self.switch_freq)
        return set(self._points)

    def decide(self, iteration: int, batch: Any = None) -> StepDecision:
        """The mode of 0-based ``iteration`` of the epoch; ``batch`` (a SequenceBatch) is
        searched when the schedule says sparse and a search is configured."""
        if self._num_batches < 0:
            raise ValueError("call start_epoch(num_batches) before decide()")
        if iteration in self._points:
            decision = StepDecision(iteration, "full", "scheduled")
        elif self.search is None or batch is None:
            decision = StepDecision(iteration, "sparse", "scheduled")
        else:
            result = search_batch(self.search, batch)
            forced = [c for c in result.failed() if c in self.enforce]
            if forced:
                decision = StepDecision(iteration, "full", f"search failed ({', '.join(forced)})",
                                        result)
            else:
                decision = StepDecision(iteration, "sparse", "search passed", result)
        log.debug("iteration %d: %s attention (%s)%s", iteration, decision.mode, decision.reason,
                 f"; {decision.search.detail}" if decision.search is not None else "")
        return decision


def search_batch(search: StructureSearch, batch: Any) -> SearchResult:
    """Search every sequence of a SequenceBatch; the conditions hold if they hold for all."""
    b, s = int(batch.batch_size), int(batch.seq_len)
    indptr = batch.indptr.detach().cpu().numpy()
    indices = batch.indices.detach().cpu().numpy()
    mask = batch.mask.detach().cpu().numpy()
    token = 0 if batch.global_token else None
    results = []
    for i in range(b):
        lo, hi = indptr[i * s], indptr[(i + 1) * s]
        ptr = indptr[i * s:(i + 1) * s + 1] - lo
        results.append(search(ptr, indices[lo:hi] - i * s, real=mask[i], token=token))
    if len(results) == 1:
        return results[0]
    first_fail = next((r for r in results if r.failed()), results[0])
    return SearchResult(all(r.self_loops for r in results), all(r.hamiltonian for r in results),
                        all(r.reachable for r in results), all(r.exact for r in results),
                        sum(r.num_nodes for r in results), min(r.min_degree for r in results),
                        f"{b} sequences; first: {first_fail.detail}")
