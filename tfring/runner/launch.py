"""``python -m tfring.runner.launch -np 2 python train.py``: ``tfringrun`` without the console
script (docs/launcher.md). A face and entry point: the launcher is tfring/_runner/launch.py.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.runner.launch in tfring/_api/exports.py

if __name__ == "__main__":
    from tfring._runner.launch import main

    raise SystemExit(main())
