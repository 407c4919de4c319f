"""Synthetic datasets for tests, demos and benchmarks (no dataset can be downloaded here).

Not part of ingest: these modules *make* datasets, in the source formats that
:mod:`graphpipe.ingest` reads. One module per generator or job:

- :mod:`graphpipe.synthetic.graph`: the result type :class:`SyntheticGraph` and the
  random node data all generators use (:func:`random_normal`, :func:`random_splits`,
  :func:`external_ids`).
- :mod:`graphpipe.synthetic.rmat`: :func:`rmat_edges`, R-MAT / Graph500 power-law
  edge lists, Numba-parallel and deterministic for a seed whatever the thread count;
  :func:`rmat_graph` adds random features, labels and splits.
- :mod:`graphpipe.synthetic.community`: :func:`community_graph`, a degree-corrected
  stochastic block model with a noisy class signal in the features, on which
  neighbour aggregation clearly beats features alone.
- :mod:`graphpipe.synthetic.graph_level`: many small labelled graphs
  (:func:`~graphpipe.synthetic.graph_level.community_count_graphs`) and their
  graph-level store (not re-exported here: it imports the ingest pipeline).
- :mod:`graphpipe.synthetic.writers`, one writer per source format that graphpipe
  ingests: :func:`write_ogb_raw` (+ :func:`ogb_meta_dict`), :func:`write_edge_list`,
  :func:`write_node_table`, :func:`write_table_file`, :func:`write_npz`.
- :mod:`graphpipe.synthetic.papers`: an ogbn-papers100M-like dataset of any size in OGB's
  ``papers100M-bin`` layout, streamed in bounded memory through
  :mod:`graphpipe.synthetic.npz_stream` (an ``.npz`` written member by member, block by block).
- :mod:`graphpipe.synthetic.mag`: an ogbn-mag-like typed graph (paper, author, institution,
  field_of_study; labels carried by the typed neighbourhoods) in OGB's heterogeneous raw
  layout (:func:`~graphpipe.synthetic.mag.write_ogb_mag`); not re-exported here.
- :mod:`graphpipe.synthetic.text`: the writers' fast CSV formatting and parallel gzip.

Edge direction everywhere: ``(src, dst)`` is an edge from ``src`` to ``dst``.
"""

from graphpipe.synthetic.community import community_graph
from graphpipe.synthetic.graph import SyntheticGraph, external_ids, random_normal, random_splits
from graphpipe.synthetic.rmat import rmat_edges, rmat_graph, rmat_vertex_permutation
from graphpipe.synthetic.writers import (
    FEATURE_LAYOUTS,
    SPLIT_NAMES,
    as_synthetic_graph,
    infer_format,
    ogb_meta_dict,
    write_edge_list,
    write_node_table,
    write_npz,
    write_ogb_raw,
    write_table_file,
)

__all__ = [
    "FEATURE_LAYOUTS",
    "SPLIT_NAMES",
    "SyntheticGraph",
    "as_synthetic_graph",
    "community_graph",
    "external_ids",
    "infer_format",
    "ogb_meta_dict",
    "random_normal",
    "random_splits",
    "rmat_edges",
    "rmat_graph",
    "rmat_vertex_permutation",
    "write_edge_list",
    "write_node_table",
    "write_npz",
    "write_ogb_raw",
    "write_table_file",
]
