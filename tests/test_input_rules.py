"""Input that is accepted but makes the numbers meaningless, only looks valid, is named in another
caller's words, or is reported by numbers that mislead: each class refused or worded as its reader knows it."""

from __future__ import annotations

import functools

import pytest
import torch

from distill import losses
from distill.distillation import TeacherStudentDistill
from distill.errors import DistillError, on_command_line
from tests.conftest import DEV, SAMPLES, TRAIN, kd_with, run_main, student_on, tagger_on, with_option


def run_cli(*args) -> tuple[int, str]:
    """nlp-train in-process: its exit status and what it wrote to stderr."""
    import contextlib
    import io

    from procedures.cli import main
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    return exit_info.value.code, stderr.getvalue()


# -- settings that make the numbers meaningless ---------------------------------------------------------------

def centred_limit(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """T^2 * KL's limit as T grows: half the mean squared difference of the centred logits, in float64."""
    d = (teacher - student).double()
    return 0.5 * ((d - d.mean(-1, keepdim=True)) ** 2).mean(-1).mean()


def assert_worded_for_caller(cases: list) -> None:
    """Each (call, python, command_line) refusal names settings as a Python caller writes them, with no
    option in sight, and as options under `on_command_line`."""
    for call, python, command_line in cases:
        with pytest.raises(DistillError) as err:
            call()
        assert python in str(err.value) and "--" not in str(err.value), str(err.value)
        with on_command_line(), pytest.raises(DistillError) as err:
            call()
        assert command_line in str(err.value), str(err.value)


@pytest.mark.parametrize("temperature", [1e3, 1e5, 1e6, 1e9, 1e12])
def test_a_large_temperature_gives_the_kl_term_not_rounding_noise(temperature):
    generator = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(32, 5, generator=generator) * 3, torch.randn(32, 5, generator=generator) * 3
    expected = centred_limit(student, teacher).item()  # within 1e-5 of T^2 * KL for T >= 1e3 at this scale
    assert losses.kl_distill(student, teacher, temperature).item() == pytest.approx(expected, rel=1e-4)
    two = torch.randn(32, 2, generator=generator) * 3
    one = (two[:, 1] - two[:, 0]).unsqueeze(1)  # a one-logit student: the two-class KL of [0, s]
    expected = centred_limit(losses.two_class_logits(one), teacher[:, :2]).item()
    assert losses.binary_kl_distill(one, teacher[:, :2], temperature).item() == pytest.approx(expected, rel=1e-4)
    student.requires_grad_(True)
    losses.kl_distill(student, teacher, temperature).backward()
    s, t = student.detach().double(), teacher.double()
    if temperature <= 1e6:  # d/ds of T^2 KL is T (q - p), which float64 resolves this far
        exact = temperature * (torch.softmax(s / temperature, -1) - torch.softmax(t / temperature, -1)) / len(s)
    else:  # and beyond, its limit: the centred difference over the classes
        exact = (s - t - (s - t).mean(-1, keepdim=True)) / 5 / len(s)
    assert torch.allclose(student.grad.double(), exact, rtol=1e-4, atol=1e-5 * exact.abs().max().item())


def test_a_temperature_beyond_what_float32_resolves_is_refused_with_the_reason(tiny_classifier_teacher, tmp_path):
    TeacherStudentDistill(temperature=losses.MAX_TEMPERATURE)
    with pytest.raises(DistillError, match=r"temperature must be at most 1e\+12, got 1e\+13: .*float32"):
        TeacherStudentDistill(temperature=1e13)
    from conftest import SAMPLES
    status, stderr = run_cli("kd", "--teacher", tiny_classifier_teacher, "--model", "cnn", "--train",
                             SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
                             "--output", tmp_path / "student", "--temperature", "1e20", "--quiet")
    assert status == 2 and stderr.startswith("error: temperature must be at most 1e+12") and "Traceback" not in stderr


# -- input that only looks valid ------------------------------------------------------------------------------

@pytest.mark.parametrize("label", ["/Physics", "Science/", "Science//Physics", "Science/ /Physics"])
def test_a_hierarchical_label_with_an_empty_level_is_refused_where_it_is(tmp_path, label):
    """'/a' trained a level-0 class named '', 'a//b' a deeper hierarchy than meant, silently."""
    from distill.data import DataOptions, labelled_examples
    path = tmp_path / "train.csv"
    path.write_text(f"text,label\ngood film,Arts/Film\nnew stars,{label}\n", encoding="utf-8")
    with pytest.raises(DistillError, match=rf"train.csv:3: label '{label}' has an empty level \(split at '/': .*"
                                           r"read them flat with DataOptions\(separator=None\)$"):
        labelled_examples(str(path), "classification", DataOptions(), "train")
    with pytest.raises(DistillError, match=rf"^train: example 1: label '{label}' has an empty level"):
        labelled_examples((["good film", "new stars"], ["Arts/Film", label]), "classification", DataOptions(), "train")
    with on_command_line(), pytest.raises(DistillError, match=r"read them flat with --label-separator ''$"):
        labelled_examples(str(path), "classification", DataOptions(), "train")
    flat = labelled_examples(str(path), "classification", DataOptions(separator=None), "train")
    assert flat.labels == ["Arts/Film", label.strip()]  # flat labels may hold the character


def test_a_hierarchical_label_with_an_empty_level_stops_the_cli(tmp_path):
    from conftest import SAMPLES
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"text {i},{'Arts/Film' if i % 2 else 'Arts//Music'}\n"
                                              for i in range(8)), encoding="utf-8")
    status, stderr = run_cli("student", "--model", "ngram", "--train", train, "--dev", SAMPLES / "sentiment_dev.csv",
                             "--output", tmp_path / "out", "--quiet")
    assert status == 2 and stderr.startswith(f"error: {train}:2: label 'Arts//Music' has an empty level") \
        and stderr.rstrip().endswith("read them flat with --label-separator ''")


@pytest.mark.parametrize("content, message", [
    # a lone no-break space written as the word: split() drops it, leaving one field
    ("Mina B-PER\n\u00a0 O\n", r"t.conll:2: expected 2 fields like the first line, found 1: the line holds "
                                r"U\+00A0 NO-BREAK SPACE, a Unicode space, read as a separator, not a field"),
    ("Mina B-PER\nspoke\u3000\u3000\n", r"t.conll:2: expected 2 fields like the first line, found 1: the line holds "
                                        r"U\+3000 IDEOGRAPHIC SPACE, a Unicode space"),
    ("\u00a0 O\nMina B-PER\n", r"t.conll:1: tag column -1 is the word itself \(lines have 1 field\); .*: the line "
                               r"holds U\+00A0 NO-BREAK SPACE, a Unicode space"),
    # a zero-width character is no space to split(): a tag of one alone was a class no one sees
    ("Mina B-PER\nspoke \u2060\n", r"t.conll:2: the tag is only U\+2060 WORD JOINER, which shows nothing"),
])
def test_a_conll_field_of_only_invisible_characters_is_named(tmp_path, content, message):
    from distill.data import read_tagging
    path = tmp_path / "t.conll"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DistillError, match=message):
        read_tagging(str(path))
    path.write_text("Mina B-PER\n\u200b O\nspoke O\n", encoding="utf-8")  # a word may show nothing: no sub-token
    assert read_tagging(str(path))["tokens"] == [["Mina", "\u200b", "spoke"]]  # reads it, and it gets no loss


@pytest.mark.parametrize("name, content, message", [
    ("c.csv", "text,label\n\u00a0,pos\n", r"c.csv:2: the text in column 'text' is only U\+00A0 NO-BREAK SPACE"),
    ("c.csv", "text,label\ngood,\u200b\n", r"c.csv:2: the label in column 'label' is only U\+200B ZERO WIDTH SPACE"),
    ("c.jsonl", '{"text": "\\u200b\\u200d", "label": "pos"}\n',
     r"c.jsonl:1: the text in column 'text' is only U\+200B ZERO WIDTH SPACE, U\+200D ZERO WIDTH JOINER"),
    ("c.csv", "text,label\n\u3164,pos\n", r"c.csv:2: the text in column 'text' is only U\+3164 HANGUL FILLER"),
    ("t.jsonl", '{"tokens": ["Mina", "spoke"], "tags": ["B-PER", "\\ufeff"]}\n',
     r"t.jsonl:1: tag 2 is only U\+FEFF ZERO WIDTH NO-BREAK SPACE"),
])
def test_any_field_of_only_invisible_characters_is_refused_naming_them(tmp_path, name, content, message):
    """The same rule for a text, a label or a tag that shows nothing (a word may: it gets a tag, and no loss)."""
    from distill.data import read_classification, read_tagging
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DistillError, match=message + ", which shows nothing"):
        (read_tagging if name.startswith("t") else read_classification)(str(path))


# -- messages in the caller's words ---------------------------------------------------------------------------

def test_save_pretrained_names_the_overwrite_argument_and_the_cli_its_option(tmp_path):
    from distill.labels import LabelHierarchy
    from distill.trainers import new_student
    model = new_student("cnn", LabelHierarchy(["neg", "pos"]), ["a fine film", "dull"], 0)
    saved = model.save_pretrained(tmp_path / "model")
    with pytest.raises(DistillError, match=r"already holds a student model \(cnn, classification\); pass "
                                           r"overwrite=True to replace it"):
        model.save_pretrained(saved)
    with on_command_line(), pytest.raises(DistillError, match="; pass --overwrite to replace it"):
        model.save_pretrained(saved)  # one check, as the CLI's outputs are checked
    (saved / "resume.pt").write_bytes(b"")
    with pytest.raises(DistillError, match="continue it with resume=True, or start over with overwrite=True"):
        model.save_pretrained(saved)


def test_data_given_in_memory_is_named_by_its_role_not_its_digest():
    from distill import Runtime, TrainSettings, train_student
    train = (["a fine film", "dull", "long and dull", "fine"], ["pos", "neg", "neg", "pos"])
    with pytest.raises(DistillError) as err:
        train_student("cnn", train, (["new"], ["unsure"]), TrainSettings(epochs=1),
                      env=Runtime(device="cpu", threads=1, progress=False))
    assert str(err.value).startswith("dev: label 'unsure' is not one of the model's labels") and "memory:" not in str(err.value)


@pytest.mark.parametrize("value, kind", [({"a": 1}, "a JSON object"), ([1], "a list"), (5, "a number"),
                                         (True, "true")])
def test_a_json_value_is_named_as_json_names_it(tmp_path, value, kind):
    import json

    from distill.data import read_unlabeled
    path = tmp_path / "u.jsonl"
    path.write_text(json.dumps({"text": value}) + "\n", encoding="utf-8")
    with pytest.raises(DistillError, match=rf"u.jsonl:1: 'text' must be a text \(a string\), got {kind}$"):
        read_unlabeled(str(path), "classification")


# -- numbers that mislead -------------------------------------------------------------------------------------

def test_a_share_never_rounds_to_none_or_all():
    from distill.truncation import share
    assert [share(2, 8000), share(7999, 8000), share(1, 3), share(8000, 8000), share(0, 8)] == \
        ["<0.1%", ">99.9%", "33.3%", "100.0%", "0.0%"]


def test_kd_warns_of_truncation_only_for_the_texts_its_teacher_reads(tiny_classifier_teacher, tmp_path, caplog):
    """Every kd run warned of the whole transfer set, also when every teacher output came from the cache."""
    import csv
    import logging

    from conftest import SAMPLES
    with open(SAMPLES / "sentiment_train.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    long = " ".join(row["text"] for row in rows)  # far beyond the teacher's 64 sub-tokens
    train = tmp_path / "train.csv"
    with open(train, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("text", "label"), *[(row["text"], row["label"]) for row in rows[:12]],
                                      (long, rows[0]["label"])])
    unlabeled = tmp_path / "more.txt"
    unlabeled.write_text("a film\n" + long[:2000] + "\n", encoding="utf-8")

    def kd(output: str) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="distill"):
            status, stderr = run_cli("kd", "--teacher", tiny_classifier_teacher, "--model", "ngram", "--train", train,
                                     "--dev", SAMPLES / "sentiment_dev.csv", "--unlabeled", unlabeled, "--output",
                                     tmp_path / output, "--cache-dir", tmp_path / "cache", "--epochs", "1", "--quiet")
        assert status == 0, stderr
        return [r.getMessage() for r in caplog.records if "sub-tokens the teacher reads" in r.getMessage()]

    first = kd("first")  # each file named with its own count
    assert [message.split(" are longer")[0] for message in first] == \
        [f"warning: {train}: 1 of 13 texts (7.7%)", f"warning: {unlabeled}: 1 of 2 texts (50.0%)"]
    assert kd("second") == []  # every output from the cache: the teacher reads nothing


def test_compare_says_how_many_examples_it_scored_and_the_batch_size_of_its_speeds(tmp_path):
    """--limit 300 scored the first 300 examples, and the table said neither that nor the batch size."""
    from conftest import SAMPLES
    from distill.compare import compare_models, format_table
    from distill.labels import LabelHierarchy
    from distill.trainers import new_student
    model = new_student("ngram", LabelHierarchy(["negative", "positive"]), ["a fine film", "dull"], 0)
    model.save_pretrained(tmp_path / "model")
    data = SAMPLES / "sentiment_dev.csv"
    total = len(data.read_text(encoding="utf-8").splitlines()) - 1
    limited = format_table(compare_models([str(tmp_path / "model")], str(data), batch_size=8, limit=5))
    assert limited.splitlines()[-1] == f"score on the first 5 of {total} examples; ex/s at batch size 8"
    whole = format_table(compare_models([str(tmp_path / "model")], str(data), batch_size=4))
    assert whole.splitlines()[-1] == f"score on all {total} examples; ex/s at batch size 4"


# -- every module's messages in the caller's words ------------------------------------------------------------

def test_a_python_caller_is_told_the_arguments_and_the_command_line_its_options(tmp_path):
    """Messages reachable from the Python API told a caller to 'pass --overwrite' or 'set --layers 2'."""
    from distill import Output
    from distill.export import export_model
    from distill.io import load_sealed, save_sealed
    from distill.labels import LabelHierarchy, build_hierarchy
    from distill.models.multitask import with_head
    from distill.models.transformer_student import kept_layers
    from distill.pseudo_label import pseudo_label
    from distill.trainers import new_student
    state = tmp_path / "state.pt"
    save_sealed(state, {"epoch": torch.tensor(1)})
    state.write_bytes(state.read_bytes().replace(b"epoch", b"epocH"))  # the stored checksum no longer matches
    model = new_student("cnn", LabelHierarchy(["neg", "pos"]), ["a fine film", "dull"], 0)
    given = str(model.save_pretrained(tmp_path / "model"))
    calls = [  # (call, the Python caller's words, the command line's)
        (lambda: load_sealed(state), "start over with overwrite=True", "start over with --overwrite"),  # io
        (lambda: Output("runs/x", overwrite=True, resume=True),  # trainers
         "resume=True continues the interrupted run and overwrite=True starts over: give one of them",
         "--resume continues the interrupted run and --overwrite starts over: give one of them"),
        (lambda: pseudo_label(given, "in.txt", str(tmp_path / "p.jsonl"), min_confidence=2),  # pseudo_label
         "min_confidence must be within [0, 1], got 2", "--min-confidence must be within [0, 1], got 2"),
        (lambda: pseudo_label(given, "in.txt", str(tmp_path / "p.jsonl"), resume=True, overwrite=True),
         "resume=True continues the interrupted run and overwrite=True", "--resume continues the interrupted run"),
        (lambda: export_model(given, str(tmp_path / "e"), quantize="int8"),  # export
         "quantize='int8' needs check_data: held-back", "--quantize int8 needs --check-data: held-back"),
        (lambda: export_model(given, str(tmp_path / "e"), format="safetensors", quantize="int8"),
         "quantize='int8': only int8, and only with format='onnx'", "--quantize int8: only int8, and only with "
                                                                   "--format onnx"),
        (lambda: kept_layers("0,2", 3, 6),  # models
         "keeps 2 layers, not 3: set TransformerStudentConfig(layers=2)", "keeps 2 layers, not 3: set --layers 2"),
        (lambda: with_head(model, "ner", given), f"{given}: head='ner': not a multi-task teacher",
         f"{given}: --head ner: not a multi-task teacher"),
        (lambda: build_hierarchy("tagging", [["O", "O"]], None, "t.conll"),  # labels
         "there is nothing to tag (wrong DataOptions(tag_column=...)?)", "nothing to tag (wrong --tag-column?)"),
    ]
    assert_worded_for_caller(calls)


def test_the_teachers_and_the_layer_terms_messages_name_their_settings(tiny_encoder_dir, tiny_classifier_teacher):
    from distill.distillation import LayerObjective, TeacherStudentDistill
    from distill.labels import LabelHierarchy
    from distill.models import load_model
    from distill.models.teacher import Teacher, TeacherConfig
    from distill.trainers import new_student
    hierarchy = LabelHierarchy(["negative", "positive"])
    with pytest.raises(DistillError, match=r"^TeacherConfig\(max_length=512\) is more than the 128 positions"):
        Teacher.from_encoder(TeacherConfig(encoder=tiny_encoder_dir, max_length=512), hierarchy)
    teacher, student = load_model(tiny_classifier_teacher), new_student("cnn", hierarchy, ["a film"], 0)
    loss = TeacherStudentDistill(hidden_weight=1.0)
    with pytest.raises(DistillError, match=r"^the layer terms \(hidden_weight, attention_weight, cosine_weight\) "
                                           "compare transformer layers: the student must be"):
        LayerObjective(loss, teacher, student, ["a film"])
    with on_command_line(), pytest.raises(DistillError, match=r"^the layer terms \(--hidden-weight, "
                                                              "--attention-weight, --cosine-weight\\) compare"):
        LayerObjective(loss, teacher, student, ["a film"])


def test_the_truncation_warning_names_the_settings_as_the_caller_knows_them(tiny_classifier_teacher):
    from distill.models import load_model
    from distill.truncation import Truncation, truncation_message
    teacher, counted = load_model(tiny_classifier_teacher), Truncation(4, 2, 200, 80)
    python = truncation_message(teacher, counted, "train")
    assert "the teacher reads (max_length=64)" in python and python.endswith(
        "a teacher trained with long_inputs='windows' (or a larger max_length) reads them whole")
    with on_command_line():
        assert truncation_message(teacher, counted, "train").endswith(
            "a teacher trained with --long-inputs windows (or a larger --max-length) reads them whole")


def test_the_command_line_names_its_options_where_the_library_checks(tmp_path):
    from distill.labels import LabelHierarchy
    from distill.trainers import new_student
    model = new_student("cnn", LabelHierarchy(["neg", "pos"]), ["a fine film", "dull"], 0)
    model.save_pretrained(tmp_path / "model")
    status, stderr = run_cli("export", tmp_path / "model", "--output", tmp_path / "e", "--quantize", "int8")
    assert status == 2 and stderr.startswith("error: --quantize int8 needs --check-data: held-back"), stderr


def test_data_given_in_memory_is_named_by_its_role_and_head():
    """check_held_out said 'the dev data', and every head of a multi-task teacher said 'dev'."""
    from distill import Runtime, TaskData, TrainSettings, train_multitask_teacher, train_student
    env = Runtime(device="cpu", threads=1, progress=False)
    train = (["a fine film", "dull", "long and dull", "fine"], ["pos", "neg", "neg", "pos"])
    with pytest.raises(DistillError, match=r"^dev: 100% of its examples are also in the training data"):
        train_student("cnn", train, train, TrainSettings(epochs=1), env=env)
    topics = (["rain today", "the match", "more rain", "a goal"], ["weather", "sport", "weather", "sport"])
    with pytest.raises(DistillError, match=r"^head polarity's dev: label 'unsure' is not one of the model's labels"):
        train_multitask_teacher([TaskData("topic", "classification", topics, (["rain again"], ["weather"])),
                                 TaskData("polarity", "classification", train, (["new"], ["unsure"]))], env=env)


def test_no_message_hard_codes_an_option():
    """A message that names a command-line option (--overwrite) gives a Python caller the argument instead,
    through `distill.errors.option`: every string in distill/ that reads as an option (outside docstrings, and
    other than pip's) is an argument of an `option(...)` call. The students' field helper, also named `option`,
    holds the options' own spellings (flag="--crf"), as the settings spine's `setting(option="--warmup-ratio")` and
    its metadata dicts (``{"option": ..., "help": ...}``) do."""
    import ast
    import re
    from pathlib import Path

    flag = re.compile(r"(?<![\w-])--[a-z][\w-]*")
    others = {"--no-deps", "--experiment-id", "--nproc-per-node"}  # pip's, mlflow's, torchrun's

    def strings(node: ast.AST, docstrings: set[int]):
        if isinstance(node, ast.Call) and {"option", "setting"} & {getattr(node.func, "id", None),
                                                                 getattr(node.func, "attr", None)}:
            return
        if isinstance(node, ast.Dict):  # a field's option metadata (`setting(**CACHE_DIR_OPTION)`): its help
            for key, value in zip(node.keys, node.values):
                if not (isinstance(key, ast.Constant) and key.value in ("help", "option")):
                    yield from strings(value, docstrings)
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node
        for child in ast.iter_child_nodes(node):
            yield from strings(child, docstrings)

    hard_coded = []
    for source in sorted((Path(__file__).parents[1] / "distill").glob("**/*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        hard_coded += [f"{source.name}:{node.lineno}: {node.value!r:.80}" for node in strings(tree, docstrings)
                       if set(flag.findall(node.value)) - others]
    assert not hard_coded, "options named outside distill.errors.option:\n" + "\n".join(hard_coded)


# -- numbers that mislead: pseudo-label's truncation warning --------------------------------------------------

def test_pseudo_label_warns_of_truncation_only_for_the_texts_its_teacher_reads(tiny_classifier_teacher, tmp_path,
                                                                               caplog):
    """A second pseudo-label run over a corpus whose logits the cache holds warned of every text again, and a
    resumed run of the lines the interrupted run had labelled."""
    import csv
    import json
    import logging

    from conftest import SAMPLES
    from distill.pseudo_label import pseudo_label, run_signature, signature_path
    with open(SAMPLES / "sentiment_train.csv", newline="", encoding="utf-8") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)][:12]
    long = " ".join(texts)  # far beyond the teacher's 64 sub-tokens
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join([*texts[:6], long, texts[0], long]) + "\n", encoding="utf-8")

    def label(output: str, *options) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="distill"):
            status, stderr = run_cli("pseudo-label", "--teacher", tiny_classifier_teacher, "--input", corpus,
                                     "--output", tmp_path / output, "--cache-dir", tmp_path / "cache", "--quiet",
                                     "--chunk-size", "4", *options)
        assert status == 0, stderr
        return [r.getMessage() for r in caplog.records if "sub-tokens the teacher reads" in r.getMessage()]

    first, = label("first.jsonl")  # a text given twice (in two chunks) is read once: the second comes cached
    assert f"{corpus}: 1 of 7 texts (14.3%) are longer" in first
    assert label("second.jsonl") == []  # every output from the cache: the teacher reads nothing
    with open(corpus, "a", encoding="utf-8") as handle:
        handle.write(f"more: {long}\nnew words\n")
    grown, = label("third.jsonl")  # the two new texts alone
    assert f"{corpus}: 1 of 2 texts (50.0%) are longer" in grown
    # a resumed run reads the lines after the resume alone: here the second copy of the long text
    full, output = tmp_path / "full.jsonl", tmp_path / "resumed.jsonl"
    corpus.write_text("\n".join([*texts[:6], long, texts[0], long]) + "\n", encoding="utf-8")
    pseudo_label(tiny_classifier_teacher, str(corpus), str(full), chunk_size=4, use_cache=False, progress=False)
    rows = full.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "resumed.jsonl.part").write_text("".join(rows[:7]), encoding="utf-8")  # killed inside line 5-8's chunk
    signature_path(output).write_text(json.dumps(run_signature(
        tiny_classifier_teacher, str(corpus), min_confidence=0.0, with_logits=False, batch_size=64, chunk_size=4)))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="distill"):
        pseudo_label(tiny_classifier_teacher, str(corpus), str(output), chunk_size=4, use_cache=False,
                     resume=True, progress=False)
    resumed, = [r.getMessage() for r in caplog.records if "sub-tokens the teacher reads" in r.getMessage()]
    # from the last whole chunk (line 4): lines 5 to 9, with both copies of the long text
    assert f"{corpus}: 2 of 5 texts (40.0%) are longer" in resumed and "(max_length=64)" in resumed
    assert output.read_text(encoding="utf-8") == "".join(rows)


# -- input that only looks valid: levels, lines and options that show or do nothing ----------------------------

@pytest.mark.parametrize("level", ["\u200b", "\ufeff", "\u2060\u200b"])
def test_a_hierarchy_level_that_shows_nothing_is_an_empty_level(tmp_path, level):
    """'Science/' + U+200B trained a level-1 class no one sees: str.strip keeps the format characters."""
    from distill.data import DataOptions, labelled_examples
    path = tmp_path / "train.csv"
    path.write_text(f"text,label\ngood film,Arts/Film\nnew stars,Science/{level}\n", encoding="utf-8")
    escaped = repr(f"Science/{level}")[1:-1].replace("\\", "\\\\")
    with pytest.raises(DistillError, match=rf"train.csv:3: label '{escaped}' has an empty level"):
        labelled_examples(str(path), "classification", DataOptions(), "train")
    with pytest.raises(DistillError, match=rf"^train: example 1: label '{escaped}' has an empty level"):
        labelled_examples((["good film", "new stars"], ["Arts/Film", f"Science/{level}"]), "classification",
                          DataOptions(), "train")


def test_labels_given_in_a_list_are_named_without_a_column_and_evaluate_without_a_hierarchy():
    """An (examples, labels) pair has no columns, yet its labels were 'label in column 'label''; evaluate()
    advised DataOptions(separator=None), an argument it does not take, for a gold label the model lacks."""
    from distill.data import DataOptions, labelled_examples
    from distill.inference import evaluate
    from distill.labels import LabelHierarchy
    from distill.trainers import new_student
    texts = ["a fine film", "dull"]
    with pytest.raises(DistillError, match=r"^train: example 1: label must be a string or a finite number, got None"):
        labelled_examples((texts, ["pos", None]), "classification", DataOptions(), "train")
    with pytest.raises(DistillError, match=r"^train: example 1: the label is only U\+00A0 NO-BREAK SPACE"):
        labelled_examples((texts, ["pos", "\u00a0"]), "classification", DataOptions(), "train")
    with pytest.raises(DistillError, match=r"^train: example 0 at position 1: tag must be a string"):
        labelled_examples(([["Mina", "spoke"]], [["B-PER", None]]), "tagging", DataOptions(), "train")
    model = new_student("ngram", LabelHierarchy(["neg", "pos"]), texts, 0)
    with pytest.raises(DistillError) as err:
        evaluate(model, texts, ["neg", "pos/"])
    assert str(err.value).startswith("the gold labels: label 'pos/' is not one of the model's labels") \
        and "DataOptions" not in str(err.value)


def test_an_unlabeled_line_that_shows_nothing_is_a_blank_line_whatever_its_characters(tmp_path):
    """A line of U+00A0, U+3000 or spaces was skipped as blank, one of U+200B or U+FEFF stopped the run as
    'examples: example N is not a non-empty text', its N counting the texts the teacher read (so it shifted
    with the cache), naming no file or line."""
    from distill.data import iter_unlabeled, unlabeled_text
    lines = ["a fine movie", "\u200b", "\ufeff", "\u00a0", "\u3000", "  ", "\u200b \u2060", "bad film"]
    path = tmp_path / "u.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert list(iter_unlabeled(str(path), "classification")) == [(1, "a fine movie"), (8, "bad film")]
    assert list(iter_unlabeled(str(path), "tagging")) == [(1, ["a", "fine", "movie"]), (8, ["bad", "film"])]
    assert unlabeled_text("\n".join(lines), "classification") == ["a fine movie", "bad film"]
    records = tmp_path / "u.jsonl"
    records.write_text('{"text": "a fine movie"}\n\u200b\n{"text": "\\u200b"}\n', encoding="utf-8")
    with pytest.raises(DistillError, match=r"u.jsonl:3: the text in 'text' is only U\+200B ZERO WIDTH SPACE, "
                                           "which shows nothing"):
        list(iter_unlabeled(str(records), "classification"))


def test_a_setting_that_would_change_nothing_is_refused_in_the_library_and_on_the_command_line(
        tiny_classifier_teacher, tmp_path):
    """Accepted and ignored: min_confidence or unlabeled_ratio with no unlabeled text (the CLI alone refused
    them), a cache folder without a cache, class weights on a student loss of weight 0, and export's column
    options without --check-data."""
    from conftest import SAMPLES
    from distill import Distiller, Output, TrainSettings
    from distill.pseudo_label import pseudo_label
    train = (["a fine film", "dull", "long and dull", "fine"], ["positive", "negative", "negative", "positive"])
    dev = (["new"], ["positive"])
    cases = [
        (lambda: Distiller(tiny_classifier_teacher, "cnn", TeacherStudentDistill(min_confidence=0.5),
                           TrainSettings(epochs=1)).fit(train, dev, output=Output(tmp_path / "a")),
         "TeacherStudentDistill(min_confidence=...) applies to unlabeled text, and none was given: give "
         "fit(..., unlabeled=...)", "--min-confidence applies to unlabeled text, and none was given: give --unlabeled"),
        (lambda: Distiller(tiny_classifier_teacher, "cnn", unlabeled_ratio=0.5).fit(train, dev),
         "unlabeled_ratio applies to unlabeled text", "--unlabeled-ratio applies to unlabeled text"),
        (lambda: pseudo_label(tiny_classifier_teacher, str(SAMPLES / "unlabeled_movies.txt"), str(tmp_path / "p.jsonl"),
                              use_cache=False, cache_dir=str(tmp_path / "cache")),
         "use_cache=False reads and stores no cached logits: give it or a cache folder (cache_dir), not both",
         "--no-cache reads and stores no cached logits: give it or a cache folder (--cache-dir)"),
        (lambda: TeacherStudentDistill(student_weight=0, class_weights=[5.0, 1.0]),
         "class weights weight the student's loss on the labels, whose weight (student_weight) is 0",
         "whose weight (--student-weight) is 0"),
        (lambda: Distiller(tiny_classifier_teacher, "cnn", TeacherStudentDistill(student_weight=0), class_weights=[5, 1]),
         "whose weight (student_weight) is 0: they would change nothing", "(--student-weight) is 0"),
    ]
    assert_worded_for_caller(cases)
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # refused before anything is written
    model = tmp_path / "model"
    from distill.labels import LabelHierarchy
    from distill.trainers import new_student
    new_student("ngram", LabelHierarchy(["neg", "pos"]), ["a fine film", "dull"], 0).save_pretrained(model)
    status, stderr = run_cli("export", model, "--format", "safetensors", "--output", tmp_path / "e",
                             "--text-column", "body", "--tag-column", "2")
    assert status == 2 and "--text-column, --tag-column say where --check-data holds its texts and labels, and no " \
        "--check-data was given" in stderr and not (tmp_path / "e").exists(), stderr


def test_a_loss_setting_whose_term_is_off_is_refused_in_every_way(tiny_classifier_teacher, tmp_path):
    """--min-confidence with --student-weight 0, --teacher-mistakes with --distill-weight 0, and --teacher-layers
    with every layer term 0 trained the student of a run without them: refused by TeacherStudentDistill, so in
    Python (where --teacher-layers was accepted), on the command line and from a --config file alike."""
    from distill import LossSettings
    cases = [
        (lambda: TeacherStudentDistill(student_weight=0, min_confidence=0.5),
         "min_confidence drops unsure pseudo-labels from the student's loss on the labels, whose weight "
         "(student_weight) is 0", "--min-confidence drops unsure pseudo-labels"),
        (lambda: LossSettings(distill_weight=0, teacher_mistakes="drop").loss(),
         "teacher_mistakes drop changes the distillation term, whose weight (distill_weight) is 0",
         "--teacher-mistakes drop changes the distillation term, whose weight (--distill-weight) is 0"),
        (lambda: TeacherStudentDistill(teacher_layers=[0, 1]),
         "teacher_layers pairs the layers that the layer terms (hidden_weight, attention_weight, cosine_weight) "
         "compare, and all three are 0", "--teacher-layers pairs the layers that --hidden-weight"),
    ]
    assert_worded_for_caller(cases)
    TeacherStudentDistill(student_weight=0, distill_weight=1, min_confidence=0, teacher_mistakes="shift")
    TeacherStudentDistill(cosine_weight=1, teacher_layers="0,1")
    config = tmp_path / "kd.yaml"
    config.write_text("teacher-mistakes: shift\ndistill-weight: 0\n")
    status, stderr = run_cli(*kd_with(tiny_classifier_teacher, tmp_path / "out", "--config", config))
    assert status == 2 and stderr.startswith("error: --teacher-mistakes shift changes the distillation term") \
        and len(stderr.splitlines()) == 1 and not (tmp_path / "out").exists(), stderr
    status, stderr = run_cli(*kd_with(tiny_classifier_teacher, tmp_path / "out", "--student-weight", "0",
                                      "--min-confidence", "0.5", "--unlabeled", SAMPLES / "unlabeled_movies.txt"))
    assert status == 2 and "(--student-weight) is 0" in stderr and not (tmp_path / "out").exists(), stderr


@pytest.mark.parametrize("setting, value, message", [
    ("chunk_size", 0, "chunk_size must be a whole number from 1 to"), ("batch_size", 0, "batch_size must be a whole "
                                                                                       "number >= 1, got 0"),
    ("batch_size", 1.5, "batch_size must be a whole number >= 1, got 1.5"), ("chunk_size", True, "got True")])
def test_pseudo_label_counts_are_checked_in_python_as_on_the_command_line(setting, value, message,
                                                                         tiny_classifier_teacher, tmp_path):
    """The command line's --batch-size and --chunk-size took whole numbers >= 1, pseudo_label anything: chunk_size=0
    wrote an empty output as a success, and a cached teacher pass never ran the batch size it was given."""
    from distill.pseudo_label import pseudo_label
    label = functools.partial(pseudo_label, tiny_classifier_teacher, str(SAMPLES / "unlabeled_movies.txt"),
                              progress=False, cache_dir=str(tmp_path / "cache"))
    label(str(tmp_path / "first.jsonl"))  # the teacher's logits cached: no teacher pass to trip over the batch size
    with pytest.raises(DistillError, match=message):
        label(str(tmp_path / "p.jsonl"), **{setting: value})
    assert not (tmp_path / "p.jsonl").exists()


def test_a_chunk_beyond_what_a_slice_takes_is_refused_at_the_option(tiny_classifier_teacher, tmp_path):
    """Was: --chunk-size 10**30 passed the option and ended in islice's ValueError traceback."""
    status, stderr = run_cli("pseudo-label", "--teacher", tiny_classifier_teacher, "--input",
                             SAMPLES / "unlabeled_movies.txt", "--output", tmp_path / "p.jsonl", "--chunk-size",
                             str(10 ** 30), "--quiet")
    assert status == 2 and "--chunk-size" in stderr and "1<=x<=9223372036854775807" in stderr, stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("setting, value", [("limit", 0), ("limit", -3), ("batch_size", 1.5), ("batch_size", 0)])
def test_compare_counts_are_checked_in_python_as_on_the_command_line(setting, value, tiny_student):
    """--limit and --batch-size took whole numbers >= 1, compare_models anything: limit=0 scored every example and
    limit=-3 all but the last three, batch_size=1.5 ended in a TypeError traceback."""
    from distill.compare import compare_models
    from distill.data import DataOptions
    with pytest.raises(DistillError, match=rf"^{setting} must be a whole number >= 1, got {value}$"):
        compare_models([tiny_student], str(DEV), DataOptions(), **{"rounds": 1, setting: value})


@pytest.mark.parametrize("temperature", [1e-6, 1e-40, 5e-324])
def test_a_temperature_too_small_for_float32_is_refused_with_the_reason(temperature, tiny_classifier_teacher, tmp_path):
    """1e-6 turned distillation off in silence (the loss matched --distill-weight 0 to 7 digits); 1e-40 trained an
    epoch, then blamed the learning rate for a NaN."""
    TeacherStudentDistill(temperature=losses.MIN_TEMPERATURE)
    with pytest.raises(DistillError, match=rf"^temperature must be at least 0.001, got {temperature:g}: .*float32"):
        TeacherStudentDistill(temperature=temperature)
    from conftest import SAMPLES
    status, stderr = run_cli("kd", "--teacher", tiny_classifier_teacher, "--model", "cnn", "--train",
                             SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
                             "--output", tmp_path / "student", "--temperature", str(temperature), "--quiet")
    assert status == 2 and stderr.startswith("error: temperature must be at least 0.001") \
        and not (tmp_path / "student").exists(), stderr


def test_a_models_size_never_reads_zero(tmp_path, capsys):
    """A small student printed 'lstm: 3,370 parameters, 0.0 MB' for 19,664 bytes; compare's MB column too."""
    from conftest import SAMPLES
    from distill.compare import compare_models, format_table
    from distill.metrics import megabytes, size_text
    assert [size_text(19_664), size_text(99_949), size_text(550_000), megabytes(19_664), megabytes(0)] == \
        ["19.7 kB", "99.9 kB", "0.6 MB", "<0.1", "0.0"]
    status, _ = run_cli("student", "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "8", "--epochs", "1",
                        "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
                        "--output", tmp_path / "small", "--quiet")
    printed = capsys.readouterr().out
    assert status == 0 and " kB; best epoch 1" in printed and "0.0 MB" not in printed, printed
    row = format_table(compare_models([str(tmp_path / "small")], str(SAMPLES / "sentiment_dev.csv"))).splitlines()[1]
    assert "<0.1" in row.split() and "0.0" not in row.split(), row


def test_kd_names_only_the_files_whose_texts_its_teacher_read(tiny_classifier_teacher, tmp_path, caplog):
    """With the training texts cached, kd warned 'train.csv and more.txt: 1 of 2 texts' of the two unlabeled
    ones: the training file was named for texts that were not read from it."""
    import logging

    from conftest import SAMPLES
    unlabeled = tmp_path / "more.txt"
    unlabeled.write_text("a film\n" + "a long review of a film that goes on and on " * 40 + "\n", encoding="utf-8")

    def kd(output: str, *more) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="distill"):
            status, stderr = run_cli("kd", "--teacher", tiny_classifier_teacher, "--model", "ngram", "--train",
                                     SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
                                     "--output", tmp_path / output, "--cache-dir", tmp_path / "cache", "--epochs",
                                     "1", "--quiet", *more)
        assert status == 0, stderr
        return [r.getMessage() for r in caplog.records if "sub-tokens the teacher reads" in r.getMessage()]

    kd("first")  # caches the training texts' logits
    warned, = kd("second", "--unlabeled", unlabeled)
    assert warned.startswith(f"warning: {unlabeled}: 1 of 2 texts (50.0%) are longer"), warned


@pytest.mark.parametrize("content, line", [("Mina B-PER\n\u200b\nspoke O\n", 2), ("Mina B-PER\n\ufeff \nspoke O\n", 2),
                                           ("\u200b\nMina B-PER\n", 1)])
def test_a_conll_line_that_looks_blank_but_is_not_is_named(tmp_path, content, line):
    """A line of only U+200B or U+FEFF inside a sentence gave 'expected 2 fields like the first line (line 1),
    found 1', naming nothing on a line that looks blank."""
    from distill.data import read_tagging
    path = tmp_path / "t.conll"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DistillError, match=rf"t.conll:{line}: .*: the line is only U\+(200B ZERO WIDTH SPACE|FEFF "
                                           r"ZERO WIDTH NO-BREAK SPACE), which shows nothing in an editor but is not"):
        read_tagging(str(path))


def test_evaluate_refuses_a_column_option_its_models_data_never_reads(tiny_tagging_teacher, tmp_path):
    """evaluate --tag-column 2 of a classifier was accepted and did nothing; --text-column of a tagger too."""
    from conftest import SAMPLES
    from distill.labels import LabelHierarchy
    from distill.trainers import new_student
    classifier = tmp_path / "classifier"
    new_student("ngram", LabelHierarchy(["negative", "positive"]), ["a fine film", "dull"], 0).save_pretrained(
        classifier)
    status, stderr = run_cli("evaluate", classifier, SAMPLES / "sentiment_test.csv", "--tag-column", "2",
                             "--output", tmp_path / "m.json")
    assert status == 2 and stderr.startswith("error: --tag-column picks the CoNLL field of a tagging model's tags, "
                                             "and this model classifies texts"), stderr
    status, stderr = run_cli("evaluate", tiny_tagging_teacher, SAMPLES / "ner_test.conll", "--text-column", "words",
                             "--output", tmp_path / "m.json")
    assert status == 2 and stderr.startswith("error: --text-column names a classification model's columns, and this "
                                             "model tags words"), stderr
    assert not (tmp_path / "m.json").exists()
    status, stderr = run_cli("evaluate", tiny_tagging_teacher, SAMPLES / "ner_test.conll", "--tag-column", "-1",
                             "--output", tmp_path / "m.json")
    assert status == 0, stderr


@pytest.mark.parametrize("command", ["student", "kd"])
def test_class_weights_on_a_crf_tagger_are_refused(command, tiny_tagging_teacher, tmp_path, capsys):
    """A CRF's loss scores whole tag sequences: --class-weights trained the very model it trained without."""
    argv = ["student", "--model", "lstm-tagger"] if command == "student" else \
        ["kd", "--teacher", tiny_tagging_teacher, "--model", "lstm-tagger", "--random-embeddings"]
    argv += ["--crf", "--epochs", "1", "--embedding-dim", "8", "--hidden-dim", "8", "--quiet", "--train",
             SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll", "--output", tmp_path / "out"]
    status, err = run_main(capsys, *argv, "--class-weights", "inverse")
    assert status == 2 and "class weights do not apply to this model's loss (a CRF" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    assert run_main(capsys, *argv, "--class-weights", "none")[0] == 0


@pytest.mark.parametrize("extra, fragment", [
    (["--resume", "--overwrite"], "--resume continues the interrupted run and --overwrite starts over"),
    (["--online-teacher", "--cache-dir", "cache"], "an online teacher scores every batch and keeps no logit cache"),
    (["--unlabeled", SAMPLES / "unlabeled_movies.txt", "--unlabeled-ratio", "0.001"],
     "unlabeled ratio 0.001 keeps none of the 300 unlabeled examples"),
], ids=["resume-and-overwrite", "online-teacher-and-cache", "ratio-keeps-nothing"])
def test_kd_options_that_would_be_ignored_are_refused(extra, fragment, tiny_classifier_teacher, tmp_path, capsys):
    status, err = run_main(capsys, *kd_with(tiny_classifier_teacher, tmp_path / "kd", *extra))
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "kd").exists()


NUMBERS = [
    ("lr-nan", ["--lr", "nan"], "'--lr'"),
    ("lr-inf", ["--lr", "inf"], "'--lr'"),
    ("lr-above-one", ["--lr", "5"], "'--lr'"),
    ("dropout-one", ["--dropout", "1"], "'--dropout'"),
    ("seed-negative", ["--seed", "-1"], "'--seed'"),
    ("seed-too-big", ["--seed", str(2**40)], "'--seed'"),
    ("class-weights-nan", ["--class-weights", "1,nan"], "'--class-weights'"),
    ("class-weights-all-zero", ["--class-weights", "0,0"], "'--class-weights'"),
    ("max-vocab-one", ["--max-vocab", "1"], "'--max-vocab'"),
    ("crf-on-a-classifier", ["--crf"], "'--crf'"),
    ("both-loss-weights-zero", ["KD", "--student-weight", "0", "--distill-weight", "0"], "nothing to train on"),
    ("ratio-without-unlabeled", ["KD", "--unlabeled-ratio", "2"], "--unlabeled-ratio applies to unlabeled text"),
    ("min-confidence-without-unlabeled", ["KD", "--min-confidence", "0.5"], "--min-confidence applies to unlabeled"),
    ("temperature-with-mse", ["KD", "--kd-loss", "mse", "--temperature", "4"], "'--temperature'"),
    ("temperature-inf", ["KD", "--temperature", "inf"], "'--temperature'"),
    ("unlabeled-ratio-zero", ["KD", "--unlabeled", SAMPLES / "unlabeled_movies.txt", "--unlabeled-ratio", "0"],
     "'--unlabeled-ratio'"),
    ("model-too-large-for-memory", ["--hidden-dim", str(10**9)], "error: out of memory"),
]


@pytest.mark.parametrize("extra, fragment", [c[1:] for c in NUMBERS], ids=[c[0] for c in NUMBERS])
def test_nonsensical_numbers_are_refused_at_the_option(extra, fragment, tiny_classifier_teacher, tmp_path, capsys):
    out = tmp_path / "out"
    if extra[0] == "KD":
        argv = kd_with(tiny_classifier_teacher, out, *extra[1:])
    else:
        argv = with_option(student_on(TRAIN, out), *extra) if len(extra) == 2 else student_on(TRAIN, out) + extra
    status, err = run_main(capsys, *argv)
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("error", [
    MemoryError(), RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 4 GB"),
    RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("Storage size calculation overflowed with sizes=[4000000000, 1000000000]"),  # torch 2.11
])
def test_every_kind_of_failed_allocation_is_out_of_memory(error):
    """torch 2.11 (a GPU machine's) says a model too large for any memory as an overflow: it was a traceback."""
    from procedures.cli import out_of_memory
    assert out_of_memory(error) and not out_of_memory(RuntimeError("Expected all tensors to be on the same device"))


@pytest.mark.parametrize("repeated, message", [
    (["--head", "a", "--head", "b"], "--head is given twice: give it once"),
    (["--batch-size", "8", "--batch-size=16"], "--batch-size is given twice: give it once"),
])
def test_an_option_given_twice_is_refused_not_overridden(repeated, message, tiny_classifier_teacher, capsys):
    """click keeps the last value silently: `--head sent --head ner` scored `ner`."""
    status, err = run_main(capsys, "evaluate", tiny_classifier_teacher, DEV, *repeated)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err
    status, err = run_main(capsys, *student_on(TRAIN, "unused"), "--lowercase", "--cased")
    assert status == 2 and "--lowercase is given twice (as --lowercase and --cased)" in err, err
    status, err = run_main(capsys, "--threads", "1", "evaluate", tiny_classifier_teacher, DEV, "--threads", "2")
    assert status == 2 and "--threads is given twice: give it once" in err, err  # a global option, after the command


def test_binary_tagger_and_long_teacher_inputs_are_refused(tiny_encoder_dir, tmp_path, capsys):
    status, err = run_main(capsys, *tagger_on(SAMPLES / "ner_train.conll", tmp_path / "t"), "--binary")
    assert status == 2 and "'--binary'" in err
    status, err = run_main(capsys, "teacher", "--task", "classification", "--encoder", tiny_encoder_dir, "--train",
                           TRAIN, "--dev", DEV, "--output", tmp_path / "te", "--max-length", "512")
    assert status == 2 and "--max-length 512 is more than the 128 positions" in err, err
    assert not (tmp_path / "t").exists() and not (tmp_path / "te").exists()


def test_commands_that_score_a_trained_model_offer_no_label_separator(tiny_classifier_teacher, tmp_path, capsys):
    """The model's own label hierarchy reads the labels there: the option would be silently ignored."""
    for command in (["evaluate", tiny_classifier_teacher, DEV], ["compare", tiny_classifier_teacher, "--data", DEV]):
        status, err = run_main(capsys, *command, "--label-separator", ":")
        assert status == 2 and "No such option '--label-separator'" in err, err


@pytest.mark.parametrize("args", [
    ["--task", "tagging", "--train", SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll", "--pooling", "mean"],
    ["--task-spec", f"sentiment:classification:{TRAIN}:{DEV}",
     "--task-spec", f"ner:tagging:{SAMPLES / 'ner_train.conll'}:{SAMPLES / 'ner_dev.conll'}:pooling=first"]])
def test_a_pooling_choice_for_a_tagger_is_refused(tmp_path, capsys, args):
    """A tagger scores each word from its first sub-token: a pooling choice would be stored and never used."""
    status, err = run_main(capsys, "teacher", *args, "--output", tmp_path / "out", "--quiet")
    assert status == 2 and "is for classification: a tagger scores each word" in err
    assert not (tmp_path / "out").exists()
