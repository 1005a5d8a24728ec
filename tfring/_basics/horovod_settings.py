"""Horovod settings left in the environment: tfring reads only its ``TFRING_*`` names.

A job moved from Horovod often keeps ``HOROVOD_FUSION_THRESHOLD=...`` or
``HOROVOD_CYCLE_TIME=...`` in its launch scripts. They would be ignored without a word, so
``init()`` warns once per process, naming each variable and its tfring counterpart (or why
there is none). The identity variables (``HOROVOD_RANK`` ...) are left alone: tfringrun
sets them itself for scripts that read them. The tables are tfring-migrate's
(``tfring._migrate.rules``, reached through ``tfring._bootstrap.providers``: tfring-migrate
sits above the core), which also rewrites the names in scripts.
"""

import os
import warnings

from tfring._bootstrap import providers

_IDENTITY = {"HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
             "HOROVOD_CROSS_SIZE"}


def ignored(environ=None):
    """``[(name, advice)]`` for every Horovod setting in ``environ`` that tfring ignores."""
    environ = os.environ if environ is None else environ
    if not any(n.startswith("HOROVOD_") and n not in _IDENTITY for n in environ):
        return []  # the common case: the rules' tables are not even loaded (init's cost per rank)
    rules = providers.get("horovod_rules")
    out = []
    for name in sorted(n for n in environ if n in rules.ENVIRONMENT and n not in _IDENTITY):
        new = rules.ENVIRONMENT[name]
        if new is None:
            out.append((name, f"no tfring equivalent: {rules.ENVIRONMENT_REASONS[name]}"))
        elif new not in environ:
            out.append((name, f"set {new} instead"))
    return out


def warn_if_any(environ=None):
    """One ``UserWarning`` listing the ignored Horovod settings (none: nothing)."""
    found = ignored(environ)
    if found:
        listed = "; ".join(f"{name} ({advice})" for name, advice in found)
        warnings.warn(f"tfring ignores these Horovod settings in the environment: {listed}. "
                      "See docs/migrating.md (tfring-migrate renames them in scripts).", UserWarning, stacklevel=3)
