"""Feature rows of a mini-batch: gather (:mod:`.gather`), Match-Reorder of a window of
batches (:mod:`.reorder`), degree centrality (:mod:`.degree`) and per-row low-bit
quantization (:mod:`.quantize`)."""
