"""Per-row stochastic low-bit quantization of feature rows (Sylvie): the NumPy/Numba path in
:mod:`.cpu`; a torch (any device) dequantize sits beside it."""

from .cpu import (
    SUPPORTED_BITS,
    QuantizedRows,
    dequantize,
    quantize,
    reference_dequantize,
    reference_pack,
    reference_quantize,
    unpack_codes,
)
from .torch import dequantize_on

__all__ = [
    "SUPPORTED_BITS",
    "QuantizedRows",
    "dequantize",
    "dequantize_on",
    "quantize",
    "reference_dequantize",
    "reference_pack",
    "reference_quantize",
    "unpack_codes",
]
