"""tfring's public names, one table per public package (``exports.py``), and the one
function that binds a package's names from its table (``binding.bind``).

Each public package's ``__init__`` holds no import list and no ``__all__`` of its own: it
calls ``bind(globals())``, which imports the table's eager names, sets ``__all__`` and
returns the package's ``__getattr__`` (lazy names) and ``__dir__``.
``tests/test_public_api.py`` reads the same tables. Nothing here imports TensorFlow.
"""
