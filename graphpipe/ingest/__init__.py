"""Readers for dataset formats and the out-of-core CSC builder."""

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError

__all__ = ["EdgeChunk", "IngestError"]
