"""The static student: registered and offered by the CLI, shapes and padding, word vectors from the teacher's
encoder (another teacher: another table), weighting by frequency, kd end to end, save/load and ONNX export."""

from __future__ import annotations

import json

import pytest
import torch

from distill import precision
from distill.embedding_init import SIF_A, encoder_word_vectors, frequency_weights, static_word_vectors
from distill.errors import DistillError
from distill.labels import LabelHierarchy
from distill.models import load_model, load_teacher
from distill.models.registry import student_config, students
from distill.models.static import StaticClassifier
from distill.models.students import build_student
from distill.trainers import new_student
from tests.conftest import SAMPLES, cli

TEXTS = ["a witty , heartfelt film", "the plot is stale and the film is dull", "a fine film", "dull"]
LABELS = LabelHierarchy(["negative", "positive"])


def tiny_static(**settings) -> StaticClassifier:
    torch.manual_seed(0)
    return build_student(student_config("static", **{"embedding_dim": 8, "head_hidden": 6, "dropout": 0.0, **settings}),
                         LABELS, TEXTS).eval()


def test_registered_and_offered_by_kd(capsys):
    assert students()["static"].cls is StaticClassifier and students()["static"].task == "classification"
    from procedures.cli import main
    with pytest.raises(SystemExit):
        main(["kd", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "static (classification)" in help_text
    for option in ("--head-hidden", "--word-vectors [encoder|input]", "--weighting [sif|zipf|none]"):
        assert option in help_text


@pytest.mark.parametrize("head_hidden", [0, 6])
def test_logits_per_text_whatever_the_padding_and_unknown_words(head_hidden):
    model = tiny_static(head_hidden=head_hidden)
    inputs, mask = model.prepare(TEXTS)
    assert mask is None and model(**inputs).shape == (4, 2)
    alone = torch.cat([model(**model.prepare([text])[0]) for text in TEXTS])
    assert torch.allclose(model(**inputs), alone, atol=1e-6)  # padding (row 0) is never in the mean
    with torch.no_grad():
        model.embedding.weight[1].fill_(5.0)  # <unk> is left out of the mean too
    assert torch.allclose(model(**model.prepare(["a fine film unheardof"])[0]),
                          model(**model.prepare(["a fine film"])[0]), atol=1e-6)
    assert torch.equal(model(**model.prepare(["unheardof"])[0]), model.head(torch.zeros(1, 8)))


@pytest.mark.parametrize("settings", [{"head_hidden": 0}, {"head_hidden": 6}, {"head_hidden": 6, "binary": True}])
def test_inference_reads_the_lookup_table_and_gives_forwards_logits(settings, monkeypatch):
    """predict, the logits and the probabilities come from numpy (`lookup_logits`), equal to forward's; a change
    of the weights (a training step, a load) rebuilds the table, and a model in training mode runs forward."""
    from distill.inference import predict_logits, prediction_records
    model = tiny_static(**settings)
    texts = TEXTS + ["?!", "unheardof words only", "A FINE film , witty and dull"]

    def forward_logits():
        with torch.no_grad():
            return model(**model.prepare(texts)[0])

    monkeypatch.setattr(StaticClassifier, "forward", lambda *args, **kwargs: pytest.fail("forward ran"))
    with pytest.raises(pytest.fail.Exception):
        forward_logits()
    lookup = [predict_logits(model, texts, batch_size).logits for batch_size in (1, 3, 64)]
    predicted = [model.predict(texts, batch_size=batch_size) for batch_size in (1, 2, 64)]
    monkeypatch.undo()
    for logits in lookup:
        assert (logits - forward_logits()).abs().max() <= 1e-5
    probabilities = [record["confidence"] for record in prediction_records(model, texts, exact=True)]
    sigmoid = torch.sigmoid(forward_logits())[:, 0]
    reference = torch.softmax(forward_logits(), -1).max(-1).values if model.outputs > 1 else \
        torch.maximum(sigmoid, 1 - sigmoid)
    assert torch.allclose(torch.tensor(probabilities), reference, atol=1e-5)
    assert predicted == [[model.hierarchy.labels[i] for i in model.decode(forward_logits(), None)]] * 3
    with torch.no_grad():  # the table was built: a stale one would keep the old logits
        model.head[-1].bias.add_(3.0)
        model.embedding.weight.mul_(-2.0)
    assert (predict_logits(model, texts, 4).logits - forward_logits()).abs().max() <= 1e-5


def test_the_lookup_serves_only_where_it_equals_forward(monkeypatch):
    """Training mode (dropout) and reduced precision run forward itself."""
    model = tiny_static(dropout=0.5)
    monkeypatch.setattr(StaticClassifier, "lookup_logits", lambda self, examples: pytest.fail("lookup used"))
    model.train()
    assert model.batch_logits(TEXTS)[0].shape == (4, 2)
    model.eval()
    with monkeypatch.context() as patched:
        patched.setattr(precision, "reduced", lambda device: "bf16")
        assert model.batch_logits(TEXTS)[0].shape == (4, 2)
    with pytest.raises(pytest.fail.Exception):
        model.batch_logits(TEXTS)


def test_sif_weights_frequent_words_less():
    model = tiny_static()
    weights = frequency_weights(model.words, TEXTS, "sif")
    total = sum(len(t.split()) for t in TEXTS)
    the, witty = model.words.index["the"] - 2, model.words.index["witty"] - 2
    assert weights[the] == pytest.approx(SIF_A / (SIF_A + 2 / total)) and weights[the] < weights[witty]
    assert torch.equal(frequency_weights(model.words, TEXTS, "none"), torch.ones(len(model.words) - 2))
    zipf = frequency_weights(model.words, TEXTS, "zipf")
    assert zipf[0] == pytest.approx(torch.log(torch.tensor(2.0))) and bool((zipf[1:] > zipf[:-1]).all())


def test_word_vectors_come_from_the_teachers_encoder(tiny_classifier_teacher):
    teacher = load_teacher(tiny_classifier_teacher)
    model = new_student(student_config("static", embedding_dim=8), LABELS, TEXTS, 0, teacher)
    read_alone = encoder_word_vectors(teacher, ["film"])[0]
    inputs = teacher.tokenizer(["film"], return_tensors="pt")
    with torch.no_grad():
        expected = teacher.encoder(**inputs).last_hidden_state[0, 0]
    assert teacher.config.pooling == "first"  # as the teacher reads a sentence: a random DistilBERT's first token
    assert torch.allclose(read_alone, expected, atol=1e-5)
    again = new_student(student_config("static", embedding_dim=8), LABELS, TEXTS, 1, teacher)
    assert torch.equal(model.embedding.weight, again.embedding.weight)  # the teacher's, not the seed's
    with torch.no_grad():
        torch.manual_seed(1)  # a shift common to every word would go with PCA's centring: change each differently
        weight = teacher.encoder.transformer.layer[-1].ffn.lin2.weight
        weight.add_(torch.randn_like(weight))
    changed = new_student(student_config("static", embedding_dim=8), LABELS, TEXTS, 0, teacher)
    assert not torch.allclose(model.embedding.weight[2:], changed.embedding.weight[2:], atol=1e-3)
    assert torch.equal(changed.embedding.weight[:2], torch.zeros(2, 8))  # padding and <unk>: nothing to read
    from_inputs = static_word_vectors(teacher, model.words, TEXTS,
                                      student_config("static", embedding_dim=8, word_vectors="input"))
    assert from_inputs.shape == (len(model.words) - 2, 8)
    assert not torch.allclose(from_inputs, changed.embedding.weight[2:])


def test_kd_from_the_cli_then_saved_loaded_and_exported(tiny_classifier_teacher, tmp_path, capsys):
    out = tmp_path / "static"
    cli("--threads", "1", "kd", "--teacher", tiny_classifier_teacher, "--model", "static", "--embedding-dim", "8",
        "--head-hidden", "6", "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
        "--epochs", "2", "--output", out, "--quiet")
    assert "word vectors from the teacher" not in capsys.readouterr().err  # --quiet reaches the set-up's bar too
    model = load_model(out)
    assert isinstance(model, StaticClassifier) and model.config.head_hidden == 6
    assert json.loads((out / "config.json").read_text())["config"]["model"] == "static"
    examples = ["a fine film", "the plot is stale and the film is dull, dull, dull"]
    reloaded = StaticClassifier.from_pretrained(out)
    assert torch.equal(model(**model.prepare(examples)[0]), reloaded(**reloaded.prepare(examples)[0]))
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install -e .[export])")
    from distill.inference import predict_logits
    cli("export", out, "--output", tmp_path / "onnx", "--check-data", SAMPLES / "sentiment_test.csv")
    exported = load_model(tmp_path / "onnx")
    for batch_size in (1, 3):
        ours, theirs = predict_logits(model, examples + ["unheardof"], batch_size), \
            predict_logits(exported, examples + ["unheardof"], batch_size)
        assert (ours.logits - theirs.logits).abs().max() <= 1e-5


def test_an_onnx_export_teaching_gives_its_source_models_word_vectors(tiny_classifier_teacher, tmp_path):
    """The graph gives logits, not the encoder's states: the static student reads the model it was exported from."""
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install -e .[export])")
    cli("export", tiny_classifier_teacher, "--output", tmp_path / "onnx")
    config = student_config("static", embedding_dim=8)
    from_export = new_student(config, LABELS, TEXTS, 0, load_model(tmp_path / "onnx"))
    from_source = new_student(config, LABELS, TEXTS, 0, load_teacher(tiny_classifier_teacher))
    assert torch.allclose(from_export.embedding.weight, from_source.embedding.weight, atol=1e-6)


def test_the_lookup_table_follows_weights_replaced_in_place_of_their_memory():
    """`half()` then `float()`, `vector_to_parameters` and `param.data = tensor` give a parameter new memory without
    a new version, and a fused optimizer's step writes without one: the table built before must not answer for the
    new weights."""
    from distill.inference import predict_logits
    model = tiny_static()
    texts = TEXTS + ["unheardof"]

    def gap() -> float:
        with torch.no_grad():
            forward = model(**model.prepare(texts)[0])
        return float((predict_logits(model, texts, 8).logits - forward).abs().max())

    assert gap() <= 1e-5  # the table is built
    model.half().float()  # rounds every weight to float16
    assert gap() <= 1e-5
    torch.nn.utils.vector_to_parameters(torch.nn.utils.parameters_to_vector(model.parameters()) * -2,
                                        model.parameters())
    assert gap() <= 1e-5
    model.head[-1].bias.data = model.head[-1].bias.detach() + 3.0
    assert gap() <= 1e-5
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.5, fused=True)  # its step bumps no version either
    model.train()
    model(**model.prepare(texts)[0]).sum().backward()
    optimizer.step()
    model.eval()
    assert gap() <= 1e-5


@pytest.mark.parametrize("args", [["student", "--weighting", "zipf"],
                                  ["kd", "--random-embeddings", "--word-vectors", "input", "--weighting", "none"]])
def test_word_vector_settings_without_a_teacher_to_read_are_refused(args, tiny_classifier_teacher, tmp_path, capsys):
    """A table started at random reads no teacher: --weighting and --word-vectors would be dropped in silence."""
    from tests.conftest import run_main
    command, *options = args
    teacher = ["--teacher", tiny_classifier_teacher] if command == "kd" else []
    status, err = run_main(capsys, command, *teacher, "--model", "static", *options, "--embedding-dim", "8",
                           "--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv",
                           "--epochs", "1", "--output", tmp_path / "static", "--quiet")
    named = [option for option in options if option in ("--weighting", "--word-vectors")]
    assert status == 2 and err.startswith(f"error: {', '.join(named)} say") and "starts without a teacher" in err
    assert not (tmp_path / "static").exists()
    with pytest.raises(DistillError, match=r"weighting='zipf' says how a static student"):
        new_student(student_config("static", weighting="zipf"), LABELS, TEXTS, 0)
    assert new_student(student_config("static"), LABELS, TEXTS, 0).config.weighting == "sif"  # the default: unread


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.ao.quantization's, pointing to torchao
def test_a_head_of_other_layers_runs_forward():
    """`quantize_dynamic` (a usual way to shrink a model for the CPU) swaps the head's Linear layers for quantized
    ones, which the lookup table cannot read: predict runs forward instead of failing (an IndexError) or
    answering with the float weights."""
    from distill.inference import predict_logits
    quantize = getattr(torch.ao.quantization, "quantize_dynamic", None)
    if quantize is None:
        pytest.skip("this torch has no torch.ao.quantization.quantize_dynamic")
    model = quantize(tiny_static(), {torch.nn.Linear}, dtype=torch.qint8)
    assert not model.lookup_serves()
    with torch.no_grad():
        forward = model(**model.prepare(TEXTS)[0])
    assert torch.allclose(predict_logits(model, TEXTS, 64).logits, forward, atol=1e-6)  # one batch: quantized alike
    assert model.predict(TEXTS) == [model.hierarchy.labels[i] for i in model.decode(forward, None)]
