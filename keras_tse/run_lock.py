"""One writer per run folder: an OS-level lock held by the process that writes the folder.

A command that writes a folder takes the folder's lock (`hold`) before it writes anything there and
keeps it until the command ends (`release_all`): a second process that asks for the same folder is
refused in one line naming the folder and the owner (its pid, host and start time, written into the
lock file). The lock is the kernel's (`fcntl.flock` on POSIX, `msvcrt.locking` on Windows), so it ends
with its process however that ends: a lock file left by a killed run is stale, and the next run takes
it over. A process may hold a folder it holds already (a command that trains several variants, a test
that calls a command twice). The file is removed when the lock is released.

What it does not cover: two machines writing one folder over a network file system whose server does
not honour `flock` (NFS before v4 may not); there, give each machine its own folder.
"""

import contextlib
import datetime
import os
import socket
import sys
import time

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

LOCK = "keras_tse.lock"
_HELD = {}  # real path of a held folder -> the open lock file that holds it


class RunFolderBusy(ValueError):
    """Another process writes the folder now: one line naming the folder and the owner."""


def owner_line():
    """What the lock file says of its owner: pid, host and start time."""
    start = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return f"pid {os.getpid()} on {socket.gethostname()} since {start}"


def _try_lock(handle):
    """Whether this process now holds `handle`'s lock (without waiting)."""
    try:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _owner(handle, wait_s=1.0):
    """What a held lock file says of its owner; an owner that has just taken the lock may not have
    written it yet, so an empty file is read again for up to `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        handle.seek(0)
        owner = handle.read().strip()
        if owner or time.monotonic() > deadline:
            return owner or "another process"
        time.sleep(0.01)


def _same_file(handle, path):
    """Whether `path` still names the file `handle` holds (a releasing owner may have removed it)."""
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def hold(folder, flag="--out"):
    """Make this process the one writer of `folder` (made if missing) until `release(folder)` or
    `release_all()`. Returns what a stale lock file said of its dead owner ("" if there was none); a
    folder another live process holds is a `RunFolderBusy`."""
    key = os.path.realpath(folder)
    if key in _HELD:
        return ""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, LOCK)
    while True:
        handle = open(path, "a+")
        if not _try_lock(handle):
            owner = _owner(handle)
            handle.close()
            raise RunFolderBusy(
                f"{flag}: received {folder}, which another run writes now ({owner}); expected a folder no "
                f"other run writes (wait for that run to end, or pass another {flag})"
            )
        if _same_file(handle, path):
            break
        handle.close()  # the owner released and removed it between our open and our lock: try again
    handle.seek(0)
    stale = handle.read().strip()
    if stale:  # a lock file whose owner's lock the kernel ended: that run was killed
        print(f"{folder}: a run that was stopped ({stale}) left its lock; this run takes it over", file=sys.stderr)
    handle.seek(0)
    handle.truncate()
    handle.write(owner_line() + "\n")
    handle.flush()
    _HELD[key] = (handle, path)
    return stale


@contextlib.contextmanager
def holding(folder, flag="--out"):
    """`hold(folder)` for the `with` block; released at its end unless this process held it before."""
    taken = os.path.realpath(folder) not in _HELD
    hold(folder, flag)
    try:
        yield
    finally:
        if taken:
            release(folder)


def release(folder):
    """End this process's hold on `folder`: the lock file removed, then the lock released."""
    handle, path = _HELD.pop(os.path.realpath(folder), (None, None))
    if handle is None:
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    handle.close()  # closing releases the kernel's lock


def release_all():
    """Release every folder this process holds (a command's end)."""
    for key in list(_HELD):
        release(key)


def held():
    """The real paths of the folders this process holds."""
    return tuple(_HELD)
