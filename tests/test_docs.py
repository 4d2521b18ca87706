"""The documentation cannot drift from the code: every example in docs/ runs here.

* ``pycon`` blocks (``>>>``) run as doctests, one namespace per page.
* ``bash`` blocks run command by command: ``nlp-train`` in-process, ``make TARGET`` as a dry run
  (``make -n``: the target exists; running it would rebuild the venv or recurse into the tests),
  anything else (``mkdir``, ``cp``, the left side of a pipe) through bash.
* ``console`` blocks are ``$ command`` lines followed by the exact output the command prints.

Commands run as written in a fresh folder per page, with seven stand-ins so that the whole
file takes well under a minute on one CPU thread: the real datasets under ``data/`` are the
bundled samples, the ``minilm-l6`` encoder is the tiny random DistilBERT of conftest.py, the
trained teacher ``runs/rt-teacher`` is the tiny teacher of conftest.py, the transformers
classifier ``runs/sst2-classifier`` is conftest.py's tiny random one, so is the causal language model
``runs/qwen2.5-0.5b-instruct`` (a tiny random Llama), a Python example that
loads the transformers export ``runs/rt/teacher-hf`` gets that tiny teacher's (and the teacher
as ``runs/rt/teacher-first``), and every training command runs one epoch (``teacher --zero-shot`` trains none). The troubleshooting page must list every error message
the code raises.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
FENCE = re.compile(r"^```([\w-]+)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)

# path in the docs -> bundled sample standing in for it
DATA_STAND_INS = {
    "data/rotten_tomatoes/train.csv": "sentiment_train.csv",
    "data/rotten_tomatoes/dev.csv": "sentiment_dev.csv",
    "data/rotten_tomatoes/test.csv": "sentiment_test.csv",
    "data/conll2003/train.txt": "ner_train.conll",
    "data/conll2003/valid.txt": "ner_dev.conll",
    "data/conll2003/test.txt": "ner_test.conll",
    "data/unlabeled/movies.txt": "unlabeled_movies.txt",
    "data/unlabeled/news.txt": "unlabeled_news.txt",
}
TRAINING_COMMANDS = ("teacher", "student", "kd")


def code_blocks(page: Path, language: str) -> list[tuple[int, str]]:
    """(first line number, body) of each fenced block of `language` in a Markdown page."""
    text = page.read_text(encoding="utf-8")
    return [(text[: m.start(2)].count("\n") + 1, m.group(2)) for m in FENCE.finditer(text) if m.group(1) == language]


def pages_with(language: str) -> list:
    return [pytest.param(p, id=str(p.relative_to(DOCS))) for p in PAGES if code_blocks(p, language)]


@pytest.fixture
def workspace(tmp_path, monkeypatch, tiny_classifier_teacher, tiny_hf_classifier, tiny_causal_lm) -> Path:
    """A fresh folder like a checkout with `make data` done: samples/, examples/, data/ (sample
    stand-ins) and, for pages that load one, a trained teacher (the tiny one of conftest.py), a
    transformers classifier's folder (conftest.py's tiny one, `runs/sst2-classifier`) and a causal language
    model's (conftest.py's tiny random Llama, `runs/qwen2.5-0.5b-instruct`)."""
    (tmp_path / "samples").symlink_to(SAMPLES)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "rt-teacher").symlink_to(tiny_classifier_teacher)
    (tmp_path / "runs" / "sst2-classifier").symlink_to(tiny_hf_classifier)
    (tmp_path / "runs" / "qwen2.5-0.5b-instruct").symlink_to(tiny_causal_lm)
    for doc_path, sample in DATA_STAND_INS.items():
        (tmp_path / doc_path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / doc_path).symlink_to(SAMPLES / sample)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTILL_CACHE", str(tmp_path / "cache"))
    # a page may register a student, a kd loss or an augmenter of its own: the next page sees the built-in ones only
    from distill import augment, losses
    from distill.models import registry
    registry.load_plugins()
    monkeypatch.setattr(registry, "_STUDENTS", registry._STUDENTS.copy())
    monkeypatch.setattr(losses, "KD_LOSSES", losses.KD_LOSSES.copy())
    monkeypatch.setattr(augment, "_AUGMENTERS", augment._AUGMENTERS.copy())
    return tmp_path


def logical_lines(body: str) -> list[str]:
    """Shell lines with backslash continuations joined; blank and comment lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def with_stand_ins(args: list[str], encoder_dir: str) -> list[str]:
    """The tiny encoder for minilm-l6 and one epoch for training commands (see the module docstring)."""
    args = [encoder_dir if a == "minilm-l6" and i and args[i - 1] == "--encoder" else a for i, a in enumerate(args)]
    command = next((a for a in args if not a.startswith("-") and not a.isdigit()), None)
    if command in TRAINING_COMMANDS and "--zero-shot" not in args:  # a zero-shot teacher trains no epoch
        if "--epochs" in args:
            args[args.index("--epochs") + 1] = "1"
        else:
            args += ["--epochs", "1"]
    return args


def nlp_train(args: list[str], stdin: str = "") -> tuple[int, str]:
    """Run `nlp-train ARGS` in this process (seconds saved per command); exit status and output."""
    from procedures.cli import main
    output = io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output), \
                pytest.raises(SystemExit) as exit_info:
            main(args)
    finally:
        sys.stdin = saved_stdin
    return exit_info.value.code, output.getvalue()


def shell(command: str, stdin: str = "") -> tuple[int, str]:
    done = subprocess.run(["bash", "-c", command], input=stdin, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def run_command(line: str, encoder_dir: str) -> tuple[int, str]:
    """One documented shell line; a pipe into nlp-train feeds the left side's output to it."""
    left, bar, right = line.rpartition("| nlp-train ")
    if bar:
        status, piped = shell(left)
        assert status == 0, f"{left!r} failed: {piped}"
        return nlp_train(with_stand_ins(shlex.split(right, comments=True), encoder_dir), piped)
    words = shlex.split(line, comments=True)
    if words[0] == "nlp-train":
        return nlp_train(with_stand_ins(words[1:], encoder_dir))
    if words[0] == "make":
        return shell(f"make -n -C {shlex.quote(str(ROOT))} {shlex.join(words[1:])}")
    return shell(line)


EXECUTED = ("pycon", "bash", "console")


def fence_languages(page: Path) -> list[tuple[int, str]]:
    """(line number, info string) of every opening code fence of a page."""
    opened, found = False, []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            if not opened:
                found.append((number, line[3:].strip()))
            opened = not opened
    return found


def test_every_code_block_is_executed():
    """A block in another language (```python, ```sh, none) would escape the tests below; MyST
    directives (```{...}) are not examples."""
    unrun = [f"{page.relative_to(DOCS)}:{line}: ```{info}" for page in PAGES
             for line, info in fence_languages(page) if not info.startswith("{") and info not in EXECUTED]
    assert not unrun, "code blocks no test runs (use pycon, bash or console):\n" + "\n".join(unrun)


@pytest.fixture(scope="session")
def tiny_transformers_export(tiny_classifier_teacher, tmp_path_factory) -> str:
    """`nlp-train export --format transformers` of the tiny teacher (first-token pooling, a stock DistilBERT
    classifier)."""
    from tests.conftest import cli
    out = tmp_path_factory.mktemp("teacher-hf") / "teacher-hf"
    cli("export", tiny_classifier_teacher, "--format", "transformers", "--output", out)
    return str(out)


@pytest.mark.parametrize("page", pages_with("pycon"))
def test_python_examples(page, workspace, request):
    if "runs/rt/teacher-hf" in "".join(body for _, body in code_blocks(page, "pycon")):
        (workspace / "runs" / "rt").mkdir(exist_ok=True)
        (workspace / "runs" / "rt" / "teacher-hf").symlink_to(request.getfixturevalue("tiny_transformers_export"))
        (workspace / "runs" / "rt" / "teacher-first").symlink_to(request.getfixturevalue("tiny_classifier_teacher"))
    parser, globs = doctest.DocTestParser(), {}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for line, body in code_blocks(page, "pycon"):
        test = parser.get_doctest(body, globs, f"{page.name}:{line}", str(page), line - 1)
        runner.run(test, out=report.write, clear_globs=False)
        globs = test.globs  # a DocTest works on a copy: carry its names to the page's next block
    assert runner.failures == 0, report.getvalue()


@pytest.mark.parametrize("page", pages_with("bash"))
def test_shell_examples(page, workspace, tiny_encoder_dir):
    for line_number, body in code_blocks(page, "bash"):
        for line in logical_lines(body):
            status, output = run_command(line, tiny_encoder_dir)
            assert status == 0, f"{page.name}:{line_number}: `{line}` exited {status}:\n{output}"


@pytest.mark.parametrize("page", pages_with("console"))
def test_console_examples(page, workspace, tiny_encoder_dir):
    for line_number, body in code_blocks(page, "console"):
        for session in re.split(r"^(?=\$ )", body, flags=re.M):
            if not session.strip():
                continue
            command, _, expected = session[2:].partition("\n")
            _, output = run_command(command, tiny_encoder_dir)
            assert output.strip() == expected.strip(), f"{page.name}:{line_number}: `{command}`"


def raised_messages() -> list[tuple[str, str]]:
    """(where, longest literal fragment) of each DistillError/DataError message in distill/ and procedures/."""
    found = []
    for source in sorted([*ROOT.glob("distill/**/*.py"), *ROOT.glob("procedures/*.py")]):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and getattr(node.exc.func, "id", None) in ("DistillError", "DataError")):
                continue
            message = node.exc.args[1 if node.exc.func.id == "DataError" else 0]
            alternatives = [message.body, message.orelse] if isinstance(message, ast.IfExp) else [message]
            for text in alternatives:
                parts = [text] if isinstance(text, ast.Constant) else text.values
                literals = [p.value for p in parts if isinstance(p, ast.Constant)]
                found.append((f"{source.relative_to(ROOT)}:{node.lineno}", max(literals, key=len).strip(" :")))
    return found


def test_troubleshooting_lists_every_error_message():
    page = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    messages = raised_messages()
    assert len(messages) > 40  # the scan finds them
    missing = [f"{where}: {fragment!r}" for where, fragment in messages if fragment not in page]
    assert not missing, "undocumented error messages:\n" + "\n".join(missing)


DOC_IMPORT = re.compile(r"from distill import (\([^)]*\)|[^\n`]*)")


def documented_imports() -> list[str]:
    """Every name a `from distill import ...` in docs/ or the README imports (prompts, parentheses and a
    prose ``...`` dropped)."""
    names = set()
    for page in [*PAGES, ROOT / "README.md"]:
        text = re.sub(r"^(>>>|\.\.\.) ?", "", page.read_text(encoding="utf-8"), flags=re.M)
        for match in DOC_IMPORT.finditer(text):
            names.update(part.split(" as ")[0].strip() for part in match.group(1).strip("()").split(","))
    return sorted(name for name in names if name.isidentifier())


def test_every_documented_import_from_distill_works():
    names = documented_imports()
    assert {"Distiller", "TeacherStudentDistill", "IGNORE_INDEX", "export_model", "to_transformers"} <= set(names)
    for name in names:
        exec(f"from distill import {name}", {})
