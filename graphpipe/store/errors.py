"""Errors raised by the store layer."""


class StoreError(Exception):
    """A store cannot be opened, written or validated; the message names the path and field."""


class ManifestVersionError(StoreError):
    """The manifest was written by a format version this reader does not understand."""
