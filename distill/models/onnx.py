"""A model exported by `nlp-train export --format onnx`, run by ONNX Runtime behind the interface
inference code expects of every model (`prepare`, `decode`, calling it gives logits, `hierarchy`,
`task`), so `predict`, `evaluate` and `compare` take an exported directory like any other.

Only the forward pass is in the ONNX graph. Turning text into inputs (`prepare`) and logits into
labels (`decode`, a CRF's Viterbi included) is the PyTorch model's own code, run on a copy of it
built without weights (its configuration, vocabularies or tokenizer, and a CRF's transitions), so
an exported model reads text exactly as the model it came from. The teacher tagger's graph gives
per-window logits; they are put in the sentence grid here, as its `forward` does.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Sequence

import torch

from distill.errors import DistillError, import_extra, option, random_embeddings
from distill.io import file_sha256, load_tensors, read_json
from distill.models.base import LabelModel
from distill.models.card import CRF_WEIGHTS, ONNX_FILE

EXPORT_EXTRA = "pip install 'distill[export]'"  # onnx and onnxruntime: exports and running them

__all__ = ["CRF_WEIGHTS", "ONNX_FILE", "OnnxModel", "agreement_line", "made_from", "onnxruntime_module",
           "weightless_model"]

logger = logging.getLogger("distill")


def onnxruntime_module():
    """onnxruntime, or one line naming the `export` extra that installs it (`import_extra`: an installed one that
    does not import is said so)."""
    return import_extra("onnxruntime", "an ONNX model", EXPORT_EXTRA)


def weightless_model(directory: str | Path, card: dict) -> LabelModel:
    """The PyTorch model an export came from, built from its description without initialising weights
    (uninitialised memory): what its `prepare` and `decode` need, at no cost of training-time init."""
    directory = Path(directory)
    with torch.device("meta"):
        if card.get("model") == "transformers":  # a transformers classifier's export: its config and tokenizer
            from distill.models.hub_teacher import TransformersTeacher
            model = TransformersTeacher.unloaded(directory)
        elif card["kind"] == "teacher":
            from distill.models import teacher_class
            from distill.models.slim import SLIM_META
            model = teacher_class(card).unloaded(directory, read_json(directory / SLIM_META), card)
        else:
            from distill.models import student_class
            model = student_class(directory, card).unloaded(directory, card)
    model = model.to_empty(device="cpu").eval()
    crf = getattr(model, "crf", None)
    if crf is not None:
        crf.load_state_dict(load_tensors(directory / CRF_WEIGHTS))
    return model


class OnnxModel:
    """An exported directory: an ONNX Runtime session on the CPU plus the source model's pre- and
    post-processing. ONNX Runtime uses as many threads as torch is set to (`nlp-train --threads`)."""

    training = False
    device = torch.device("cpu")
    fixed_precision = True  # ONNX Runtime computes in the graph's types whatever --precision says (the logit cache)

    def __init__(self, directory: str | Path, card: dict):
        self.directory = Path(directory)
        self.card = card
        self.source = weightless_model(directory, card)
        self.hierarchy, self.task = self.source.hierarchy, self.source.task
        onnxruntime = onnxruntime_module()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initializers are noise to a user
        try:
            self.session = onnxruntime.InferenceSession(str(self.directory / ONNX_FILE), options,
                                                        providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own exception types for unreadable files
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise DistillError(f"{self.directory / ONNX_FILE}: ONNX Runtime cannot load it ({first})") from None
        self.input_names = [node.name for node in self.session.get_inputs()]

    # What inference code calls on a torch model; an ONNX Runtime session has no modes and runs on the CPU.
    def eval(self) -> "OnnxModel":
        return self

    def train(self, mode: bool = True) -> "OnnxModel":
        return self

    def to(self, device: torch.device | str) -> "OnnxModel":
        return self

    def prepare(self, examples: Sequence) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        return self.source.prepare(examples)

    # Labels for examples, as every model gives them: the PyTorch models' own code, run on this session's logits.
    predict = LabelModel.predict
    batch_logits = LabelModel.batch_logits
    prepare_on_device = LabelModel.prepare_on_device

    def save_pretrained(self, directory: str | Path, overwrite: bool = False, **extra) -> Path:
        """Refused: an export holds no PyTorch weights to write, and its card records what it was made from and
        how it agreed with that model; a folder copied with its card stays a checked export."""
        source = self.card["export"]["source"]
        raise DistillError(f"{self.directory}: is an exported ONNX model, which save_pretrained does not write again: "
                           f"copy its folder, or export the PyTorch model it came from ({source}) again (nlp-train "
                           "export, distill.export.export_model)")

    def decode(self, logits: torch.Tensor, mask: torch.Tensor | None) -> list:
        return self.source.decode(logits, mask)

    def __call__(self, **inputs: torch.Tensor) -> torch.Tensor:
        """Logits, as the source model's forward gives them for the same inputs."""
        # The exporter drops inputs the graph does not read (the ID-CNN's lengths), so feed what it has.
        feed = {name: inputs[name].cpu().numpy() for name in self.input_names}
        logits = torch.from_numpy(self.session.run(None, feed)[0])
        if "word_slots" in inputs:  # the teacher tagger: window logits -> the sentence grid
            from distill.models.layers import place_in_grid
            return place_in_grid(logits, inputs["word_slots"], inputs["grid_shape"])
        return logits

    def parameter_count(self) -> int:
        """The source model's parameters (quantization changes their type, not their number)."""
        return int(self.card["export"]["parameters"])

    def weight_bytes(self) -> int:
        """Bytes a deployment loads: the ONNX file (weights, int8 ones for a quantized model, and graph)."""
        return (self.directory / ONNX_FILE).stat().st_size

    def fingerprint(self) -> str:
        """A digest of the export's content: the sha256 of every file as its card records them (checked when it
        was loaded), so the logit cache keeps an int8 export's logits apart from its fp32 one's and from the
        PyTorch model's, and a re-export (other weights, another quantization) starts afresh."""
        files = json.dumps({"onnx": self.card["sha256"]}, sort_keys=True)
        return hashlib.sha256(files.encode()).hexdigest()[:40]

    def teacher_record(self) -> dict:
        """What a run that takes this export as its teacher records of it (its summary, pseudo-label's
        signature): the export's fingerprint, format, quantization and source, and its agreement with the
        source model on its check data (None: exported without --check-data)."""
        export = self.card["export"]
        return {"fingerprint": self.fingerprint(), "format": "onnx", "quantize": export.get("quantize"),
                "source": export.get("source"), "source_card_sha256": export.get("source_card_sha256"),
                "agreement": self.card.get("agreement")}

    def source_model(self) -> LabelModel | None:
        """The PyTorch model this export was made from, if its card names it, it is still there and its card is
        the one the export recorded (so its files, checked on loading, are those exported); else None."""
        export = self.card.get("export", {})
        source = export.get("source")
        if not source or not made_from(export, source):
            return None
        from distill.models import load_model
        return load_model(source, device="cpu")

    def sub_word_tokenizer(self) -> Any:
        """The teacher interface (`distill.models.base.LabelModel`): the source model's tokenizer."""
        return self.source.sub_word_tokenizer()

    def input_embeddings(self) -> torch.Tensor | None:
        """The teacher interface: the source model's sub-word embedding table, from the graph."""
        return self.embedding_table()

    def embedding_table(self) -> torch.Tensor | None:
        """The source model's sub-word embedding table, read from the graph's initializers (int8 quantization
        leaves embedding tables fp32): by its parameter's name, else the one initializer of its shape; None
        for a model without one (a word student) or a graph where it cannot be told."""
        embeddings = getattr(getattr(self.source, "encoder", None), "get_input_embeddings", lambda: None)()
        if embeddings is None:
            return None
        names = [name for name, value in self.source.named_parameters() if value is embeddings.weight]
        try:
            import onnx
            from onnx import numpy_helper
            graph = onnx.load(str(self.directory / ONNX_FILE), load_external_data=False).graph
        except Exception:  # no onnx module, or a file it cannot read: the source model may still be there
            return None
        shape = list(embeddings.weight.shape)
        fp32 = [init for init in graph.initializer if list(init.dims) == shape and init.data_type == 1]
        found = [init for init in fp32 if init.name in names] or (fp32 if len(fp32) == 1 else [])
        return torch.from_numpy(numpy_helper.to_array(found[0]).copy()) if found else None

    def initialising_teacher(self, layers: bool) -> LabelModel:
        """The PyTorch model a new student starts from (`--embeddings-from-teacher`): for its embeddings alone,
        the weightless source model with its embedding table from the graph (else the source model itself);
        for a transformer student's layers and head (`layers`), the source model the export was made from."""
        where = self.directory
        if not layers:
            if getattr(self.source, "tokenizer", None) is None:
                return self.source  # a word student exported: it has no sub-word embeddings, as build_from_teacher says
            table = self.embedding_table()
            if table is not None:
                with torch.no_grad():
                    self.source.encoder.get_input_embeddings().weight.copy_(table)
                return self.source
        source = self.source_model()
        if source is not None:
            return source
        found = self.card.get("export", {}).get("source")
        what = "its embedding table cannot be read from the graph, and" if not layers else \
            "a transformer student copies the teacher's layers, which an ONNX graph does not give back, and"
        instead = random_embeddings() if not layers else \
            option("--encoder minilm-l6 (a pretrained encoder)", "a pretrained encoder")
        raise DistillError(f"{where}: an ONNX export as the teacher: {what} the model it was exported from "
                           f"({found}) is gone or changed since; use {instead}, or give that PyTorch model")


def made_from(export: dict, source: str | Path) -> bool:
    """Whether `source` is still the model an export's card (its ``export`` record) says it was made from: the
    same model card (whose checksums cover its files), or for a transformers classifier the same files."""
    if export.get("source_fingerprint"):
        from distill.models.hub_files import is_transformers_source, source_fingerprint
        return is_transformers_source(source) and source_fingerprint(source) == export["source_fingerprint"]
    from distill.models.card import MODEL_CARD
    card = Path(source) / MODEL_CARD
    return bool(export.get("source_card_sha256")) and card.is_file() \
        and file_sha256(card) == export["source_card_sha256"]


def agreement_line(model: OnnxModel, directory: str | Path) -> str:
    """One line on an export used as a teacher: what it is, and how it agreed with its source on its check data."""
    export, agreed = model.card["export"], model.card.get("agreement")
    kind = f"ONNX {export.get('quantize') or 'fp32'} export of {export.get('source')}"
    if not agreed:
        unchecked = option("--check-data", "check_data")
        return f"teacher {directory}: {kind}; no agreement record (exported without {unchecked})"
    return (f"teacher {directory}: {kind}; on {agreed['data']}: max logit difference {agreed['max_abs_logit_diff']:.2g}, "
            f"{agreed['labels_changed']:,} of {agreed['labels_compared']:,} labels changed, {agreed['metric']} "
            f"{agreed['reference_score']:.4f} -> {agreed['score']:.4f}")
