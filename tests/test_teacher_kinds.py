"""The teacher-kind table (distill/models/kinds.py) through every command: each kind a command does not take is
refused by that command with the table's own line (exit 2, nothing written), never another message, a
traceback or a run that starts. What each kind works in is tested with the kind (test_onnx_teacher.py,
test_multitask.py, test_llm_teachers.py, test_hub_teacher.py, test_zero_shot.py)."""

from __future__ import annotations

import pytest

from distill.errors import DistillError, on_command_line
from distill.models import model_card
from distill.models.kinds import COMMANDS, KINDS, kind_of, refusal
from tests.conftest import SAMPLES, cli, copy_of, run_main
from tests.test_multitask import NER, SENTIMENT

TRAIN, DEV = SAMPLES / "sentiment_train.csv", SAMPLES / "sentiment_dev.csv"
UNLABELED = SAMPLES / "unlabeled_movies.txt"
# an ensemble and soft labels are no model source that a command line's one model could name: tested on their own
NOT_SOURCES = ("ensemble", "soft-labels")
# the kinds a command refuses somewhere: "teacher" and "student" (a transformer student) are taken everywhere
REFUSED = [(kind.name, command) for kind in KINDS for command in COMMANDS
           if command not in kind.takes and kind.name not in NOT_SOURCES]


@pytest.fixture(scope="module")
def sources(tiny_classifier_teacher, tiny_encoder_dir, tiny_hf_classifier, tiny_causal_lm, tmp_path_factory) -> dict:
    """A source of every kind of the table that some command refuses, and the ONNX export of the fine-tuned
    teacher (what --use-export is given)."""
    folder = tmp_path_factory.mktemp("kinds")
    cli("export", tiny_classifier_teacher, "--output", folder / "onnx")
    cli("teacher", "--encoder", tiny_encoder_dir, "--epochs", "1", "--max-length", "64", "--task-spec", SENTIMENT,
        "--task-spec", NER, "--output", folder / "multitask", "--quiet")  # both heads of a stock transformers form
    cli("export", folder / "multitask", "--format", "transformers", "--output", folder / "multitask-hf")
    cli("teacher", "--zero-shot", "--encoder", tiny_encoder_dir, "--labels", "negative,positive", "--output",
        folder / "zero-shot", "--quiet")
    cli("student", "--model", "cnn", "--embedding-dim", "8", "--train", TRAIN, "--dev", DEV, "--epochs", "1",
        "--output", folder / "word-student", "--quiet")
    for kind, teacher in (("transformers", tiny_hf_classifier), ("zero-shot", folder / "zero-shot")):
        cli("export", teacher, "--output", folder / f"{kind}-onnx")  # each one's export, for --use-export
    found = {"onnx": folder / "onnx", "multitask-transformers": folder / "multitask-hf",
             "multitask": folder / "multitask", "causal-lm": tiny_causal_lm, "served": "openai:tiny-model",
             "transformers": tiny_hf_classifier, "zero-shot": folder / "zero-shot",
             "transformers-onnx": folder / "transformers-onnx", "zero-shot-onnx": folder / "zero-shot-onnx",
             "word-student": folder / "word-student"}
    assert {kind for kind, _ in REFUSED} <= set(found)
    return {name: str(source) for name, source in found.items()}


def command_line(command: str, source: str, out, teacher: str, export: str) -> list:
    """`command` of the table run with `source` where that command takes its model (`out`: a path it would write)."""
    student = ["--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "8", "--train", TRAIN, "--dev", DEV]
    return {
        "kd": ["kd", "--teacher", source, *student, "--output", out],
        "pseudo-label": ["pseudo-label", "--teacher", source, "--input", UNLABELED, "--output", out],
        "evaluate": ["evaluate", source, DEV, "--output", out],
        "predict": ["predict", source, UNLABELED],
        "compare": ["compare", source, teacher, "--data", DEV],
        "search": ["search", "--teacher", source, "--train", TRAIN, "--dev", DEV, "--output", out, "--trials", "1"],
        "export onnx": ["export", source, "--format", "onnx", "--output", out],
        "export safetensors": ["export", source, "--format", "safetensors", "--output", out],
        "export transformers": ["export", source, "--format", "transformers", "--output", out],
        "export check-data": ["export", source, "--check-data", DEV, "--output", out],
        "embeddings-from-teacher": ["student", *student, "--embeddings-from-teacher", source, "--output", out],
        "use-export": ["pseudo-label", "--teacher", source, "--use-export", export, "--input", UNLABELED,
                       "--output", out],
    }[command]


@pytest.mark.parametrize("kind, command", REFUSED, ids=[f"{kind}-{command}" for kind, command in REFUSED])
def test_a_command_refuses_a_kind_it_does_not_take_with_the_tables_line(kind, command, sources,
                                                                        tiny_classifier_teacher, tmp_path, capsys):
    source = sources[kind]
    card = model_card(source)
    assert kind_of(card).name == kind
    with on_command_line():  # the table's line as the command line says it (--options, not arguments)
        # --check-data is an export's, --use-export pseudo-label's: a kind refused by both may be refused for either
        also = {"export check-data": "export onnx", "use-export": "pseudo-label"}.get(command)
        expected = {str(refusal(source, name, kind_of(card), card)) for name in (command, also)
                    if name and name not in kind_of(card).takes}
    out = tmp_path / "out"
    status, err = run_main(capsys, *command_line(command, source, out, tiny_classifier_teacher, sources["onnx"]))
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert err.strip().removeprefix("error: ") in expected, err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []


# Each kind a command takes, run through it on the samples (a served model needs its endpoint:
# test_llm_teachers.py serves one); the commands that train get one epoch and one trial.
# ("export check-data" takes an ONNX export as the export being scored, not as the model an export reads.)
TAKEN = [(kind.name, command) for kind in KINDS for command in COMMANDS
         if command in kind.takes and kind.name not in ("served", "teacher", "student", "word-student", *NOT_SOURCES)
         and (kind.name, command) != ("onnx", "export check-data")]


@pytest.mark.parametrize("kind, command", TAKEN, ids=[f"{kind}-{command}" for kind, command in TAKEN])
def test_a_command_takes_each_kind_the_table_says_it_takes(kind, command, sources, tiny_classifier_teacher,
                                                           tmp_path, capsys):
    source = sources[kind]
    out = tmp_path / ("out.jsonl" if command in ("pseudo-label", "use-export") else
                      "out.json" if command == "evaluate" else "out")
    argv = command_line(command, source, out, tiny_classifier_teacher, sources.get(f"{kind}-onnx", sources["onnx"]))
    argv += ["--epochs", "1"] if command in ("kd", "embeddings-from-teacher") else []
    argv += ["--head", "sentiment"] if kind == "multitask" and command in ("kd", "evaluate", "compare") else []
    argv += ["--labels", "negative,positive"] if kind == "causal-lm" and command != "embeddings-from-teacher" else []
    status, err = run_main(capsys, *argv)
    assert status == 0, err


def test_search_refuses_an_ensemble_and_soft_labels_by_the_table(tiny_classifier_teacher, tmp_path, capsys):
    """Was: `search --teacher A --teacher B` refused as "--teacher is given twice" (kd takes an ensemble so), and
    `search([A, B])` or `search(SoftLabels(FILE))` in Python as "['A', 'B']: model directory not found"; and
    `evaluate_model([A, B])` or `pseudo_label(SoftLabels(FILE))` a TypeError traceback, and
    `train_student(teacher_embeddings=[A, B])` an AttributeError one. The table's line now, nothing written."""
    from distill.evaluation import evaluate_model
    from distill.pseudo_label import pseudo_label
    from distill.soft_labels import SoftLabels
    from distill.student_search import search
    from distill.trainers import Output, train_student
    other = copy_of(tiny_classifier_teacher, tmp_path, "other")
    out, ensemble = tmp_path / "out", [tiny_classifier_teacher, str(other)]
    status, err = run_main(capsys, "search", "--teacher", tiny_classifier_teacher, "--teacher", other, "--train", TRAIN,
                           "--dev", DEV, "--output", out, "--trials", "1")
    assert status == 2 and err.strip() == f"error: {tiny_classifier_teacher}, {other}: search does not take an " \
        "ensemble of teachers; give one of its teachers: an ensemble teaches through kd and pseudo-label only", err
    soft = tmp_path / "soft.jsonl"
    soft.write_text('{"text": "a fine film", "probs": {"negative": 0.1, "positive": 0.9}}\n')
    for call, teacher, command, kind in [
            (lambda t: search(t, TRAIN, DEV, out, trials=1), ensemble, "search", "an ensemble of teachers"),
            (lambda t: search(t, TRAIN, DEV, out, trials=1), SoftLabels(soft), "search", "soft labels"),
            (lambda t: evaluate_model(t, DEV, output=str(out)), ensemble, "evaluate", "an ensemble of teachers"),
            (lambda t: pseudo_label(t, UNLABELED, out), SoftLabels(soft), "pseudo-label", "soft labels"),
            (lambda t: train_student("lstm", TRAIN, DEV, teacher_embeddings=t, output=Output(out)), ensemble,
             "train_student(teacher_embeddings=...)", "an ensemble of teachers")]:
        with pytest.raises(DistillError) as err:
            call(teacher)
        named = f"{tiny_classifier_teacher}, {other}" if isinstance(teacher, list) else str(soft)
        assert str(err.value).startswith(f"{named}: {command} does not take {kind}; "), err.value
    for other in (3, None):  # no model source at all: said so (was "3: model directory not found")
        with pytest.raises(DistillError, match=r"^a model is named by its folder, hub:NAME or openai:MODEL"):
            search(other, TRAIN, DEV, out, trials=1)
    assert not out.exists()


@pytest.mark.parametrize("kind", ["zero-shot", "transformers", "transformers-onnx", "onnx"])
def test_a_label_the_model_lacks_is_said_in_words_that_fit_every_kind(kind, sources, tmp_path, capsys):
    """Was: "label 'neutral' was not seen in training" (and "is spelt 'positive' in the training data") of a zero-shot
    teacher, a transformers classifier or an ONNX export, none trained on that data: the model's labels now."""
    for rows, said in [("a fine film,positive\na dull film,neutral\n",
                        "label 'neutral' is not one of the model's labels (known: negative, positive)"),
                       ("a fine film,Positive\na dull film,negative\n",
                        "label 'Positive' is spelt 'positive' in the model's labels; spell each label one way")]:
        data = tmp_path / "data.csv"
        data.write_text("text,label\n" + rows)
        status, err = run_main(capsys, "evaluate", sources[kind], data, "--output", tmp_path / "out.json", "--quiet")
        assert status == 2 and err.strip() == f"error: {data}: {said}", err
        assert not (tmp_path / "out.json").exists()
