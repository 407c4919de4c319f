"""Triton path of sparse attention, run by Triton's interpreter (TRITON_INTERPRET=1) in a
subprocess on tiny inputs, against the dense float64 reference."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import numpy as np, torch
    from graphpipe.ops.attention import sparse_attention, reference_sparse_attention

    def pattern(n, density, seed, empty=()):
        rng = np.random.default_rng(seed)
        mask = rng.random((n, n)) < density
        np.fill_diagonal(mask, True)
        for i in empty:
            mask[i] = False
        rows = [rng.permutation(np.flatnonzero(mask[i])) for i in range(n)]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=indptr[1:])
        return torch.from_numpy(indptr), torch.from_numpy(np.concatenate(rows).astype(np.int64))

    failures = []
    for compat in (None, "torchgt"):
        for with_bias in (False, True):
            n, heads, dim = 19, 2, 5
            indptr, indices = pattern(n, 0.3, 1, empty=(4,))
            g = torch.Generator().manual_seed(2)
            spread = 2.5 if compat else 1.0
            q = torch.randn(n, heads, dim, generator=g, dtype=torch.float64) * spread
            k = torch.randn(n, heads, dim, generator=g, dtype=torch.float64) * spread
            v = torch.randn(n, heads, dim, generator=g, dtype=torch.float64)
            bias = torch.randn(indices.shape[0], heads, generator=g, dtype=torch.float64) \\
                if with_bias else None
            grad = torch.randn(n, heads, dim, generator=g, dtype=torch.float64)
            for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-5)):
                leaves = [t.to(dtype).requires_grad_() for t in (q, k, v)]
                b = bias.to(dtype).requires_grad_() if bias is not None else None
                out, lse = sparse_attention(*leaves, indptr, indices, bias=b, compat=compat,
                                            backend="triton", block_m=4, block_n=4,
                                            return_lse=True)
                got = torch.autograd.grad(out, leaves + ([b] if b is not None else []),
                                          grad.to(dtype))
                rl = [t.clone().requires_grad_() for t in (q, k, v)]
                rb = bias.clone().requires_grad_() if bias is not None else None
                ref, ref_lse = reference_sparse_attention(*rl, indptr, indices, bias=rb,
                                                          compat=compat)
                want = torch.autograd.grad(ref, rl + ([rb] if rb is not None else []), grad)
                tag = f"compat={compat} bias={with_bias} {dtype}"
                if not torch.allclose(out.double(), ref, atol=tol, rtol=tol):
                    failures.append(f"{tag}: out {(out.double() - ref).abs().max()}")
                if not torch.equal(torch.isinf(lse), torch.isinf(ref_lse)) or not torch.allclose(
                        lse.double()[~torch.isinf(ref_lse)], ref_lse[~torch.isinf(ref_lse)],
                        atol=tol, rtol=tol):
                    failures.append(f"{tag}: lse")
                for name, a, w in zip("qkvb", got, want):
                    if not torch.allclose(a.double(), w, atol=10 * tol, rtol=10 * tol):
                        failures.append(f"{tag}: grad {name} {(a.double() - w).abs().max()}")
                if not torch.all(out[4] == 0):
                    failures.append(f"{tag}: empty row not zero")
    print("FAILURES", failures)
    assert not failures, failures
    print("OK")
""")


def test_triton_sparse_attention_under_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
