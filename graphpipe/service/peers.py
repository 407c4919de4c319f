"""Who is on the other end of a call: gRPC peer strings, loopback, and what the OS says
about a loopback peer's socket.

gRPC names a call's peer ``ipv4:127.0.0.1:53616`` or ``ipv6:[::1]:53616`` (the brackets
may come URL-encoded). Over TCP there is no ``SO_PEERCRED``, but for a peer on this
host Linux lists its socket in ``/proc/net/tcp`` / ``/proc/net/tcp6``, with its state
and its owner's uid: :func:`local_socket` reads them. The service uses this to tie a
shared-memory arena to the connection that asked for it (and to that user), and to
drop the arena once the connection is gone; where ``/proc`` is not there it answers
None and the callers fall back to timeouts.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["ESTABLISHED", "GONE", "LocalSocket", "is_loopback_peer", "local_socket", "parse_peer"]

#: TCP state of a connected socket in /proc/net/tcp
ESTABLISHED = 0x01
_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


@dataclass(frozen=True)
class LocalSocket:
    """A socket of this host as ``/proc/net/tcp*`` lists it: TCP state and owner uid."""

    state: int
    uid: int


#: what :func:`local_socket` answers for a socket that is not (or no longer) listed
GONE = LocalSocket(0, -1)

def parse_peer(peer: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int] | None:
    """``(address, port)`` of a gRPC peer string (only the connection part of an owner
    string such as ``"ipv4:127.0.0.1:5000 identity"``); None when it is not TCP."""
    text = unquote(peer.split(" ", 1)[0])
    kind, _, rest = text.partition(":")
    if kind not in ("ipv4", "ipv6") or ":" not in rest:
        return None
    host, _, port = rest.rpartition(":")
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
        return address, int(port)
    except ValueError:
        return None


def is_loopback_peer(peer: str) -> bool:
    """Whether the peer connected over loopback (IPv4-mapped loopback included)."""
    parsed = parse_peer(peer)
    if parsed is None:
        return False
    address = parsed[0]
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def _hex_words(packed: bytes) -> str:
    """``/proc/net/tcp*`` spelling of an address: each 32-bit word in host (little-endian) order."""
    return "".join(f"{int.from_bytes(packed[i:i + 4], 'little'):08X}" for i in range(0, len(packed), 4))


def _spellings(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> set[str]:
    """The ``ADDR:PORT`` keys under which the socket may be listed (v4, and v4-mapped in tcp6)."""
    keys = {f"{_hex_words(address.packed)}:{port:04X}"}
    v4 = address if address.version == 4 else address.ipv4_mapped
    if v4 is not None:
        keys.add(f"{_hex_words(v4.packed)}:{port:04X}")
        keys.add(f"{_hex_words(ipaddress.IPv6Address(f'::ffff:{v4}').packed)}:{port:04X}")
    return keys


def local_socket(peer: str, tables: tuple[str, ...] = _TABLES) -> LocalSocket | None:
    """The peer's own socket (local address = the peer's address and port, on this host);
    :data:`GONE` when the tables were read and do not list it (the connection closed and
    the socket is gone); None when they cannot be read or the peer is not TCP."""
    parsed = parse_peer(peer)
    if parsed is None:
        return None
    keys = _spellings(*parsed)
    read_any = False
    for table in tables:
        try:
            with open(table, encoding="ascii", errors="replace") as fh:
                lines = fh.readlines()[1:]
        except OSError:
            continue
        read_any = True
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and fields[1] in keys:
                try:
                    return LocalSocket(int(fields[3], 16), int(fields[7]))
                except ValueError:
                    continue
    return GONE if read_any else None
