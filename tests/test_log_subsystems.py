"""Every subsystem the core logs under can be named in TFRING_LOG_LEVEL: the list in
cc/core/base/logging.h (which ParseLogSpec accepts) holds every name a TFRING_LOG call uses,
and the setting's description (settings_table.h; docs/configuration.md is generated from it)
lists them all.
Reads the sources; no build needed."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG_CALL = re.compile(r'TFRING_LOG\(\s*LogLevel::k\w+\s*,\s*"([^"]+)"')


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _declared_subsystems():
    match = re.search(r"kLogSubsystems\[\]\s*=\s*\{([^}]*)\}", _read("cc", "core", "base", "logging.h"))
    return re.findall(r'"([^"]+)"', match.group(1))


def _used_subsystems():
    used = {}
    for dirpath, _, names in os.walk(os.path.join(ROOT, "cc")):
        for name in names:
            if name.endswith((".h", ".cc")):
                path = os.path.join(dirpath, name)
                for subsystem in LOG_CALL.findall(_read(path)):
                    used.setdefault(subsystem, os.path.relpath(path, ROOT))
    return used


def test_every_logged_subsystem_can_be_configured():
    declared = set(_declared_subsystems())
    used = _used_subsystems()
    assert used, "no TFRING_LOG call found: the pattern no longer matches the sources"
    missing = {s: where for s, where in used.items() if s not in declared}
    assert missing == {}, f"TFRING_LOG_LEVEL would refuse these subsystems (add them to kLogSubsystems): {missing}"


def test_the_setting_lists_every_subsystem():
    match = re.search(r"\(subsystems: ([a-z_, ]+)\)", _read("cc", "core", "base", "settings_table.h"))
    assert match, "TFRING_LOG_LEVEL's description no longer lists its subsystems"
    assert [s.strip() for s in match.group(1).split(",")] == _declared_subsystems()
