"""Measurements the benchmark scripts share: speed, the machine, sizes, logging."""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_commit() -> str:
    """The commit of the code measuring: `git rev-parse --short HEAD` of this checkout, `+changes` where files
    differ from it, `unknown` outside a git checkout."""
    import subprocess

    def git(*args: str) -> str | None:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return "unknown"
    return commit + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def shown(path) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    path = Path(path)
    return str(path.relative_to(ROOT)) if path.is_absolute() and path.is_relative_to(ROOT) else str(path)


def best_speeds(models: dict, batch: list, single: list) -> dict[str, dict[str, float]]:
    """Batch-32 examples/s over `batch` and batch-1 ms over `single` for each model, the best of two
    rounds taken one model after another, so a burst of load from other jobs does not decide a ratio."""
    from distill.inference import predict_logits, throughput
    rows = {name: {"examples_per_second_b32": 0.0, "latency_ms_b1": float("inf")} for name in models}
    for _ in range(2):
        for name, model in models.items():
            row = rows[name]
            row["examples_per_second_b32"] = max(row["examples_per_second_b32"], throughput(model, batch, 32))
            for example in single[:5]:  # warm-up
                predict_logits(model, [example], 1)
            started = time.perf_counter()
            for example in single:
                predict_logits(model, [example], 1)
            row["latency_ms_b1"] = min(row["latency_ms_b1"], 1000 * (time.perf_counter() - started) / len(single))
    return rows


def disk_bytes(directory: Path) -> int:
    """Bytes of a model directory as deployed: everything but the run's own records."""
    records = {"metrics.jsonl", "train_summary.json", "test_metrics.json"}
    return sum(f.stat().st_size for f in Path(directory).rglob("*") if f.is_file() and f.name not in records)


def matmul_peak(dtype, size: int, seconds: float, windows: int = 5) -> float:
    """GFLOP/s of a square torch.matmul loop, the best of `windows` time windows (other jobs come and
    go on a shared machine): this machine's practical peak for that dtype."""
    import torch
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.matmul(a, b)
    best = 0.0
    for _ in range(windows):
        runs, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds / windows:
            torch.matmul(a, b)
            runs += 1
        best = max(best, 2 * size ** 3 * runs / elapsed / 1e9)
    return best


def machine(threads: int, peak_seconds: float) -> dict:
    """What the speed figures ran on, and its measured matmul peaks at the benchmark's thread count."""
    import platform
    import torch
    import transformers
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
             if line.startswith("model name")] if cpuinfo.exists() else []
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else None
    torch.set_num_threads(threads)
    return {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "cpu": names[0] if names else platform.processor() or platform.machine(),
            "logical_cores": os.cpu_count(), "memory_bytes": memory, "threads": threads,
            "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "matmul_size": 1024, "matmul_gflops_fp32": matmul_peak(torch.float32, 1024, peak_seconds),
            "matmul_gflops_bf16": matmul_peak(torch.bfloat16, 1024, peak_seconds)}


if __name__ == "__main__":  # a module of the benchmark scripts: run on its own it would do nothing in silence
    raise SystemExit(f"{__file__}: a module that scripts/benchmark.py imports, not a script; run scripts/benchmark.py "
                     "--help")
