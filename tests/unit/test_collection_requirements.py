# SPDX-License-Identifier: Apache-2.0
"""require_collections(): galaxy.yml's dependencies are checked where ansible-playbook will look, before a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpufabric import runs
from gpufabric.collection import collection_root, require_collections
from gpufabric.errors import UserError

DEPENDENCIES = yaml.safe_load((collection_root() / "galaxy.yml").read_text())["dependencies"]


def install(base: Path, fqcn: str, version: str) -> Path:
    """A collection as ansible-galaxy leaves it: <base>/ansible_collections/<ns>/<name>/MANIFEST.json."""
    namespace, name = fqcn.split(".")
    directory = base / "ansible_collections" / namespace / name
    directory.mkdir(parents=True)
    info = {"namespace": namespace, "name": name, "version": version}
    (directory / "MANIFEST.json").write_text(json.dumps({"collection_info": info}))
    return directory


@pytest.fixture
def no_sys_path(monkeypatch):
    # Only the given paths: this virtual environment's `ansible` package would otherwise satisfy everything.
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "false")


def test_the_ansible_package_in_this_environment_carries_them(monkeypatch, tmp_path):
    # As `pip install gpufabric` leaves it: nothing on ANSIBLE_COLLECTIONS_PATH, the collections in site-packages.
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", raising=False)
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    require_collections()
    require_collections(str(tmp_path / "empty"))


def test_installed_on_the_collections_path(no_sys_path, tmp_path):
    for fqcn, requirement in DEPENDENCIES.items():
        install(tmp_path / "c", fqcn, requirement.removeprefix(">="))
    require_collections(f"{tmp_path / 'elsewhere'}:{tmp_path / 'c'}")
    # An entry naming the ansible_collections directory itself counts too, as it does for Ansible.
    require_collections(str(tmp_path / "c" / "ansible_collections"))


def test_missing_collections_are_all_named_with_how_to_install_them(no_sys_path, tmp_path):
    first = next(iter(DEPENDENCIES))
    install(tmp_path, first, "99.0.0")
    with pytest.raises(UserError) as raised:
        require_collections(str(tmp_path))
    message = str(raised.value)
    assert "\n" not in message and "galaxy.yml" in message
    for fqcn, requirement in DEPENDENCIES.items():
        assert (f"{fqcn} {requirement} (not installed)" in message) == (fqcn != first), message
    assert f"searched {tmp_path}." in message
    assert "-m pip install 'ansible" in message and "ansible-galaxy collection install" in message


def test_the_first_copy_on_the_path_is_the_one_checked(no_sys_path, tmp_path):
    # Ansible loads the first copy it finds: a newer one later on the path does not help.
    for fqcn in DEPENDENCIES:
        install(tmp_path / "new", fqcn, "99.0.0")
    old = install(tmp_path / "old", "community.general", "10.0.0")
    with pytest.raises(UserError, match=rf"community\.general >=\S+ \(found 10\.0\.0 in {old}\)"):
        require_collections(f"{tmp_path / 'old'}:{tmp_path / 'new'}")
    require_collections(f"{tmp_path / 'new'}:{tmp_path / 'old'}")


def test_a_run_stops_before_reading_the_inventory(no_sys_path, tmp_path, monkeypatch):
    # As `pip install gpufabric` without the `ansible` package's collections: named before any host is touched.
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    artifacts = tmp_path / "run"
    with pytest.raises(UserError, match=r"community\.general \S+ \(not installed\)"):
        runs.run_playbook(runs.site_playbook(), str(tmp_path / "no-such-inventory"), artifacts_dir=artifacts)
    assert not artifacts.exists()


def test_the_wheels_bundle_comes_after_the_users_collections(tmp_path, monkeypatch):
    # An installed wheel: its bundle is searched after the user's collections path (theirs wins), and
    # --show-settings says so. A checkout has no bundle (bundled_path() is None): nothing is added.
    from gpufabric import collection, show_settings

    bundle = tmp_path / "bundle"
    for fqcn, requirement in DEPENDENCIES.items():
        install(bundle, fqcn, requirement.removeprefix(">="))
    monkeypatch.setattr(collection, "bundled_path", lambda: bundle)
    monkeypatch.setattr(runs, "bundled_path", lambda: bundle)
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(tmp_path / "mine"))
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "false")
    paths = runs.base_env()["ANSIBLE_COLLECTIONS_PATH"].split(":")
    assert paths[1:] == [str(tmp_path / "mine"), str(bundle)]
    require_collections()  # the same order, composed without runs
    require_collections(runs.base_env()["ANSIBLE_COLLECTIONS_PATH"])
    old = install(tmp_path / "mine", "community.general", "1.0.0")
    with pytest.raises(UserError, match=rf"found 1\.0\.0 in {old}\).*upgrade or remove it"):
        require_collections()
    [row] = [r for r in show_settings.describe("stock", 1)["settings"] if r["env"] == "ANSIBLE_COLLECTIONS_PATH"]
    assert row["source"] == (
        "gpufabric's collection, then environment (ANSIBLE_COLLECTIONS_PATH), then the collections the wheel bundles"
    )
