"""Errors raised by the store layer."""


class StoreError(Exception):
    """A store cannot be opened, written or validated; the message names the path and field."""


class CorruptStoreError(StoreError):
    """The store's bytes or metadata contradict its manifest or the format's invariants
    (a flipped byte, a truncated or missing chunk, an edited ``zarr.json`` or manifest).

    The CLI reports it as one line and exits with :attr:`exit_code` (2: bad input)."""

    exit_code = 2


class ObjectStorageError(StoreError):
    """A request to object storage failed after its bounded retries (refused, unreachable,
    throttled, 5xx, timed out): the store could not be read, which says nothing about its
    contents. The message names the object, the retries made and why."""


class ManifestVersionError(StoreError):
    """The manifest was written by a format version this reader does not understand."""
