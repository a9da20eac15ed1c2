"""`keras_tse.peers` in one process: the agreement over real sockets between threads that play the processes,
and the watcher on socket pairs, its exit replaced by a record (tests/test_processes.py runs the same
through real processes and a training command)."""

import socket
import struct
import threading

import pytest

from keras_tse import peers
from keras_tse._checks import InputError

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py
# A wait that ends a test while other processes must have joined within it: long enough for a loaded machine.
JOIN_S = 3.0
# The longest a test waits for a thread playing a process: one that has not ended by then hangs (a daemon
# thread, so the test fails rather than never returning).
HANG_S = 20


def _free_port():
    """A port whose next one is free too (process 0 listens on both)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        try:
            socket.create_server(("", port + 1)).close()
            return port
        except OSError:
            continue


@pytest.fixture
def kept(monkeypatch):
    """A fresh peer table; every set of connections `agree` keeps, recorded and closed at the end."""
    monkeypatch.setattr(peers, "_PEERS", peers._Peers())
    records, keep = [], peers._keep

    def recorded(connections):
        records.append(dict(connections))
        keep(connections)

    monkeypatch.setattr(peers, "_keep", recorded)
    yield records
    for connections in records:
        for connection in connections.values():
            connection.close()


def _processes(port, count, settings_of, timeout_s=10, ids=None):
    """Each process id's answer from `agree`, run in threads: "joined" or its one line."""
    answers = {}

    def run(slot, index):
        try:
            peers.agree(f"127.0.0.1:{port}", count, index, settings_of(index), timeout_s)
            answers[slot] = "joined"
        except InputError as error:
            answers[slot] = str(error)

    threads = [threading.Thread(target=run, args=(slot, i), daemon=True) for slot, i in enumerate(ids or range(count))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_S)
    return [answers.get(slot) for slot in range(len(threads))]


def _in_background(port, count, timeout_s, ids):
    """`_processes` in a thread: (the thread, the list its answers land in)."""
    answers = []
    thread = threading.Thread(
        target=lambda: answers.extend(_processes(port, count, lambda i: {}, timeout_s, ids)), daemon=True
    )
    thread.start()
    return thread, answers


def _connect(port):
    """A connection to process 0's agreement port, once it listens (`peers._listener`: never one to itself)."""
    while True:
        try:
            return peers._listener("127.0.0.1", port + 1)
        except OSError:
            continue


def _to_itself():
    """A TCP connection to itself, as a retry makes where nothing listens yet and the system picks the port
    tried as the retry's own (simultaneous open)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.connect(sock.getsockname())
    return sock


def test_a_hello_that_reaches_itself_is_not_taken_for_process_0s_answer(kept, monkeypatch):
    """A process whose first try connects to itself drops that connection and tries again: it joins process 0
    (with the self-connection kept, it would read its own hello back as the answer and never join)."""
    real, made = socket.create_connection, []

    def first_to_itself(*args, **kwargs):
        if not made:
            made.append(_to_itself())
            assert made[0].getsockname() == made[0].getpeername()
            return made[0]
        return real(*args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", first_to_itself)
    assert _processes(_free_port(), 2, lambda i: {}, JOIN_S) == ["joined"] * 2
    assert made and made[0].fileno() == -1  # closed


def test_processes_with_the_same_settings_join_and_keep_their_connections(kept):
    settings = {"learning_rate": 0.001, "seed": 0}
    # a long wait allowed: process 0 answers once the last process joined, not when the wait is over
    assert _processes(_free_port(), 3, lambda i: settings, timeout_s=120) == ["joined"] * 3
    assert sorted(sorted(connections) for connections in kept) == [[0], [0], [1, 2]]
    assert all(c.gettimeout() is None for connections in kept for c in connections.values())  # a blocking watch


def test_a_setting_on_one_side_only_or_different_stops_every_process_naming_it(kept):
    expected = (
        "--augment: received None on process 2 and 'none' on process 0; expected every process started with "
        "the same settings"
    )
    settings = [{"augment": "none", "seed": 0}, {"augment": "none", "seed": 0}, {"seed": 0}]
    assert _processes(_free_port(), 3, settings.__getitem__) == [expected] * 3
    expected = "--learning-rate: received 0.002 on process 1 and 0.001 on process 0; expected every process started"
    answers = _processes(_free_port(), 2, lambda i: {"learning_rate": 0.001 * (i + 1)})
    assert [a.startswith(expected) for a in answers] == [True, True]


def test_a_process_id_given_twice_or_out_of_range_is_named(kept):
    def expected(index, last):
        return f"--process-id: received {index} from two processes, or out of 1 to {last}; expected each index once"

    assert _processes(_free_port(), 3, lambda i: {}, JOIN_S, ids=[0, 1, 1]) == [expected(1, 2)] * 3  # each told
    assert _processes(_free_port(), 3, lambda i: {}, ids=[0, 1, 3]) == [expected(3, 2)] * 3
    port = _free_port()
    thread, answers = _in_background(port, 2, 30, ids=[0])
    with _connect(port) as hello:  # a hello that says it is process 0 (only process 0 is)
        hello.sendall(b'{"process_id": 0, "settings": {}}\n')
        assert hello.makefile().readline() == '{"error": ["--process-id", "0 from two processes, or out of 1 to 1", ' \
            '"each index once"]}\n'  # fmt: skip
    thread.join(HANG_S)
    assert answers == [expected(0, 1)]


def test_missing_processes_are_each_named_and_a_late_one_is_waited_for(kept):
    def missing(named, seconds):
        return (
            f"--num-processes: received 4, but process(es) {named} did not join within {seconds:g} s; expected every "
            "process started with the same --coordinator (--join-timeout sets the wait)"
        )

    assert _processes(_free_port(), 4, lambda i: {}, 1.0, ids=[0]) == [missing("1, 2, 3", 1.0)]
    assert _processes(_free_port(), 4, lambda i: {}, JOIN_S, ids=[0, 2]) == [missing("1, 3", JOIN_S)] * 2
    port = _free_port()
    first, answers = _in_background(port, 2, 30, ids=[0])
    first.join(1.0)  # process 0 listens alone past several of its polls before process 1 starts
    assert _processes(port, 2, lambda i: {}, 30, ids=[1]) == ["joined"]
    first.join(HANG_S)
    assert answers == ["joined"]


def test_settings_larger_than_one_read_arrive_whole(kept):
    settings = {"notes": "x" * 300_000}  # a hello of several reads
    assert _processes(_free_port(), 2, lambda i: settings) == ["joined"] * 2


def test_a_missing_process_a_missing_process_0_and_a_port_probe(kept):
    port = _free_port()
    thread, answers = _in_background(port, 3, JOIN_S, ids=[0, 1])
    _connect(port).close()  # a connection that says nothing (a port probe) is no process of the run
    thread.join(HANG_S)
    expected = (
        f"--num-processes: received 3, but process(es) 2 did not join within {JOIN_S:g} s; expected every process "
        "started with the same --coordinator (--join-timeout sets the wait)"
    )
    assert answers == [expected, expected]
    port = _free_port()
    assert _processes(port, 2, lambda i: {}, 0.5, ids=[1]) == [
        f"--coordinator: received 127.0.0.1:{port}, where no process 0 answered within 0.5 s; expected process 0 "
        "started with the same --coordinator (--join-timeout sets the wait)"
    ]


@pytest.mark.parametrize("ends", ["closes", "stays_silent", "resets"])
def test_a_process_0_that_never_answers_is_one_line(kept, ends):
    port = _free_port()
    with socket.create_server(("127.0.0.1", port + 1)) as server:
        thread, answers = _in_background(port, 2, 0.5, ids=[1])
        connection, _ = server.accept()
        if ends == "resets":  # gone before it read the hello: the connection reset (SO_LINGER 0 sends RST)
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            connection.recv(4096)
        if ends != "stays_silent":
            connection.close()
        thread.join(HANG_S)  # a silent process 0's connection stays open: the wait ends by its deadline
        connection.close()
    assert answers == [
        "--coordinator: received no answer from process 0; expected it to stay until every process joined"
    ]


def test_the_free_port_check_listens_on_neither_port(monkeypatch):
    """A process 1 retrying its hello while process 0 checks its ports is refused and retries: a check that
    listened would accept it into a socket about to close, and its hello would be reset."""
    port, listened, real = _free_port(), [], socket.socket.listen
    monkeypatch.setattr(socket.socket, "listen", lambda sock, *a: listened.append(sock.getsockname()) or real(sock, *a))
    peers._check_free(port, "--coordinator", f"127.0.0.1:{port}")
    assert listened == []


def test_a_busy_port_is_named_for_process_0(kept):
    for busy in (0, 1):
        port = _free_port()
        with socket.create_server(("", port + busy)):
            assert _processes(port, 2, lambda i: {}, ids=[0]) == [
                f"--coordinator: received 127.0.0.1:{port}, whose port {port + busy} is in use on this machine; "
                f"expected free ports {port} and {port + 1} for process 0 (pick another port, or stop what holds it)"
            ]


class _Exited(Exception):
    pass


@pytest.fixture
def watched(monkeypatch, capsys):
    """Connections to two other processes (socket pairs: the far ends play them) and a watcher whose
    `os._exit` records its status instead of ending the tests."""
    monkeypatch.setattr(peers, "_PEERS", peers._Peers())
    exits, cleaned = [], []

    def exit_(status):
        exits.append(status)
        raise _Exited  # ends the watcher's thread, as the process would end

    monkeypatch.setattr(peers.os, "_exit", exit_)
    monkeypatch.setattr(peers.threading, "excepthook", lambda args: None)
    ends = {index: socket.socketpair() for index in (1, 2)}
    peers._keep({index: near for index, (near, _) in ends.items()})
    peers.on_stop(lambda: cleaned.append(True))
    yield {index: far for index, (_, far) in ends.items()}, exits, cleaned, capsys
    for pair in ends.values():
        for end in pair:
            end.close()


def _watcher():
    before = set(threading.enumerate())
    peers.watch()
    (thread,) = set(threading.enumerate()) - before
    assert thread.name == "keras_tse peers" and thread.daemon  # a daemon: a finished process is not kept alive
    return thread


def test_a_process_that_ends_before_saying_it_finished_stops_this_one_and_the_rest_hear_of_it(watched):
    far, exits, cleaned, capsys = watched
    thread = _watcher()
    far[2].close()
    thread.join(HANG_S)
    assert not thread.is_alive() and exits == [peers.PEER_LOST_EXIT] == [1] and cleaned == [True]
    assert far[1].recv(64) == b"lost 2\n"  # the others are told which process ended
    assert capsys.readouterr().err == (
        "error: process 2 of this run ended before the run did (killed, crashed or stopped by an error); this "
        "process stops too. Every file saved is whole: start every process again with the same command to resume "
        "from the last saved epoch\n"
    )


def test_a_relayed_loss_names_the_process_that_ended(watched):
    far, exits, _, capsys = watched
    thread = _watcher()
    far[1].sendall(b"lost 7\n")
    thread.join(HANG_S)
    assert exits == [1] and "error: process 7 of this run ended" in capsys.readouterr().err
    assert far[2].recv(64) == b"lost 7\n"


def test_processes_that_finished_stop_no_one_and_this_ones_finish_is_told(watched):
    far, exits, cleaned, _ = watched
    thread = _watcher()
    for end in far.values():
        end.sendall(b"finished\n")
        end.close()
    thread.join(HANG_S)
    assert not thread.is_alive() and exits == [] and cleaned == []
    peers.finished()
    assert peers._PEERS.finished


def test_this_processs_finish_reaches_every_peer_and_stops_no_later_stop(watched):
    far, exits, _, _ = watched
    peers.finished()
    assert [far[i].recv(64) for i in (1, 2)] == [b"finished\n", b"finished\n"]
    peers._stop(1)  # a peer's end after this one finished: nothing to stop
    assert exits == []


def test_settle_waits_its_grace_in_polls_only_while_a_peer_could_still_be_heard(monkeypatch, watched):
    class Clock:
        now, sleeps = 0.0, []

        @classmethod
        def monotonic(cls):
            return cls.now

        @classmethod
        def sleep(cls, seconds):
            cls.sleeps.append(seconds)
            cls.now += seconds

    monkeypatch.setattr(peers, "time", Clock)
    peers.settle(1.0)
    assert Clock.sleeps == [peers._POLL_S] * 5  # 1 s in 0.2 s polls
    peers.finished()
    peers.settle(1.0)
    monkeypatch.setattr(peers, "_PEERS", peers._Peers())
    peers.settle(1.0)
    assert len(Clock.sleeps) == 5  # finished, or no peers: no wait
    peers.finished()  # a run of one process finishes with no one to tell


def test_a_reset_connection_is_a_peers_end_and_a_finished_peer_leaves_the_others_watched(watched):
    """A connection reset (the peer's machine gone) reads as an end, as a closed one does; a peer that said it
    finished is no longer watched, the other still is."""
    far, exits, _, capsys = watched
    with socket.create_server(("127.0.0.1", 0)) as server:
        near = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
    peers._keep({1: near, 2: peers._PEERS.connections[2]})
    thread = _watcher()
    far[2].sendall(b"finished\n")
    thread.join(0.5)  # the finish heard first (a watcher that failed on it would have ended here)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()  # an abortive close: the watcher's recv fails with a reset
    thread.join(HANG_S)
    near.close()
    assert exits == [1] and "error: process 1 of this run ended" in capsys.readouterr().err
