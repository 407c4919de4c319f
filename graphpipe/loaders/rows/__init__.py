"""Row sources: where the loader's gather stage reads feature rows from, composed as
wrappers (see :mod:`graphpipe.loaders.rows.base`)."""

from graphpipe.loaders.rows.base import RowSource, RowSplit, check_ids
from graphpipe.loaders.rows.cached import CachedRows
from graphpipe.loaders.rows.chunked import ChunkedRows
from graphpipe.loaders.rows.degree_cache import DegreeCachedRows
from graphpipe.loaders.rows.disk import DiskRows
from graphpipe.loaders.rows.memory import ArrayRows
from graphpipe.loaders.rows.quantized import PackedRows, QuantizedRowSource

__all__ = [
    "ArrayRows",
    "CachedRows",
    "ChunkedRows",
    "DegreeCachedRows",
    "DiskRows",
    "PackedRows",
    "QuantizedRowSource",
    "RowSource",
    "RowSplit",
    "check_ids",
]
