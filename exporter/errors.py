"""Errors raised by the node exporter.

The tree::

    ExporterError
     ├── ConfigError             invalid settings: the CLI exits 2 with the message
     ├── SourceUnavailable       a counter source cannot be used at all (NVML not loadable, dcgm-exporter down)
     └── DeviceError             one call on one device failed; the counter is left out of this sample
          ├── CounterUnsupported  NOT_SUPPORTED / NO_PERMISSION / FUNCTION_NOT_FOUND: left out for good, logged once
          └── GpuLost             GPU_IS_LOST: the device is reported ``up: false`` with no counters

``NVMLError`` is translated into these in exactly one place (``mfumon.exporter.node.sources.nvml_api``), so nothing else
in the exporter depends on pynvml's exception classes.
"""

from __future__ import annotations

__all__ = ["ConfigError", "CounterUnsupported", "DeviceError", "ExporterError", "GpuLost", "SourceUnavailable"]


class ExporterError(Exception):
    """Base class of every error the exporter raises on purpose."""


class ConfigError(ExporterError):
    """The settings are invalid (bad flag value, unreadable token file, ...)."""


class SourceUnavailable(ExporterError):
    """The counter source cannot be opened: NVML absent, dcgm-exporter unreachable, ..."""


class DeviceError(ExporterError):
    """A call on one device failed; ``code`` is the library's error code when there is one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class CounterUnsupported(DeviceError):
    """The device does not support this counter (or we lack the permission): leave it out, never send zero."""


class GpuLost(DeviceError):
    """The GPU fell off the bus (NVML_ERROR_GPU_IS_LOST): report ``up: false`` rather than stale values."""
