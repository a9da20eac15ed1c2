"""`keras_tse.run_files`, in this process: the claim of a run folder (new, ours, someone else's, a run of
other settings or other data), the whole-or-nothing writes, and the readers of the logs a run appends to.
The commands that use them are tested end to end in test_reliability.py and test_run_lock.py; here each
rule is pinned by the value it must give, so that a changed comparison or message fails a test."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_tse import run_files, run_lock
from keras_tse.run_files import RunFolderMismatch

# Once: file I/O, the same code whatever the backend (tests/conftest.py's rule).
pytestmark = pytest.mark.one_backend


@pytest.fixture
def claim(tmp_path):
    """`claim_folder`, its locks released when the test ends (a command's end releases them)."""
    claimed = []

    def claim_folder(folder, *args, **kwargs):
        claimed.append(str(folder))
        return run_files.claim_folder(str(folder), *args, **kwargs)

    yield claim_folder
    for folder in claimed:
        run_lock.release(folder)


def _manifest(folder):
    with open(os.path.join(folder, run_files.MANIFEST)) as f:
        return json.load(f)


def test_a_new_folder_is_claimed_with_its_command_and_settings_as_json_stores_them(tmp_path, claim):
    out = tmp_path / "a" / "b"
    assert claim(out, "train vit", {"depth": 2, "sizes": (1, 2), "train": {"epochs": 3}}) == "new"
    assert _manifest(out) == {"command": "train vit", "settings": {"depth": 2, "sizes": [1, 2], "train": {"epochs": 3}}}
    assert str(out) in run_lock.held()
    # the same settings again (a tuple given as before): ours, the manifest untouched
    assert claim(out, "train vit", {"depth": 2, "sizes": (1, 2), "train": {"epochs": 3}}) == "ours"
    # a setting the stored run lacks (a field added since) and one only it has do not part the runs
    assert claim(out, "train vit", {"depth": 2, "new_field": 1}) == "ours"


def test_an_empty_folder_is_new_and_a_left_temporary_manifest_is_removed_once_held(tmp_path, claim):
    out = tmp_path / "run"
    out.mkdir()
    (out / (run_files.MANIFEST + ".partial")).write_text("{half")
    assert claim(out, "sweep", {"quick": True}) == "new"
    assert sorted(os.listdir(out)) == sorted([run_lock.LOCK, run_files.MANIFEST])
    (out / (run_files.MANIFEST + ".partial")).write_text("{half")  # a kill inside a later rewrite
    assert claim(out, "sweep", {"quick": True}) == "ours"
    assert not (out / (run_files.MANIFEST + ".partial")).exists()


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ({"depth": 3, "train": {"epochs": 3}}, "a train vit run with depth 2; expected a folder for depth 3"),
        ({"depth": 2, "train": {"epochs": 4}}, "with train.epochs 3; expected a folder for train.epochs 4"),
        ({"depth": "2", "train": {"epochs": 3}}, "with depth 2; expected a folder for depth '2'"),
    ],
)
def test_a_run_of_other_settings_is_refused_naming_the_dotted_setting_and_both_values(tmp_path, claim, given, line):
    out = tmp_path / "run"
    claim(out, "train vit", {"depth": 2, "train": {"epochs": 3}})
    with pytest.raises(RunFolderMismatch) as error:
        claim(out, "train vit", given, flag="--out-dir")
    said = str(error.value)
    assert said.startswith(f"--out-dir: received {out}, ") and line in said
    assert said.endswith(f"(pass another --out-dir, or remove {out} to start over)") and "\n" not in said


def test_another_commands_folder_is_refused_naming_its_command(tmp_path, claim):
    out = tmp_path / "run"
    claim(out, "sweep", {"quick": True})
    with pytest.raises(
        RunFolderMismatch, match="a sweep run with command 'sweep'; expected a folder for command 'figures'"
    ):
        claim(out, "figures", {"quick": True})


def test_a_file_given_as_the_folder_is_one_line(tmp_path, claim):
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    with pytest.raises(RunFolderMismatch) as error:
        claim(path, "sweep", {}, flag="--dir")
    assert str(error.value) == f"--dir: received {path}, a file; expected a folder"
    assert path.read_text() == "mine"


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        (["b.txt", "a.txt"], "a.txt, b.txt"),
        (["e", "d", "c", "b", "a"], "a, b, c, d, ..."),
        (["a", "b", "c", "d"], "a, b, c, d"),
    ],
)
def test_a_folder_of_someone_elses_files_is_refused_naming_the_first_four(tmp_path, claim, names, shown):
    out = tmp_path / "theirs"
    out.mkdir()
    for name in names:
        (out / name).write_text(name)
    with pytest.raises(RunFolderMismatch) as error:
        claim(out, "sweep", {}, writes=("*.csv",), marker="*.csv")
    assert str(error.value) == (
        f"--out: received {out}, which holds files keras-tse did not write ({shown}); expected a new or empty "
        "folder, or one keras-tse sweep made"
    )
    assert sorted(os.listdir(out)) == sorted(names)  # nothing added: no manifest, no lock


def test_a_folder_of_our_file_names_is_ours_only_with_the_marker(tmp_path, claim):
    out = tmp_path / "old_run"
    out.mkdir()
    (out / "fig1.png").write_text("png")
    # our names, but nothing proves them ours: named as foreign
    with pytest.raises(RunFolderMismatch, match=r"did not write \(fig1.png\)"):
        claim(out, "figures", {"quick": False}, writes=("fig*.csv", "fig*.png"), marker="fig*.csv")
    # a file of our names among someone else's: only theirs named
    (out / "mine.doc").write_text("doc")
    (out / "fig1.csv").write_text("csv")
    with pytest.raises(RunFolderMismatch, match=r"did not write \(mine.doc\)"):
        claim(out, "figures", {"quick": False}, writes=("fig*.csv", "fig*.png"), marker="fig*.csv")
    os.remove(out / "mine.doc")
    assert claim(out, "figures", {"quick": False}, writes=("fig*.csv", "fig*.png"), marker="fig*.csv") == "new"
    assert _manifest(out) == {"command": "figures", "settings": {"quick": False}}


def test_a_run_made_before_manifests_is_compared_by_the_settings_it_kept(tmp_path, claim):
    out = tmp_path / "old_run"
    (out / "post").mkdir(parents=True)
    (out / "post" / "config.json").write_text("{}")
    kept = {"train": {"epochs": (3,)}}

    def before(folder):
        assert folder == str(out)
        return kept

    mine = dict(writes=("post",), marker="*/config.json", settings_before=before)
    with pytest.raises(
        RunFolderMismatch, match=r"a train vit run with train.epochs \[3\]; expected a folder for train.epochs 4"
    ):
        claim(out, "train vit", {"train": {"epochs": 4}}, **mine)
    assert claim(out, "train vit", {"train": {"epochs": [3]}}, **mine) == "new"


def test_a_run_on_changed_data_is_refused_naming_the_change(tmp_path, claim):
    out = tmp_path / "run"
    contents = {"a.png": "1", "b.png": "2"}  # data.own.contents: file -> digest
    assert claim(out, "train vit", {"depth": 2}, data_contents=lambda: contents) == "new"
    with open(out / run_files.DATA_RECORD) as f:
        assert json.load(f) == contents
    assert _manifest(out) == {"command": "train vit", "settings": {"depth": 2}}
    assert claim(out, "train vit", {"depth": 2}, data_contents=lambda: {}) == "ours"  # not compared then
    with pytest.raises(RunFolderMismatch) as error:
        claim(out, "train vit", {"depth": 3}, data_contents=lambda: {"a.png": "3", "b.png": "2"}, data_flag="--images")
    said = str(error.value)
    assert said.startswith(f"--images: received data changed since the run in {out} began (1 changed: a.png); ")
    assert said.endswith("expected the data that run trained on (restore it, or pass another --out)")
    with pytest.raises(RunFolderMismatch, match=f"^--data-dir: received data changed since the run in {out} began"):
        claim(out, "train vit", {"depth": 3}, data_contents=lambda: {"a.png": "3", "b.png": "2"})
    # the same data: the settings' difference is the reason
    with pytest.raises(RunFolderMismatch, match="with depth 2; expected a folder for depth 3"):
        claim(out, "train vit", {"depth": 3}, data_contents=lambda: contents)
    # no record of the data (a run made before records): the settings' difference too
    os.remove(out / run_files.DATA_RECORD)
    with pytest.raises(RunFolderMismatch, match="with depth 2; expected a folder for depth 3"):
        claim(out, "train vit", {"depth": 3}, data_contents=lambda: {"a.png": "3"})


def test_a_run_made_before_manifests_on_a_users_data_is_claimed_by_the_same_rules(tmp_path, claim):
    """With `data_contents`, a folder without a manifest is judged as without: our files and the marker, the
    settings it kept; the data record is ours to write beside them."""
    out = tmp_path / "old_run"
    (out / "post").mkdir(parents=True)
    (out / "post" / "config.json").write_text("{}")
    mine = dict(writes=("post",), marker="*/config.json", settings_before=lambda folder: {"depth": 2})
    with pytest.raises(RunFolderMismatch) as error:
        claim(out, "train vit", {"depth": 3}, flag="--dir", data_contents=dict, **mine)
    assert str(error.value).startswith(
        f"--dir: received {out}, a train vit run with depth 2; expected a folder for depth 3"
    )
    assert claim(out, "train vit", {"depth": 2}, data_contents=lambda: {"a.png": "1"}, **mine) == "new"
    assert _manifest(out) == {"command": "train vit", "settings": {"depth": 2}}
    assert sorted(os.listdir(out)) == sorted([run_files.DATA_RECORD, run_files.MANIFEST, run_lock.LOCK, "post"])


def test_a_manifest_without_settings_is_a_run_of_none(tmp_path, claim):
    out = tmp_path / "run"
    out.mkdir()
    (out / run_files.MANIFEST).write_text('{"command": "sweep"}')
    assert claim(out, "sweep", {"quick": True}) == "ours"


HOLDER = """
import sys
from keras_tse import run_lock
run_lock.hold(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.starts_processes
@pytest.mark.parametrize("ours", [False, True])
def test_a_folder_another_process_holds_is_refused_under_the_commands_flag(tmp_path, ours):
    out = tmp_path / "run"
    if ours:
        run_files.write_json(str(out / run_files.MANIFEST), {"command": "sweep", "settings": {}})
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(run_lock.RunFolderBusy, match=f"^--dir: received {out}, which another run writes now"):
            run_files.claim_folder(str(out), "sweep", {}, flag="--dir")
    finally:
        holder.kill()
        holder.wait()


def test_flatten_names_every_setting_by_its_dotted_path_and_keeps_an_empty_mapping():
    config = {"a": {"b": {"c": 1}, "d": [2]}, "e": {}, "f": None}
    assert run_files.flatten(config) == {"a.b.c": 1, "a.d": [2], "e": {}, "f": None}
    assert run_files.flatten({"x": 1}, "p.") == {"p.x": 1}


def test_claim_file_takes_a_new_name_or_ours_and_refuses_the_rest(tmp_path):
    path = tmp_path / "table.csv"
    run_files.claim_file(str(path), lambda p: False, "the table")  # new
    path.write_text("theirs")
    run_files.claim_file(str(path), lambda p: p == str(path), "the table")  # ours
    with pytest.raises(RunFolderMismatch) as error:
        run_files.claim_file(str(path), lambda p: False, "the table", flag="--csv")
    assert (
        str(error.value)
        == f"--csv: received {path}, a file keras-tse did not write; expected a new file name for the table"
    )
    with pytest.raises(RunFolderMismatch) as error:
        run_files.claim_file(str(tmp_path), lambda p: True, "the table")
    assert str(error.value) == f"--out: received {tmp_path}, a folder; expected a file name for the table"
    assert path.read_text() == "theirs"


def test_whole_file_writes_make_their_folder_and_leave_no_temporary(tmp_path, monkeypatch):
    run_files.write_text(str(tmp_path / "new" / "a.txt"), "one\ntwo")
    run_files.write_json(str(tmp_path / "b.json"), {"x": [1]}, indent=None)
    run_files.write_csv(str(tmp_path / "c.csv"), ("k", "v"), [{"k": "a", "v": 1}, {"v": 2, "k": "b"}])
    assert (tmp_path / "new" / "a.txt").read_text() == "one\ntwo"
    assert (tmp_path / "b.json").read_text() == '{"x": [1]}'
    run_files.write_json(str(tmp_path / "b.json"), {"x": 1})
    assert (tmp_path / "b.json").read_text() == '{\n  "x": 1\n}'
    assert (tmp_path / "c.csv").read_bytes() == b"k,v\r\na,1\r\nb,2\r\n"  # csv's own line ends, not translated
    with run_files.replacing(str(tmp_path / "d.bin"), "wb", suffix=".tmp") as f:
        assert f.name == str(tmp_path / "d.bin.tmp")
        f.write(b"\x00\x01")
    assert (tmp_path / "d.bin").read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(tmp_path)) == ["b.json", "c.csv", "d.bin", "new"]
    monkeypatch.chdir(tmp_path / "new")  # a bare file name: the folder is the current one
    run_files.write_text("e.txt", "e")
    assert (tmp_path / "new" / "e.txt").read_text() == "e"


def test_a_failed_whole_file_write_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    path = tmp_path / "a.json"
    run_files.write_json(str(path), {"v": 1})
    with pytest.raises(OSError, match="disk full"):
        with run_files.replacing(str(path)) as f:
            f.write("{")
            raise OSError("disk full")
    assert json.loads(path.read_text()) == {"v": 1} and os.listdir(tmp_path) == ["a.json"]


class _Saver:
    """A model's `save`/`save_weights`: writes `text` to the path given, or fails after writing half."""

    def __init__(self, text, fail=False):
        self.text, self.fail, self.paths = text, fail, []

    def save(self, path):
        self.paths.append(path)
        with open(path, "w") as f:
            f.write(self.text[: len(self.text) // 2] if self.fail else self.text)
        if self.fail:
            raise OSError("disk full")

    save_weights = save


def test_models_and_weights_are_saved_through_a_temporary_of_their_own_suffix(tmp_path, monkeypatch):
    saver = _Saver("model")
    run_files.save_model(saver, str(tmp_path / "ckpt" / "last.keras"))
    run_files.save_weights(saver, str(tmp_path / "w.weights.h5"))
    assert saver.paths == [str(tmp_path / "ckpt" / "last.partial.keras"), str(tmp_path / "w.partial.weights.h5")]
    assert (tmp_path / "ckpt" / "last.keras").read_text() == "model"
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "w.weights.h5"] and os.listdir(tmp_path / "ckpt") == ["last.keras"]
    with pytest.raises(OSError, match="disk full"):
        run_files.save_model(_Saver("another model", fail=True), str(tmp_path / "ckpt" / "last.keras"))
    assert (tmp_path / "ckpt" / "last.keras").read_text() == "model" and os.listdir(tmp_path / "ckpt") == ["last.keras"]
    with pytest.raises(ValueError, match=r"A model file must end in .keras. Received: path='m.h5'"):
        run_files.save_model(saver, "m.h5")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")  # a bare file name: written where the process runs, nothing beside it
    run_files.save_model(saver, "m.keras")
    assert os.listdir(".") == ["m.keras"]


def test_a_figure_is_made_without_pyplot_and_saved_as_a_png(tmp_path):
    fig, axes = run_files.new_figure((4, 2), ncols=3)
    assert len(axes) == 3 and len(fig.axes) == 3 and tuple(fig.get_size_inches()) == (4, 2)
    assert len(run_files.new_figure((2, 2))[1]) == 1
    axes[0].plot([0, 1], [1, 0])
    run_files.save_figure(fig, str(tmp_path / "f.png"), dpi=50)
    data = (tmp_path / "f.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 200 and int.from_bytes(data[20:24], "big") == 100  # 4x2 in at 50 dpi
    run_files.save_figure(fig, str(tmp_path / "f.png"))  # at 100 dpi
    assert int.from_bytes((tmp_path / "f.png").read_bytes()[16:20], "big") == 400
    assert os.listdir(tmp_path) == ["f.png"]


def test_appended_rows_get_one_header_even_after_an_empty_file(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("")  # created, killed before its header
    run_files.append_row(str(path), {"epoch": 0, "loss": 1.5})
    run_files.append_row(str(path), {"epoch": 1, "loss": 0.5})
    assert path.read_bytes() == b"epoch,loss\r\n0,1.5\r\n1,0.5\r\n"
    with pytest.raises(ValueError) as error:
        run_files.append_row(str(path), {"epoch": 2})
    assert str(error.value) == (
        f"{path}: received a row of columns ['epoch']; expected the file's columns ['epoch', 'loss'] "
        "(write to another file, or move this one away)"
    )


def test_logged_rows_cut_short_are_named_by_line_and_the_rest_read_whole(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("a,b\n1,2\n3\n4,5,6\n7,8\n")
    fields, whole, cut = run_files.read_logged_rows(str(path))
    assert fields == ["a", "b"]
    assert whole == [(2, {"a": "1", "b": "2"}), (5, {"a": "7", "b": "8"})]
    assert cut == [3, 4]  # a field missing; one too many (a kill cut a row and the next began on its line)
    path.write_text("")
    assert run_files.read_logged_rows(str(path)) == ([], [], [])


def test_a_history_reads_each_epoch_once_the_last_written_winning(tmp_path):
    path = tmp_path / "history.csv"
    assert run_files.read_history(str(path)) == {}
    path.write_text("epoch,loss,acc\n0,2.0,0.1\n1,1.5,0.2\n1,1.4,0.3\n2,1.0,\n3,0.5\n2,1.2,0.4\n")
    with pytest.warns(UserWarning) as caught:
        columns = run_files.read_history(str(path))
    assert columns == {"epoch": [0.0, 1.0, 2.0], "loss": [2.0, 1.4, 1.2], "acc": [0.1, 0.3, 0.4]}
    assert run_files.__file__ not in {w.filename for w in caught}  # the warning points at the caller's line
    assert [str(w.message) for w in caught] == [
        f"{path}: line 5 is incomplete; skipped",
        f"{path}: line 6 is incomplete; skipped",
    ]


def test_similarity_start_is_the_first_row_and_end_the_last_epoch_end(tmp_path):
    path = tmp_path / "similarity.csv"
    path.write_text(
        "epoch,when,tsim_01,tsim_00,tcos_00\n"
        "0,train_begin,0.2,0.1,9\n0,epoch_end,0.4,0.3,9\n1,step,0.6,0.5,9\n1,epoch_end,0.8,0.7,9\n2,step,1.0,0.9,9\n"
    )
    assert run_files.similarity_start_end(str(path)) == ([0.1, 0.2], [0.7, 0.8])
    path.write_text("epoch,when,tsim_00\n0,train_begin,0.1\n0,step,0.3\n")
    assert run_files.similarity_start_end(str(path)) == ([0.1], [0.3])  # no epoch end yet: the last row
    path.write_text("epoch,when,tsim_00\n0,train_begin,0.1\n")
    assert run_files.similarity_start_end(str(path)) == ([0.1], [0.1])


def test_steps_are_read_in_order_the_last_written_winning(tmp_path):
    path = tmp_path / "steps.csv"
    steps, losses = run_files.read_steps(str(path))
    assert steps.dtype == np.int64 and steps.shape == losses.shape == (0,)
    path.write_text("step,loss\n2,0.5\n1,0.9\n2,0.25\n")
    steps, losses = run_files.read_steps(str(path))
    assert steps.tolist() == [1, 2] and losses.tolist() == [0.9, 0.25] and steps.dtype == np.int64


@pytest.mark.parametrize(("theirs", "state"), [({"depth": 2}, "ours"), ({"depth": 3}, None)])
def test_a_run_that_claims_the_folder_between_our_look_and_our_lock_is_checked_like_any_other(
    tmp_path, claim, monkeypatch, theirs, state
):
    out = tmp_path / "run"
    hold = run_lock.hold

    def racer_first(folder, flag="--out"):
        """The other run wrote its manifest while we waited for the lock."""
        if not (out / run_files.MANIFEST).exists():
            run_files.write_json(str(out / run_files.MANIFEST), {"command": "train vit", "settings": theirs})
        hold(folder, flag)

    monkeypatch.setattr(run_lock, "hold", racer_first)
    if state is None:
        with pytest.raises(RunFolderMismatch, match=f"^--dir: received {out}, a train vit run with depth 3; expected"):
            claim(out, "train vit", {"depth": 2}, flag="--dir")
    else:
        assert claim(out, "train vit", {"depth": 2}) == state
    assert _manifest(out) == {"command": "train vit", "settings": theirs}  # theirs, not overwritten
