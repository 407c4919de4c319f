"""The `graphpipe` command line (installed as ``graphpipe.cli``)."""
