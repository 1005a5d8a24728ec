"""The implementation of ``tfring-migrate`` (private; ``tfring.migrate`` is its face).

``tfring-migrate``: rewrites the mechanical edits that move a Horovod, Keras 2 or
MultiWorkerMirroredStrategy script to tfring and Keras 3, and lists the rest with the fix.

    tfring-migrate train.py run.sh       # a unified diff, and the manual edits left
    tfring-migrate --write train.py      # change the files in place

Python files are rewritten on their syntax tree (python_source.py, on LibCST), notebooks'
code cells the same way (notebook.py); shell scripts and other text get the ``horovodrun``,
``HOROVOD_*`` and Horovod module-name rewrites (text_rules.py; module rules: modules.py).
The tables of what maps to what are in rules.py; docs/migrating.md explains every edit.
"""
