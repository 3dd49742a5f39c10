"""What this machine offers a run: GPUs (CUDA devices a process can use) and CPU cores.

Read without importing torch where the answer is known without it (no GPU driver, no GPU), so the
sidecar, its request checks and `config`'s device defaults stay cheap on a CPU machine.
"""

from __future__ import annotations

import os


GPU_DRIVER_PATHS = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/kfd")
"""What a machine with an NVIDIA (or ROCm) GPU driver has; without any of them CUDA cannot be there."""


def gpu_driver_present() -> bool:
    return any(os.path.exists(p) for p in GPU_DRIVER_PATHS)


def cuda_device_count() -> int:
    """CUDA devices this process can use (torch's answer). On a machine without a GPU driver it is 0
    without importing torch: the sidecar then never loads torch (~2 s of CPU, 200 MB) just to learn
    that a CPU machine has no GPU; only its workers do."""
    if not gpu_driver_present():
        return 0
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def cuda_available() -> bool:
    return cuda_device_count() > 0


def visible_gpus() -> list[str]:
    """The CUDA devices this process sees, as CUDA_VISIBLE_DEVICES names them ('0', '1', ...)."""
    count = cuda_device_count()
    if count == 0:
        return []
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if len(listed) >= count else [str(i) for i in range(count)]


def cpu_cores() -> int:
    """The threads the sidecar may hand out: $OMP_NUM_THREADS when set, else the usable CPUs."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
