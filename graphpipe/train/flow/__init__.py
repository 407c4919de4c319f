"""Flow Parallelism (UniTG, thesis §5.4-5.5, §5.8): a deep GNN cut into ``P`` stages of
consecutive layers on ``P`` gloo ranks, GPipe forward-then-backward over ``M`` METIS
graph microbatches, and the Bubble Interleaver that runs the LM in the stages' idle time.

- :mod:`.schedule`: the microbatch rule ``M`` and the stage split;
- :mod:`.revgcn`: the deep reversible GCN and its stages;
- :mod:`.microbatches`: METIS parts as induced subgraphs;
- :mod:`.stage`: the stage driver (point-to-point sends, gradient accumulation, timing);
- :mod:`.trainer`: the epochs of one rank; :mod:`.launch`: the ranks;
- :mod:`.checkpoint`: one file for the whole pipeline, written by stage 0, resumable on any ``P``.
"""
