"""Bad input to any command: one line on stderr, exit status 2, no traceback, nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import DEV, SAMPLES, SMALL_LSTM, TRAIN, kd_with, run_main, student_on, tagger_on, write


def link_loop(tmp: Path) -> Path:
    """A symbolic link to itself."""
    (tmp / "loop").symlink_to("loop")
    return tmp / "loop"


def teacher_without_checkpoint(teacher: str, tmp: Path) -> str:
    copy = Path(shutil.copytree(teacher, tmp / "broken-teacher"))
    (copy / "checkpoint.pt").unlink()
    return str(copy)


def truncated_weights(student: str, tmp: Path) -> str:
    copy = Path(shutil.copytree(student, tmp / "truncated-student"))
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return str(copy)


def flipped_byte(teacher: str, tmp: Path) -> str:
    copy = Path(shutil.copytree(teacher, tmp / "corrupt-teacher"))
    data = bytearray((copy / "checkpoint.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "checkpoint.pt").write_bytes(bytes(data))
    return str(copy)


# Each case: (id, argv builder (tmp, classifier teacher, student) -> argv, expected fragment of the message).
BAD_INPUT = [
    ("missing-file", lambda t, te, st: student_on(t / "nope.csv", t / "out"), "file not found"),
    ("empty-file", lambda t, te, st: student_on(write(t / "e.csv", ""), t / "out"), "file is empty"),
    ("binary-file", lambda t, te, st: student_on(write(t / "b.csv", b"text,label\n\x00\x01,pos\n"), t / "out"),
     "binary data"),
    ("not-utf8", lambda t, te, st: student_on(write(t / "l.csv", b"text,label\ncaf\xe9,pos\n"), t / "out"),
     "not UTF-8"),
    ("wrong-columns", lambda t, te, st: student_on(write(t / "c.csv", "review,label\ngood,pos\n"), t / "out"),
     "missing column 'text'"),
    ("wrong-field-count", lambda t, te, st: student_on(write(t / "f.csv", "text,label\ngood,pos,x\n"), t / "out"),
     ":2: wrong number of fields"),
    ("malformed-conll", lambda t, te, st: tagger_on(write(t / "m.conll", "EU NNP B-ORG\nrejects\n"), t / "out"),
     ":2: expected 3 fields"),
    ("mixed-tag-schemes", lambda t, te, st: tagger_on(write(t / "x.conll", "EU B-ORG\nrejects PER\n"), t / "out"),
     "mixed tagging schemes"),
    ("unseen-label-at-evaluation", lambda t, te, st: ["evaluate", te, write(t / "u.csv", "text,label\nok,meh\n")],
     "label 'meh' is not one of the model's labels"),
    ("unlabeled-only-empty-lines", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input",
                                                       write(t / "blank.txt", "\n  \n\n"), "--output", t / "p.jsonl"],
     "no examples"),
    ("extremely-long-line", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input",
                                               write(t / "long.txt", "ok\n" + "word " * 40_000 + "\n"),
                                               "--output", t / "p.jsonl"],
     ":2: example is 199,999 characters long, over the 100,000 limit"),
    ("conll-sentence-over-limit", lambda t, te, st: tagger_on(write(t / "run-on.conll", "word O\n" * 30_000),
                                                               t / "out"),
     "run-on.conll:1: example is 149,999 characters long, over the 100,000 limit"),
    ("csv-field-over-csv-limit", lambda t, te, st: student_on(write(t / "h.csv", "text,label\n" + "x" * 200_000
                                                                  + ",pos\n"), t / "out"), "h.csv:2:"),
    ("teacher-dir-missing-files", lambda t, te, st: ["pseudo-label", "--teacher", teacher_without_checkpoint(te, t),
                                                     "--input", SAMPLES / "unlabeled_movies.txt",
                                                     "--output", t / "p.jsonl"], "missing checkpoint.pt"),
    ("teacher-student-label-sets-differ", lambda t, te, st: ["kd", "--teacher", te, *SMALL_LSTM, "--train",
                                                             SAMPLES / "topics_train.csv", "--dev",
                                                             SAMPLES / "topics_dev.csv", "--output", t / "out"],
     "label sets differ"),
    ("word-student-as-teacher-of-word-embeddings", lambda t, te, st: kd_with(st, t / "out"),
     "has no sub-word embeddings to start word embeddings from: use --random-embeddings"),
    ("tagger-student-classification-teacher", lambda t, te, st: ["kd", "--teacher", te, "--model", "lstm-tagger",
                                                                 "--train", SAMPLES / "ner_train.conll", "--dev",
                                                                 SAMPLES / "ner_dev.conll", "--output", t / "out"],
     "does tagging but teacher"),
    ("unknown-offline-encoder", lambda t, te, st: ["teacher", "--task", "classification", "--encoder",
                                                   "no-such-org/no-such-encoder", "--train", TRAIN, "--dev", DEV,
                                                   "--output", t / "out"], "minilm-l6"),
    ("temperature-zero", lambda t, te, st: kd_with(te, t / "out", "--temperature", "0"), "'--temperature'"),
    ("negative-weight", lambda t, te, st: kd_with(te, t / "out", "--distill-weight", "-1"), "'--distill-weight'"),
    ("batch-size-zero", lambda t, te, st: student_on(TRAIN, t / "out") + ["--batch-size", "0"], "'--batch-size'"),
    ("min-confidence-above-one", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input",
                                                    SAMPLES / "unlabeled_movies.txt", "--output", t / "p.jsonl",
                                                    "--min-confidence", "1.5"], "'--min-confidence'"),
    ("min-confidence-keeps-nothing", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input",
                                                        SAMPLES / "unlabeled_movies.txt", "--output", t / "p.jsonl",
                                                        "--min-confidence", "1", "--quiet"],
     "p.jsonl: not written: no example reached --min-confidence 1 (the teacher's most confident was 0."),
    ("class-weights-wrong-length", lambda t, te, st: student_on(TRAIN, t / "out") + ["--class-weights", "1,2,3"],
     "3 class weights given for 2 labels"),
    ("output-under-a-file", lambda t, te, st: student_on(TRAIN, write(t / "afile", "x") / "out"),
     "is a file, not a directory"),
    ("file-output-under-a-file", lambda t, te, st: ["evaluate", st, SAMPLES / "sentiment_test.csv", "--output",
                                                    write(t / "afile", "x") / "m.json"], "afile/m.json: /"),
    ("truncated-safetensors", lambda t, te, st: ["evaluate", truncated_weights(st, t), SAMPLES / "sentiment_test.csv",
                                                 "--output", t / "m.json"], "corrupted or truncated"),
    ("corrupted-checkpoint", lambda t, te, st: ["evaluate", flipped_byte(te, t), SAMPLES / "sentiment_test.csv",
                                                "--output", t / "m.json"], "corrupted or truncated"),
    ("model-dir-not-found", lambda t, te, st: ["predict", t / "no-model"], "model directory not found"),
    ("unlabeled-input-is-a-folder", lambda t, te, st: ["pseudo-label", "--teacher", te, "--input", SAMPLES, "--output",
                                                      t / "pl.jsonl"], "is a directory, expected a file"),
    ("labelled-data-is-a-folder", lambda t, te, st: ["evaluate", st, SAMPLES, "--output", t / "m.json"],
     "is a directory, expected a file"),
    ("model-dir-is-a-file", lambda t, te, st: ["evaluate", SAMPLES / "sentiment_test.csv", SAMPLES / "sentiment_test.csv",
                                               "--output", t / "m.json"], "is a file, not a model directory"),
    ("model-dir-without-card", lambda t, te, st: ["predict", (t / "plain").mkdir() or t / "plain"],
     "not a model directory (no distill.json, the card of a model distill wrote, nor config.json"),
    ("malformed-hub-spec", lambda t, te, st: student_on("hub:rotten_tomatoes", t / "out"),
     "hub datasets are written hub:NAME[:CONFIG]:SPLIT"),
    # a path through a link to itself: Path.resolve's RuntimeError ('Symlink loop from ...') was a traceback
    ("output-through-a-link-loop", lambda t, te, st: student_on(TRAIN, link_loop(t) / "out"), "loop/out: "),
    ("cache-dir-through-a-link-loop", lambda t, te, st: kd_with(te, t / "out", "--cache-dir", link_loop(t) / "c"),
     "loop/c: "),
    ("pseudo-label-output-through-a-link-loop", lambda t, te, st: [
        "pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output",
        link_loop(t) / "pl.jsonl"], "loop/pl.jsonl: "),
]


@pytest.mark.parametrize("build, fragment", [case[1:] for case in BAD_INPUT], ids=[case[0] for case in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_nothing_written(build, fragment, tmp_path, tiny_classifier_teacher,
                                                      tiny_student, capsys):
    before = set(tmp_path.rglob("*"))
    argv = build(tmp_path, tiny_classifier_teacher, tiny_student)
    inputs = set(tmp_path.rglob("*")) - before
    status, err = run_main(capsys, *argv)
    assert status == 2, err
    assert fragment in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert set(tmp_path.rglob("*")) - before == inputs, "bad input left output behind"


def test_paths_are_resolved_through_real_path():
    """Paths are made absolute and their links followed through `distill.io.real_path`: Path.resolve raises
    RuntimeError on a link loop ('Symlink loop from ...', a traceback) where os.path.realpath leaves the path for the
    file system to refuse in one line where it is used. A call on a module's own `__file__` is the one exception."""
    import ast
    root = Path(__file__).resolve().parents[1]
    calls = []
    sources = [path for package in ("distill", "procedures", "scripts") for path in (root / package).rglob("*.py")]
    for source in sorted(sources):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "resolve" and \
                    "__file__" not in ast.unparse(node.func.value):
                calls.append(f"{source.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    assert calls == [], "use distill.io.real_path:\n" + "\n".join(calls)


EMPTY = "is an empty or blank path, which names no file or folder (as a path, '' is the current folder): give one"


@pytest.mark.parametrize("build, named", [
    (lambda te: kd_with(te, ""), "'--output'"),  # trained a student into the working folder
    (lambda te: ["pseudo-label", "--teacher", te, "--input", SAMPLES / "unlabeled_movies.txt", "--output", ""],
     "'--output'"),  # a ValueError traceback (PosixPath('.') has an empty name)
    (lambda te: ["export", te, "--output", " "], "'--output'"),
    (lambda te: kd_with(te, "out", "--cache-dir", ""), "'--cache-dir'"),  # checked the working folder, used the default
    (lambda te: ["evaluate", "", SAMPLES / "sentiment_test.csv"], "'MODEL_DIR'"),
    (lambda te: kd_with(te, "out", "--teacher", ""), "'--teacher'"),
    # a data file given '': "': is a directory, expected a file" (the working folder, read as data)
    (lambda te: ["kd", "--teacher", te, *SMALL_LSTM, "--train", "", "--dev", DEV, "--output", "out"], "'--train'"),
    (lambda te: ["kd", "--teacher", te, *SMALL_LSTM, "--train", TRAIN, "--dev", " ", "--output", "out"], "'--dev'"),
    (lambda te: ["pseudo-label", "--teacher", te, "--input", "", "--output", "out.jsonl"], "'--input'"),
    (lambda te: ["predict", te, ""], "'[INPUT_FILE]'"),
    (lambda te: ["evaluate", te, " "], "'DATA_FILE'"),
    (lambda te: ["export", te, "--output", "out", "--check-data", ""], "'--check-data'"),
])
def test_an_empty_path_is_refused_not_read_as_the_working_folder(build, named, tmp_path, tiny_classifier_teacher,
                                                                 capsys, monkeypatch):
    """`--output "$OUT"` with the variable unset: the path '' is the working folder to the file system."""
    monkeypatch.chdir(tmp_path)
    status, err = run_main(capsys, *build(tiny_classifier_teacher))
    assert status == 2 and f"Invalid value for {named}: " in err and EMPTY in err, err
    assert len(err.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []
