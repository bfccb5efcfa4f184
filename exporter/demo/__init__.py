"""``mfumon demo``: the aggregator plus a simulated cluster, for a machine without GPUs.

The top of the import graph: it drives the node agent's pipeline and posts job reports like a real job would.
"""
