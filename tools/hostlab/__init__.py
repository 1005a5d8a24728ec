"""Emulated hosts on one machine, shared by tests/ (the host-fault and multi-host tests,
through the ``lab`` fixture of tests/host_lab.py), lab/ (the scale lab and the host soak)
and tests/measure/faults.py: nothing here imports tests, lab or benchmarks.

- ``netns``: network namespaces joined by a bridge, links shaped with ``tc tbf``.
- ``host_faults``: kill, cut, freeze or throttle a whole emulated host.
- ``elastic_job``: an elastic job over those hosts and one fault round of it.
- ``elastic_numpy.py``: the light elastic worker that job runs by default.
"""
