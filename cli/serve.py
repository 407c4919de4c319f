"""`graphpipe serve STORE`: the sampling / ID-map service over Arrow Flight.

Prints ``serving STORE on grpc://HOST:PORT`` (``grpc+tls://`` with ``--tls-cert`` and
``--tls-key``) on stdout once listening (``--port 0`` picks a free port), logs one line
per call on stderr, and on SIGTERM/SIGINT drains the calls in flight and exits 0.
Binding an address other than loopback without ``--token-file`` (or sending the token
without TLS) prints a warning on stderr first. Error replies carry no traceback.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys

import click
from graphpipe.cli._common import fail, friendly_errors


@click.command("serve")
@click.argument("store", type=click.Path(path_type=str))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (loopback by default; 0.0.0.0 exposes the service).")
@click.option("--port", default=8815, show_default=True, type=click.IntRange(0, 65535),
              help="Port to bind; 0 picks a free one (printed on stdout).")
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False, path_type=str),
              help="File holding a bearer token; calls without it are refused.")
@click.option("--threads", type=click.IntRange(1), default=None,
              help="Sampling worker threads shared by all calls [default: CPU count].")
@click.option("--max-seeds", type=click.IntRange(1), default=1 << 18, show_default=True,
              help="Most seeds in one sample request batch.")
@click.option("--max-rows", type=click.IntRange(1), default=1 << 22, show_default=True,
              help="Most IDs in one lookup / reverse_lookup / features request batch.")
@click.option("--max-response-bytes", type=click.IntRange(1), default=1 << 30, show_default=True,
              help="Most bytes in one response record batch (one sampled batch, or one features batch).")
@click.option("--max-request-bytes", type=click.IntRange(1), default=2 << 30, show_default=True,
              help="Most bytes one sample request batch may make the server allocate: an upper bound "
                   "from the seeds, fanouts and the graph's degrees, checked before any work.")
@click.option("--shared-memory-mib", type=click.IntRange(0), default=2048, show_default=True,
              help="Most MiB of shared-memory arenas handed to clients on this host, all together "
                   "(their sampled batches then skip the network copies); 0: none.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=str),
              help="PEM certificate (chain) to serve over TLS (grpc+tls://); needs --tls-key.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=str),
              help="PEM private key of --tls-cert.")
@click.option("--drain-timeout", type=click.FloatRange(0), default=60.0, show_default=True,
              help="Seconds to wait for calls in flight after SIGTERM.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@friendly_errors
def command(store: str, host: str, port: int, token_file: str | None, threads: int | None,
            max_seeds: int, max_rows: int, max_response_bytes: int, max_request_bytes: int,
            shared_memory_mib: int, tls_cert: str | None, tls_key: str | None,
            drain_timeout: float, log_level: str) -> None:
    """Serve STORE (sample, lookup, reverse_lookup, features, info, health) over Arrow Flight."""
    from graphpipe.allocator import tune_allocator
    from graphpipe.service.server import (
        SamplingServer,
        hide_reply_tracebacks,
        serve_until_signalled,
    )

    hide_reply_tracebacks()
    tune_allocator()  # a dedicated process: reuse freed response memory (GRAPHPIPE_TUNE_MALLOC=0: off)

    logging.basicConfig(level=getattr(logging, log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = None
    if token_file is not None:
        with open(token_file, encoding="utf-8") as fh:
            token = fh.read().strip()
        if not token:
            fail(f"--token-file {token_file!r} is empty")
    tls = _tls_certificates(tls_cert, tls_key)
    warning = exposure_warning(host, has_token=token is not None, tls=tls is not None)
    if warning is not None:
        click.echo(f"warning: {warning}", err=True)
    try:
        literal = ipaddress.ip_address(host)
        url_host = f"[{host}]" if literal.version == 6 else host
    except ValueError:
        url_host = host
    scheme = "grpc+tls" if tls is not None else "grpc"
    server = SamplingServer(store, f"{scheme}://{url_host}:{port}", token=token, threads=threads,
                            max_seeds=max_seeds, max_rows=max_rows, max_response_bytes=max_response_bytes,
                            max_request_bytes=max_request_bytes, shared_memory_bytes=shared_memory_mib << 20,
                            tls_certificates=tls)

    def announce() -> None:
        click.echo(f"serving {store} on {scheme}://{url_host}:{server.port}")
        sys.stdout.flush()

    drained = serve_until_signalled(server, drain_timeout=drain_timeout, ready=announce)
    if not drained or not server.closed:  # calls still open: do not wait for them in teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0 if drained else 1)
    sys.exit(0)


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` exposes the service to this machine only."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def exposure_warning(host: str, *, has_token: bool, tls: bool) -> str | None:
    """The warning to print before binding ``host``: None on loopback, else what is
    missing (a token; TLS for the token to travel safely)."""
    if is_loopback_host(host):
        return None
    if not has_token:
        return (f"--host {host} is not loopback and there is no --token-file: anyone who can reach "
                "this address can read the whole store; add --token-file (and --tls-cert/--tls-key)")
    if not tls:
        return (f"--host {host} is not loopback and there is no TLS: the bearer token and the data "
                "travel in the clear; add --tls-cert/--tls-key")
    return None


def _tls_certificates(cert: str | None, key: str | None) -> list[tuple[bytes, bytes]] | None:
    """``[(certificate PEM, key PEM)]`` for Flight, None without TLS; both or neither."""
    if (cert is None) != (key is None):
        fail("--tls-cert and --tls-key go together (got only "
             f"{'--tls-cert' if cert is not None else '--tls-key'})")
    if cert is None:
        return None
    with open(cert, "rb") as fh:
        cert_pem = fh.read()
    with open(key, "rb") as fh:
        key_pem = fh.read()
    if b"-----BEGIN CERTIFICATE" not in cert_pem:
        fail(f"--tls-cert {cert!r} is not a PEM certificate")
    if b"PRIVATE KEY-----" not in key_pem:
        fail(f"--tls-key {key!r} is not a PEM private key")
    return [(cert_pem, key_pem)]


if __name__ == "__main__":
    command()
