"""Bridges to other graph libraries' in-memory types, one module per job
(:mod:`.pyg_data`: a ``torch_geometric.data.Data`` as a store or as loader input).
The libraries stay optional: each module imports them inside its functions."""
