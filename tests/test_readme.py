"""The README's commands are what CI runs, and its Python snippet runs as written."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_readme_opens_with_two_commands_and_ci_runs_the_test_one():
    install_demo, install_test = (block.strip() for block in _blocks("bash")[:2])
    assert README.lstrip().startswith("# keras_tse\n\n```bash\n" + install_demo)
    assert "keras-tse demo" in install_demo and "run_all_backends.py" in install_test
    ci = (ROOT / ".ci" / "run").read_text()
    assert install_test in ci
    assert "keras-tse demo" in ci


def test_python_snippet_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the snippet writes blocks.keras
    (snippet,) = _blocks("python")
    exec(compile(snippet, "README.md", "exec"), {})
    assert (tmp_path / "blocks.keras").exists()
