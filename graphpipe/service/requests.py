"""Reading a call's request as the server's handlers do: the request record batches with
their schema checked (:func:`request_batches`), the parameters of a command or an action
(:func:`only`, :func:`flag`, :func:`action_params`), dense IDs in range
(:func:`check_ids`), the response size against its limit (:func:`check_response`,
:func:`spec_bytes`) and who
a call comes from (:func:`owner`). Every refusal is a ``ValueError`` naming the field (the
server answers INVALID_ARGUMENT)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from graphpipe.service import limits

__all__ = ["action_params", "check_ids", "check_response", "flag", "only", "owner",
           "request_batches", "schema_matches", "spec_bytes"]


def request_batches(server: Any, reader: fl.MetadataRecordBatchReader, expected: pa.Schema,
                    op: str, *, with_metadata: bool = False) -> Iterator[Any]:
    """The request record batches of a call, after checking their schema against ``expected``
    (``with_metadata``: pairs ``(batch, app_metadata bytes or None)``). While it waits for
    the client's next batch the call counts as idle on ``server`` (a
    :class:`~graphpipe.service.server.SamplingServer`: ``waiting_for_client``,
    ``draining``); a batch after the first one that arrives while the server drains is
    refused (UNAVAILABLE)."""
    checked = False
    count = 0
    while True:
        try:
            with server.waiting_for_client():
                chunk = reader.read_chunk()
        except StopIteration:
            return
        batch = chunk.data
        if batch is None:
            continue
        count += 1
        if count > 1 and server.draining:
            raise fl.FlightUnavailableError("the server is shutting down; send this request to another "
                                            "server or after the restart")
        if not checked:
            if not schema_matches(batch.schema, expected):
                raise ValueError(f"{op} request schema must be {_schema_text(expected)} "
                                 f"(got {_schema_text(batch.schema)})")
            checked = True
        if with_metadata:
            meta = chunk.app_metadata
            yield batch, (meta.to_pybytes() if meta is not None else None)
        else:
            yield batch


def schema_matches(got: pa.Schema, expected: pa.Schema) -> bool:
    """Same column names and types; nullability, metadata and list child names ignored,
    ``large_list`` accepted for ``list``."""
    if got.names != expected.names:
        return False
    for field, want in zip(got, expected):
        if pa.types.is_list(want.type):
            if not (pa.types.is_list(field.type) or pa.types.is_large_list(field.type)) \
                    or field.type.value_type != want.type.value_type:
                return False
        elif field.type != want.type:
            return False
    return True


def _schema_text(schema: pa.Schema) -> str:
    return "{" + ", ".join(f"{f.name}: {f.type}" for f in schema) + "}"


def action_params(body: bytes, allowed: tuple[str, ...], action: str) -> dict[str, Any]:
    """The JSON object body of an action, with only ``allowed`` keys."""
    params = limits.parse_json(bytes(body) or b"{}", f"{action} body", expected="a JSON object")
    if not isinstance(params, dict):
        raise ValueError(f"{action} body must be a JSON object (got {params!r:.60})")  # noqa: TRY004
    only(params, allowed, action)
    return params


def owner(context: fl.ServerCallContext) -> str:
    """Who a call comes from, for arena ownership: the connection (gRPC peer address,
    e.g. ``ipv4:127.0.0.1:53616``), and the authenticated identity when there is one."""
    identity = context.peer_identity()
    return context.peer() + (f" {identity.decode(errors='replace')}" if identity else "")


def check_ids(ids: np.ndarray, num_nodes: int, name: str, where: str = "") -> None:
    """``ValueError`` unless every ID is a dense node ID in ``[0, num_nodes)``.

    >>> check_ids(np.array([0, 4]), 4, "node_id")
    Traceback (most recent call last):
    ValueError: 'node_id' must be dense node IDs in [0, 4) (got 4)
    """
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num_nodes:
            raise ValueError(f"'{name}'{where} must be dense node IDs in [0, {num_nodes}) "
                             f"(got {lo if lo < 0 else hi})")


def spec_bytes(spec: tuple[np.dtype, int | None]) -> int:
    """Bytes of one feature or label row of ``(dtype, width or None)``.

    >>> spec_bytes((np.dtype(np.float32), 8)), spec_bytes((np.dtype(np.int64), None))
    (32, 8)
    """
    return np.dtype(spec[0]).itemsize * (spec[1] or 1)


def check_response(nbytes: int, limit: int, what: str, hint: str) -> None:
    """``ValueError`` naming ``what``, its size and the limit when ``nbytes > limit``."""
    if nbytes > limit:
        raise ValueError(f"{what} would be {nbytes} bytes; this server's limit is "
                         f"--max-response-bytes {limit} per response batch; {hint}")


def only(params: dict[str, Any], allowed: tuple[str, ...], op: str) -> None:
    """``ValueError`` naming the parameters of ``params`` that are not ``allowed``."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"{op} takes parameters {list(allowed)} (got unknown {unknown})")


def flag(params: dict[str, Any], name: str, default: bool = False) -> bool:
    """The boolean parameter ``name`` (``default`` when absent); ``ValueError`` otherwise."""
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"'{name}' must be true or false (got {value!r})")  # noqa: TRY004 - invalid argument
    return value
