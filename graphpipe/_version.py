"""The package version (the face re-exports it; the writer records it in every manifest)."""

__version__ = "0.1.0"
