"""Loaders that turn a store into training batches."""
