"""The sampling / ID-map service (Arrow Flight)."""
