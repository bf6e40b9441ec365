"""Resolve the settings' device and dtype to torch objects, with errors that list what exists."""

from __future__ import annotations

from typing import Any

from autogradcli.errors import DeviceError
from autogradcli.settings import DTYPES


def available_devices() -> list[str]:
    """Devices this machine can use, e.g. ``['cpu', 'cuda:0']``."""
    import torch

    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def resolve_device(spec: str) -> Any:
    """``auto`` is CUDA when available, else CPU (as seed 000 does); others are checked."""
    import torch

    if spec == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):
        raise DeviceError("unknown_device", device=spec)
    if device.type in ("cpu", "mps") and device.index not in (None, 0):
        raise DeviceError("device_index", device=spec, type=device.type, index=device.index)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda:0")
    name = "cpu" if device.type == "cpu" else str(device)
    if device.type == "mps":
        name = "mps"
    available = available_devices()
    if name not in available:
        raise DeviceError("device_unavailable", device=spec, available=available)
    return device


def resolve_dtype(name: str) -> Any:
    """The torch dtype for one of ``DTYPES``."""
    if name not in DTYPES:
        raise DeviceError("unknown_dtype", dtype=name, dtypes=list(DTYPES))
    import torch

    return getattr(torch, name)
