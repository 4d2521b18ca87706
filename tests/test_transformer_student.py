"""Transformer students: layers cut from the teacher or another encoder, teacher-assistant chains."""

import json
import re

import pytest
import torch

from distill.errors import DistillError
from distill.inference import predict_logits
from distill.models import MODEL_CARD, load_model
from distill.models.registry import student_config
from distill.models.transformer_student import TransformerStudent, kept_layers
from distill.trainers import new_student
from tests.conftest import SAMPLES, run_main

SENTIMENT = ("--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv")
NER = ("--train", SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll")
QUICK = ("--epochs", "1", "--quiet", "--batch-size", "16")
TEXTS = ["a fine film", "dull , dull and far too long", "great"]
SENTENCES = [["Karl", "Weber", "visited", "Port", "Halden", "yesterday"], ["Unbelievably", "good"]]


def ok(capsys, *args) -> None:
    status, err = run_main(capsys, *args)
    assert status == 0, err


@pytest.mark.parametrize("layer_map, layers, depth, kept", [
    ("uniform", 3, 6, [0, 2, 4]), ("uniform", 6, 12, [0, 2, 4, 6, 8, 10]), ("uniform", 2, 6, [0, 3]),
    ("first", 2, 6, [0, 1]), ("last", 2, 6, [4, 5]), ("1,5", 2, 6, [1, 5]), ("uniform", 6, 6, list(range(6)))])
def test_kept_layers(layer_map, layers, depth, kept):
    assert kept_layers(layer_map, layers, depth) == kept


@pytest.mark.parametrize("layer_map, layers, depth, message", [
    ("uniform", 7, 6, "of 7 layers: its encoder has only 6"),
    ("0,2", 3, 6, r"keeps 2 layers, not 3: set TransformerStudentConfig\(layers=2\)$"),  # the API's words
    ("2,1", 2, 6, "increasing layer numbers from 0 to 5"), ("0,6", 2, 6, "from 0 to 5"),
    ("every other", 2, 6, "use uniform, first, last or layer numbers")])
def test_kept_layers_refuses(layer_map, layers, depth, message):
    with pytest.raises(DistillError, match=message):
        kept_layers(layer_map, layers, depth)


def copy_of_every_layer(teacher_dir: str, **settings) -> tuple:
    """The teacher of `teacher_dir`, a transformer student of all its (two) layers (and `settings`), and
    examples of its task."""
    teacher = load_model(teacher_dir)
    name = "transformer" if teacher.task == "classification" else "transformer-tagger"
    examples = TEXTS if teacher.task == "classification" else SENTENCES
    student = new_student(student_config(name, layers=2, **settings), teacher.hierarchy, examples, 0, teacher)
    return teacher, student.eval(), examples


@pytest.mark.parametrize("fixture", ["tiny_classifier_teacher", "tiny_tagging_teacher"])
def test_a_copy_of_every_teacher_layer_scores_as_the_teacher(request, fixture):
    """Embeddings, layers and head are the teacher's: with all its layers the student is the teacher."""
    teacher, student, examples = copy_of_every_layer(request.getfixturevalue(fixture))
    assert (student.config.sentence_pooling, student.config.max_length) == (teacher.config.pooling,
                                                                         teacher.config.max_length)
    ours, theirs = predict_logits(student, examples), predict_logits(teacher, examples)
    assert torch.allclose(ours.logits, theirs.logits, atol=1e-5)
    assert torch.equal(ours.scored, theirs.scored) if theirs.scored is not None else ours.scored is None


def test_a_transformer_student_reads_as_many_tokens_as_its_teacher_unless_told(tiny_classifier_teacher,
                                                                               tiny_other_encoder_dir):
    """A student that read 128 sub-tokens of a teacher's 256 would be taught on text it never sees."""
    teacher = load_model(tiny_classifier_teacher)
    assert teacher.config.max_length == 64

    def student(with_teacher: bool = True, **settings):
        return new_student(student_config("transformer", layers=1, **settings), teacher.hierarchy, TEXTS, 0,
                           teacher if with_teacher else None)
    lengths = [student().config.max_length, student(max_length=32).config.max_length,
               student(encoder=tiny_other_encoder_dir).config.max_length,
               student(False, encoder=tiny_other_encoder_dir).config.max_length]
    assert lengths == [64, 32, 64, 128]
    teacher.config.max_length = 512  # more than the other encoder's 128 positions: its most, not an error
    assert student(encoder=tiny_other_encoder_dir).config.max_length == 128
    with pytest.raises(DistillError, match=r"max_length must be 0 \(its teacher's\) or >= 8, got 4"):
        student_config("transformer", max_length=4)


def test_the_kept_layers_are_the_teachers(tiny_classifier_teacher):
    teacher = load_model(tiny_classifier_teacher)
    student = new_student(student_config("transformer", layers=1, layer_map="last"), teacher.hierarchy, TEXTS, 0,
                          teacher)
    assert student.encoder.config.num_hidden_layers == 1
    theirs, ours = teacher.encoder.state_dict(), student.encoder.state_dict()
    assert all(torch.equal(ours[k], theirs[k.replace("layer.0.", "layer.1.")]) for k in ours)
    assert torch.equal(student.network.classifier.weight, teacher.classifier.weight)
    assert student.parameter_count() < teacher.parameter_count()


def test_save_and_load_round_trip(tiny_classifier_teacher, tmp_path):
    teacher = load_model(tiny_classifier_teacher)
    student = new_student(student_config("transformer", layers=1), teacher.hierarchy, TEXTS, 0, teacher).eval()
    student.save_pretrained(tmp_path / "s")
    loaded = load_model(tmp_path / "s", expect="student")
    assert type(loaded) is TransformerStudent and loaded.config == student.config
    assert torch.equal(predict_logits(loaded, TEXTS).logits, predict_logits(student, TEXTS).logits)
    assert loaded.fingerprint() == student.fingerprint() != teacher.fingerprint()
    card = json.loads((tmp_path / "s" / MODEL_CARD).read_text())
    assert (card["model"], card["class"]) == ("transformer", "distill.models.transformer_student:TransformerStudent")
    on_disk = sorted(str(p.relative_to(tmp_path / "s")) for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert sorted(card["sha256"]) == [name for name in on_disk if name != MODEL_CARD]
    assert {"model.safetensors", "config.json", "encoder/config.json", "encoder/tokenizer.json"} <= set(card["sha256"])
    (tmp_path / "s" / "encoder" / "vocab.txt").write_text("[PAD]\n")  # a file the card does not list
    with pytest.raises(DistillError, match="not part of the model as saved"):
        load_model(tmp_path / "s")


@pytest.mark.parametrize("name, given, expected", [
    ("transformer", {}, (5e-5, 20, 2)), ("transformer-tagger", {}, (8e-5, 20, 2)), ("lstm", {}, (2e-3, 50, 4)),
    ("transformer", {"lr": 1e-4, "epochs": 3, "patience": 5}, (1e-4, 3, 5))])
def test_each_student_trains_by_its_own_defaults(name, given, expected):
    """Pretrained layers: the teacher's rate and patience (they peak within the first epochs); the word
    students' 50-epoch cap and patience 4 otherwise; a value the run gives is kept."""
    from distill.labels import LabelHierarchy
    from distill.trainers import student_settings
    from distill.training import TrainSettings
    task = "tagging" if name.endswith("tagger") else "classification"
    labels = LabelHierarchy(["O", "B-PER"] if task == "tagging" else ["negative", "positive"])
    settings = student_settings(TrainSettings(**given), name, task, labels)
    assert (settings.lr, settings.epochs, settings.patience) == expected


def test_classification_chain_teacher_transformer_bilstm(tiny_classifier_teacher, tmp_path, capsys):
    """teacher -> transformer student (kd, cached logits) -> BiLSTM (kd, the student as teacher) -> evaluate,
    predict, pseudo-label; each stage keys the logit cache by its own teacher's fingerprint."""
    cache = ("--cache-dir", tmp_path / "cache")
    ok(capsys, "kd", "--teacher", tiny_classifier_teacher, "--model", "transformer", "--layers", "1", *SENTIMENT,
       *QUICK, *cache, "--output", tmp_path / "ta")
    summary = json.loads((tmp_path / "ta" / "train_summary.json").read_text())
    assert summary["model"] == "transformer" and summary["settings"]["lr"] == 5e-5
    assert summary["settings"]["patience"] == 2
    assessor = load_model(tmp_path / "ta")
    assert assessor.encoder.config.num_hidden_layers == 1
    ok(capsys, "kd", "--teacher", tmp_path / "ta", "--model", "lstm", "--embedding-dim", "8", "--hidden-dim", "6",
       *SENTIMENT, *QUICK, *cache, "--output", tmp_path / "bilstm")
    assert json.loads((tmp_path / "bilstm" / "train_summary.json").read_text())["settings"]["lr"] == 2e-3
    assert json.loads((tmp_path / "bilstm" / "train_summary.json").read_text())["settings"]["patience"] == 4
    assert (tmp_path / "cache" / assessor.fingerprint()).is_dir()
    assert (tmp_path / "cache" / load_model(tiny_classifier_teacher).fingerprint()).is_dir()
    ok(capsys, "evaluate", tmp_path / "ta", SAMPLES / "sentiment_test.csv")
    ok(capsys, "pseudo-label", "--teacher", tmp_path / "ta", "--input", SAMPLES / "unlabeled_movies.txt",
       "--output", tmp_path / "pseudo.jsonl", *cache)
    first = json.loads((tmp_path / "pseudo.jsonl").read_text().splitlines()[0])
    assert first["label"] in ("negative", "positive")
    ok(capsys, "kd", "--teacher", tmp_path / "bilstm", "--model", "cnn", "--random-embeddings", "--filters", "4",
       "--embedding-dim", "8", *SENTIMENT, *QUICK, *cache, "--output", tmp_path / "cnn")
    ok(capsys, "compare", tmp_path / "ta", tmp_path / "bilstm", tmp_path / "cnn", "--data",
       SAMPLES / "sentiment_test.csv")


def test_tagging_chain_teacher_transformer_bilstm(tiny_tagging_teacher, tmp_path, capsys):
    cache = ("--cache-dir", tmp_path / "cache")
    ok(capsys, "kd", "--teacher", tiny_tagging_teacher, "--model", "transformer-tagger", "--layers", "1",
       "--max-length", "16", *NER, *QUICK, *cache, "--output", tmp_path / "ta")
    ok(capsys, "kd", "--teacher", tmp_path / "ta", "--model", "lstm-tagger", "--embedding-dim", "8",
       "--hidden-dim", "6", *NER, *QUICK, *cache, "--output", tmp_path / "bilstm")
    ok(capsys, "evaluate", tmp_path / "ta", SAMPLES / "ner_test.conll")
    ok(capsys, "pseudo-label", "--teacher", tmp_path / "ta", "--input", SAMPLES / "unlabeled_news.txt",
       "--output", tmp_path / "pseudo.jsonl", *cache)
    record = json.loads((tmp_path / "pseudo.jsonl").read_text().splitlines()[0])
    assert len(record["tags"]) == len(record["tokens"])


def test_another_encoder_as_the_student(tiny_tagging_teacher, tiny_other_encoder_dir, tmp_path, capsys):
    """A student on another tokenizer: tagging KD compares each word's first sub-token on both sides."""
    ok(capsys, "kd", "--teacher", tiny_tagging_teacher, "--model", "transformer-tagger", "--encoder",
       tiny_other_encoder_dir, "--layers", "2", "--layer-map", "0,2", *NER, *QUICK, "--cache-dir", tmp_path / "cache",
       "--output", tmp_path / "other")
    student, teacher = load_model(tmp_path / "other"), load_model(tiny_tagging_teacher)
    assert len(student.tokenizer) != len(teacher.tokenizer)
    assert student.encoder.config.hidden_size == 24 and student.encoder.config.num_hidden_layers == 2
    ours, theirs = predict_logits(student, SENTENCES), predict_logits(teacher, SENTENCES)
    assert ours.logits.shape == theirs.logits.shape and torch.equal(ours.scored, theirs.scored)


def test_a_student_without_a_teacher_cuts_a_pretrained_encoder(tiny_other_encoder_dir, tmp_path, capsys):
    ok(capsys, "student", "--model", "transformer", "--encoder", tiny_other_encoder_dir, "--layers", "1", *SENTIMENT,
       *QUICK, "--output", tmp_path / "s")
    student = load_model(tmp_path / "s")
    assert student.encoder.config.num_hidden_layers == 1 and student.config.sentence_pooling == "first"
    status, err = run_main(capsys, "student", "--model", "transformer", *SENTIMENT, *QUICK, "--output", tmp_path / "x")
    assert status == 2 and "a transformer student needs layers to start from" in err
    assert not (tmp_path / "x").exists()


def test_a_word_student_teacher_refuses_what_it_cannot_give(tmp_path, capsys):
    ok(capsys, "student", "--model", "cnn", "--filters", "4", "--embedding-dim", "8", *SENTIMENT, *QUICK,
       "--output", tmp_path / "cnn")
    common = ("kd", "--teacher", tmp_path / "cnn", *SENTIMENT, *QUICK, "--cache-dir", tmp_path / "cache")
    status, err = run_main(capsys, *common, "--model", "transformer", "--output", tmp_path / "t")
    assert status == 2 and "a transformer student copies a transformer's layers, and the teacher is a cnn" in err
    status, err = run_main(capsys, *common, "--model", "lstm", "--output", tmp_path / "l")
    assert status == 2 and "no sub-word embeddings to start word embeddings from: use --random-embeddings" in err


def test_students_are_listed_in_the_same_order_whatever_was_imported_first():
    """The order shows in --help and in errors: the built-in modules' order, not the import order."""
    from tests.test_api import run_python
    done = run_python("""
        import distill.models.transformer_student, distill.models.ngram
        from distill.models.registry import students
        print(list(students()))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(["lstm", "cnn", "lstm-tagger", "idcnn-tagger", "ngram", "static", "transformer",
                                       "transformer-tagger"])


def test_listing_the_students_does_not_import_transformers():
    """Loading a BiLSTM reads the registry, which lists the transformer students: that must stay light."""
    from tests.test_api import run_python
    done = run_python("""
        import sys
        from distill.models.registry import students
        print(sorted(students()), "transformers" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("'transformer', 'transformer-tagger'] False")


@pytest.mark.parametrize("fixture", ["tiny_classifier_teacher", "tiny_tagging_teacher"])
def test_hidden_state_term_is_zero_for_a_copy_of_the_teacher(request, fixture):
    """Every layer copied, same width: the student's mapped states are the teacher's, at sentence or word level."""
    from distill.distillation import LayerObjective, TeacherStudentDistill
    from distill.training import make_batch
    teacher, student, examples = copy_of_every_layer(request.getfixturevalue(fixture))
    loss = TeacherStudentDistill(hidden_weight=1.0)
    with LayerObjective(loss, teacher, student, examples) as objective:
        assert objective.pairs == [(0, 0), (1, 1)] and objective.parameters() == []
        batch = make_batch(student, examples, [None] * len(examples), list(range(len(examples))))
        terms = objective.terms(student, student(**batch["inputs"]), batch)
        assert len(terms) == 3 and terms[2].mean().item() == pytest.approx(0.0, abs=1e-8)
        assert terms[2].denominator.item() == 2 * 32 * (len(examples) if teacher.task == "classification" else 8)
    assert not student.network.encoder.transformer.layer[0]._forward_hooks  # taken off on leaving


@pytest.mark.parametrize("fixture", ["tiny_classifier_teacher", "tiny_tagging_teacher"])
def test_attention_term_is_zero_for_a_copy_of_the_teacher(request, fixture):
    """Every layer copied: the same attention head by head, over the real tokens; the recording attention
    scores as the encoder's own, which each encoder gets back on leaving."""
    from distill.distillation import LayerObjective, TeacherStudentDistill
    from distill.training import make_batch
    teacher = load_model(request.getfixturevalue(fixture))
    teacher, student, examples = copy_of_every_layer(request.getfixturevalue(fixture),
                                                     max_length=teacher.config.max_length)
    batch = make_batch(student, examples, [None] * len(examples), list(range(len(examples))))
    own = student(**batch["inputs"])
    with LayerObjective(TeacherStudentDistill(attention_weight=1.0), teacher, student, examples) as objective:
        assert student.encoder.config._attn_implementation == "distill-recording"
        logits = student(**batch["inputs"])
        terms = objective.terms(student, logits, batch)
        assert torch.allclose(logits, own, atol=1e-5)
        assert len(terms) == 3 and terms[2].mean().item() == pytest.approx(0.0, abs=1e-6)
        real_tokens = batch["inputs"]["attention_mask"].sum().item()
        assert terms[2].denominator.item() == 2 * 2 * real_tokens  # pairs x heads x real query tokens
    assert {model.encoder.config._attn_implementation for model in (teacher, student)} == {"sdpa"}


def test_attention_term_trains_the_students_attention(tiny_classifier_teacher):
    """One layer of two: its attention differs from the teacher's second layer's, and the term's gradient
    reaches the student's queries and keys."""
    from distill.distillation import LayerObjective, TeacherStudentDistill
    from distill.training import make_batch
    teacher = load_model(tiny_classifier_teacher)
    student = new_student(student_config("transformer", layers=1, max_length=teacher.config.max_length),
                          teacher.hierarchy, TEXTS, 0, teacher)
    with LayerObjective(TeacherStudentDistill(attention_weight=1.0), teacher, student, TEXTS) as objective:
        assert objective.pairs == [(0, 1)] and objective.parameters() == []
        batch = make_batch(student, TEXTS, [None] * len(TEXTS), [0, 1, 2])
        attention = objective.terms(student, student(**batch["inputs"]), batch)[2]
        assert attention.mean().item() > 1e-4
        attention.mean().backward()
    query = student.encoder.transformer.layer[0].attention.q_lin.weight
    assert query.grad is not None and query.grad.abs().sum() > 0


def test_attention_term_refuses_other_heads_and_an_encoder_computing_attention_itself(tiny_classifier_teacher,
                                                                                      tiny_encoder_dir):
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel, MPNetConfig, MPNetModel

    from distill.distillation import check_attention_term
    from distill.models.teacher import Teacher, TeacherConfig
    teacher = load_model(tiny_classifier_teacher)
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)

    def reading(encoder) -> Teacher:
        return Teacher(TeacherConfig(encoder=tiny_encoder_dir, max_length=64), teacher.hierarchy, encoder, tokenizer)
    four_heads = reading(DistilBertModel(DistilBertConfig(vocab_size=600, dim=32, n_layers=1, n_heads=4,
                                                          hidden_dim=32)))
    with pytest.raises(DistillError, match="the student has 4 attention heads a layer, the teacher 2"):
        check_attention_term(four_heads, teacher)
    mpnet = reading(MPNetModel(MPNetConfig(vocab_size=600, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                           intermediate_size=32)))
    with pytest.raises(DistillError, match=r"which MPNetModel does not use: set "
                                           r"TeacherStudentDistill\(attention_weight=0\)$"):
        check_attention_term(teacher, mpnet)


def test_kd_with_the_attention_term(tiny_classifier_teacher, tiny_other_encoder_dir, tmp_path, capsys):
    """It trains and saves a student that loads in a fresh process (the recording attention is not saved);
    where the tokens or heads cannot be compared it is refused in one line."""
    ok(capsys, "kd", "--teacher", tiny_classifier_teacher, "--model", "transformer", "--layers", "1",
       "--max-length", "64", "--attention-weight", "1", *SENTIMENT, *QUICK, "--output", tmp_path / "a")
    summary = json.loads((tmp_path / "a" / "train_summary.json").read_text())
    assert summary["kd"]["attention_weight"] == 1.0 and "hidden_weight" not in summary["kd"]
    assert "distill-recording" not in (tmp_path / "a" / "encoder" / "config.json").read_text()
    assert load_model(tmp_path / "a").encoder.config._attn_implementation == "sdpa"
    for extra, message in [(("--encoder", tiny_other_encoder_dir), "the student's tokenizer is not the teacher's"),
                           (("--max-length", "32"), "the student reads 32 sub-tokens, the teacher 64; set "
                                                     "--max-length 64")]:
        status, err = run_main(capsys, "kd", "--teacher", tiny_classifier_teacher, "--model", "transformer",
                               "--layers", "1", "--attention-weight", "1", *extra, *SENTIMENT, *QUICK,
                               "--output", tmp_path / "x")
        assert status == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("fixture", ["tiny_classifier_teacher", "tiny_tagging_teacher"])
def test_cosine_term_compares_the_last_layers(request, fixture):
    """Every layer copied: the last states point the same way (0); a student of one layer is compared on
    its last layer against the teacher's last, per sentence or per word, with no map at the same width."""
    from distill.distillation import LayerObjective, TeacherStudentDistill
    from distill.training import make_batch
    teacher, student, examples = copy_of_every_layer(request.getfixturevalue(fixture))
    batch = make_batch(student, examples, [None] * len(examples), list(range(len(examples))))
    with LayerObjective(TeacherStudentDistill(cosine_weight=1.0), teacher, student, examples) as objective:
        assert objective.state_pairs == [(1, 1)] and objective.parameters() == []
        terms = objective.terms(student, student(**batch["inputs"]), batch)
        assert len(terms) == 3 and terms[2].mean().item() == pytest.approx(0.0, abs=1e-6)
        rows = len(examples) if teacher.task == "classification" else 8  # sentences, or the words both scored
        assert terms[2].denominator.item() == rows
    one = new_student(student_config(student.config.model, layers=1), teacher.hierarchy, examples, 0, teacher)
    with LayerObjective(TeacherStudentDistill(cosine_weight=1.0), teacher, one, examples) as objective:
        assert objective.state_pairs == [(0, 1)]
        assert objective.terms(one, one(**batch["inputs"]), batch)[2].mean().item() > 1e-4


def test_layer_pairs_uniform_or_as_listed():
    from distill.distillation import layer_pairs
    assert layer_pairs("uniform", 3, 6) == [(0, 1), (1, 3), (2, 5)]
    assert layer_pairs("0,2,4", 3, 6) == [(0, 0), (1, 2), (2, 4)]
    assert layer_pairs("5,5", 2, 6) == [(0, 5), (1, 5)]


@pytest.mark.parametrize("spec, message", [
    ("0,2", "teacher layers 0,2 name 2 layers for a student of 3: give one per student layer"),
    ("0,2,6", "teacher layers 0,2,6: the teacher has layers 0 to 5"),
    ("0,-2,4", "teacher layers '0,-2,4': use uniform or one teacher layer number per student layer"),
    ("even", "teacher layers 'even': use uniform or one teacher layer number per student layer"),
    *[(spec, f"teacher layers {spec!r}: use uniform") for spec in (" 0,1,2", "+0,1,2", "0,1_0,2", "\uff11,0,2", "0,,2")]])
def test_layer_pairs_refuses(spec, message):
    from distill.distillation import TeacherStudentDistill, layer_pairs
    with pytest.raises(DistillError, match=re.escape(message)):
        TeacherStudentDistill(hidden_weight=1.0, teacher_layers=spec)
        layer_pairs(spec, 3, 6)


def test_teacher_layers_have_one_spelling():
    """A choice of layers is recorded (summary, resume signature) in one form, whoever spelt it."""
    from distill.distillation import TeacherStudentDistill
    for spec in ([0, 2, 4], (0, 2, 4), "00,2,4", "0,2,4"):
        assert TeacherStudentDistill(hidden_weight=1.0, teacher_layers=spec).teacher_layers == "0,2,4"
    for spec in (None, 3, [0, True], [0.0, 1], []):
        with pytest.raises(DistillError, match="use uniform or one teacher layer number per student layer"):
            TeacherStudentDistill(hidden_weight=1.0, teacher_layers=spec)


@pytest.mark.parametrize("fixture", ["tiny_classifier_teacher", "tiny_tagging_teacher"])
def test_the_layer_terms_compare_the_listed_teacher_layers(request, fixture):
    """Every layer copied: each student layer against the teacher layer it was copied from adds nothing,
    against the other layer it does."""
    from distill.distillation import LayerObjective, TeacherStudentDistill
    from distill.training import make_batch
    teacher, student, examples = copy_of_every_layer(request.getfixturevalue(fixture))
    batch = make_batch(student, examples, [None] * len(examples), list(range(len(examples))))
    for spec, zero in (("0,1", True), ("1,0", False)):
        with LayerObjective(TeacherStudentDistill(hidden_weight=1.0, teacher_layers=spec), teacher, student,
                            examples) as objective:
            assert objective.pairs == [(0, int(spec[0])), (1, int(spec[2]))]
            hidden = objective.terms(student, student(**batch["inputs"]), batch)[2].mean().item()
            assert (hidden == pytest.approx(0.0, abs=1e-8)) == zero


def test_kd_with_the_hidden_state_term(tiny_tagging_teacher, tiny_other_encoder_dir, tmp_path, capsys):
    """Widths 24 and 32 differ: learned maps, trained beside the student and kept out of it."""
    ok(capsys, "kd", "--teacher", tiny_tagging_teacher, "--model", "transformer-tagger", "--encoder",
       tiny_other_encoder_dir, "--layers", "2", "--hidden-weight", "1", *NER, *QUICK, "--output", tmp_path / "h")
    summary = json.loads((tmp_path / "h" / "train_summary.json").read_text())
    assert summary["kd"]["hidden_weight"] == 1.0 and "cache_dir" not in summary
    ok(capsys, "kd", "--teacher", tiny_tagging_teacher, "--model", "transformer-tagger", "--encoder",
       tiny_other_encoder_dir, "--layers", "2", "--cosine-weight", "1", *NER, *QUICK, "--output", tmp_path / "c")
    assert json.loads((tmp_path / "c" / "train_summary.json").read_text())["kd"]["cosine_weight"] == 1.0
    ok(capsys, "kd", "--teacher", tiny_tagging_teacher, "--model", "transformer-tagger", "--encoder",
       tiny_other_encoder_dir, "--layers", "2", "--hidden-weight", "1", "--teacher-layers", "0,0", *NER, *QUICK,
       "--output", tmp_path / "p")
    assert json.loads((tmp_path / "p" / "train_summary.json").read_text())["kd"]["teacher_layers"] == "0,0"
    assert "teacher_layers" not in summary["kd"]  # uniform, the default, as runs before the option
    for option, message in ((["--teacher-layers", "0,1"], "--teacher-layers pairs the layers that --hidden-weight"),
                            (["--hidden-weight", "1", "--teacher-layers", "0,9"], "the teacher has layers 0 to 1")):
        status, err = run_main(capsys, "kd", "--teacher", tiny_tagging_teacher, "--model", "transformer-tagger",
                               "--layers", "2", *option, *NER, *QUICK, "--output", tmp_path / "bad")
        assert status == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not any("projection" in name for name in load_model(tmp_path / "h").state_dict())
    status, err = run_main(capsys, "kd", "--teacher", tiny_tagging_teacher, "--model", "lstm-tagger",
                           "--hidden-weight", "1", *NER, *QUICK, "--output", tmp_path / "x")
    assert status == 2 and "compare transformer layers: the student must be distill's transformer teacher or a " \
        "transformer student, not a lstm-tagger student" in err


def test_a_hidden_state_run_resumes_to_the_same_student(tiny_tagging_teacher, tiny_other_encoder_dir, tmp_path,
                                                        capsys, monkeypatch):
    """The width maps are part of the resume state: a resumed run ends where an uninterrupted one does."""
    from tests.conftest import interrupted_in_epoch_2
    args = ("kd", "--teacher", tiny_tagging_teacher, "--model", "transformer-tagger", "--encoder",
            tiny_other_encoder_dir, "--layers", "1", "--hidden-weight", "2", *NER, "--epochs", "2", "--patience", "2",
            "--quiet", "--batch-size", "16", "--dropout", "0")
    ok(capsys, *args, "--output", tmp_path / "whole")
    ok(capsys, *interrupted_in_epoch_2(capsys, monkeypatch, *args, "--output", tmp_path / "resumed"), "--resume")
    whole, resumed = load_model(tmp_path / "whole").state_dict(), load_model(tmp_path / "resumed").state_dict()
    assert all(torch.equal(whole[name], resumed[name]) for name in whole)


def test_hidden_state_term_averages_a_windowed_teachers_windows(tiny_encoder_dir):
    """A teacher that reads long texts in windows: its pooled states per text are the mean of its windows'."""
    from distill.distillation import LayerObjective, TeacherStudentDistill
    from distill.labels import LabelHierarchy
    from distill.models.teacher import Teacher, TeacherConfig
    from distill.training import make_batch
    torch.manual_seed(0)
    teacher = Teacher.from_encoder(TeacherConfig(encoder=tiny_encoder_dir, max_length=8, long_inputs="windows",
                                                 window_overlap=2, max_windows=4),
                                   LabelHierarchy(["negative", "positive"])).eval()
    examples = [" ".join(TEXTS * 3), "great"]
    assert teacher.prepare(examples)[0]["input_ids"].shape[0] > len(examples)  # several windows
    student = new_student(student_config("transformer", layers=2), teacher.hierarchy, examples, 0, teacher).eval()
    with LayerObjective(TeacherStudentDistill(hidden_weight=1.0), teacher, student, examples) as objective:
        batch = make_batch(student, examples, [None] * len(examples), [0, 1])
        terms = objective.terms(student, student(**batch["inputs"]), batch)
        assert terms[2].denominator.item() == 2 * 32 * len(examples)
