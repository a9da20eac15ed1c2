"""One writer per run folder (`keras_tse.run_lock`): two processes racing into one `--out` never leave
a corrupt or doubled file, a folder another live process writes is refused in one line naming it and
its owner, and a lock a killed run left behind is taken over."""

import csv
import os
import socket
import subprocess
import sys

import pytest

from keras_tse import run_lock

# Once: a folder's lock is file I/O, the same code whatever the backend (tests/conftest.py's rule).
pytestmark = pytest.mark.one_backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = [sys.executable, "-m", "keras_tse.cli.main", "train", "vit", "--dataset", "digits", "--norm", "post"]
TINY = ["--depth", "1", "--hidden-dim", "8", "--num-heads", "2", "--epochs", "3", "--verbose", "2"]
HOLDER = """
import sys, time
from keras_tse import run_lock
run_lock.hold(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


def _env():
    """The processes a test starts run JAX, the quickest backend to start: the lock is the same code on each."""
    return {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}


def _history_rows(path):
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("epoch") and sum(line.startswith("epoch") for line in lines) == 1, lines
    rows = list(csv.DictReader(lines))
    assert [int(row["epoch"]) for row in rows] == list(range(len(rows))), rows  # no epoch twice, none missing
    return rows


@pytest.mark.large
@pytest.mark.starts_processes  # its two racers run under JAX, whatever backend hosts the test
def test_two_identical_commands_into_one_folder_never_corrupt_it(tmp_path):
    out = tmp_path / "run"
    command = [*TRAIN, *TINY, "--out", str(out)]
    racers = [subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]  # fmt: skip
    results = [(racer.wait(timeout=600), *racer.communicate()) for racer in racers]
    codes = sorted(code for code, _, _ in results)
    if codes == [0, 2]:  # they met: the second is refused in one line naming the folder and the owner
        (err,) = [err for code, _, err in results if code == 2]
        line = err.strip().splitlines()[-1]  # after the backend's own start-up lines, if it prints any
        assert "Traceback" not in err and line.startswith(
            f"keras-tse train vit: error: --out: received {out}, which another run writes now (pid "
        )
    else:  # one finished before the other claimed the folder: the second found it finished
        assert codes == [0, 0] and sum("finished, skipping" in out for _, out, _ in results) == 1, results
    assert len(_history_rows(out / "post" / "history.csv")) == 3
    assert not (out / run_lock.LOCK).exists() and not (out / "post" / run_lock.LOCK).exists()  # released


def test_a_folder_another_live_process_holds_is_refused_naming_it_and_the_owner(tmp_path, capsys):
    from keras_tse.cli import main as cli

    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = sorted(os.listdir(out))
        assert cli.main(["train", "vit", "--dataset", "digits", "--norm", "post", *TINY, "--out", str(out)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert f"--out: received {out}, which another run writes now (pid {holder.pid} on " in line
        assert sorted(os.listdir(out)) == before == [run_lock.LOCK]  # nothing of the owner's touched
    finally:
        holder.kill()
        holder.wait()


def test_a_refused_writer_leaves_the_owners_half_written_manifest_alone(tmp_path):
    from keras_tse import run_files

    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        partial = out / (run_files.MANIFEST + ".partial")
        partial.write_text("{")  # the owner inside its manifest's write: the rename comes next
        with pytest.raises(run_lock.RunFolderBusy, match=f"pid {holder.pid} on "):
            run_files.claim_folder(str(out), "train vit", {"norm": "post"})
        assert partial.read_text() == "{"  # removing it would fail the owner's rename
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_a_killed_run_left_is_taken_over_and_released_at_the_end(tmp_path, capsys):
    from keras_tse.cli import main as cli

    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], env=_env(), stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()  # SIGKILL: its lock file stays, naming it, but the kernel's lock ended with it
    holder.wait()
    assert f"pid {holder.pid} on " in (out / run_lock.LOCK).read_text()
    assert cli.main(["train", "vit", "--dataset", "digits", "--norm", "post", *TINY, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"a run that was stopped (pid {holder.pid} on " in err and "this run takes it over" in err
    assert len(_history_rows(out / "post" / "history.csv")) == 3
    assert sorted(os.listdir(out)) == ["keras_tse.json", "plots", "post"]  # the lock file is gone


def test_a_process_may_hold_a_folder_twice_and_release_removes_the_file(tmp_path):
    folder = tmp_path / "folder"
    assert run_lock.hold(str(folder)) == "" and run_lock.hold(str(folder)) == ""
    assert (folder / run_lock.LOCK).read_text().startswith(f"pid {os.getpid()} on ")
    run_lock.release(str(folder))
    assert os.listdir(folder) == [] and run_lock.held() == ()


def test_a_stale_lock_file_taken_over_names_the_new_owner(tmp_path):
    """A lock file no process holds (its owner was killed): `hold` returns what it said, and the file then
    names this process, not the dead one."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / run_lock.LOCK).write_text("pid 999999 on elsewhere, since 2026-11-27\n")
    try:
        assert run_lock.hold(str(folder)) == "pid 999999 on elsewhere, since 2026-11-27"
        assert (folder / run_lock.LOCK).read_text().startswith(f"pid {os.getpid()} on {socket.gethostname()} since ")
    finally:
        run_lock.release(str(folder))


LATE_OWNER = """
import fcntl, os, sys, time
path = os.path.join(sys.argv[1], "LOCK_NAME")
os.makedirs(sys.argv[1], exist_ok=True)
handle = open(path, "a+")
fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the lock taken, its owner line not yet written
print("locked", flush=True)
if sys.argv[2] != "never":
    time.sleep(float(sys.argv[2]))
    handle.write("pid 4242 on elsewhere\\n")
    handle.flush()
time.sleep(60)
"""


@pytest.mark.parametrize("late", ["0.2", "never"])
def test_a_holder_that_has_not_written_its_owner_yet_is_waited_for_then_named(tmp_path, late):
    """A lock just taken, its owner line not yet written: the refusal waits for the line (up to a second)
    and names the owner it then says; a holder that never writes one is "another process"."""
    folder = tmp_path / "run"
    script = LATE_OWNER.replace("LOCK_NAME", run_lock.LOCK)
    holder = subprocess.Popen([sys.executable, "-c", script, str(folder), late], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(run_lock.RunFolderBusy) as refused:
            run_lock.hold(str(folder))
        expected = "pid 4242 on elsewhere" if late != "never" else "another process"
        assert f"which another run writes now ({expected}); expected a folder" in str(refused.value)
    finally:
        holder.kill()
        holder.wait()
