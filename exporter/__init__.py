"""mfu-monitor's node side: the node exporter (``mfumon exporter``), the simulated cluster (``mfumon demo``) and
the job-side reporter (``mfumon wrap``).

Nothing in this package imports FastAPI, SQLAlchemy or ``api``: GPU nodes and training jobs install it without the
server's dependencies. Optional heavy imports (pynvml, torch) happen inside the functions that need them.
"""
