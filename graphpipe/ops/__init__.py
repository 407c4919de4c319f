"""Kernels, one module per job (sampling, idmap, reorder, partition, gather, aggregate,
attention, quantize). Each has a reference, a CPU (Numba) path and a GPU path behind one
function. Nothing here knows about files or models."""
