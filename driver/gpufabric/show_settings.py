# SPDX-License-Identifier: Apache-2.0
"""`--show-settings`: the Ansible configuration a playbook run of gpufabric would use, and who decided it.

For each setting of gpufabric's set, for host key checking and for the path lists every run merges
(collections, callback plugins): the value Ansible gets and where it comes from (the user's environment,
the user's ansible.cfg, or gpufabric), beside the configuration file found (the one
every run gets as ANSIBLE_CONFIG) and the variables gpufabric always sets. Nothing runs.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

from gpufabric import ansible_config, ansible_settings, collection, runs

# The path lists every run merges (runs.base_env): the row's setting, and how its source reads.
PATH_LISTS = {
    "ANSIBLE_COLLECTIONS_PATH": ("[defaults] collections_path", "gpufabric's collection, then {}"),
    "ANSIBLE_CALLBACK_PLUGINS": ("[defaults] callback_plugins", "{}, then ansible-runner's event callback"),
}


def describe(
    name: str,
    hosts: int,
    *,
    forks: int | None = None,
    strategy: str | None = None,
    always: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The settings of a run of `hosts` hosts with the named set, layered under the user's configuration;
    always: the environment the command sets besides (default: runs.base_env())."""
    config = ansible_config.user_config()
    chosen = ansible_settings.settings(name, hosts, forks=forks, strategy=strategy)
    layered = ansible_settings.layer(chosen, config)
    kept = {setting.env for setting in ansible_settings.without_long_control_dir(ansible_settings.ours(layered))}
    rows = []
    for entry in [*layered, ansible_settings.host_key_checking(config)]:
        source = entry.source
        if entry.setting is ansible_settings.HOST_KEY_CHECKING and source == ansible_settings.GPUFABRIC:
            source = "Ansible's default, set since ansible-runner would turn it off"
        elif source == ansible_settings.GPUFABRIC and entry.setting.env not in kept:
            source = "Ansible's default (control path too long for a socket)"
        rows.append(
            {
                "setting": f"[{entry.setting.section}] {entry.setting.key}",
                "env": entry.setting.env,
                "value": entry.value,
                "source": source,
            }
        )
    base = runs.base_env() if always is None else always
    bundled = collection.bundled_path()
    for env, (setting, merged) in PATH_LISTS.items():
        user = ansible_config.path_list(env, config)
        source = merged.format(user.source)
        if env == "ANSIBLE_COLLECTIONS_PATH" and bundled and str(bundled) in base.get(env, "").split(os.pathsep):
            source += ", then the collections the wheel bundles"
        rows.append({"setting": setting, "env": env, "value": base.get(env, ""), "source": source})
    shown = {row["env"] for row in rows}
    fixed = {key: value for key, value in base.items() if key.startswith("ANSIBLE_") and key not in shown}
    return {
        "config_file": str(config.path) if config else None,
        "settings_set": name,
        "hosts": hosts,
        "settings": rows,
        "always": runs.redact(fixed),
    }


def render(described: dict[str, Any], console: Console) -> None:
    """Plain lines, one per setting (read in terminals and in logs, and found with grep)."""
    searched = "ANSIBLE_CONFIG, ./ansible.cfg, ~/.ansible.cfg, /etc/ansible/ansible.cfg"
    lines = [
        f"Ansible configuration file: {described['config_file'] or f'none ({searched})'}",
        f"settings {described['settings_set']} for {described['hosts']} host(s):",
        *(f"  {row['setting']} = {row['value']}  (from {row['source']})" for row in described["settings"]),
        "gpufabric also sets:",
        *(f"  {key}={value}" for key, value in described["always"].items()),
    ]
    for line in lines:
        console.print(line, markup=False, highlight=False)
