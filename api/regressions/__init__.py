"""Regressions across software changes (issue 59): the statistics, and the comparison of a signature's jobs before
and after each change of one fingerprint component."""
