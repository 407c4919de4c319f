"""Readers for dataset formats, the out-of-core CSC builder, and the ingest pipeline."""

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.csc_builder import CscOptions, CscStats, build_csc
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.pipeline import IngestOptions, ingest, open_source

__all__ = ["CscOptions", "CscStats", "EdgeChunk", "IngestError", "IngestOptions", "build_csc", "ingest",
           "open_source"]
