"""Developer tooling: scripts (docs generation, system packages, GPU checks) and
``tools.hostlab``, the emulated hosts that tests/, lab/ and benchmarks/ all use."""
