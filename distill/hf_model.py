"""The teacher as a stock `transformers` model with a head, for tools that expect one.

`transformers.pipeline` and other Hugging Face tooling take a ``PreTrainedModel`` whose
output has ``logits``. Tagging teachers map onto ``DistilBertForTokenClassification`` as
they are. ``DistilBertForSequenceClassification`` always applies a dense layer and ReLU to
the first token, so it cannot hold a teacher without `--pre-classifier` or with mean
pooling; `TeacherForSequenceClassification` holds any of our classification heads.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import (DistilBertConfig, DistilBertForTokenClassification, DistilBertModel,
                          DistilBertPreTrainedModel, PreTrainedModel, PreTrainedTokenizerBase)
from transformers.modeling_outputs import SequenceClassifierOutput

from distill.errors import DistillError
from distill.models.teacher import Teacher, pool


class TeacherForSequenceClassification(DistilBertPreTrainedModel):
    """DistilBERT + the teacher's head: first-token or mean pooling, optional dense+ReLU, Linear."""

    def __init__(self, config: DistilBertConfig):
        super().__init__(config)
        self.distilbert = DistilBertModel(config)
        self.pre_classifier = nn.Linear(config.dim, config.dim) if config.teacher_pre_classifier else None
        self.dropout = nn.Dropout(config.seq_classif_dropout)
        self.classifier = nn.Linear(config.dim, config.num_labels)
        self.post_init()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                **kwargs) -> SequenceClassifierOutput:
        hidden = self.distilbert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
        features = pool(hidden, attention_mask, self.config.teacher_pooling)
        if self.pre_classifier is not None:
            features = torch.relu(self.pre_classifier(features))
        return SequenceClassifierOutput(logits=self.classifier(self.dropout(features)))


def to_transformers(teacher: Teacher) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A `transformers` model computing the teacher's logits, and its tokenizer (same max length)."""
    if not isinstance(teacher.encoder, DistilBertModel):
        raise DistillError(f"only DistilBERT-form teachers convert to a transformers head model, "
                           f"not {type(teacher.encoder).__name__}")
    if teacher.config.long_inputs == "windows":
        raise DistillError("a teacher with long_inputs='windows' has no transformers head model: its head reads "
                           "the mean of several windows, a transformers model reads one")
    labels = teacher.hierarchy.labels
    config = DistilBertConfig.from_dict({
        **teacher.encoder.config.to_dict(), "id2label": dict(enumerate(labels)),
        "label2id": {label: i for i, label in enumerate(labels)},
        "teacher_pooling": teacher.config.pooling, "teacher_pre_classifier": teacher.pre_classifier is not None})
    if teacher.task == "classification":
        model = TeacherForSequenceClassification(config)
    elif teacher.pre_classifier is None:
        model = DistilBertForTokenClassification(config)
    else:
        raise DistillError("a tagging teacher with pre_classifier=True has no transformers token-classification "
                           "form")
    model.distilbert.load_state_dict(teacher.encoder.state_dict())
    model.classifier.load_state_dict(teacher.classifier.state_dict())
    if teacher.pre_classifier is not None:
        model.pre_classifier.load_state_dict(teacher.pre_classifier.state_dict())
    tokenizer = copy.deepcopy(teacher.tokenizer)
    tokenizer.model_max_length = teacher.config.max_length
    return model.eval(), tokenizer


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
