"""The core's layering (docs/architecture.md, "The core's folders"): cc/core holds one folder
per layer, every include of a core header names its folder ("base/status.h"), and a file
includes only its own layer or the layers below it. No build needed: reads the sources."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = os.path.join(ROOT, "cc", "core")

# Lowest first. A layer may include itself and what comes before it, never what follows.
LAYERS = ["base", "rendezvous", "transport", "collectives", "control", "backends", "runtime"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def _sources(folder):
    for dirpath, _, names in os.walk(folder):
        for name in sorted(names):
            if name.endswith((".h", ".cc")):
                yield os.path.join(dirpath, name)


def _layer_of(path):
    """The layer folder of a file under cc/core (backends/nccl/ belongs to backends)."""
    return os.path.relpath(path, CORE).split(os.sep)[0]


def _core_headers():
    return {os.path.relpath(p, CORE) for p in _sources(CORE) if p.endswith(".h")}


def find_layer_violations(sources, core_headers):
    """(file, include, why) for each include into a higher layer, or of a core header by a
    path that does not name its folder. `sources` maps a path to its text."""
    by_basename = {os.path.basename(h): h for h in core_headers}
    problems = []
    for path, text in sources.items():
        in_core = os.path.commonpath([path, CORE]) == CORE
        own = _layer_of(path) if in_core else None
        for include in INCLUDE.findall(text):
            if include in core_headers:
                target = include.split("/")[0]
                if own is not None and LAYERS.index(target) > LAYERS.index(own):
                    problems.append((path, include, f"{own}/ may not include the higher layer {target}/"))
            elif "/" not in include and include in by_basename:
                problems.append((path, include, f"name the folder: \"{by_basename[os.path.basename(include)]}\""))
    return problems


def _read_all(*folders):
    return {p: open(p, encoding="utf-8").read() for f in folders for p in _sources(f)}


def test_core_files_live_in_layer_folders():
    loose = [n for n in os.listdir(CORE) if os.path.isfile(os.path.join(CORE, n))]
    assert loose == [], f"cc/core keeps files only in its layer folders {LAYERS}; found {loose}"
    assert sorted(n for n in os.listdir(CORE)) == sorted(LAYERS), (
        "a new folder in cc/core needs its place in LAYERS here and in docs/architecture.md")


def test_no_include_reaches_into_a_higher_layer():
    sources = _read_all(os.path.join(ROOT, "cc"))
    problems = find_layer_violations(sources, _core_headers())
    assert problems == [], "\n".join(f"{os.path.relpath(p, ROOT)}: #include \"{i}\": {why}"
                                     for p, i, why in problems)


@pytest.mark.parametrize("text, expected", [
    ('#include "runtime/job.h"\n', "may not include the higher layer runtime/"),
    ('#include "status.h"\n', 'name the folder: "base/status.h"'),
])
def test_the_check_catches_an_upward_or_unnamed_include(text, expected):
    # A base file including runtime/, and an include that leaves the folder out: both found.
    fake = os.path.join(CORE, "base", "fake_for_test.cc")
    problems = find_layer_violations({fake: text}, _core_headers())
    assert len(problems) == 1 and expected in problems[0][2], problems
