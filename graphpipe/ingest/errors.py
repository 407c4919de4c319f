"""Errors raised while ingesting a dataset."""

from graphpipe.store.errors import StoreError


class IngestError(StoreError):
    """Bad input: the message names the file and the line, row or field at fault."""
