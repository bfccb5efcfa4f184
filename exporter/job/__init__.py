"""The job side: what runs inside (or around) a training or inference job.

:mod:`mfumon.exporter.job.reporter` (``JobReporter``), :mod:`mfumon.exporter.job.models` (model descriptors),
:mod:`mfumon.exporter.job.integrations` (Hugging Face and Lightning callbacks) and :mod:`mfumon.exporter.job.wrap`
(``mfumon wrap``). Standard library only, except where a framework integration imports its framework lazily;
never imports the node agent. Users import the stable paths ``exporter``, ``mfumon.exporter.reporter``,
``mfumon.exporter.models`` and ``mfumon.exporter.integrations``.
"""
