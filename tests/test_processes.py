"""Several processes training as one through JAX's distributed runtime (`--coordinator`, `--num-processes`,
`--process-id`): the same losses as one process, one writer, and a run that resumes across process counts.

Every test starts its recipe processes with KERAS_BACKEND=jax on this machine's CPU (gloo collectives),
so it runs once, whatever backend the suite runs under."""

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_tse import data as pipelines
from tests.helpers import STARTED_PROCESS_XLA_FLAGS

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "recipes", "cifar10_vit.py")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _arrays(path, train=48, test=12):
    rng = np.random.default_rng(1)
    np.savez(
        path,
        x_train=rng.integers(0, 255, (train, 8, 8), dtype=np.uint8),
        y_train=np.arange(train) % 3,
        x_test=rng.integers(0, 255, (test, 8, 8), dtype=np.uint8),
        y_test=np.arange(test) % 3,
    )
    return str(path)


def _start(data, out, epochs, tmp, processes=None, log=None, extra=()):
    """One recipe process (the ViT smoke model, one block), its own temp folder; `processes`:
    (port, count, index) to join others; `extra`: more flags."""
    argv = [sys.executable, RECIPE, "--smoke", "--norm", "deescalate", "--depth", "1", "--epochs", str(epochs), *extra]
    argv += ["--batch-size", "16", "--dataset", "npz", "--data-dir", data, "--out", str(out), "--verbose", "2"]
    if processes is not None:
        port, count, index = processes
        argv += ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(count), "--process-id", str(index)]
    os.makedirs(tmp, exist_ok=True)
    env = {**os.environ, "KERAS_BACKEND": "jax", "TMPDIR": str(tmp), "XLA_FLAGS": STARTED_PROCESS_XLA_FLAGS}
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _history(out):
    with open(os.path.join(out, "deescalate", "history.csv"), newline="") as f:
        return list(csv.DictReader(f))


def _files(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs)


@pytest.mark.starts_processes  # its recipe processes run under JAX, whatever backend hosts the test
def test_the_language_model_trains_over_two_processes_as_one(tmp_path):
    """The Transformer-XL recipe: each process feeds its streams of every batch (their memory rows), the
    losses of every logged interval and the perplexities are one process's, and only process 0 writes.
    The one-process command run twice, side by side, gives the same numbers to the last digit (the
    recipe's seed fixes init, dropout and the stream's order)."""
    lm = os.path.join(ROOT, "recipes", "wikitext103_txl.py")
    argv = [sys.executable, lm, "--smoke", "--norm", "deescalate", "--depth", "1", "--steps", "8"]
    argv += ["--eval-interval", "4", "--batch-size", "4", "--verbose", "2"]
    port = _free_port()

    def start(out, tmp, processes=None):
        extra = [] if processes is None else ["--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
        extra += [] if processes is None else ["--process-id", str(processes)]
        os.makedirs(tmp, exist_ok=True)
        env = {**os.environ, "KERAS_BACKEND": "jax", "TMPDIR": str(tmp), "XLA_FLAGS": STARTED_PROCESS_XLA_FLAGS}
        command = [*argv, "--out", str(out), *extra]
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    runs = [start(tmp_path / out, tmp_path / f"t_{out}") for out in ("one", "again")]
    runs += [start(tmp_path / "two", tmp_path / f"t{i}", i) for i in (0, 1)]
    outputs = [run.communicate(timeout=400)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0, 0], "\n".join(o[-2000:] for o in outputs)
    for name in ("steps.csv", "history.csv"):
        first, again = ((tmp_path / out / "deescalate" / name).read_text() for out in ("one", "again"))
        assert again == first, name
    summaries = [json.loads((tmp_path / out / "deescalate" / "summary.json").read_text()) for out in ("one", "again")]
    for key in ("train_loss", "last_block_similarity_end", "valid_loss", "test_loss", "test_perplexity"):
        assert summaries[0][key] == summaries[1][key], key
    for name in ("steps.csv", "history.csv"):
        rows = []
        for out in ("one", "two"):
            with open(tmp_path / out / "deescalate" / name, newline="") as f:
                rows.append(list(csv.DictReader(f)))
        assert len(rows[0]) == len(rows[1]) >= 2
        columns = [c for c in rows[0][0] if c in ("loss", "val_loss", "perplexity", "val_perplexity")]
        for column in columns:
            got, expected = ([float(r[column]) for r in part] for part in (rows[1], rows[0]))
            np.testing.assert_allclose(got, expected, rtol=1e-4, err_msg=f"{name} {column}")
    assert _files(tmp_path / "two") == _files(tmp_path / "one")
    assert os.listdir(tmp_path / "t1") == []


def _wait_for_rows(history, rows, runs, log):
    """Until `history` holds more than `rows` epoch rows; the runs must still be running."""
    deadline = time.time() + 400
    while time.time() < deadline and not (history.exists() and len(history.read_text().splitlines()) > rows + 1):
        assert all(run.poll() is None for run in runs), log.read_text()[-2000:]
        time.sleep(0.1)


def _first_epoch(log):
    """The first epoch a run's log shows (1-based, as Keras prints it)."""
    return int(log.read_text().split("Epoch ")[1].split("/")[0])


@pytest.mark.starts_processes  # its recipe processes run under JAX, whatever backend hosts the test
def test_two_processes_train_as_one_and_a_killed_one_resumes_by_two_by_one_and_by_two_again(tmp_path):
    """Two processes train as one (their first two epochs' rows are one process's; crop-and-flip
    augmentation on) and only process 0 writes. Process 1 killed after the second epoch's row: process 0
    stops at once in one line (JAX's runtime would block it about 70 s, then abort). Resumed by one
    process, killed again after its first row, resumed by two: each resume starts after the last one's
    checkpoint (a kill between an epoch's row and its backup repeats that epoch, its old row trimmed),
    never from the start, and no epoch's row is there twice. The killed process's private copy is gone
    once it starts again; a process 1 that ends on its own leaves its temp folder empty."""
    data = _arrays(tmp_path / "d.npz", train=480, test=48)
    history = tmp_path / "run" / "deescalate" / "history.csv"
    folders = [tmp_path / f"tmp_{i}" for i in range(2)]  # each process's temp folder, kept between starts

    def two(name):
        port, logs = _free_port(), [open(tmp_path / f"{name}_{i}.log", "w") for i in range(2)]
        return [_start(data, tmp_path / "run", 4, folders[i], (port, 2, i), logs[i]) for i in range(2)], logs

    one = _start(data, tmp_path / "one", 4, tmp_path / "tmp_one", log=open(tmp_path / "one.log", "w"))
    runs, logs = two("first")
    _wait_for_rows(history, 1, runs, tmp_path / "first_0.log")  # two rows: the first epoch's backup is whole
    first_rows = _history(tmp_path / "run")[:2]
    runs[1].send_signal(signal.SIGKILL)
    runs[1].wait()
    assert runs[0].wait(timeout=60) == 1
    last = (tmp_path / "first_0.log").read_text().strip().splitlines()[-1]
    assert last.startswith("error: process 1 of this run ended before the run did"), last
    assert "Traceback" not in (tmp_path / "first_0.log").read_text()
    assert [name for name in os.listdir(folders[1]) if name.startswith("keras_tse_process")]  # SIGKILL: left
    done = len(_history(tmp_path / "run"))

    with open(tmp_path / "alone.log", "w") as log:
        alone = _start(data, tmp_path / "run", 4, tmp_path / "tmp_alone", log=log)
        _wait_for_rows(history, done, [alone], tmp_path / "alone.log")
        alone.send_signal(signal.SIGKILL)
        alone.wait()
    assert 1 < _first_epoch(tmp_path / "alone.log") <= done + 1  # resumed, not started over
    done = len(_history(tmp_path / "run"))
    assert done < 4

    runs, logs = two("again")
    for run in runs:
        run.wait(timeout=400)
    outputs = [(tmp_path / f"again_{i}.log").read_text() for i in range(2)]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    assert all(1 < _first_epoch(tmp_path / f"again_{i}.log") <= done + 1 for i in range(2))
    rows = _history(tmp_path / "run")
    assert [r["epoch"] for r in rows] == ["0", "1", "2", "3"] and all(np.isfinite(float(r["loss"])) for r in rows)
    with open(tmp_path / "run" / "deescalate" / "config.json") as f:
        assert '"processes": 2' in f.read()  # made by two processes; resumed by one, then two
    assert not [name for name in os.listdir(folders[1]) if name.startswith("keras_tse_process")]
    assert "keras_tse_process1_" in outputs[1] and "keras_tse_process1_" not in outputs[0]

    assert one.wait(timeout=400) == 0, (tmp_path / "one.log").read_text()[-2000:]
    for column in ("loss", "val_loss", "val_accuracy"):
        expected = [float(r[column]) for r in _history(tmp_path / "one")[:2]]
        np.testing.assert_allclose([float(r[column]) for r in first_rows], expected, atol=1e-4, err_msg=column)
    assert _files(tmp_path / "run") == _files(tmp_path / "one")


@pytest.mark.parametrize("pipeline", ["numpy", "tf"])
def test_the_processes_parts_of_every_batch_make_one_processs_batch(pipeline):
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 255, (20, 4, 4, 1), dtype=np.uint8), np.arange(20) % 3
    kwargs = dict(shuffle=True, seed=3, pipeline=pipeline, mixup=0.2, num_classes=3)
    whole = [tuple(np.asarray(t) for t in b) for b in pipelines.image_dataset(images, labels, 8, **kwargs)]
    parts = [
        [tuple(np.asarray(t) for t in b) for b in pipelines.image_dataset(images, labels, 8, shard=(i, 2), **kwargs)]
        for i in range(2)
    ]
    assert [len(b[0]) for b in whole] == [8, 8, 4] and [len(b[0]) for b in parts[1]] == [4, 4, 2]
    for batch, first, second in zip(whole, *parts):
        for full, a, b in zip(batch, first, second):
            np.testing.assert_array_equal(np.concatenate([a, b]), full)
    with pytest.raises(ValueError, match="a batch of 4 .20 examples in batches of 8.; expected a multiple of 8"):
        pipelines.image_dataset(images, labels, 8, shard=(0, 8), pipeline=pipeline)


def test_the_processes_streams_make_one_processs_segments():
    from keras_tse.data.text import lm_segments

    ids = np.arange(1_000)
    (x, y), parts = lm_segments(ids, 4, 5), [lm_segments(ids, 4, 5, (i, 2)) for i in (0, 1)]
    for whole, index in ((x, 0), (y, 1)):
        halves = [part[index].reshape(-1, 2, 5) for part in parts]  # window k: this process's 2 streams
        np.testing.assert_array_equal(np.concatenate(halves, axis=1).reshape(-1, 5), whole)
    with pytest.raises(ValueError, match=r"count dividing batch_size 4\. Received: shard=\(0, 3\)"):
        lm_segments(ids, 4, 5, (0, 3))


# Before JAX joins them, the processes agree (`keras_tse.peers`): these start the check alone, in plain
# Python processes, so each takes seconds; the last starts the training command itself.
AGREE = """
import json, sys
from keras_tse import peers
try:
    peers.agree(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), float(sys.argv[5]))
    print("joined")
except ValueError as error:
    print(error)
"""


def _agree(port, count, index, settings, timeout_s):
    argv = [sys.executable, "-c", AGREE, f"127.0.0.1:{port}", str(count), str(index), settings, str(timeout_s)]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _lines(runs, timeout=60):
    return [run.communicate(timeout=timeout)[0].strip().splitlines() for run in runs]


WATCH = """
import sys, time
from keras_tse import peers
peers.agree(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), {}, 30)
peers.on_stop(lambda: print("cleaned up", flush=True))
peers.watch()
print("watching", flush=True)
if sys.argv[4] == "finish":
    peers.finished()
    sys.exit(0)
if sys.argv[4] == "fail":  # the symptom of a peer's end: a collective's error, raised before the watcher hears it
    from keras_tse.cli import flags
    def collective():
        print("failing", flush=True)
        raise OSError("Gloo AllGather failed: Connection reset by peer")
    sys.exit(flags.exit_code_of("prog", collective))
time.sleep(float(sys.argv[4]))
print("slept", flush=True)
"""


def _watching(port, count, index, then):
    argv = [sys.executable, "-c", WATCH, f"127.0.0.1:{port}", str(count), str(index), then]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_process_that_ends_mid_run_stops_the_others_in_one_line():
    """Process 2 of three killed: processes 0 and 1 (told by 0) stop within seconds, exit 1, each in one
    line naming process 2, after their cleanup. A process that said it finished stops no one."""
    port = _free_port()
    runs = [_watching(port, 3, i, "120") for i in range(3)]
    assert [run.stdout.readline().strip() for run in runs] == ["watching"] * 3
    runs[2].send_signal(signal.SIGKILL)
    lines = _lines(runs[:2], timeout=30)  # a process still running then fails the test
    assert [run.returncode for run in runs[:2]] == [1, 1]
    for error, cleaned in lines:  # the line first, then the cleanup `on_stop` registered
        assert (
            error.startswith(
                "error: process 2 of this run ended before the run did (killed, crashed or stopped by an error); "
                "this process stops too."
            )
            and cleaned == "cleaned up"
        ), lines
    port = _free_port()
    runs = [_watching(port, 2, 0, "3"), _watching(port, 2, 1, "finish")]
    assert _lines(runs) == [["watching", "slept"], ["watching"]] and [r.returncode for r in runs] == [0, 0]


def test_a_collective_that_fails_as_its_peer_dies_reports_the_peers_end():
    """The collective's error reaches process 0 before its watcher hears process 1's end: the line printed
    is still the peer's (the cause), exit 1, not the collective's (`peers.settle`)."""
    port = _free_port()
    runs = [_watching(port, 2, 0, "fail"), _watching(port, 2, 1, "120")]
    assert [run.stdout.readline().strip() for run in runs] == ["watching"] * 2
    assert runs[0].stdout.readline().strip() == "failing"
    runs[1].send_signal(signal.SIGKILL)
    (lines,) = _lines(runs[:1], timeout=30)
    assert runs[0].returncode == 1 and lines[-2].startswith("error: process 1 of this run ended"), lines
    assert lines[-1] == "cleaned up", lines


def test_processes_started_with_one_setting_different_all_stop_naming_it():
    port = _free_port()
    same = [_agree(port, 2, i, '{"learning_rate": 0.001, "seed": 0}', 30) for i in (1, 0)]
    assert _lines(same) == [["joined"], ["joined"]]
    port = _free_port()
    runs = [_agree(port, 2, i, json.dumps({"learning_rate": lr, "seed": 0}), 30) for i, lr in ((0, 0.001), (1, 0.002))]
    expected = (
        "--learning-rate: received 0.002 on process 1 and 0.001 on process 0; expected every process started "
        "with the same settings"
    )
    assert _lines(runs) == [[expected], [expected]]


def test_a_process_that_never_starts_ends_the_wait_in_one_line_naming_it():
    port = _free_port()
    runs = [_agree(port, 3, i, "{}", 2) for i in (0, 1)]  # process 2 never starts
    expected = (
        "--num-processes: received 3, but process(es) 2 did not join within 2 s; expected every process "
        "started with the same --coordinator (--join-timeout sets the wait)"
    )
    assert _lines(runs) == [[expected], [expected]]
    (alone,) = _lines([_agree(_free_port(), 2, 1, "{}", 1)])  # a process whose process 0 never starts
    assert (
        alone[0].startswith("--coordinator: received 127.0.0.1:")
        and "where no process 0 answered within 1 s" in alone[0]
    )


def test_a_busy_coordinator_port_is_named():
    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        (line,) = _lines([_agree(port, 2, 0, "{}", 5)])
    assert line == [
        f"--coordinator: received 127.0.0.1:{port}, whose port {port} is in use on this machine; expected free "
        f"ports {port} and {port + 1} for process 0 (pick another port, or stop what holds it)"
    ]


@pytest.mark.starts_processes  # its recipe process runs under JAX, whatever backend hosts the test
def test_ctrl_c_ends_process_0s_wait_for_the_others(tmp_path):
    data = _arrays(tmp_path / "d.npz")
    port = _free_port()
    run = _start(data, tmp_path / "out", 1, tmp_path / "tmp", (port, 2, 0))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until process 0 listens for the others on port + 1
        with socket.socket() as probe:
            try:
                probe.bind(("", port + 1))
            except OSError:
                break
        assert run.poll() is None, run.communicate()[0][-2000:]
        time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    output = run.communicate(timeout=30)[0]
    assert run.returncode == 130 and "Traceback" not in output, output[-2000:]
    assert (
        output.strip()
        .splitlines()[-1]
        .endswith("interrupted; every file it had saved is whole, and the same command resumes")
    )
    assert not os.path.exists(tmp_path / "out" / "deescalate")  # nothing trained, nothing written


@pytest.mark.starts_processes  # its recipe processes run under JAX, whatever backend hosts the test
def test_two_training_processes_with_different_flags_both_stop_before_training(tmp_path):
    data = _arrays(tmp_path / "d.npz")
    port = _free_port()
    runs = [
        _start(data, tmp_path / f"out{i}", 1, tmp_path / f"tmp{i}", (port, 2, i), extra=["--learning-rate", rate])
        for i, rate in ((0, "1e-3"), (1, "2e-3"))
    ]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [2, 2], outputs
    for output in outputs:
        assert "Traceback" not in output and output.strip().splitlines()[-1].endswith(
            "error: --learning-rate: received 0.002 on process 1 and 0.001 on process 0; expected every process "
            "started with the same settings"
        ), output[-2000:]
    assert not os.path.exists(tmp_path / "out0" / "deescalate")


def test_a_killed_processs_private_copy_is_removed_by_the_next_start(tmp_path):
    from keras_tse.training import scale

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for name, pid in (("keras_tse_process1_dead", dead.pid), ("keras_tse_process1_live", os.getpid())):
        os.makedirs(tmp_path / name / "run")
        (tmp_path / name / scale.OWNER).write_text(str(pid))
    os.makedirs(tmp_path / "someone_elses")
    assert scale.remove_stale_copies(str(tmp_path)) == [str(tmp_path / "keras_tse_process1_dead")]
    assert sorted(os.listdir(tmp_path)) == ["keras_tse_process1_live", "someone_elses"]


def test_a_setting_one_process_has_and_another_lacks_is_named():
    """The comparison runs over the keys of both sides: a key on one side only differs (iterating one
    side's keys would let a process with an extra setting through)."""
    from keras_tse import peers
    from keras_tse._checks import InputError

    theirs, ours = {"seed": 0, "learn_tau": True}, {"seed": 0}
    assert str(InputError(*peers._first_difference(1, theirs, ours))) == (
        "--learn-tau: received True on process 1 and None on process 0; expected every process started with the "
        "same settings"
    )
    assert peers._first_difference(1, ours, theirs)[1] == "None on process 1 and True on process 0"
    assert peers._first_difference(1, ours, dict(ours)) is None
