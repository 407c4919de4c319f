"""Writers from a store to other libraries' on-disk formats (the reverse of
:mod:`graphpipe.ingest`): :func:`write_graphbolt` (DGL GraphBolt's ``OnDiskDataset``)."""

from graphpipe.export.graphbolt import write_graphbolt

__all__ = ["write_graphbolt"]
