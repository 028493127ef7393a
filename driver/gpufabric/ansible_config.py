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
        (None: the file leaves it alone)."""
        for entry in ini_entries().get(env, ()):
            if entry in self.values:
                return self.values[entry]
        return None


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
    """The user's configuration file, read; None when there is none."""
    path = find()
    return read(path) if path is not None else None


@functools.cache
def ini_entries() -> dict[str, tuple[tuple[str, str], ...]]:
    """Environment variable -> every (section, key) Ansible reads for the same setting."""
    import ansible.config
    from ansible.plugins.connection import ssh

    definitions = dict(yaml.safe_load((Path(ansible.config.__file__).parent / "base.yml").read_text()))
    definitions.update(yaml.safe_load(ssh.DOCUMENTATION)["options"])
    index: dict[str, set[tuple[str, str]]] = {}
    for definition in definitions.values():
        if not isinstance(definition, dict):
            continue
        ini = [(entry["section"], entry["key"]) for entry in definition.get("ini") or [] if "key" in entry]
        for env in definition.get("env") or []:
            index.setdefault(env["name"], set()).update(ini)
    return {env: tuple(sorted(pairs)) for env, pairs in index.items()}
