"""Everything of mfu-monitor outside the aggregator, with none of the server's dependencies.

Sub-packages say where each part runs:

- :mod:`mfumon.exporter.node`: the node agent (``mfumon exporter``), one per GPU node;
- :mod:`mfumon.exporter.job`: the job side, inside a training or inference job (``JobReporter``, callbacks,
  ``mfumon wrap``); a job imports it from :mod:`mfumon` itself;
- :mod:`mfumon.exporter.scheduler`: the scheduler adapters (``mfumon scheduler``), one per cluster;
- :mod:`mfumon.exporter.ops`: tools for the people who run the cluster (``mfumon report``), on any machine that
  reaches the aggregator's API;
- :mod:`mfumon.exporter.demo`: the simulated cluster (``mfumon demo``), which starts the aggregator.

:mod:`mfumon.exporter.samples` (the node-sample wire contract), :mod:`mfumon.exporter.workloads` (which job a
Kubernetes pod belongs to) and :mod:`mfumon.exporter.errors` are shared. Imports run one way: ``demo`` ->
``node``/``job`` -> shared modules, and nothing here imports :mod:`mfumon.api` (the demo starts it as a process).
Optional heavy imports (pynvml, torch) happen inside the functions that need them.
"""
