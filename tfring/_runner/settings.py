"""Launcher flags that set the core's TFRING_* settings, and their validation.

Help texts, defaults and bounds come from the core's table (``_core.config_table()``), and
validation is the core's own (``_core.validate_config``), so nothing here retypes them.
Every setting is validated before the launcher starts anything: a bad value ends the
launch with exit code 2 and the core's message naming the variable.
"""

import dataclasses

from tfring import _core
from tfring import _errors as errors

MIB = 1 << 20

# Variables the launcher sets per worker; values inherited from its own environment are
# replaced, never validated or passed on.
IDENTITY = ("TFRING_RANK", "TFRING_SIZE", "TFRING_LOCAL_RANK", "TFRING_LOCAL_SIZE",
            "TFRING_CROSS_RANK", "TFRING_CROSS_SIZE", "TFRING_STORE_ADDR", "TFRING_SECRET")


@dataclasses.dataclass(frozen=True)
class SettingFlag:
    flag: str
    variable: str
    unit_bytes: int = 0  # the flag is in units of this many bytes; the variable in bytes
    metavar: str = "VALUE"
    note: str = ""  # what the launcher itself does with the value
    switch: str = ""  # non-empty: the flag takes no value and sets the variable to this

    @property
    def dest(self):
        return self.flag.lstrip("-").replace("-", "_")

    def to_env(self, text):
        """The variable's value for the flag's text (non-numbers pass through for the core
        to refuse with its own message)."""
        if not self.unit_bytes:
            return text
        try:
            return str(round(float(text) * self.unit_bytes))
        except ValueError:
            return text


FLAGS = (
    SettingFlag("--fusion-threshold-mb", "TFRING_FUSION_THRESHOLD", unit_bytes=MIB, metavar="MB"),
    SettingFlag("--cycle-time-ms", "TFRING_CYCLE_TIME_MS", metavar="MS"),
    SettingFlag("--timeout-s", "TFRING_TIMEOUT_S", metavar="S"),
    SettingFlag("--start-timeout", "TFRING_START_TIMEOUT_S", metavar="S"),
    SettingFlag("--stall-warning-s", "TFRING_STALL_WARNING_S", metavar="S"),
    SettingFlag("--stall-shutdown-s", "TFRING_STALL_SHUTDOWN_S", metavar="S"),
    SettingFlag("--peer-timeout-s", "TFRING_PEER_TIMEOUT_S", metavar="S"),
    SettingFlag("--log-level", "TFRING_LOG_LEVEL", metavar="LEVEL"),
    SettingFlag("--bind-addr", "TFRING_BIND_ADDR", metavar="ADDR",
                note="tfringrun also serves its store there (default 127.0.0.1)."),
    SettingFlag("--timeline-filename", "TFRING_TIMELINE", metavar="PATH"),
    SettingFlag("--autotune", "TFRING_AUTOTUNE", switch="1"),
    SettingFlag("--autotune-log-file", "TFRING_AUTOTUNE_LOG", metavar="PATH"),
)


def table():
    """The core's settings table as {name: spec dict}."""
    return {p["name"]: p for p in _core.config_table()}


def add_flags(parser):
    """Adds one option per setting the core knows, with the core's description and default."""
    specs = table()
    group = parser.add_argument_group("settings passed to every worker (see docs/configuration.md)")
    for f in FLAGS:
        spec = specs.get(f.variable)
        if spec is None:  # an older core without this setting
            continue
        default = spec["default"] or "(empty)"
        if f.unit_bytes and spec["default"]:
            default = f"{int(spec['default']) / f.unit_bytes:g}"
        text = f"{spec['description']} Sets {f.variable}; default {default}. {f.note}".rstrip()
        if f.switch:
            group.add_argument(f.flag, dest=f.dest, action="store_const", const=f.switch, default=None,
                               help=text.replace(f"Sets {f.variable};", f"Sets {f.variable}={f.switch};"))
        else:
            group.add_argument(f.flag, dest=f.dest, metavar=f.metavar, default=None, help=text)


def collect(namespace, environ):
    """The settings of this job: {variable: (value text, origin)}.

    Settings inherited from the launcher's environment come first (origin ``environment``);
    flags win over them (origin: the flag). Identity variables are left out.
    """
    specs = table()
    out = {}
    for name, value in environ.items():
        if name in specs and name not in IDENTITY and value != "":
            out[name] = (value, f"environment variable {name}")
    for f in FLAGS:
        text = getattr(namespace, f.dest, None)
        if text is not None:
            out[f.variable] = (f.to_env(text), f.flag if f.switch else f"{f.flag} {text}")
    return out


def float_value(settings, name):
    """A float setting of the job (``collect`` output): its value from the flags or the
    environment, else the core's default."""
    return float(settings.get(name, (table()[name]["default"], None))[0])


LOG_LEVELS = ("trace", "debug", "info", "warning", "error")


def log_enabled(settings, level, subsystem):
    """Whether the job's TFRING_LOG_LEVEL (``collect`` output, else the core's default)
    lets a ``level`` message of ``subsystem`` through, read as the core reads it:
    ``LEVEL[,SUBSYSTEM=LEVEL...]``, any case, fatal as error. For the launcher's own
    messages; call after ``validate`` (a malformed value lets everything through)."""
    text = settings.get("TFRING_LOG_LEVEL", (table()["TFRING_LOG_LEVEL"]["default"], None))[0]
    levels = {}  # "" -> the default level, else subsystem -> level
    for part in text.lower().split(","):
        name, _, value = part.rpartition("=")
        levels[name] = "error" if value == "fatal" else value
    chosen = levels.get(subsystem, levels.get("", "warning"))
    return chosen not in LOG_LEVELS or LOG_LEVELS.index(level) >= LOG_LEVELS.index(chosen)


def validate(settings, slot_env):
    """Validates ``settings`` (from ``collect``) together with one rank's identity.

    Raises:
      ValueError: a setting is invalid; the message names the flag or environment variable
        it came from and the core's reason (which names the TFRING_* variable).
    """
    values = {name: text for name, (text, _) in settings.items()}
    values.update(slot_env)
    values.update({"TFRING_STORE_ADDR": "127.0.0.1:1", "TFRING_SECRET": "0" * 64})
    try:
        _core.validate_config(values)
    except errors.InvalidArgumentError as e:
        message = str(e)
        origin = next((o for name, (_, o) in settings.items() if message.startswith(name + "=")), None)
        raise ValueError(f"invalid setting ({origin}): {message}" if origin else message) from None
