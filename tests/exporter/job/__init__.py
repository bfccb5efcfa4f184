"""Tests of the job-side reporter, model descriptors, framework callbacks and ``mfumon wrap``."""
