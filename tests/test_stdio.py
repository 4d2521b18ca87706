"""Standard input and output: predict reads stdin as strictly as a file (lines or JSON lines), pseudo-label
and --output take files only, and a closed stdout ends predict quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from distill.labels import LabelHierarchy
from distill.models.students import build_student
from tests.conftest import DEV, ROOT, config_for, run_main


def test_pseudo_label_says_it_does_not_read_stdin(tiny_student, tmp_path, capsys):
    status, err = run_main(capsys, "pseudo-label", "--teacher", tiny_student, "--input", "-", "--output",
                           tmp_path / "p.jsonl")
    assert status == 2 and "pseudo-label reads a file, not stdin" in err and not (tmp_path / "p.jsonl").exists()


def test_stdin_is_read_as_strictly_as_a_file(tiny_student):
    """A Latin-1 byte on stdin is refused with its line, as in a file; it is never predicted as U+FFFD."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    run = lambda data: subprocess.run([sys.executable, "-m", "procedures.cli", "--threads", "1", "predict",  # noqa: E731
                                       str(tiny_student)], input=data, capture_output=True, env=env, cwd=ROOT)
    bad = run(b"a fine film\ncaf\xe9 noir\n")
    assert bad.returncode == 2 and bad.stdout == b""
    assert bad.stderr.decode().strip() == "error: stdin:2: not UTF-8 text (byte 0xe9)"
    good = run("\ufeffa fine film\r\ncaf\u00e9 noir\n".encode())  # BOM and CRLF are fine
    assert good.returncode == 0, good.stderr.decode()
    assert [json.loads(line)["text"] for line in good.stdout.decode().splitlines()] == ["a fine film", "caf\u00e9 noir"]


@pytest.mark.parametrize("text, expected", [
    ('{"text": "a fine film"}\n{"text": "dull"}\n', ["a fine film", "dull"]),  # JSON lines, as --help says
    ("a fine film\ndull\n", ["a fine film", "dull"])])
def test_stdin_reads_lines_or_json_lines(capsys, monkeypatch, tmp_path, text, expected):
    import io
    model = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                          ["good film"])
    model.save_pretrained(tmp_path / "m")
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", str(tmp_path / "m")])
    assert exit_info.value.code == 0
    assert [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()] == expected


@pytest.mark.parametrize("text, message", [("text,label\ngood,positive\n", "looks like CSV"),
                                           ("Mina B-PER\nspoke O\n. O\n", "looks like CoNLL"),
                                           ("go\x00od\n", "NUL byte")])
def test_stdin_refuses_what_a_file_refuses(capsys, monkeypatch, tmp_path, text, message):
    import io
    model = build_student(config_for("lstm", embedding_dim=8, hidden_dim=8), LabelHierarchy(["neg", "pos"]),
                          ["good film"])
    model.save_pretrained(tmp_path / "m")
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    status, err = run_main(capsys, "predict", tmp_path / "m")
    assert status == 2 and message in err and err.startswith("error: stdin")


def test_output_dash_is_refused_and_a_closed_stdout_ends_predict_quietly(tiny_student, tmp_path, capsys):
    status, err = run_main(capsys, "evaluate", tiny_student, DEV, "--output", "-")
    assert status == 2 and err.strip() == "error: --output -: an evaluate result of " \
        f"{tiny_student} on {DEV} is written to a file; give its name", err
    lines = "".join(f"a fine film number {i}\n" for i in range(20000))
    reader = subprocess.Popen(["head", "-n", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    predict = subprocess.Popen([sys.executable, "-m", "procedures.cli", "--threads", "1", "predict", tiny_student, "-"],
                               env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=reader.stdin, stderr=subprocess.PIPE)
    reader.stdin.close()
    _, err = predict.communicate(lines.encode())
    reader.wait()
    assert predict.returncode == 1 and err == b"", err  # click's exit for a closed pipe: no traceback, no message
