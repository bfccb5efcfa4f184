"""The node agent (``mfumon exporter``): one per GPU node.

Reads GPU counters from a source (:mod:`mfumon.exporter.node.sources`: NVML/GPM, a local DCGM exporter, or a
simulation), attributes GPUs to jobs, and pushes batches to the aggregator, spooling to disk while it is unreachable.
Imports run one way: this package uses :mod:`mfumon.exporter.samples` and :mod:`mfumon.exporter.errors`, never the job
side or the demo.
"""
