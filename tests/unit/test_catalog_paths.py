# SPDX-License-Identifier: Apache-2.0
"""A catalog override path is data: one clear error naming the value as given and where it came from, and never a
template (runs.write_extravars marks the --catalog paths gpufabric gives site.yml !unsafe)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufabric import catalog, runs
from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError

fabric_catalog = plugin_utils("fabric_catalog")


PIPE = "{{ lookup('pipe', 'id') }}.yml"


@pytest.mark.parametrize(
    ("env", "cli", "named"),
    [
        ("", [PIPE], f"{PIPE!r} (--catalog): cannot read file: No such file or directory; accepted: "),
        ("/", [], "'/' (GPUFABRIC_CATALOG): is a directory, not a regular file; accepted: a YAML file"),
    ],
)
def test_a_bad_override_path_names_the_value_and_where_it_came_from(monkeypatch, tmp_path, env, cli, named):
    monkeypatch.setenv("GPUFABRIC_CATALOG", env)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as raised:
        catalog.load([Path(name) for name in cli])
    assert named in str(raised.value)


def test_an_unreadable_override_names_the_option_it_came_from(tmp_path):
    """What the fabric_plan lookup and the gpu_fleet plugin say for their option catalog_files."""
    missing = tmp_path / "site.yml"
    option = "lookup option catalog_files (site.yml: the variable gpufabric_catalog_files)"
    with pytest.raises(fabric_catalog.CatalogError) as raised:
        fabric_catalog.load_named_catalog([(option, missing)])
    assert str(raised.value) == f"{str(missing)!r} ({option}): cannot read file: No such file or directory; " + (
        "accepted: a readable catalog YAML file"
    )


def test_extra_variables_reach_ansible_as_unsafe_text(tmp_path):
    runs.write_extravars(tmp_path, {"gpufabric_catalog_files": ["/c/{{ x }}.yml"], "gpufabric_serial": 5})
    written = tmp_path / "env" / "extravars"
    text = written.read_text(encoding="utf-8")
    assert "!unsafe '/c/{{ x }}.yml'" in text and "gpufabric_serial: 5" in text
    assert written.stat().st_mode & 0o777 == 0o600
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    loaded = DataLoader().load_from_file(str(written), trusted_as_template=True)  # as ansible-playbook reads -e @FILE
    expression = trust_as_template("{{ gpufabric_catalog_files[0] }}")
    assert Templar(variables=loaded).template(expression) == "/c/{{ x }}.yml"
    assert yaml.load(text, Loader=yaml.BaseLoader)["gpufabric_serial"] == "5"
