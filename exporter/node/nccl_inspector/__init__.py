"""NCCL Inspector on the node (issue 61): read the profiler plugin's dump directory and fold it per job.

NCCL (2.28+) ships an Inspector profiler plugin that writes every collective's GPU-timed execution time, message size
and bandwidth per communicator and rank, as JSON lines (``<dir>/<host>-pid<pid>.log``) or as Prometheus textfiles
(``<dir>/nccl_inspector_metrics_<uuid>.prom``). It stops at the process; this package joins its records to jobs
through the pid (the node agent's attribution) and aggregates them per job, communicator and collective kind.

Stages, each a module, joined by frozen records (:mod:`.records`):

- :mod:`.jsonl`: one line -> :class:`~.records.CollRecord` or a skip reason; :class:`~.jsonl.Tailer` reads only the
  new complete lines of each file (offsets, truncation, rotation, bounds);
- :mod:`.prom`: the textfiles of both Prometheus modes (2.29 latest-sample, 2.30 aggregated ``v5.1``);
- :mod:`.bandwidth`: NCCL's traffic and bus-factor definitions;
- :mod:`.window`: one read interval's records -> per (pid, communicator, op) figures and lost records;
- :mod:`.source`: :class:`~.source.InspectorSource`, the whole read for one agent cycle;
- :mod:`.cycle`: the node agent with the inspector in its cycle (the batch is kept, not pushed yet).
"""

from mfumon.exporter.node.nccl_inspector.source import InspectorBatch, InspectorSource

__all__ = ["InspectorBatch", "InspectorSource"]
