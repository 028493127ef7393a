# SPDX-License-Identifier: Apache-2.0
"""The user's own Ansible configuration file, found and read as ansible-playbook finds and reads it.

ansible-runner starts ansible-playbook from a temporary directory, where it would never see the
user's ./ansible.cfg. gpufabric therefore looks the file up itself, in the user's directory and in
Ansible's order (ANSIBLE_CONFIG, ./ansible.cfg unless the directory is world-writable,
~/.ansible.cfg, /etc/ansible/ansible.cfg: Ansible's own `find_ini_config_file`), and hands its path
to every run as ANSIBLE_CONFIG. A relative path in the file then resolves against the file's
directory, as it does for ansible-playbook run there.

gpufabric's tuned settings are environment variables, which outrank any ansible.cfg; a setting the
file sets must win, so `sets()` tells which of them the file sets, under any of the sections and
keys Ansible reads for that setting (base.yml and the ssh connection plugin's documentation list
them: `pipelining` is read from [connection] and from [ssh_connection]).
"""

from __future__ import annotations

import configparser
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpufabric.errors import UserError


@dataclass(frozen=True)
class ConfigFile:
    """The user's ansible.cfg: where it is and what it sets, by (section, key)."""

    path: Path
    values: dict[tuple[str, str], str]

    def value_of(self, env: str) -> str | None:
        """The file's value of the setting Ansible also reads from the environment variable `env`
        (None: the file leaves it alone). Where the file sets it under several sections, the last
        one Ansible reads wins, as in Ansible."""
        found = None
        for entry in same_setting(env).ini:
            if entry in self.values:
                found = self.values[entry]
        return found


def environment_value(env: str) -> tuple[str, str] | None:
    """(variable, value) of the setting `env` names as the user's environment sets it, under any of the
    variables Ansible reads for it (the last set one wins, as in Ansible); None: the environment leaves it."""
    found = None
    for name in same_setting(env).env:
        if name in os.environ:
            found = (name, os.environ[name])
    return found


# The path lists that gpufabric or ansible-runner also set through the environment (this collection; the
# runner's event callback), by environment variable: Ansible's setting name for each. A variable outranks the
# user's ansible.cfg, so the user's list (environment, file or Ansible's default) is joined after gpufabric's.
PATH_LISTS = {
    "ANSIBLE_COLLECTIONS_PATH": "COLLECTIONS_PATHS",
    "ANSIBLE_CALLBACK_PLUGINS": "DEFAULT_CALLBACK_PLUGIN_PATH",
}
ANSIBLE_DEFAULT = "Ansible's default"


@dataclass(frozen=True)
class PathList:
    """A path list as Ansible resolves it for the user: absolute paths, and where the value came from."""

    paths: tuple[str, ...]
    source: str  # "environment (VARIABLE)", the ansible.cfg's path, or ANSIBLE_DEFAULT


def path_list(env: str, config: ConfigFile | None) -> PathList:
    """The user's value of the path list `env` names (a key of PATH_LISTS), resolved by Ansible's own
    ConfigManager: their environment, then their file (a relative entry is relative to the file, as
    Ansible reads it), else Ansible's default under ANSIBLE_HOME."""
    import jinja2
    from ansible.config.manager import ConfigManager

    name = PATH_LISTS[env]
    manager = ConfigManager(str(config.path) if config is not None else None)
    value, origin = manager.get_config_value_and_origin(name)
    if origin == "default":
        # Ansible templates this default when it loads its constants; the manager alone leaves it raw.
        default = manager.get_configuration_definition(name)["default"]
        home = manager.get_config_value("ANSIBLE_HOME")
        text = jinja2.Environment(autoescape=False).from_string(default).render(ANSIBLE_HOME=home)
        return PathList(tuple(os.path.expanduser(p) for p in text.split(os.pathsep) if p), ANSIBLE_DEFAULT)
    source = f"environment ({origin.removeprefix('env: ')})" if origin.startswith("env: ") else origin
    return PathList(tuple(str(path) for path in value or []), source)


def find() -> Path | None:
    """The file ansible-playbook would read if started in this process's directory, or None."""
    from ansible.config.manager import find_ini_config_file

    found = find_ini_config_file()
    return Path(found).resolve() if found else None


def read(path: Path) -> ConfigFile:
    """Read the file as Ansible does (configparser, `;` starts an inline comment)."""
    parser = configparser.ConfigParser(inline_comment_prefixes=(";",))
    try:
        with path.open(encoding="utf-8") as handle:
            parser.read_file(handle)
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise UserError(
            f"Ansible configuration {path} (found as ansible-playbook finds it: $ANSIBLE_CONFIG, ./ansible.cfg, "
            f"~/.ansible.cfg, /etc/ansible/ansible.cfg) cannot be read: {exc}; fix it or point ANSIBLE_CONFIG "
            "at another file"
        ) from exc
    # raw: the text as written (Ansible expands it later); [DEFAULT]'s keys show up in every section.
    values = {
        (section, key): parser.get(section, key, raw=True) for section in parser.sections() for key in parser[section]
    }
    return ConfigFile(path, values)


def user_config() -> ConfigFile | None:
    """The user's configuration file, read and checked; None when there is none."""
    path = find()
    config = read(path) if path is not None else None
    check_values(config)
    return config


# Ansible's setting types, as a user would write a value of each.
ACCEPTED_TYPES = {
    "integer": "a whole number",
    "int": "a whole number",
    "float": "a number",
    "boolean": "a boolean (true or false)",
    "bool": "a boolean (true or false)",
}


def check_values(config: ConfigFile | None) -> None:
    """Every setting the user's file or environment sets has a value of the type Ansible reads it as.

    Importing ansible.constants (any Ansible plugin does) converts every setting and raises on the
    first bad one (`forks = abc`), which would surface as a traceback from deep inside a run; this
    names the file, key, value and what is accepted instead. Only the settings the user sets are
    checked: converting all of them takes most of a second.
    """
    from ansible.config.manager import ConfigManager
    from ansible.errors import AnsibleError

    manager = ConfigManager(str(config.path) if config is not None else None)
    for name, definition in manager.get_configuration_definitions().items():
        envs = [entry["name"] for entry in definition.get("env") or [] if "name" in entry]
        inis = [(entry["section"], entry["key"]) for entry in definition.get("ini") or [] if "key" in entry]
        from_env = [env for env in envs if env in os.environ]
        from_file = [ini for ini in inis if config is not None and ini in config.values]
        if not from_env and not from_file:
            continue
        try:
            manager.get_config_value_and_origin(name)
        except AnsibleError as exc:
            choices = definition.get("choices")
            accepted = (
                "one of " + ", ".join(str(choice) for choice in choices)
                if choices
                else ACCEPTED_TYPES.get(
                    str(definition.get("type")), f"a value of Ansible's type {definition.get('type')}"
                )
            )
            # The environment outranks the file, as in Ansible: the last variable set wins.
            if from_env:
                where = f"{from_env[-1]}={os.environ[from_env[-1]]!r} (environment)"
            else:
                assert config is not None
                section, key = from_file[-1]
                where = (
                    f"[{section}] {key} = {config.values[(section, key)]!r} in the Ansible configuration {config.path}"
                )
            raise UserError(f"{where}: not a valid {name}; accepted: {accepted}") from exc


@dataclass(frozen=True)
class Names:
    """Every environment variable and (section, key) Ansible reads for one setting, in the order it reads them."""

    env: tuple[str, ...]
    ini: tuple[tuple[str, str], ...]


def same_setting(env: str) -> Names:
    """The names of the setting Ansible also reads from the environment variable `env`."""
    return _names().get(env, Names((env,), ()))


@functools.cache
def _names() -> dict[str, Names]:
    """Environment variable -> the names of its setting, from Ansible's base.yml and the ssh connection
    plugin's documentation (which reads some settings under more names: ANSIBLE_SSH_HOST_KEY_CHECKING,
    [ssh_connection] host_key_checking)."""
    import ansible.config
    from ansible.plugins.connection import ssh

    # libyaml's loader where PyYAML has it: base.yml is 2,000 lines, read by every command (0.32 s -> 0.06 s).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    base = (Path(ansible.config.__file__).parent / "base.yml").read_text()
    definitions = list(yaml.load(base, Loader=loader).values())  # a safe loader (CSafeLoader or SafeLoader)
    definitions += yaml.load(ssh.DOCUMENTATION, Loader=loader)["options"].values()
    envs: dict[str, list[str]] = {}
    inis: dict[str, list[tuple[str, str]]] = {}
    for definition in definitions:
        if not isinstance(definition, dict):
            continue
        names = [entry["name"] for entry in definition.get("env") or [] if "name" in entry]
        ini = [(entry["section"], entry["key"]) for entry in definition.get("ini") or [] if "key" in entry]
        for name in names:
            # A dict keeps the first place of each name: the order Ansible reads them in.
            envs[name] = list(dict.fromkeys([*envs.get(name, []), *names]))
            inis[name] = list(dict.fromkeys([*inis.get(name, []), *ini]))
    return {name: Names(tuple(envs[name]), tuple(inis[name])) for name in envs}
