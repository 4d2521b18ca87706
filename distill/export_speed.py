"""Which teacher runs a bulk teacher pass faster on this machine, the PyTorch teacher or its ONNX export,
measured rather than assumed.

How fast an export runs next to PyTorch depends on the CPU: fp32 ONNX ran a MiniLM teacher at 0.84x PyTorch on
one Intel Xeon and 1.1x on an AMD EPYC at batch 64, int8 faster than both on both (docs/export.md). So
`nlp-train export` with check data times both on that data and records it in the export's card (`speed_record`),
and `pseudo-label --use-export` runs the export only where that measurement was taken on the same CPU model with
the same threads and precision and says the export was faster (`choose_teacher_pass`).
"""

from __future__ import annotations

import datetime
import logging
import platform
from typing import Sequence

import torch

from distill import precision
from distill.errors import DistillError, option
from distill.inference import throughput

__all__ = ["SPEED_BATCH_SIZE", "SPEED_EXAMPLES", "choose_teacher_pass", "cpu_model", "speed_record"]

logger = logging.getLogger("distill")

SPEED_EXAMPLES = 256  # check examples a measurement reads (one pass per model)
SPEED_BATCH_SIZE = 64  # pseudo-label's default --batch-size


def cpu_model() -> str:
    """This machine's CPU model: the 'model name' of /proc/cpuinfo (Linux), else what `platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def speed_record(reference, exported, examples: Sequence, batch_size: int = SPEED_BATCH_SIZE) -> dict:
    """What an export's card records of its speed: ex/s of the PyTorch model and of the export over up to
    `SPEED_EXAMPLES` examples, at `batch_size`, with this process's threads and precision, on this CPU, today."""
    examples = list(examples[:SPEED_EXAMPLES])
    pytorch = throughput(reference, examples, batch_size)
    export = throughput(exported, examples, batch_size)
    return {"examples": len(examples), "batch_size": batch_size, "threads": torch.get_num_threads(),
            "precision": precision.current(), "cpu": cpu_model(), "date": datetime.date.today().isoformat(),
            "pytorch_examples_per_second": round(pytorch, 1), "export_examples_per_second": round(export, 1),
            "ratio": round(export / pytorch, 3)}


def _threads(count: int) -> str:
    return f"{count} thread{'s' if count != 1 else ''}"


def choose_teacher_pass(teacher_dir: str, export_dir: str, device: str = "auto") -> tuple[str, dict]:
    """The directory a teacher pass loads, `teacher_dir` (a PyTorch teacher) or `export_dir` (an ONNX export of
    it), and what was chosen and why (``{"teacher": DIR, "export": bool, "reason": ...}``, said in one log line):
    the export where its card's speed record was measured on this CPU model with this thread count and
    precision and says it ran faster than PyTorch, and the teacher would run on the CPU; else the PyTorch teacher.
    An export of another teacher, or a `teacher_dir` that is itself an export, is refused in one line."""
    from distill.models import read_model_card
    from distill.models.base import pick_device
    from distill.models.kinds import require_kind
    from distill.models.onnx import made_from
    use_export = option("--use-export", "use_export")
    require_kind(teacher_dir, "use-export")  # the teacher-kind table: a kind that has an ONNX export of its own
    card = read_model_card(export_dir)
    if card.get("format") != "onnx":
        raise DistillError(f"{export_dir}: is not an ONNX export; {use_export} takes a folder that nlp-train export "
                           f"wrote from {teacher_dir} in the ONNX format")
    recorded = card.get("export", {})
    if not made_from(recorded, teacher_dir):
        raise DistillError(f"{export_dir}: is an export of {recorded.get('source')}, not of {teacher_dir} (the model "
                           f"card it recorded differs); give that teacher, or export {teacher_dir}")
    what = f"ONNX {recorded.get('quantize') or 'fp32'} export {export_dir}"
    speed = card.get("speed")
    here = {"cpu": cpu_model(), "threads": torch.get_num_threads(), "precision": precision.current()}
    measure = option("--check-data", "check_data")
    if pick_device(device).type != "cpu":
        why = f"it runs on {pick_device(device).type}, the {what} on the CPU"
    elif not speed:
        why = f"the {what} has no speed measurement (exported without {measure})"
    elif any(speed.get(key) != value for key, value in here.items()):
        why = (f"the {what} was measured on {speed.get('cpu')}, {_threads(speed.get('threads', 0))}, "
               f"{speed.get('precision')}; this is {here['cpu']}, {_threads(here['threads'])}, {here['precision']}: "
               f"export it here with {measure} to measure")
    elif speed["ratio"] <= 1:
        why = f"the {what} measured {speed['ratio']:.2f}x PyTorch on this CPU, {_threads(here['threads'])}"
    else:
        agreed = card.get("agreement") or {}
        changed = agreed.get("labels_changed", 0) / max(agreed.get("labels_compared", 0), 1)
        reason = (f"measured {speed['ratio']:.2f}x PyTorch on this CPU, {_threads(here['threads'])}; labels may "
                  f"differ from PyTorch on {100 * changed:.1f}% of the check data")
        return export_dir, {"teacher": export_dir, "export": True, "reason": reason,
                            "line": f"teacher pass: {what} ({reason})"}
    return teacher_dir, {"teacher": teacher_dir, "export": False, "reason": why,
                         "line": f"teacher pass: PyTorch teacher {teacher_dir} ({why})"}
