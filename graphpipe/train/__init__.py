"""Models, layers, Trainer and `graphpipe train`."""
