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

from pathlib import Path
from typing import Sequence

import torch

from distill.errors import DistillError
from distill.io import load_tensors, read_json
from distill.models.base import LabelModel
from distill.models.card import CRF_WEIGHTS, ONNX_FILE


__all__ = ["CRF_WEIGHTS", "ONNX_FILE", "OnnxModel", "onnxruntime_module", "weightless_model"]


def onnxruntime_module():
    """onnxruntime, or a one-line error saying how to install it (it is the optional `export` extra)."""
    try:
        import onnxruntime
    except ImportError:
        raise DistillError("ONNX models need onnxruntime: pip install -e .[export] (or pip install onnxruntime)") \
            from None
    return onnxruntime


def weightless_model(directory: str | Path, card: dict) -> LabelModel:
    """The PyTorch model an export came from, built from its description without initialising weights
    (uninitialised memory): what its `prepare` and `decode` need, at no cost of training-time init."""
    directory = Path(directory)
    with torch.device("meta"):
        if card["kind"] == "teacher":
            from distill.models.slim import SLIM_META
            from distill.models.teacher import Teacher
            model = Teacher.unloaded(directory, read_json(directory / SLIM_META), card)
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
            from distill.models.teacher import place_in_grid
            return place_in_grid(logits, inputs["word_slots"], inputs["grid_shape"])
        return logits

    def parameter_count(self) -> int:
        """The source model's parameters (quantization changes their type, not their number)."""
        return int(self.card["export"]["parameters"])

    def weight_bytes(self) -> int:
        """Bytes a deployment loads: the ONNX file (weights, int8 ones for a quantized model, and graph)."""
        return (self.directory / ONNX_FILE).stat().st_size
