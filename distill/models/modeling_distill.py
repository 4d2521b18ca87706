"""A DistilBERT classifier with distill's teacher head, as transformers code that needs nothing from distill.

`DistilBertForSequenceClassification` always reads the first token through a dense layer and ReLU, so a
teacher that pools by the mean of its tokens (the default for sentence-transformers encoders such as
``minilm-l6``) has no stock transformers class. A transformers export of such a teacher saves this file
beside its weights as ``modeling_distill.py`` and names it in ``config.json``'s ``auto_map``, the Hub's
way of shipping a head of one's own: ``AutoModelForSequenceClassification.from_pretrained(FOLDER,
trust_remote_code=True)`` and ``pipeline(..., trust_remote_code=True)`` load it. distill itself, given such
a folder as a teacher, builds this class from its own package and never runs the folder's copy.

Its config has a model type of its own (`MODEL_TYPE`): under DistilBERT's, transformers loaded the folder without
``trust_remote_code`` as a stock ``DistilBertForSequenceClassification`` (first token, a new random dense
layer), whose labels were wrong, with a load report as the only sign; now it asks for ``trust_remote_code``.

Only torch and transformers are imported here: the file must work alone in a model folder.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DistilBertConfig, DistilBertModel, DistilBertPreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

MODULE_FILE = "modeling_distill.py"  # the name this file takes in an exported folder
POOLINGS = ("first", "mean")
MODEL_TYPE = "distill_distilbert"  # no stock class has it: transformers builds the class of `auto_map` or none


class DistillTeacherConfig(DistilBertConfig):
    """DistilBERT's config under a model type of its own (`MODEL_TYPE`), so that only this file's class loads it."""

    model_type = MODEL_TYPE


class DistillTeacherForSequenceClassification(DistilBertPreTrainedModel):
    """DistilBERT, then the first token's state or the mean over real tokens (``config.classifier_pooling``),
    an optional dense+ReLU layer (``config.pre_classifier_layer``), dropout and a Linear layer."""

    config_class = DistillTeacherConfig

    def __init__(self, config: DistilBertConfig):
        super().__init__(config)
        pooling = getattr(config, "classifier_pooling", "first")
        if pooling not in POOLINGS:
            raise ValueError(f"classifier_pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
        self.distilbert = DistilBertModel(config)
        self.pre_classifier = nn.Linear(config.dim, config.dim) if getattr(config, "pre_classifier_layer", False) \
            else None
        self.dropout = nn.Dropout(config.seq_classif_dropout)
        self.classifier = nn.Linear(config.dim, config.num_labels)
        self.post_init()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, **kwargs) -> SequenceClassifierOutput:
        """Logits per text; with `labels`, also their cross-entropy (what `transformers.Trainer` trains on)."""
        hidden = self.distilbert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
        if self.config.classifier_pooling == "mean":
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            features = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        else:
            features = hidden[:, 0]
        if self.pre_classifier is not None:
            features = torch.relu(self.pre_classifier(features))
        logits = self.classifier(self.dropout(features))
        loss = None if labels is None else nn.functional.cross_entropy(logits.view(-1, self.num_labels),
                                                                         labels.view(-1))
        return SequenceClassifierOutput(loss=loss, logits=logits)
