"""The teacher as a `transformers` model with a head, for tools that expect one.

`transformers.pipeline` and other Hugging Face tooling take a ``PreTrainedModel`` whose output has
``logits``. Tagging teachers map onto the encoder's own ``*ForTokenClassification`` as they are, and a
first-token classification head onto ``DistilBertForSequenceClassification``; a head that pools by the
mean of the tokens has no stock class and becomes `DistillTeacherForSequenceClassification`, whose file
a transformers export ships beside the weights (``trust_remote_code=True`` loads it).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import DistilBertConfig, DistilBertModel, PreTrainedModel, PreTrainedTokenizerBase

from distill.errors import DistillError, option
from distill.models.modeling_distill import MODULE_FILE, DistillTeacherConfig, DistillTeacherForSequenceClassification
from distill.models.teacher import Teacher

AUTO_CLASS = "AutoModelForSequenceClassification"


def to_transformers(teacher: Teacher) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A `transformers` model computing the teacher's logits, and its tokenizer (same max length): what
    `nlp-train export --format transformers` saves, in memory."""
    if not isinstance(teacher.encoder, DistilBertModel):
        raise DistillError(f"only DistilBERT-form teachers convert to a transformers head model, "
                           f"not {type(teacher.encoder).__name__}")
    if teacher.config.long_inputs == "windows":
        raise DistillError("a teacher with long_inputs='windows' has no transformers head model: its head reads "
                           "the mean of several windows, a transformers model reads one")
    return stock_transformers(teacher, "the teacher")


@torch.inference_mode()
def max_logit_difference(teacher: Teacher, model: PreTrainedModel, examples: list) -> float:
    """Largest |teacher logit - converted model logit| over `examples` (per sentence, or per word)."""
    teacher.eval()
    inputs, _ = teacher.prepare(examples)
    ours = teacher(inputs["input_ids"], inputs["attention_mask"], inputs.get("word_positions"))
    theirs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
    if "word_positions" in inputs:
        index = inputs["word_positions"].unsqueeze(-1).expand(-1, -1, theirs.size(-1))
        theirs = theirs.gather(1, index)
    return float((ours - theirs).abs().max())


# ---- `nlp-train export --format transformers` ----

TOLERANCE = 1e-4  # the largest logit difference a stock model may show on the probe texts (float rounding: ~1e-6)
PROBES = {"classification": ["a first example to probe , longer than the other one", "a second", "Third!"],
          "tagging": [["A", "first", "example", "to", "probe", "."], ["Second", "one"]]}


def _refuse(where: str, why: str, instead: str) -> DistillError:
    onnx = option("--format onnx", "format='onnx'")
    return DistillError(f"{where}: has no stock transformers form ({why}); {instead}, or export it with {onnx}")


def relu_shift(norm: nn.LayerNorm) -> torch.Tensor:
    """Per feature, a constant that makes every output of `norm` positive: a LayerNorm's normalised value
    lies within sqrt(n-1) of 0 (n features), so output i is within |gamma_i| sqrt(n-1) + |beta_i| of 0."""
    n = norm.normalized_shape[0]
    weight = norm.weight if norm.weight is not None else torch.ones(n)
    bias = norm.bias if norm.bias is not None else torch.zeros(n)
    return (weight.detach().abs() * (n - 1) ** 0.5 + bias.detach().abs() + 1.0).float()


def _sequence_classifier(network: Teacher, config: DistilBertConfig, where: str) -> PreTrainedModel:
    """DistilBertForSequenceClassification computing the teacher's head: first token, pre_classifier,
    ReLU, Linear. A head without pre_classifier gets an identity whose ReLU never clips: its bias shifts
    every feature above 0 (the encoder's last LayerNorm bounds them), and the Linear's bias takes the
    shift back, so relu(h + c) = h + c and W(h + c) + b - Wc = Wh + b."""
    from transformers import DistilBertForSequenceClassification
    model = DistilBertForSequenceClassification(config)
    model.distilbert.load_state_dict(network.encoder.state_dict())
    if network.pre_classifier is not None:
        model.pre_classifier.load_state_dict(network.pre_classifier.state_dict())
        model.classifier.load_state_dict(network.classifier.state_dict())
        return model
    last = network.encoder.transformer.layer[-1].output_layer_norm
    shift = relu_shift(last)
    weight, bias = network.classifier.weight.detach(), network.classifier.bias.detach()
    with torch.no_grad():
        model.pre_classifier.weight.copy_(torch.eye(config.dim))
        model.pre_classifier.bias.copy_(shift)
        model.classifier.weight.copy_(weight)
        model.classifier.bias.copy_((bias.double() - weight.double() @ shift.double()).float())
    return model


def _mean_pooling_classifier(network: Teacher, config: DistilBertConfig) -> PreTrainedModel:
    """`DistillTeacherForSequenceClassification` holding the teacher's encoder and head; its config names the
    class in ``auto_map``, so that a saved folder (with the class's file beside it) loads through the auto
    classes and `pipeline` with ``trust_remote_code=True``."""
    config = DistillTeacherConfig.from_dict({**config.to_dict(), "model_type": DistillTeacherConfig.model_type})
    config.classifier_pooling = network.config.pooling
    config.pre_classifier_layer = network.pre_classifier is not None
    module = MODULE_FILE.removesuffix(".py")
    config.auto_map = {"AutoConfig": f"{module}.{DistillTeacherConfig.__name__}",
                       AUTO_CLASS: f"{module}.{DistillTeacherForSequenceClassification.__name__}"}
    model = DistillTeacherForSequenceClassification(config)
    model.distilbert.load_state_dict(network.encoder.state_dict())
    model.classifier.load_state_dict(network.classifier.state_dict())
    if network.pre_classifier is not None:
        model.pre_classifier.load_state_dict(network.pre_classifier.state_dict())
    return model


def needs_remote_code(model: PreTrainedModel) -> bool:
    """Whether a saved `model` loads only with ``trust_remote_code=True`` (its class's file beside it)."""
    return isinstance(model, DistillTeacherForSequenceClassification)


def _token_classifier(network: Teacher, config, where: str) -> PreTrainedModel:
    """The encoder's own *ForTokenClassification (encoder, dropout, Linear on every token), holding the
    teacher's encoder and Linear; distill scores each word at its first sub-token, which it holds."""
    from transformers import AutoModelForTokenClassification
    try:
        model = AutoModelForTokenClassification.from_config(config)
    except ValueError:
        raise _refuse(where, f"transformers has no token classifier for {config.model_type} encoders",
                      "train on a DistilBERT or BERT encoder") from None
    base = getattr(model, model.base_model_prefix)
    state = {k: v for k, v in network.encoder.state_dict().items() if k in base.state_dict()}
    missing, unexpected = base.load_state_dict(state, strict=False)
    head = getattr(model, "classifier", None)
    if missing or not isinstance(head, nn.Linear) or head.weight.shape != network.classifier.weight.shape:
        raise _refuse(where, f"{type(model).__name__} does not hold the encoder and one Linear layer",
                      "train on a DistilBERT or BERT encoder")
    head.load_state_dict(network.classifier.state_dict())
    return model


def stock_transformers(network: Teacher, where: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """`network` (a teacher, a transformer student's network, a multi-task teacher's head) as a transformers
    model that `AutoModelFor...Classification.from_pretrained` rebuilds, and its tokenizer: a stock class
    wherever one computes its logits, else (a mean-pooling head) `DistillTeacherForSequenceClassification`,
    which loads with ``trust_remote_code=True``; refused in one line, naming why and what would work, where
    neither does. The logits are compared on probe texts before it is returned."""
    config_data = network.encoder.config.to_dict()
    labels = network.hierarchy.labels
    config_data.update(id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)})
    for key in ("_name_or_path", "name_or_path", "architectures"):
        config_data.pop(key, None)
    config = type(network.encoder.config).from_dict(config_data)
    if network.task == "classification":
        if network.config.long_inputs == "windows":
            raise _refuse(where, "it reads a long text in windows and averages them; a transformers classifier "
                          "reads one window",
                          "train it with " + option("--long-inputs truncate", "long_inputs='truncate'"))
        if not isinstance(network.encoder, DistilBertModel):
            raise _refuse(where, f"a {type(network.encoder).__name__}'s sequence classifier adds a pooler of its own",
                          "train it on a DistilBERT encoder (minilm-l6)")
        model = _sequence_classifier(network, config, where) if network.config.pooling == "first" else \
            _mean_pooling_classifier(network, config)
    else:
        if network.pre_classifier is not None:
            raise _refuse(where, "a token classifier has no dense layer before its Linear",
                          "train it " + option("without --pre-classifier", "with pre_classifier=False"))
        model = _token_classifier(network, config, where)
    model.eval()
    tokenizer = copy.deepcopy(network.tokenizer)
    tokenizer.model_max_length = network.config.max_length
    tokenizer.model_input_names = ["input_ids", "attention_mask"]  # what the teacher's encoder reads
    difference = max_logit_difference(network, model, PROBES[network.task])
    if difference > TOLERANCE:
        raise _refuse(where, f"{type(model).__name__} gives logits {difference:.2g} away from distill's",
                      "report it")
    return model, tokenizer
