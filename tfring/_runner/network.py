"""This machine's addresses for a job that spans hosts: ``tfring._bootstrap.network``
(below the core, which serves a store under mpirun), re-exported under the launcher's path."""

from tfring._bootstrap.network import (
    interface_address,
    interface_names,
    own_address,
    reachable_address,
    route_source_address,
)

__all__ = ["interface_address", "interface_names", "own_address", "reachable_address", "route_source_address"]
