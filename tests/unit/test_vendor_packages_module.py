# SPDX-License-Identifier: Apache-2.0
"""vendor_packages: the one way roles install pinned vendor packages.

The apt backend runs against a host double whose package index is REAL apt (apt-get update and apt-cache on
a signed TEST-DOUBLE repository from tests/fixtures/aptrepo.py, in a private apt directory, so signatures are
checked by apt itself) and whose dpkg database is simulated (installed versions and holds; its install step
refuses what apt refuses: a held package that moves, a pinned dependency left to apt's choice). Nothing is
installed on the machine running the tests. The module itself goes through real ``ansible`` in check mode,
which reads the real dpkg database and writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpufabric.collection import module_utils
from tests.fixtures import ansible_module, aptrepo

vp = module_utils("vendor_packages")
apt = module_utils("vendor_packages_apt")
TOOLS = ("gpg", "gpgv", "dpkg-deb", "apt-ftparchive", "apt-get", "apt-cache")
pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in TOOLS), reason=f"needs {', '.join(TOOLS)} (gnupg, apt, apt-utils)"
)
OLD, NEW = "2.9.1-1", "2.10.0-1"


def _doca(version: str) -> list[aptrepo.Package]:
    return [
        aptrepo.Package("doca-ofed", version, depends=[f"doca-ofed-userspace (= {version})"]),
        aptrepo.Package("doca-ofed-userspace", version),
    ]


class Host:
    """The module's view of a host: run_command and atomic_move, apt's index real, dpkg's database simulated."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for directory in ("sources.list.d", "preferences.d", "state/lists/partial", "cache/archives/partial"):
            (root / directory).mkdir(parents=True, exist_ok=True)
        (root / "status").write_text("")
        self.installed: dict[str, str] = {}
        self.held: set[str] = set()
        self.commands: list[list[str]] = []

    @property
    def backend(self) -> Any:
        return apt.Apt(
            self, sources_dir=str(self.root / "sources.list.d"), preferences_dir=str(self.root / "preferences.d")
        )

    def _apt(self, argv: list[str]) -> tuple[int, str, str]:
        options = {
            "Dir::Etc::SourceList": str(self.root / "none.list"),
            "Dir::Etc::SourceParts": str(self.root / "sources.list.d"),
            "Dir::Etc::PreferencesParts": str(self.root / "preferences.d"),
            "Dir::Etc::TrustedParts": str(self.root / "trusted.gpg.d"),
            "Dir::State": str(self.root / "state"),
            "Dir::State::status": str(self.root / "status"),
            "Dir::Cache": str(self.root / "cache"),
            "APT::Sandbox::User": "root",
        }
        extra = [part for name, value in options.items() for part in ("-o", f"{name}={value}")]
        done = subprocess.run([argv[0], *extra, *argv[1:]], capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    def run_command(self, argv: list[str], environ_update: dict[str, str] | None = None) -> tuple[int, str, str]:
        self.commands.append(argv)
        if argv[:2] in (["apt-get", "update"], ["apt-cache", "madison"], ["apt-cache", "show"]):
            return self._apt(argv)
        if argv[0] == "dpkg-query":
            names = argv[3:]
            lines = [
                f"{name}\t{self.installed[name]}\t{'hold' if name in self.held else 'install'} ok installed\n"
                for name in names
                if name in self.installed
            ]
            return (0 if len(lines) == len(names) else 1), "".join(lines), ""
        if argv[:2] == ["apt-get", "install"]:
            return self._install([arg for arg in argv[2:] if not arg.startswith("-") and "::" not in arg])
        if argv[0] == "apt-mark":
            names = set(argv[2:])
            self.held = self.held | names if argv[1] == "hold" else self.held - names
            return 0, "", ""
        raise AssertionError(f"unexpected command {argv}")

    def _install(self, specs: list[str]) -> tuple[int, str, str]:
        wanted = dict(spec.split("=", 1) for spec in specs)
        rc, shown, _err = self._apt(["apt-cache", "show", "--no-all-versions", *specs])
        assert rc == 0, shown
        for name, version in apt.parse_exact_dependencies(shown).items():
            if wanted.get(name, self.installed.get(name)) != version.split("=", 1)[1]:
                return 100, "", f"E: Unmet dependencies: {name} (= {version}) is not going to be installed"
        for name, version in wanted.items():
            if name in self.held and self.installed.get(name) != version:
                return 100, "", "E: Held packages were changed and -y was used without --allow-change-held-packages."
        self.installed.update(wanted)
        return 0, "", ""

    def atomic_move(self, source: str, dest: str) -> None:
        os.replace(source, dest)


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, aptrepo.Repo]:
    root = tmp_path_factory.mktemp("repos")
    return {
        "good": aptrepo.build_repo(root / "good", _doca(OLD) + _doca(NEW)),
        "other": aptrepo.build_repo(root / "other", _doca(OLD), sign_with="other"),
    }


def request(repo: aptrepo.Repo, version: str = OLD, **extra: Any) -> Any:
    return vp.parse_request(
        {
            "repositories": [
                {"name": "gpufabric-doca", "uris": [f"file:{repo.path}"], "suites": [repo.suite],
                 "components": [repo.component], "signed_by": str(repo.key_file)},
            ],
            "packages": [{"name": "doca-ofed", "version": version, "repository": "gpufabric-doca"},
                         {"name": "doca-ofed-userspace"}],
            "managed_by": "role gpufabric.cluster.rdma_stack",
            "pins_from": "rdma_stack_doca_version",
            **extra,
        }
    )  # fmt: skip


def test_fresh_install_then_nothing_changes(tmp_path, repos):
    host = Host(tmp_path)
    done = vp.converge(request(repos["good"]), host.backend, check_mode=False)
    assert done.changed and done.refreshed and done.verified
    assert done.install == [f"doca-ofed={OLD}", f"doca-ofed-userspace={OLD}"]
    assert (host.installed, host.held) == (
        {"doca-ofed": OLD, "doca-ofed-userspace": OLD},
        {"doca-ofed", "doca-ofed-userspace"},
    )
    source = (tmp_path / "sources.list.d/gpufabric-doca.sources").read_text()
    assert source == (
        "# Managed by gpufabric (role gpufabric.cluster.rdma_stack): local edits are overwritten.\n"
        f"Types: deb\nURIs: file:{repos['good'].path}\nSuites: stable\nComponents: main\n"
        f"Signed-By: {repos['good'].key_file}\n"
    )
    host.commands.clear()
    again = vp.converge(request(repos["good"]), host.backend, check_mode=False)
    assert (again.changed, again.refreshed, again.diff) == (False, False, [])
    assert [argv[0] for argv in host.commands] == ["dpkg-query"]  # a converged host reads, and nothing else


def test_check_mode_on_a_fresh_host_reports_without_writing(tmp_path, repos):
    host = Host(tmp_path)
    checked = vp.converge(request(repos["good"]), host.backend, check_mode=True)
    assert checked.changed and not checked.verified and not checked.refreshed
    assert checked.files == [str(tmp_path / "sources.list.d/gpufabric-doca.sources")]
    assert checked.install == [f"doca-ofed={OLD}", "doca-ofed-userspace"]
    assert checked.hold == ["doca-ofed", "doca-ofed-userspace"]
    assert not (tmp_path / "sources.list.d/gpufabric-doca.sources").exists() and host.installed == {}
    assert checked.diff[0]["before"] == "" and "Signed-By:" in checked.diff[0]["after"]
    assert checked.diff[1]["before"] == "doca-ofed: not installed\ndoca-ofed-userspace: not installed\n"
    assert checked.diff[1]["after"] == f"doca-ofed: {OLD} (hold)\ndoca-ofed-userspace: (newest) (hold)\n"


def test_check_mode_on_a_converged_host_reports_nothing(tmp_path, repos):
    host = Host(tmp_path)
    vp.converge(request(repos["good"]), host.backend, check_mode=False)
    checked = vp.converge(request(repos["good"]), host.backend, check_mode=True)
    assert (checked.changed, checked.diff) == (False, [])


def test_a_moved_pin_unholds_upgrades_and_holds_again(tmp_path, repos):
    host = Host(tmp_path)
    vp.converge(request(repos["good"]), host.backend, check_mode=False)
    checked = vp.converge(request(repos["good"], NEW), host.backend, check_mode=True)
    assert checked.verified and checked.install == [f"doca-ofed={NEW}", f"doca-ofed-userspace={NEW}"]
    assert host.installed["doca-ofed"] == OLD and host.held == {"doca-ofed", "doca-ofed-userspace"}
    moved = vp.converge(request(repos["good"], NEW), host.backend, check_mode=False)
    assert moved.unhold == ["doca-ofed", "doca-ofed-userspace"] and moved.hold == ["doca-ofed", "doca-ofed-userspace"]
    assert host.installed == {"doca-ofed": NEW, "doca-ofed-userspace": NEW}
    assert host.held == {"doca-ofed", "doca-ofed-userspace"}
    assert (
        f"doca-ofed: {OLD} (hold)" in moved.diff[0]["before"] and f"doca-ofed: {NEW} (hold)" in moved.diff[0]["after"]
    )
    back = vp.converge(request(repos["good"]), host.backend, check_mode=False)  # a pin moved back downgrades
    assert back.install == [f"doca-ofed={OLD}", f"doca-ofed-userspace={OLD}"] and host.installed["doca-ofed"] == OLD


def test_a_held_package_missing_its_hold_is_held(tmp_path, repos):
    host = Host(tmp_path)
    vp.converge(request(repos["good"]), host.backend, check_mode=False)
    host.held.clear()
    checked = vp.converge(request(repos["good"]), host.backend, check_mode=True)
    assert (checked.changed, checked.install, checked.hold, host.held) == (
        True,
        [],
        ["doca-ofed", "doca-ofed-userspace"],
        set(),
    )
    vp.converge(request(repos["good"]), host.backend, check_mode=False)
    assert host.held == {"doca-ofed", "doca-ofed-userspace"}


def test_an_untrusted_repository_is_refused_naming_it_and_its_keyring(tmp_path, repos):
    host = Host(tmp_path)
    with pytest.raises(vp.VendorPackagesError) as refused:
        vp.converge(request(repos["other"]), host.backend, check_mode=False)
    message = str(refused.value)
    assert message.startswith(f"apt refused the repository file:{repos['other'].path} (gpufabric-doca): its signature")
    assert f"signature is not trusted (the key in {repos['other'].key_file} did not sign it)" in message
    assert "NO_PUBKEY" in message or "not signed" in message
    # The source stays, as apt was given it; nothing is installed from it.
    assert refused.value.outcome.files == [str(tmp_path / "sources.list.d/gpufabric-doca.sources")]
    assert refused.value.outcome.changed and not refused.value.outcome.verified and host.installed == {}


def test_a_version_the_repository_lacks_is_refused_naming_what_it_offers(tmp_path, repos):
    host = Host(tmp_path)
    with pytest.raises(vp.VendorPackagesError) as refused:
        wrong = request(repos["good"], "9.9.9-1", offer_hint="Try the doca component.", preferences="doca")
        vp.converge(wrong, host.backend, check_mode=False)
    assert str(refused.value) == (
        "doca-ofed version '9.9.9-1' is not in repository gpufabric-doca (rdma_stack_doca_version); available: "
        f"{NEW}, {OLD}. Try the doca component. Nothing was installed."
    )
    assert host.installed == {} and host.held == set()
    assert not (tmp_path / "preferences.d/doca.pref").exists()  # the refused pin is written nowhere


def test_preferences_pin_every_versioned_package(tmp_path, repos):
    host = Host(tmp_path)
    done = vp.converge(request(repos["good"], preferences="gpufabric-doca", pin_priority=1001), host.backend, False)
    assert str(tmp_path / "preferences.d/gpufabric-doca.pref") in done.files
    assert (tmp_path / "preferences.d/gpufabric-doca.pref").read_text() == (
        "# Managed by gpufabric (role gpufabric.cluster.rdma_stack): these packages move only when their pin "
        f"changes.\n\nPackage: doca-ofed\nPin: version {OLD}\nPin-Priority: 1001\n"
    )
    assert host.installed["doca-ofed"] == OLD


def test_release_removes_the_other_modes_record_and_releases_its_holds(tmp_path, repos):
    host = Host(tmp_path)
    # Adopt mode's record: the image's doca-ofed and a package of the image's that install mode does not manage.
    record = tmp_path / "preferences.d/gpufabric-adopted.pref"
    record.write_text(
        "# Managed by gpufabric (role gpufabric.cluster.rdma_stack): adopted.\n\n"
        "Package: image-rdma-core\nPin: version 1.0-1\nPin-Priority: 1001\n\n"
        f"Package: doca-ofed\nPin: version {NEW}\nPin-Priority: 1001\n\nPackage: *\nPin: origin x\nPin-Priority: 400\n"
    )
    host.installed = {"image-rdma-core": "1.0-1", "doca-ofed": NEW, "doca-ofed-userspace": NEW}
    host.held = {"image-rdma-core", "doca-ofed", "doca-ofed-userspace"}
    install = request(repos["good"], release=["gpufabric-adopted"])
    checked = vp.converge(install, host.backend, check_mode=True)
    assert (checked.released, checked.removed) == (["image-rdma-core"], [str(record)])
    assert record.exists() and "image-rdma-core" in host.held  # check mode writes nothing
    assert {"before_header": "holds", "after_header": "holds", "before": "image-rdma-core (hold)\n",
            "after": "image-rdma-core\n"} in checked.diff  # fmt: skip
    done = vp.converge(install, host.backend, check_mode=False)
    assert done.changed and not record.exists() and done.install == [f"doca-ofed={OLD}", f"doca-ofed-userspace={OLD}"]
    # doca-ofed moves (released for its own move and held again); the image's other package is free, not held.
    assert host.held == {"doca-ofed", "doca-ofed-userspace"}
    again = vp.converge(install, host.backend, check_mode=False)
    assert (again.changed, again.released, again.removed) == (False, [], [])


def test_a_package_dropped_from_the_preferences_loses_its_hold(tmp_path, repos):
    host = Host(tmp_path)
    vp.converge(request(repos["good"], preferences="gpufabric-doca"), host.backend, check_mode=False)
    host.installed["doca-extra"], host.held = "1.0-1", host.held | {"doca-extra"}
    pref = tmp_path / "preferences.d/gpufabric-doca.pref"
    pref.write_text(pref.read_text() + "\nPackage: doca-extra\nPin: version 1.0-1\nPin-Priority: 1001\n")
    done = vp.converge(request(repos["good"], preferences="gpufabric-doca"), host.backend, check_mode=False)
    assert (done.released, done.install) == (["doca-extra"], [])
    assert host.held == {"doca-ofed", "doca-ofed-userspace"} and "doca-extra" not in pref.read_text()


@pytest.mark.parametrize("name", ["../etc", "gpufabric-doca", "a b"])
def test_a_release_that_is_not_another_preferences_file_is_refused(repos, name):
    with pytest.raises(vp.VendorPackagesError, match="release"):
        request(repos["good"], preferences="gpufabric-doca", release=[name])


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"signed_by": "/etc/apt/keyrings/doca.key"}, r"signed_by: keyring '/etc/apt/keyrings/doca.key' is not"),
        ({"uris": []}, r"repositories\[gpufabric-doca\].uris is empty"),
        ({"name": "../doca"}, "name '../doca' is not accepted"),
        ({"suites": ["a b"]}, r"suites is \['a b'\]; accepted: a list of non-empty words"),
    ],
)  # fmt: skip
def test_bad_repositories_are_refused_before_anything_runs(repos, change, error):
    good = request(repos["good"]).repositories[0]
    entry = {"name": good.name, "uris": list(good.uris), "suites": list(good.suites), "signed_by": good.signed_by}
    with pytest.raises(vp.VendorPackagesError, match=error):
        vp.parse_request({"repositories": [{**entry, **change}]})


@pytest.mark.parametrize(
    ("packages", "error"),
    [
        ([{"name": "Doca"}], "packages: name 'Doca' .rdma_stack_doca_version. is not a package name"),
        ([{"name": "doca", "version": "1.0 || true"}], "doca version '1.0 || true' .rdma_stack_doca_version. is not"),
        ([{"name": "doca"}, {"name": "doca"}], "packages: doca listed twice"),
        ([{"name": "doca", "repository": "doca-repo"}], "packages: doca repository 'doca-repo' .* accepted: none, or"),
    ],
)  # fmt: skip
def test_bad_packages_are_refused(packages, error):
    with pytest.raises(vp.VendorPackagesError, match=error):
        vp.parse_request({"packages": packages, "pins_from": "rdma_stack_doca_version"})


def test_pending_reads_package_facts_of_both_families():
    installed = {"rdma-core": [{"version": "44.0-2"}], "ucx": [{"version": "1.13.1", "release": "2.el9"}]}
    packages = [
        {"name": "rdma-core", "version": "44.0-2"},
        {"name": "ucx", "version": "1.13.1-2.el9"},
        {"name": "perftest", "version": "4.5"},
        {"name": "rdma-core", "version": "45.0-1"},
        {"name": "libibverbs", "version": ""},
    ]
    assert vp.pending(packages, installed) == ["perftest", "rdma-core", "libibverbs"]


def test_only_mandatory_exact_dependencies_are_named():
    shown = (
        "Package: nvidia-driver\nPre-Depends: nvidia-installer-cleanup\n"
        "Depends: nvidia-driver-libs (= 535.261.03-1), nvidia-kernel-dkms (= 535.261.03-1) | "
        "nvidia-open-kernel-dkms (= 535.261.03-1), libc6:amd64 (= 2.36-9), xserver-xorg-video-nvidia (>= 535)\n"
    )
    assert apt.parse_exact_dependencies(shown) == {
        "nvidia-driver-libs": "nvidia-driver-libs=535.261.03-1",
        "libc6": "libc6=2.36-9",
    }


def test_apt_refusals_are_told_apart():
    repo = vp.Repository("r", ("https://x.example/repo/",), ("./",), (), (), "/etc/apt/keyrings/r.asc")
    assert apt.refusal((repo,), 0, "Hit:1 https://x.example/repo ./ InRelease", "") is None
    unsigned = apt.refusal((repo,), 100, "", "E: The repository 'https://x.example/repo ./ InRelease' is not signed.")
    assert unsigned and unsigned.startswith("apt refused the repository https://x.example/repo/ (r)")
    failed = apt.refusal((repo,), 100, "", "E: Could not resolve 'x.example'")
    assert failed == "apt-get update failed (rc 100). E: Could not resolve 'x.example'"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg")
def test_the_module_in_check_mode_through_ansible(ansible_env, repos, tmp_path):
    """Check mode through real ansible on this machine: it reads dpkg and writes nothing (no such source here)."""
    args = {
        "repositories": [{"name": "gpufabric-test-double-vendor-packages", "uris": [f"file:{repos['good'].path}"],
                          "suites": ["stable"], "components": ["main"], "signed_by": str(repos["good"].key_file)}],
        "packages": [{"name": "gpufabric-test-double-absent", "version": "1.0-1"}],
    }  # fmt: skip
    checked = ansible_module.run(ansible_env, "vendor_packages", "-a", json.dumps(args), "--check", "--diff")
    assert checked["changed"] is True and checked["verified"] is False
    assert checked["files"] == ["/etc/apt/sources.list.d/gpufabric-test-double-vendor-packages.sources"]
    assert checked["installed"] == ["gpufabric-test-double-absent=1.0-1"]
    assert not Path(checked["files"][0]).exists()
    bad_version = {**args, "packages": [{"name": "x", "version": "1 2"}]}
    refused = ansible_module.run(ansible_env, "vendor_packages", "-a", json.dumps(bad_version), "--check")
    assert refused["failed"] and "packages: name 'x'" in refused["msg"]


# Revisions as NVIDIA's Ubuntu repositories publish them: -0ubuntu1 up to 580.105.08, -1ubuntu1 from 580.126.09
# (shared/reference/real-images.md section 1); a newer branch beside them.
DRIVER_VERSIONS = ("580.105.08-0ubuntu1", "580.126.09-1ubuntu1", "590.48.01-1ubuntu1")


def test_a_glob_installs_the_newest_revision_it_matches_and_pins_what_it_resolved_to(tmp_path):
    repo = aptrepo.build_repo(tmp_path / "cuda", [aptrepo.Package("nvidia-open", v) for v in DRIVER_VERSIONS])
    host = Host(tmp_path / "host")

    def driver(version: str) -> Any:
        return vp.parse_request(
            {
                "repositories": [
                    {"name": "gpufabric-cuda", "uris": [f"file:{repo.path}"], "suites": [repo.suite],
                     "components": [repo.component], "signed_by": str(repo.key_file)},
                ],
                "packages": [{"name": "nvidia-open", "version": version, "repository": "gpufabric-cuda"}],
                "preferences": "gpufabric-nvidia-driver",
                "pins_from": "nvidia_driver_version",
            }
        )  # fmt: skip

    done = vp.converge(driver("580.126.09-*"), host.backend, check_mode=False)
    assert (
        done.install == ["nvidia-open=580.126.09-1ubuntu1"] and host.installed["nvidia-open"] == "580.126.09-1ubuntu1"
    )
    assert done.resolved == {"nvidia-open": "580.126.09-1ubuntu1"}
    # Pinned at the version it resolved to: the next run, finding it installed, writes the same file.
    pref = (tmp_path / "host/preferences.d/gpufabric-nvidia-driver.pref").read_text()
    assert "Pin: version 580.126.09-1ubuntu1\n" in pref
    # Real apt reads the pin: its candidate is the pinned version, not the newer branch.
    _rc, policy, _err = host._apt(["apt-cache", "policy", "nvidia-open"])
    assert "Candidate: 580.126.09-1ubuntu1" in policy, policy
    again = vp.converge(driver("580.126.09-*"), host.backend, check_mode=False)
    assert not again.changed and again.resolved == {"nvidia-open": "580.126.09-1ubuntu1"}
    assert (tmp_path / "host/preferences.d/gpufabric-nvidia-driver.pref").read_text() == pref
    with pytest.raises(vp.VendorPackagesError, match=r"version '575\.64\.05-\*' is not in repository gpufabric-cuda"):
        vp.converge(driver("575.64.05-*"), host.backend, check_mode=False)
