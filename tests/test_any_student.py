"""Any transformers encoder as a transformer student, and any module that follows the student protocol."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

from distill import Distiller, LabelModel, Runtime, TrainSettings, register_student, train_student
from distill.errors import DistillError
from distill.io import read_json
from distill.labels import LabelHierarchy
from distill.models import load_model
from distill.models.card import CONFIG, WEIGHTS
from distill.models.students import StudentConfig, StudentFiles, write_student_config
from distill.models.transformer_student import cut_layers
from tests.conftest import SAMPLES, run_main

SENTIMENT = ("--train", SAMPLES / "sentiment_train.csv", "--dev", SAMPLES / "sentiment_dev.csv")
NER = ("--train", SAMPLES / "ner_train.conll", "--dev", SAMPLES / "ner_dev.conll")
QUICK = ("--epochs", "1", "--quiet", "--batch-size", "16")
TRAIN, DEV = str(SAMPLES / "sentiment_train.csv"), str(SAMPLES / "sentiment_dev.csv")
QUIET = Runtime(threads=1, progress=False)
ENCODERS = {"tiny_encoder_dir": ("DistilBertModel", 2), "tiny_other_encoder_dir": ("BertModel", 3)}
SEE = "see docs/python-api.md#student-protocol"


def ok(capsys, *args) -> None:
    status, err = run_main(capsys, *args)
    assert status == 0, err


def refused(capsys, *args) -> str:
    status, err = run_main(capsys, *args)
    assert status == 2, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("fixture", ENCODERS)
@pytest.mark.parametrize("model, data", [("transformer", SENTIMENT), ("transformer-tagger", NER)])
def test_student_and_kd_cut_any_encoder_folder(request, fixture, model, data, tmp_path, capsys):
    """A BERT and a DistilBERT folder (not offline encoders), each cut to one layer, trained alone and distilled."""
    folder = request.getfixturevalue(fixture)
    teacher = request.getfixturevalue("tiny_classifier_teacher" if model == "transformer" else "tiny_tagging_teacher")
    architecture, depth = ENCODERS[fixture]
    assert json.loads((Path(folder) / "config.json").read_text())["architectures"] == [architecture]
    ok(capsys, "student", "--model", model, "--encoder", folder, "--layers", "1", *data, *QUICK,
       "--output", tmp_path / "alone")
    ok(capsys, "kd", "--teacher", teacher, "--model", model, "--encoder", folder, "--layers", "1", *data, *QUICK,
       "--cache-dir", tmp_path / "cache", "--output", tmp_path / "kd")
    for run in ("alone", "kd"):
        student = load_model(tmp_path / run)
        assert type(student.encoder).__name__ == architecture and student.encoder.config.num_hidden_layers == 1
        assert student.config.encoder == folder and depth > 1
        assert len(student.predict(["a fine film"] if model == "transformer" else [["Karl", "Weber"]])) == 1


def test_a_classifier_checkpoint_gives_its_encoder(tiny_hf_classifier, tmp_path, capsys):
    """A transformers classifier's folder: AutoModel takes its base model (the head is left out)."""
    ok(capsys, "student", "--model", "transformer", "--encoder", tiny_hf_classifier, "--layers", "1", *SENTIMENT,
       *QUICK, "--output", tmp_path / "s")
    assert type(load_model(tmp_path / "s").encoder).__name__ == "DistilBertModel"


def test_a_folder_that_is_not_an_encoder_is_refused(tmp_path, capsys):
    from transformers import GPT2Config, T5Config
    causal, seq2seq, other = tmp_path / "gpt2", tmp_path / "t5", tmp_path / "notes"
    for folder in (causal, seq2seq, other):
        folder.mkdir()
    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(causal)
    T5Config(num_layers=1, d_model=8, num_heads=2, d_kv=4, d_ff=16).save_pretrained(seq2seq)
    (other / "notes.txt").write_text("not a model")
    for folder, message in [(causal, "it is a gpt2 model, a causal (left-to-right) language model, not an encoder"),
                            (seq2seq, "it is a t5 model, an encoder-decoder (sequence-to-sequence) model"),
                            (other, "the folder does not hold a whole pretrained encoder")]:
        for model, data in [("transformer", SENTIMENT), ("transformer-tagger", NER)]:
            err = refused(capsys, "student", "--model", model, "--encoder", folder, *data, *QUICK,
                          "--output", tmp_path / "out")
            assert f"cannot load encoder '{folder}': {message}" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("edit, said", [
    ({"activation": "nope"}, "its config.json does not describe a model that can be built (KeyError: "),
    ({"dim": "32"}, "its config.json does not describe a model that can be built (StrictDataclassFieldValidationError"),
    ({"max_position_embeddings": -5}, "its config.json does not describe a model that can be built (RuntimeError: "),
    ({"n_layers": 1}, "its weights hold 16 of the encoder's tensors its config.json has no place for (e.g. transformer"
                      ".layer.1."),
    ("nan", "its weights hold NaN or infinite values (in "),
    ("int", "its weights hold transformer.layer.1.sa_layer_norm.weight as int64, where the encoder's is a "
            "floating tensor"),
    ("added", "its tokenizer has 602 tokens and the encoder embeds 600, so a text holding one of the others could "
              "not be read")])
def test_an_encoder_folder_whose_config_or_weights_make_no_whole_model_is_refused(edit, said, tiny_encoder_dir,
                                                                                  tmp_path, capsys):
    """A config value transformers cannot build (a number written as text, an unknown activation, a negative size)
    was a traceback from every command taking --encoder; a config of fewer layers than the weights dropped the
    others in silence, and a NaN weight was trained from (zero-shot: a teacher of NaN logits)."""
    import shutil
    from safetensors.torch import load_file, save_file
    folder = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, folder)
    if edit == "added":  # tokens added, the model never resized: an IndexError traceback at the first such text
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.add_tokens(["delightful", "muddled"])
        tokenizer.save_pretrained(folder)
    elif edit in ("nan", "int"):  # int: was cast back to float in silence, its fractions cut off
        tensors = load_file(folder / "model.safetensors")
        name = sorted(tensors)[-1]
        tensors[name] = torch.full_like(tensors[name], float("nan")) if edit == "nan" else \
            tensors[name].to(torch.int64)
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    else:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **edit}))
    for args in (["teacher", "--zero-shot", "--labels", "negative,positive"], ["student", "--model", "transformer",
                                                                                *SENTIMENT, *QUICK]):
        err = refused(capsys, *args, "--encoder", folder, "--output", tmp_path / "out")
        assert f"error: cannot load encoder '{folder}': {said}" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage, said", [
    ("cut", "error: cannot load encoder '{folder}': the folder does not hold a whole pretrained encoder (its config, "
            "tokenizer and weights: Error while deserializing header"),
    ("vocabulary", "error: {folder}: cannot load its tokenizer (its vocabulary holds only its 5 special tokens, so "
                   "every word would read as [UNK])")])
def test_an_encoder_folder_cut_short_or_without_its_vocabulary_is_refused(damage, said, tiny_encoder_dir, tmp_path,
                                                                          capsys):
    """--encoder DIR with its weights cut short was a SafetensorError traceback; with its tokenizer.json and
    vocab.txt gone, transformers built a tokenizer of the special tokens alone and a teacher trained on texts
    read as [UNK] only, exit 0."""
    import shutil
    folder = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, folder)
    if damage == "cut":
        (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:5000])
    else:
        for name in ("tokenizer.json", "vocab.txt"):
            (folder / name).unlink()
    for args in (["teacher", "--task", "classification", *SENTIMENT, *QUICK],
                 ["student", "--model", "transformer", *SENTIMENT, *QUICK]):
        err = refused(capsys, *args, "--encoder", folder, "--output", tmp_path / "out")
        assert said.format(folder=folder) in err, err
    assert not (tmp_path / "out").exists()


def test_layers_are_cut_from_any_family_with_a_layer_list_or_refused():
    """ModernBERT's per-layer `layer_types` follow the kept layers (its config is refused otherwise); ALBERT
    shares one layer's weights across its depth: it keeps all of them or is refused in one line."""
    from transformers import AlbertConfig, AlbertModel, AutoConfig, AutoModel, ModernBertConfig, ModernBertModel
    modern = ModernBertModel(ModernBertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                                              intermediate_size=32, max_position_embeddings=64, pad_token_id=0,
                                              bos_token_id=1, eos_token_id=2, cls_token_id=3, sep_token_id=4,
                                              global_attn_every_n_layers=2, local_attention=8))
    cut = cut_layers(modern, [0, 3])
    assert cut.config.num_hidden_layers == 2 and cut.config.layer_types == [modern.config.layer_types[i] for i in (0, 3)]
    with pytest.raises(DistillError, match=r"^encoder ModernBertModel: layers 1,2 do not fit their new places \(e\.g\. "
                                           r"layers\.0\.attn_norm\.weight: .*choose other layers with layer_map$"):
        cut_layers(modern, [1, 2])  # its first layer has no attention norm, the others have one
    rebuilt = AutoModel.from_config(AutoConfig.for_model(**cut.config.to_dict()))
    rebuilt.load_state_dict(cut.state_dict())
    ids = torch.tensor([[3, 10, 11, 12, 4]])
    with torch.no_grad():
        assert cut(input_ids=ids).last_hidden_state.shape == (1, 5, 16)
    albert = AlbertModel(AlbertConfig(vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=3,
                                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64))
    assert cut_layers(albert, [0, 1, 2]).config.num_hidden_layers == 3
    with pytest.raises(DistillError, match=r"cannot find the layers of encoder AlbertModel to keep some of .*keep all "
                                           r"of them, TransformerStudentConfig\(layers=3\)$"):
        cut_layers(albert, [0, 2])


# The student protocol: modules given in memory.

class NoPrepare(nn.Module):
    """Has labels and a forward, but nothing to turn examples into its inputs."""

    task = "classification"

    def __init__(self):
        super().__init__()
        self.hierarchy = LabelHierarchy(["negative", "positive"])
        self.linear = nn.Linear(4, 2)

    def forward(self, features):
        return self.linear(features)


class NoLabels(LabelModel):
    """A LabelModel that never says its labels."""

    task = "classification"

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def prepare(self, examples):
        return {"features": torch.ones(len(examples), 4)}, None

    def forward(self, features):
        return self.linear(features)


class WrongWidth(NoLabels):
    """Labels and every method, but three logits for two labels."""

    def __init__(self):
        super().__init__()
        self.hierarchy = LabelHierarchy(["negative", "positive"])
        self.linear = nn.Linear(4, 3)


@pytest.mark.parametrize("make, message", [
    (NoPrepare, "student NoPrepare lacks prepare(examples) -> (inputs, mask); LabelModel's decode, supervised_loss, "
                f"predict and save_pretrained (subclass distill.LabelModel): {SEE}"),
    (NoLabels, f"student NoLabels lacks hierarchy (its labels, a LabelHierarchy): {SEE}"),
    (WrongWidth, "student 'WrongWidth' returns logits of shape (2, 3) for 2 examples; classification with 2 labels "
                 "needs (examples, labels) = (2, 2 or 1)"),
])
def test_a_module_off_the_protocol_is_refused_in_one_line(make, message, tiny_classifier_teacher):
    for train in (lambda student: train_student(student, TRAIN, DEV, TrainSettings(epochs=1), env=QUIET),
                  lambda student: Distiller(tiny_classifier_teacher, student, settings=TrainSettings(epochs=1),
                                            env=QUIET, teacher_embeddings=False).fit(TRAIN, DEV)):
        with pytest.raises(DistillError) as caught:
            train(make())
        assert str(caught.value) == message


def test_anything_else_is_refused_as_no_student():
    with pytest.raises(DistillError, match="student: give a student model, a StudentConfig or a registered name, "
                                           "not int"):
        train_student(3, TRAIN, DEV, env=QUIET)


# A student of one's own: a LabelModel (not a StudentModel) that reads bytes.

@dataclass
class ByteConfig(StudentConfig):
    model: str = "byte-mean"
    width: int = 8


class ByteMean(StudentFiles, LabelModel):
    """The mean of a text's byte embeddings -> Linear: no vocabulary, no tokenizer."""

    config_class = ByteConfig
    kind = "student"
    required_files = (WEIGHTS, CONFIG)

    def __init__(self, config: ByteConfig, hierarchy: LabelHierarchy):
        super().__init__()
        self.config, self.hierarchy = config, hierarchy
        self.embedding = nn.EmbeddingBag(256, config.width, mode="mean")
        self.output = nn.Linear(config.width, len(hierarchy))

    @classmethod
    def build(cls, config, hierarchy, examples):
        return cls(config, hierarchy)

    def prepare(self, examples):
        rows = [list(text.encode("utf-8")[:256]) or [32] for text in examples]
        offsets = torch.tensor([0] + [len(row) for row in rows[:-1]]).cumsum(0)
        ids = torch.tensor([byte for row in rows for byte in row])
        return {"ids": ids.to(self.device), "offsets": offsets.to(self.device)}, None

    def forward(self, ids, offsets):
        return self.output(self.embedding(ids, offsets))

    def write_description(self, directory):
        return [write_student_config(self, directory)]

    @classmethod
    def unloaded(cls, directory, card):
        meta = read_json(Path(directory) / CONFIG)
        return cls(ByteConfig.from_dict(meta["config"]), LabelHierarchy.from_dict(meta["hierarchy"]))


def test_a_label_model_of_ones_own_distils_saves_and_loads(tiny_classifier_teacher, tmp_path, monkeypatch):
    from distill.models import registry
    monkeypatch.setattr(registry, "_STUDENTS", registry._STUDENTS.copy())  # the registry is left as it was
    register_student("byte-mean", task="classification")(ByteMean)
    with pytest.raises(DistillError, match=r"^student 'byte-mean' lacks build_from_teacher\(config, hierarchy, "
                                           r"examples, teacher\) to start from the teacher's weights: use "
                                           r"teacher_embeddings=False \(Distiller\)"):
        Distiller(tiny_classifier_teacher, "byte-mean", settings=TrainSettings(epochs=1), env=QUIET).fit(TRAIN, DEV)
    result = Distiller(tiny_classifier_teacher, "byte-mean", settings=TrainSettings(epochs=2), env=QUIET,
                       teacher_embeddings=False).fit(TRAIN, DEV)
    student = result.model
    assert isinstance(student, ByteMean) and [r["epoch"] for r in result.history] == [1, 2]
    student.save_pretrained(tmp_path / "bytes")
    reloaded = ByteMean.from_pretrained(tmp_path / "bytes")
    texts = ["A gripping film.", "Tedious."]
    assert reloaded.predict(texts) == student.predict(texts)
    # given built, in memory, it trains too, and its run's output is a model directory
    again = Distiller(tiny_classifier_teacher, ByteMean(ByteConfig(width=4), student.hierarchy),
                      settings=TrainSettings(epochs=1), env=QUIET, teacher_embeddings=False)
    from distill import Output
    assert again.fit(TRAIN, DEV, output=Output(str(tmp_path / "run"))).summary["model"] == "byte-mean"
    assert isinstance(load_model(tmp_path / "run"), ByteMean)


def test_a_module_without_write_files_trains_but_writes_no_output(tmp_path):
    from distill import Output

    class Unsaveable(WrongWidth):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 2)

    model = train_student(Unsaveable(), TRAIN, DEV, TrainSettings(epochs=1), env=QUIET).model
    assert model.predict(["fine"])[0] in ("negative", "positive")
    with pytest.raises(DistillError, match=r"^student Unsaveable lacks write_files\(directory\) \(to write the "
                                           r"run's output\): see docs/python-api.md#student-protocol$"):
        train_student(Unsaveable(), TRAIN, DEV, TrainSettings(epochs=1), env=QUIET, output=Output(str(tmp_path / "o")))


@pytest.mark.parametrize("body, lacks", [
    ("", "prepare(examples) -> (inputs, mask); forward(**inputs) -> logits; write_files(directory); "
         "from_checkpoint(directory, card); build(config, hierarchy, examples)"),
    ("forward = lambda self, x: x\n    prepare = lambda self, e: e", "write_files(directory); "
                                                                     "from_checkpoint(directory, card); build"),
])
def test_register_student_checks_the_protocol(body, lacks, monkeypatch):
    from distill.models import registry
    monkeypatch.setattr(registry, "_STUDENTS", registry._STUDENTS.copy())
    namespace: dict = {}
    exec(f"class Half(LabelModel):\n    kind = 'student'\n    config_class = ByteConfig\n    {body or 'pass'}\n",
         {"LabelModel": LabelModel, "ByteConfig": ByteConfig}, namespace)
    with pytest.raises(DistillError, match="^student 'half': Half lacks " + lacks.replace("(", r"\(").replace(")", r"\)")
                       .replace("*", r"\*")):
        register_student("half", task="classification")(namespace["Half"])
    assert "half" not in registry._STUDENTS
