"""Before JAX's runtime joins the processes of one run, a check that they agree (standard-library
sockets; nothing trains here, and the training runtime stays JAX's).

JAX's join blocks in C++ (deaf to Ctrl-C), ends a missing peer in an abort after five minutes, and
never compares the processes' settings. So process 0 first listens on the coordinator's port + 1 for a
moment; every other process sends its index and its run settings; process 0 answers each "go" or the
one line that stops them all (the missing process ids, the first setting that differs, a busy port).
Then JAX's runtime joins them on the coordinator's port itself.

The check's connections stay open while the run trains (`watch`). A process that ends without saying it
finished (killed, crashed, or stopped by an error) closes them, and JAX's runtime would leave the others
blocked in a collective until its heartbeat aborts them with a C++ stack; instead each other process stops
at once, in one line naming the process that ended, after removing what `on_stop` registered (a private
copy of the run folder) and releasing its run folders.
"""

import json
import os
import selectors
import socket
import sys
import threading
import time

from keras_tse import run_lock
from keras_tse._checks import InputError

DEFAULT_JOIN_TIMEOUT_S = 180
_POLL_S = 0.2  # how often a wait wakes, so that Ctrl-C ends it
# A collective fails the moment a peer dies, when the watcher hears the closed connection too: this long
# a failing process waits for the watcher, so that it reports the cause (the peer's end), not the symptom.
SETTLE_S = 3.0
PEER_LOST_EXIT = 1  # a run failure, not a bad input (2) nor Ctrl-C (130)
_FINISHED = b"finished\n"


def agree(coordinator, num_processes, process_id, settings, timeout_s=DEFAULT_JOIN_TIMEOUT_S):
    """Return once all `num_processes` processes have joined with the same `settings` (a flat dict of
    JSON values); else raise `InputError` in one line naming the missing process ids, the differing
    setting, or the busy port, on every process that can be told."""
    host, _, port = coordinator.rpartition(":")
    port = int(port)
    if process_id == 0:
        _check_free(port, "--coordinator", coordinator)
        with socket.create_server(("", port + 1)) as server:
            server.settimeout(_POLL_S)
            return _gather(server, num_processes, settings, timeout_s)
    return _report(host, port + 1, process_id, settings, timeout_s)


def _check_free(port, flag, given):
    # bound, never listening: a process connecting while the check runs must be refused and try again, not be
    # accepted by a socket about to close (its hello would be reset)
    for where in (port, port + 1):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(("", where))
        except OSError:
            raise InputError(
                flag,
                f"{given}, whose port {where} is in use on this machine",
                f"free ports {port} and {port + 1} for process 0 (pick another port, or stop what holds it)",
            ) from None


def _gather(server, num_processes, settings, timeout_s):
    """Process 0: every other process's hello, then one answer to all."""
    deadline, peers, problem = time.monotonic() + timeout_s, {}, None
    heard = []  # every process that said hello, each told the answer (two with one index included)
    while len(peers) < num_processes - 1 and time.monotonic() < deadline:
        try:
            connection, _ = server.accept()
        except TimeoutError:
            continue
        hello = _read_line(connection, deadline)
        if not hello:  # closed without a word (a port probe): not a process of this run
            connection.close()
            continue
        index = hello.get("process_id")
        if index in peers or not isinstance(index, int) or not 0 < index < num_processes:
            twice = f"{index!r} from two processes, or out of 1 to {num_processes - 1}"
            problem = problem or ("--process-id", twice, "each index once")
        heard.append(connection)
        peers.setdefault(index, connection)
        problem = problem or _first_difference(index, hello.get("settings", {}), settings)
    missing = [i for i in range(1, num_processes) if i not in peers]
    if missing and problem is None:
        named = ", ".join(map(str, missing))
        problem = (
            "--num-processes",
            f"{num_processes}, but process(es) {named} did not join within {timeout_s:g} s",
            "every process started with the same --coordinator (--join-timeout sets the wait)",
        )
    for connection in heard:
        connection.sendall((json.dumps({"error": problem}) + "\n").encode())
    if problem is not None:
        for connection in heard:
            connection.close()
        raise InputError(*problem)
    _keep(peers)


def _report(host, port, process_id, settings, timeout_s):
    """Another process: say hello to process 0 (retrying until it listens) and wait for its answer."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            connection = _listener(host, port)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise InputError(
                    "--coordinator",
                    f"{host}:{port - 1}, where no process 0 answered within {timeout_s:g} s",
                    "process 0 started with the same --coordinator (--join-timeout sets the wait)",
                ) from None
            time.sleep(_POLL_S)
    try:
        connection.sendall((json.dumps({"process_id": process_id, "settings": settings}) + "\n").encode())
        answer = _read_line(connection, deadline + timeout_s)
    except OSError:  # process 0 went away (its connection reset) before it answered
        answer = {}
    if answer.get("error") or not answer:
        connection.close()
        raise InputError(*(answer.get("error") or _LOST_AT_JOIN))
    _keep({0: connection})


def _listener(host, port):
    """A connection to process 0's listening port; OSError while nothing listens there. A connection to itself
    counts as none: with nothing listening on a local port, a retry whose own port the system picks equal to it
    connects to itself (TCP's simultaneous open) and would read its own hello back as process 0's answer."""
    connection = socket.create_connection((host, port), timeout=_POLL_S)
    if connection.getsockname() == connection.getpeername():
        connection.close()
        raise ConnectionRefusedError(f"{host}:{port}: a connection to itself; nothing listens there yet")
    return connection


_LOST_AT_JOIN = ("--coordinator", "no answer from process 0", "it to stay until every process joined")


class _Peers:
    """This process's open connections to the run's other processes ({process id: socket})."""

    def __init__(self):
        self.connections = {}
        self.finished = False
        self.cleanups = []
        self.lock = threading.Lock()


_PEERS = _Peers()


def _keep(connections):
    for connection in connections.values():
        connection.settimeout(None)
    _PEERS.connections = dict(connections)


def on_stop(callback):
    """Call `callback()` before this process stops because another one ended (`watch`)."""
    _PEERS.cleanups.append(callback)


def watch():
    """Start watching the connections `agree` kept: the end of another process before it said it finished
    stops this one (one line, exit status PEER_LOST_EXIT)."""
    if _PEERS.connections:
        threading.Thread(target=_watch, name="keras_tse peers", daemon=True).start()


def finished():
    """Tell the other processes this one finished its run, so that its exit stops none of them."""
    with _PEERS.lock:
        _PEERS.finished = True
        for connection in _PEERS.connections.values():
            try:
                connection.sendall(_FINISHED)
            except OSError:
                pass  # it ended already: nothing to tell


def settle(grace_s=SETTLE_S):
    """Before this process reports its own failure: if another process of its run ended, stop in the
    watcher's one line (the process never returns from here); else return after `grace_s` seconds.
    Immediate without other processes, or once this one finished."""
    if not _PEERS.connections or _PEERS.finished:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with _PEERS.lock:  # a stop under way holds it until it ends the process
            pass
        time.sleep(_POLL_S)


def _watch():
    selector = selectors.DefaultSelector()
    for index, connection in _PEERS.connections.items():
        selector.register(connection, selectors.EVENT_READ, index)
    while selector.get_map():
        for key, _ in selector.select():
            try:
                said = key.fileobj.recv(64)
            except OSError:
                said = b""
            if said.startswith(_FINISHED):
                selector.unregister(key.fileobj)
            elif said.startswith(b"lost "):  # process 0 heard of another's end first
                _stop(int(said.split()[1]))
            elif not said:
                _stop(key.data)


def _stop(index):
    """Another process ended mid-run: tell the rest (process 0 speaks to them all), clean up, stop."""
    with _PEERS.lock:
        if _PEERS.finished:
            return
        for other, connection in _PEERS.connections.items():
            if other != index:
                try:
                    connection.sendall(f"lost {index}\n".encode())
                except OSError:
                    pass
        print(
            f"error: process {index} of this run ended before the run did (killed, crashed or stopped by an error); "
            "this process stops too. Every file saved is whole: start every process again with the same command "
            "to resume from the last saved epoch",
            file=sys.stderr,
            flush=True,
        )
        for callback in _PEERS.cleanups:
            callback()
        run_lock.release_all()
        os._exit(PEER_LOST_EXIT)  # the main thread may be blocked in a collective that never returns


def _read_line(connection, deadline):
    """One JSON line from `connection`, waking every _POLL_S (Ctrl-C) until `deadline`."""
    connection.settimeout(_POLL_S)
    received = b""
    while not received.endswith(b"\n") and time.monotonic() < deadline:
        try:
            chunk = connection.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        received += chunk
    try:
        return json.loads(received.decode() or "{}")
    except ValueError:
        return {}


def _first_difference(index, theirs, ours):
    """The first setting the two processes disagree on, as `InputError`'s three parts; None if none."""
    for key in sorted(set(theirs) | set(ours)):
        if theirs.get(key) != ours.get(key):
            received = f"{theirs.get(key)!r} on process {index} and {ours.get(key)!r} on process 0"
            return f"--{key.replace('_', '-')}", received, "every process started with the same settings"
    return None
