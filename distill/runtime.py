"""Where and how a run computes (`Runtime`) and where it writes (`Output`): two settings groups
(`distill.settings`) that every training entry point takes, light so that the command line declares their options
without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from distill.errors import DistillError, require_flag, require_whole
from distill.settings import named, setting


def _is_device_name(name: str) -> bool:
    import torch  # here: the command line builds its options from this module before any run needs torch
    try:
        torch.device(name)
    except RuntimeError:
        return False
    return True


# The most torch threads a run may ask for: past a few thousand, libgomp cannot create them (the run stops at its
# first parallel step, or aborts), and no CPU has more cores than this.
MAX_THREADS = 1024


@dataclass
class Runtime:
    """Where and how a run computes: device, precision (fp32, bf16, fp16 on CUDA, auto; None keeps the
    process's setting), torch threads (None keeps it) and whether to show progress bars."""

    device: str = setting("auto", help="auto (GPU if available), cpu, cuda or cuda:N.")
    precision: str | None = None  # the `nlp-train` group's --precision and --threads
    threads: int | None = None
    progress: bool = setting(True, option="--quiet", negated=True, help="No progress bars.")

    def __post_init__(self):
        require_whole("threads", self.threads, high=MAX_THREADS, optional=True)
        require_flag("progress", self.progress)
        if not isinstance(self.device, str) or (self.device != "auto" and not _is_device_name(self.device)):
            raise DistillError(f"unknown device {self.device!r}: use auto, cpu, cuda or cuda:N")


@dataclass
class Output:
    """Where a run writes: a model directory (None: nothing written), and the CLI's `--overwrite` /
    `--resume` for it; `config`: the run's options as a config file gives them (`distill.config`), written
    into the directory as run_config.yaml (the CLI's resolved options)."""

    directory: str | Path | None = setting(None, option="--output", path="dir", help="Directory for the model.")
    overwrite: bool = setting(False, help="Replace what --output already holds (a model, an interrupted run, an "
                                          "earlier result). The old content comes back if this run fails.")
    resume: bool = setting(False, help="Continue an interrupted run in --output from its last finished epoch (model, "
                                       "optimizer, RNG and data order restored; same options and unchanged input "
                                       "files required, else it is refused).")
    config: dict | None = None

    def __post_init__(self) -> None:
        require_flag("overwrite", self.overwrite)
        require_flag("resume", self.resume)
        if isinstance(self.directory, str) and not self.directory.strip():  # to the file system, the working folder
            raise DistillError(f"{named(Output, 'directory', f'directory={self.directory!r}')}: an empty or blank path "
                               "names no folder (as a path, '' is the current folder): give the model's directory")
        if self.config is not None and not isinstance(self.config, dict):
            raise DistillError(f"config must be a dict of option names and values, got {type(self.config).__name__}")
        if self.overwrite and self.resume:
            raise DistillError(f"{named(Output, 'resume', 'resume=True')} continues the interrupted run and "
                               f"{named(Output, 'overwrite', 'overwrite=True')} starts over: give one of them")
