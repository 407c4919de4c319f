"""Readers for dataset formats, the out-of-core CSC builder, and the ingest pipeline."""

from graphpipe.ingest.api import ingest
from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.csc_builder import CscOptions, CscStats, build_csc
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.formats import open_source
from graphpipe.ingest.options import IngestOptions

__all__ = ["CscOptions", "CscStats", "EdgeChunk", "IngestError", "IngestOptions", "build_csc", "ingest",
           "open_source"]
