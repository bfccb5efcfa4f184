"""Tools for the people who run the cluster (``mfumon report``).

They read the aggregator's JSON API over HTTP, like any script of an ops team would, and import nothing from
``api`` or the node and job sides: an ops laptop installs the client package and nothing else.
"""
