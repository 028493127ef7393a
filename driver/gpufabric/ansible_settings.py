# SPDX-License-Identifier: Apache-2.0
"""Named sets of Ansible settings for the playbook runs of `gpufabric apply` and `gpufabric drift`.

A set is a list of `Setting`s: an environment variable for ansible-runner and the same value as an
ansible.cfg key, each with a one-line reason. Two sets:

  stock   nothing changed: Ansible's own defaults (the baseline a benchmark compares against)
  tuned   pipelining, SSH multiplexing with a private control directory, forks sized to the run,
          a jsonfile fact cache under the state directory and `gathering: smart`

The strategy stays `linear` in both unless the caller asks for another: bench/fleet_drift.py measured
`free` no faster for these playbooks (docs/operations.md). examples/ansible.cfg is `ansible_cfg(example())`, for
people who run ansible-playbook or AWX directly (a test keeps the two equal).
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

from gpufabric import ansible_config, base_dirs
from gpufabric.ansible_config import ConfigFile
from gpufabric.errors import UserError

STOCK, TUNED = "stock", "tuned"
NAMES = (STOCK, TUNED)
# Ansible's default forks; a run never gets fewer.
FORKS_MIN = 5
# Each fork is a Python process of about 50-100 MB on the controller and holds an SSH connection:
# 50 keeps a small controller (4-8 GB) responsive. Larger fleets go faster with more controllers
# (AWX job slicing), not with more forks on one.
FORKS_MAX = 50
# Long enough for the check, remediation and final check of one `gpufabric drift --remediate`;
# short enough that a nightly run never reuses yesterday's facts (a reboot may change the kernel).
FACT_CACHE_TIMEOUT_S = 3600
# Keeps the SSH master open between the steps of one command (check, apply, check) and between
# the tasks of a slow role; Ansible's default is 60s.
CONTROL_PERSIST = "300s"
STRATEGIES = ("linear", "free", "host_pinned")
# ssh appends ".XXXXXXXXXXXXXXXX" to a ControlPath while it creates the socket and a UNIX socket
# path holds at most 107 bytes: with Ansible's 10-character name the directory must stay under this.
MAX_CONTROL_DIR_CHARS = 70


@dataclass(frozen=True)
class Setting:
    """One Ansible setting: its environment variable, its ansible.cfg place, the value, and why."""

    env: str
    section: str
    key: str
    value: str
    why: str


# The state directory of a root run without $XDG_STATE_HOME: the FHS place for a service's state
# (systemd's StateDirectory=gpufabric), where a read-only root filesystem mounts its volume.
ROOT_STATE_DIR = Path("/var/lib/gpufabric")
GPUFABRIC, ENVIRONMENT = "gpufabric", "environment"


def state_dir() -> Path:
    """gpufabric's state directory: $XDG_STATE_HOME/gpufabric; else /var/lib/gpufabric for root and
    ~/.local/state/gpufabric for anyone else."""
    state_home = base_dirs.state_home()
    if state_home is not None:
        return state_home / "gpufabric"
    if os.geteuid() == 0:
        return ROOT_STATE_DIR
    return base_dirs.home() / ".local" / "state" / "gpufabric"


def forks_for(hosts: int) -> int:
    """One fork per host of the run, at least Ansible's default, at most FORKS_MAX."""
    return max(FORKS_MIN, min(hosts, FORKS_MAX))


def _forks(value: int) -> Setting:
    return Setting(
        "ANSIBLE_FORKS",
        "defaults",
        "forks",
        str(value),
        f"one fork per host of the run (at least {FORKS_MIN}, at most {FORKS_MAX}): a task reaches every host at once",
    )


def _strategy(value: str) -> Setting:
    if value not in STRATEGIES:
        raise UserError(f"unknown Ansible strategy {value!r}; accepted: {', '.join(STRATEGIES)}")
    return Setting(
        "ANSIBLE_STRATEGY",
        "defaults",
        "strategy",
        value,
        "linear: every host finishes a task before the next starts, so serial and max_fail_percentage mean what "
        "they say (bench/fleet_drift.py measured free no faster)",
    )


def tuned(
    hosts: int, *, state: Path | None = None, forks: int | None = None, strategy: str | None = None
) -> list[Setting]:
    """The tuned set for a run over `hosts` hosts; state: where the fact cache and control sockets live."""
    base = state if state is not None else state_dir()
    return [
        Setting(
            "ANSIBLE_PIPELINING",
            "connection",
            "pipelining",
            "True",
            "modules go through the SSH session's stdin: one round trip per task instead of three "
            "(needs sudo without requiretty, the default of current distributions)",
        ),
        Setting(
            "ANSIBLE_SSH_ARGS",
            "ssh_connection",
            "ssh_args",
            f"-C -o ControlMaster=auto -o ControlPersist={CONTROL_PERSIST}",
            f"one SSH connection per host reused by every task (ControlPersist {CONTROL_PERSIST}: it outlives a "
            "slow task and the steps of drift --remediate)",
        ),
        Setting(
            "ANSIBLE_SSH_CONTROL_PATH_DIR",
            "ssh_connection",
            "control_path_dir",
            str(base / "cp"),
            "control sockets in a private directory (Ansible creates it 0700) with a short path: a UNIX socket "
            "path holds at most 107 bytes",
        ),
        _forks(forks if forks is not None else forks_for(hosts)),
        Setting(
            "ANSIBLE_CACHE_PLUGIN",
            "defaults",
            "fact_caching",
            "jsonfile",
            "facts outlive a run (one JSON file per host), so a play that gathers facts skips hosts gathered "
            "within the timeout",
        ),
        Setting(
            "ANSIBLE_CACHE_PLUGIN_CONNECTION",
            "defaults",
            "fact_caching_connection",
            str(base / "facts"),
            "the fact cache lives under gpufabric's state directory, not in a run's artifacts",
        ),
        Setting(
            "ANSIBLE_CACHE_PLUGIN_TIMEOUT",
            "defaults",
            "fact_caching_timeout",
            str(FACT_CACHE_TIMEOUT_S),
            "an hour: covers one command's runs, never reaches the next night's (a reboot may change the kernel)",
        ),
        Setting(
            "ANSIBLE_GATHERING",
            "defaults",
            "gathering",
            "smart",
            "gather only for hosts without cached facts (site.yml gathers none itself; a role's own setup "
            "task always runs)",
        ),
        _strategy(strategy or "linear"),
    ]


def stock(*, forks: int | None = None, strategy: str | None = None) -> list[Setting]:
    """Ansible's defaults: nothing set, except what the caller asks for explicitly."""
    chosen = []
    if forks is not None:
        chosen.append(_forks(forks))
    if strategy is not None:
        chosen.append(_strategy(strategy))
    return chosen


def parse_name(name: str) -> str:
    """A settings set's name (--settings), checked."""
    if name not in NAMES:
        raise UserError(f"unknown Ansible settings {name!r}; accepted: {', '.join(NAMES)}")
    return name


def settings(
    name: str, hosts: int, *, state: Path | None = None, forks: int | None = None, strategy: str | None = None
) -> list[Setting]:
    """The named set for a run over `hosts` hosts."""
    if parse_name(name) == TUNED:
        return tuned(hosts, state=state, forks=forks, strategy=strategy)
    return stock(forks=forks, strategy=strategy)


@dataclass(frozen=True)
class Layered:
    """One setting of the set and what decides it: the environment, the user's ansible.cfg, or gpufabric."""

    setting: Setting
    source: str  # ENVIRONMENT, the ansible.cfg's path, or GPUFABRIC
    value: str  # the value Ansible gets


def layer(chosen: list[Setting], config: ConfigFile | None) -> list[Layered]:
    """The set under the user's own configuration: what they exported wins, then what their
    ansible.cfg sets, then gpufabric's value (an environment variable outranks any file, so
    gpufabric leaves out every setting the user decided)."""
    layered = []
    for setting in chosen:
        from_file = config.value_of(setting.env) if config is not None else None
        exported = ansible_config.environment_value(setting.env)
        if exported is not None:
            name, value = exported
            layered.append(Layered(setting, ENVIRONMENT if name == setting.env else f"{ENVIRONMENT} ({name})", value))
        elif from_file is not None:
            layered.append(Layered(setting, str(config.path if config else ""), from_file))
        else:
            layered.append(Layered(setting, GPUFABRIC, setting.value))
    return layered


HOST_KEY_CHECKING = Setting(
    "ANSIBLE_HOST_KEY_CHECKING",
    "defaults",
    "host_key_checking",
    "True",
    "a security setting, never a tuning: the user's environment or ansible.cfg decides it, else Ansible's own "
    "default (on). Passed to every run, since ansible-runner turns it off whenever the variable is unset, and "
    "a variable outranks the user's ansible.cfg",
)


def host_key_checking(config: ConfigFile | None) -> Layered:
    """Host key checking as the user's configuration decides it: their environment, then their ansible.cfg,
    then Ansible's default (True). The value goes to every run as ANSIBLE_HOST_KEY_CHECKING, unchanged (Ansible
    reads a variable and a file key the same way), so that ansible-runner's False never fills the gap."""
    return layer([HOST_KEY_CHECKING], config)[0]


def ours(layered: list[Layered]) -> list[Setting]:
    """The settings gpufabric itself sets (the user decided none of them)."""
    return [entry.setting for entry in layered if entry.source == GPUFABRIC]


def environment(chosen: list[Setting]) -> dict[str, str]:
    """The settings as environment variables for ansible-runner."""
    return {setting.env: setting.value for setting in chosen}


def without_long_control_dir(chosen: list[Setting]) -> list[Setting]:
    """The settings less a control directory too long for a socket path (ssh would fail every
    connection): Ansible's own default (~/.ansible/cp) applies instead."""
    return [
        setting
        for setting in chosen
        if not (setting.env == "ANSIBLE_SSH_CONTROL_PATH_DIR" and len(setting.value) > MAX_CONTROL_DIR_CHARS)
    ]


def prepare(chosen: list[Setting]) -> None:
    """Create the fact cache and control directories private (0700): facts describe the fleet."""
    for setting in chosen:
        if setting.env in ("ANSIBLE_CACHE_PLUGIN_CONNECTION", "ANSIBLE_SSH_CONTROL_PATH_DIR"):
            Path(setting.value).expanduser().mkdir(mode=0o700, parents=True, exist_ok=True)


SECTION_ORDER = ("defaults", "connection", "ssh_connection")
# The example file: paths under ~ (Ansible expands them), forks at the cap since a file cannot
# follow the size of each run.
EXAMPLE_STATE = Path("~/.local/state/gpufabric")


def example() -> list[Setting]:
    return tuned(FORKS_MAX, state=EXAMPLE_STATE)


def ansible_cfg(chosen: list[Setting]) -> str:
    """An ansible.cfg with the settings, grouped by section, each under its reason."""
    lines = [
        "# SPDX-License-Identifier: Apache-2.0",
        "# The `tuned` Ansible settings of `gpufabric apply` and `gpufabric drift`, for running",
        "# playbooks/site.yml with ansible-playbook or AWX directly. Generated from",
        "# driver/gpufabric/ansible_settings.py (a test keeps them equal); docs/apply.md explains them.",
        "# forks: gpufabric sizes it to each run; a file cannot, so it holds the cap.",
    ]
    present = {setting.section for setting in chosen}
    for section in sorted(present, key=lambda name: (SECTION_ORDER.index(name) if name in SECTION_ORDER else 99, name)):
        lines += ["", f"[{section}]"]
        for setting in chosen:
            if setting.section == section:
                lines += [f"# {line}" for line in textwrap.wrap(setting.why, width=98)]
                lines.append(f"{setting.key} = {setting.value}")
    return "\n".join(lines) + "\n"
