"""mfu-monitor's aggregator: ingest job throughput and GPU samples, compute MFU, store in SQL, serve /metrics.

``mfumon serve`` runs it; :func:`mfumon.api.main.create_app` builds the FastAPI app. The MFU engine is
``mfumon.mfu``.
"""
