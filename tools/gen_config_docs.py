"""Writes docs/configuration.md from the core's own settings table (never retyped).

The table is generated; the sections after it are written by hand and kept from the file
as it is (everything from the line MANUAL on).

    python tools/gen_config_docs.py          # rewrite the file
    python tools/gen_config_docs.py --check  # exit 1 if the file is stale (used by tests)
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tfring import _core

TARGET = os.path.join(ROOT, "docs", "configuration.md")
MANUAL = "<!-- Written by hand from here on: tools/gen_config_docs.py keeps it. -->\n"

HEADER = """# Configuration

Every setting is a `TFRING_*` environment variable (set by `tfringrun` flags or by you), or
an explicit argument to `tfring.init()` (lower-case name without the prefix, e.g.
`tfring.init(cycle_time_ms=0.5)`). Explicit arguments win over the environment, which wins
over the defaults. A bad value fails `init()` with `InvalidArgumentError` naming the
variable. `tfring.config()` returns the effective values and where each came from.

Settings marked in the column *Same on every rank* change what goes on the wire: `init()`
fails on every rank when one rank's value differs from rank 0's, naming that rank ("with
TFRING_SHM": only where shared memory is on).

This page is generated from the core's table (`cc/core/base/settings_table.h`) by
`python tools/gen_config_docs.py`.

| Variable | Type | Default | Range | Same on every rank | Description |
|---|---|---|---|---|---|
"""


def manual_part(current):
    """The hand-written sections of the file's text `current` (from MANUAL on), or ""."""
    at = current.find(MANUAL)
    return "" if at < 0 else "\n" + current[at:]


def render(current=""):
    lines = [HEADER]
    for p in _core.config_table():
        if p["type"] in ("int", "float"):
            lo, hi = p["min"], p["max"]
            fmt = (lambda v: str(int(v))) if p["type"] == "int" else (lambda v: f"{v:g}")
            rng = f"{fmt(lo)} .. {fmt(hi)}"
        elif p["type"] == "enum":
            rng = ", ".join(f"`{choice}`" for choice in p["choices"])
        else:
            rng = ""
        default = p["default"] if p["default"] != "" else "(empty)"
        alike = p["must_match"]
        lines.append(f"| `{p['name']}` | {p['type']} | `{default}` | {rng} | {alike} | {p['description']} |\n")
    return "".join(lines) + manual_part(current)


def main():
    current = ""
    if os.path.exists(TARGET):
        with open(TARGET) as f:
            current = f.read()
    text = render(current)
    if "--check" in sys.argv:
        if current != text:
            print("docs/configuration.md is stale: run python tools/gen_config_docs.py")
            return 1
        return 0
    with open(TARGET, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
