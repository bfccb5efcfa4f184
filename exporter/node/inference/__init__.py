"""Serving engines on this node, read without touching them: vLLM, SGLang and TGI ``/metrics``.

- ``engines``: one exposition text -> an :class:`~mfumon.exporter.node.inference.engines.EngineReading` (standard keys).
- ``histograms``: a latency histogram as the report carries it, and its increase between two readings.
- ``window``: two readings -> what the engine did in between (counter resets handled).
- ``endpoints``: ``--inference.url`` and how a served model is described (HF ``config.json``, cache, shape).
- ``discovery``: engines found among this node's processes.
- ``collector``: the thread that reads them every interval and posts inference reports.

Where endpoints come from: ``--inference.url`` (any engine the agent can reach: a pod IP, another host), and local
discovery (``--inference.discovery local``, the default): processes of this node in the agent's network namespace.
Kubernetes pods in their own network namespace are not discovered: configure them with ``--inference.url``.
"""
