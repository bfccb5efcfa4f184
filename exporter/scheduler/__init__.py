"""Scheduler adapters (``mfumon scheduler``): what Slurm or Kubernetes says is requested, queued and where.

One adapter per cluster reads the scheduler every interval and puts the whole picture to the aggregator
(``PUT /v1/scheduler/{source}``, the ingest token as everywhere else): pending and running GPU jobs with their
requests, pools and teams, submit/eligible/start times, and team quotas. The aggregator ends the jobs that left.

- :mod:`mfumon.exporter.scheduler.model`: the snapshot an adapter produces (the wire format);
- :mod:`mfumon.exporter.scheduler.slurm`: ``squeue --json`` (Slurm 22.05 to 24.11 data_parser shapes);
- :mod:`mfumon.exporter.scheduler.kubernetes`: pods, owners and Kueue through lightkube;
- :mod:`mfumon.exporter.scheduler.cli`: the loop and its settings.

This package never imports the node agent, the demo or the server (``tests/test_layout.py``).
"""
