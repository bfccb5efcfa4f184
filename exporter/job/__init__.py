"""The job side: what runs inside (or around) a training or inference job.

:mod:`exporter.job.reporter` (``JobReporter``), :mod:`exporter.job.models` (model descriptors),
:mod:`exporter.job.integrations` (Hugging Face and Lightning callbacks) and :mod:`exporter.job.wrap`
(``mfumon wrap``). Standard library only, except where a framework integration imports its framework lazily;
never imports the node agent. Users import the stable paths ``exporter``, ``exporter.reporter``,
``exporter.models`` and ``exporter.integrations``.
"""
