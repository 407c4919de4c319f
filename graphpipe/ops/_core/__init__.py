"""What every technique in :mod:`graphpipe.ops` shares: worksharing over helper threads."""
