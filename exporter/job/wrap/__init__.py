"""``mfumon wrap``: run a command, read its throughput lines, report them.

:mod:`.cli` is the command, :mod:`.patterns` the trainers' log formats, :mod:`.proc` the child process.
"""
