"""The memory this process may use: free RAM bounded by its memory cgroup's limit.

:func:`usable_memory` returns ``min(available RAM, limit - working set)`` over the
process's own memory cgroup and every ancestor of it that sets a limit, reading
cgroup v2 (``memory.max``, ``memory.current``) or cgroup v1
(``memory.limit_in_bytes``, ``memory.usage_in_bytes``) from the mount points listed in
``/proc/self/mountinfo``. A cgroup's working set is its usage less its inactive file
pages (``memory.stat`` ``inactive_file`` / ``total_inactive_file``): page cache the
kernel reclaims before it kills anyone, the figure ``docker stats`` reports.

Under ``memlimit.sh 1G`` (or a container limit) ``psutil`` still reports the host's free
memory; this function reports what is left under the cap, so ``in_memory="auto"``, the
loader's row cache and ``graphpipe train`` pick the disk tier instead of an OOM kill.
Anything unreadable (no cgroup fs, no permission) counts as "no limit".
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cgroup_headroom", "cgroup_limit", "usable_memory"]

_UNLIMITED = 1 << 62  # v1 reports "no limit" as a huge page-aligned number


def _read_int(path: Path) -> int | None:
    """The integer in ``path`` (``max`` -> None), None when unreadable."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _inactive_file(folder: Path, v2: bool) -> int:
    """Inactive page-cache bytes charged to the cgroup at ``folder`` (0 when unknown)."""
    key = "inactive_file" if v2 else "total_inactive_file"
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _memory_cgroup_dirs(proc: Path = Path("/proc/self")) -> list[tuple[Path, bool]]:
    """``(folder, is_v2)`` for the process's memory cgroup and its ancestors, innermost first."""
    try:
        groups = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return []
    v1_path = v2_path = None
    for line in groups:
        _hid, controllers, path = line.split(":", 2)
        if controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    for line in mounts:
        pre, _, post = line.partition(" - ")
        fields, post_fields = pre.split(), post.split()
        if len(fields) < 5 or len(post_fields) < 3:
            continue
        root, mount, fstype, options = fields[3], fields[4], post_fields[0], post_fields[2]
        if fstype == "cgroup" and v1_path is not None and "memory" in options.split(","):
            return _walk(Path(mount), root, v1_path, False)
        if fstype == "cgroup2" and v2_path is not None and v1_path is None:
            return _walk(Path(mount), root, v2_path, True)
    return []


def _walk(mount: Path, root: str, path: str, v2: bool) -> list[tuple[Path, bool]]:
    """The folders from ``path`` (a cgroup path, relative to the mount's ``root``) up to the mount."""
    rel = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    parts = [] if rel in (".", "") else [p for p in rel.split("/") if p and p != ".."]
    return [(mount.joinpath(*parts[:i]), v2) for i in range(len(parts), -1, -1)]


def cgroup_headroom(proc: Path = Path("/proc/self")) -> int | None:
    """Bytes the process's memory cgroups still allow (``limit - working set``, the
    smallest over the cgroup and its ancestors), or None when no cgroup sets a limit."""
    best: int | None = None
    for folder, v2 in _memory_cgroup_dirs(proc):
        limit = _read_int(folder / ("memory.max" if v2 else "memory.limit_in_bytes"))
        usage = _read_int(folder / ("memory.current" if v2 else "memory.usage_in_bytes"))
        if limit is None or limit >= _UNLIMITED or usage is None:
            continue
        room = max(0, limit - max(0, usage - _inactive_file(folder, v2)))
        best = room if best is None else min(best, room)
    return best


def cgroup_limit(proc: Path = Path("/proc/self")) -> int | None:
    """The smallest memory limit in bytes set on the process's cgroup or an ancestor of
    it (``memory.max`` / ``memory.limit_in_bytes``), or None when none sets one.

    >>> limit = cgroup_limit()
    >>> limit is None or limit > 0
    True
    """
    best: int | None = None
    for folder, v2 in _memory_cgroup_dirs(proc):
        limit = _read_int(folder / ("memory.max" if v2 else "memory.limit_in_bytes"))
        if limit is not None and limit < _UNLIMITED:
            best = limit if best is None else min(best, limit)
    return best


def usable_memory() -> int:
    """Bytes this process may still allocate: ``min(available RAM, cgroup headroom)``."""
    import psutil

    available = int(psutil.virtual_memory().available)
    headroom = cgroup_headroom()
    return available if headroom is None else min(available, headroom)
