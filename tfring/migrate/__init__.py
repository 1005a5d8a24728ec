"""``tfring-migrate``: rewrites the mechanical edits that move a Horovod, Keras 2 or
MultiWorkerMirroredStrategy script to tfring and Keras 3, and lists the rest with the fix.

    tfring-migrate train.py run.sh       # a unified diff, and the manual edits left
    tfring-migrate --write train.py      # change the files in place

Python files are rewritten on their syntax tree (python_source.py, on LibCST); shell
scripts and other text get the ``horovodrun`` and ``HOROVOD_*`` rewrites (text_rules.py).
The tables of what maps to what are in rules.py; docs/migrating.md explains every edit.
"""
