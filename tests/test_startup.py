"""`nlp-train` starts light: `--help` imports neither torch nor transformers, and `predict` and
`evaluate` of a word student import no transformers (timings: scripts/bench_startup.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import click
import pytest

from tests.conftest import ROOT, SAMPLES, cli

HEAVY = ("torch", "transformers")


def run_python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_help_imports_neither_torch_nor_transformers():
    done = run_python(f"""
        import contextlib, io, json, sys
        from procedures.cli import main
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            try:
                main(["--help"])
            except SystemExit as exit:
                status = exit.code
        print(json.dumps({{"status": status, "help": shown.getvalue(),
                          "imported": [name for name in {HEAVY!r} if name in sys.modules]}}))
    """)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == 0 and result["imported"] == []
    for name in ("teacher", "student", "kd", "pseudo-label", "evaluate", "predict", "compare", "export"):
        assert f"\n  {name} " in result["help"]


@pytest.mark.parametrize("command", ["predict", "evaluate", "compare"])
def test_the_help_of_a_command_that_uses_a_model_imports_no_torch(command):
    """`nlp-train predict --help` imported torch (a second of a 1.8 s start) to ask whether a launcher started the
    process (`distill.distributed.launched`), which needs only the environment."""
    done = run_python(f"""
        import contextlib, io, json, sys
        from procedures.cli import main
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            try:
                main([{command!r}, "--help"])
            except SystemExit as exit:
                status = exit.code
        print(json.dumps({{"status": status, "usage": shown.getvalue().splitlines()[0],
                          "imported": [name for name in {HEAVY!r} if name in sys.modules]}}))
    """)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == 0 and result["imported"] == [] and f"nlp-train {command} " in result["usage"]


def test_every_command_is_listed_with_its_own_short_help():
    """The group lists each command's short help without importing it: that help is the command's own."""
    from procedures.cli import COMMANDS, cli as group
    listed = click.Context(group, info_name="nlp-train")
    assert group.list_commands(listed) == sorted(COMMANDS)
    for name in COMMANDS:
        command = group.get_command(listed, name)
        assert command.name == name and not command.hidden
        first_paragraph = " ".join(command.help.split("\n\n")[0].split())
        assert COMMANDS[name][1] == first_paragraph
        for limit in (30, 45, 74, 200):
            assert click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit) == \
                command.get_short_help_str(limit)
    with pytest.raises(SystemExit) as exit_info:
        group.main(["--help"], prog_name="nlp-train", standalone_mode=True)
    assert exit_info.value.code == 0


def test_help_lists_each_command_as_click_would(capsys):
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    rows = shown.split("Commands:\n")[1].splitlines()
    assert [row.split()[0] for row in rows] == ["compare", "evaluate", "export", "kd", "predict", "pseudo-label",
                                                "search", "student", "teacher"]
    assert "kd            Distill a teacher (or an ensemble" in shown


def test_global_options_after_the_command_with_help(capsys):
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["kd", "--threads", "1", "--help"])
    assert exit_info.value.code == 0
    assert "--kd-loss" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["--threads", "1", "predict", "--precision", "fp32", "--threads", "2", "--help"])
    assert exit_info.value.code == 2
    assert "error: --threads is given twice: give it once" in capsys.readouterr().err


def test_a_mistyped_command_is_refused_with_a_suggestion(capsys):
    from procedures.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["evalute", "model", "data.csv"])
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: No such command 'evalute'.")
    if hasattr(click.exceptions, "NoSuchCommand"):  # click >= 8.4 suggests
        assert "Did you mean 'evaluate'?" in line


WORD_STUDENTS = {  # name: (options, train, dev)
    "lstm": (["--embedding-dim", "8", "--hidden-dim", "8"], "sentiment_train.csv", "sentiment_dev.csv"),
    "cnn": (["--embedding-dim", "8", "--filters", "4"], "sentiment_train.csv", "sentiment_dev.csv"),
    "ngram": ([], "sentiment_train.csv", "sentiment_dev.csv"),
    "static": (["--embedding-dim", "8", "--head-hidden", "4"], "sentiment_train.csv", "sentiment_dev.csv"),
    "lstm-tagger": (["--embedding-dim", "8", "--hidden-dim", "8"], "ner_train.conll", "ner_dev.conll"),
}


@pytest.mark.parametrize("name", list(WORD_STUDENTS))
def test_predict_and_evaluate_of_a_word_student_import_no_transformers(name, tmp_path):
    options, train, dev = WORD_STUDENTS[name]
    student = tmp_path / name
    cli("--threads", "1", "student", "--model", name, *options, "--epochs", "1", "--quiet", "--train",
        SAMPLES / train, "--dev", SAMPLES / dev, "--output", student)
    lines = ["John Smith flew to Paris .", "The film opens in Berlin ."] if train.endswith(".conll") else \
        ["a fine film", "a dull and tired sequel"]
    (tmp_path / "input.txt").write_text("\n".join(lines) + "\n")
    done = run_python(f"""
        import contextlib, io, json, sys
        from procedures.cli import main
        imported = {{}}
        for command in (["predict", {str(student)!r}, {str(tmp_path / "input.txt")!r}],
                        ["evaluate", {str(student)!r}, {str(SAMPLES / dev)!r}, "--quiet"]):
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    main(["--threads", "1", *command])
                except SystemExit as exit:
                    assert exit.code == 0, exit.code
            imported[command[0]] = "transformers" in sys.modules
        print(json.dumps(imported))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"predict": False, "evaluate": False}
