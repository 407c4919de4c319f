"""Errors raised by the store layer."""


class StoreError(Exception):
    """A store cannot be opened, written or validated; the message names the path and field."""


class CorruptStoreError(StoreError):
    """The store's bytes or metadata contradict its manifest or the format's invariants
    (a flipped byte, a truncated or missing chunk, an edited ``zarr.json`` or manifest).

    The CLI reports it as one line and exits with :attr:`exit_code` (2: bad input)."""

    exit_code = 2


class ManifestVersionError(StoreError):
    """The manifest was written by a format version this reader does not understand."""
