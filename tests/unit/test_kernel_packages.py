# SPDX-License-Identifier: Apache-2.0
"""kernel_packages: the running kernel's own packages are installed or offered, else one error before any change.

The decision and the message are kernel_build's pure functions; the reads go through vendor_packages' apt backend,
here against a host double whose index is REAL apt (a signed TEST-DOUBLE archive from tests/fixtures/aptrepo.py that
has moved on to a later kernel, as Ubuntu's does: actions/runner-images #2291, #7570, #8080) and whose dpkg database
is simulated. The versions in the messages are of the form Ubuntu's azure kernels carry (6.8.0-1065.73~22.04.1,
Justsenger/ExHyperV #282's dpkg -l of an Azure 22.04 host); which one an archive offers on a given day is made up.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpufabric.collection import module_utils
from tests.fixtures import ansible_module, aptrepo

kb = module_utils("kernel_build")
apt = module_utils("vendor_packages_apt")

KERNEL = "6.8.0-1015-azure"
HEADERS = f"linux-headers-{KERNEL}"
EXTRA = f"linux-modules-extra-{KERNEL}"
NEEDED_BY = "role gpufabric.cluster.nvidia_driver for the driver's DKMS build"


def test_only_packages_of_the_running_kernels_release_are_checked():
    names = [HEADERS, "linux-headers-azure", "gcc-12", EXTRA, "linux-headers-6.8.0-1016-azure", HEADERS, "dkms"]
    assert kb.running_kernel_packages(names, KERNEL) == [HEADERS, EXTRA]
    assert kb.running_kernel_packages(names, "") == []


@pytest.mark.parametrize(
    ("kernel", "flavour"),
    [("6.8.0-1015-azure", "azure"), ("6.1.0-28-cloud-amd64", "cloud-amd64"), ("6.12.9+bpo-amd64", "amd64"),
     ("5.15.0-101-generic", "generic"), ("6.6.87.2-microsoft-standard-WSL2", None), ("6.9.0", None)],
)  # fmt: skip
def test_the_flavour_is_what_follows_version_and_abi(kernel, flavour):
    assert kb.kernel_flavour(kernel) == flavour


def test_the_meta_package_asked_about_is_the_partner_of_the_installed_image_meta():
    # A 22.04 HWE host has linux-image-azure-6.8, not linux-image-azure (the 5.15 kernel): ask for its headers' partner.
    assert kb.flavour_headers(KERNEL, ["linux-image-azure-6.8", "linux-image-6.8.0-1015-azure"]) == [
        "linux-headers-azure-6.8"
    ]
    assert kb.flavour_headers(KERNEL, []) == ["linux-headers-azure"]
    assert kb.flavour_headers("6.9.0", []) == []


def test_nothing_missing_is_no_error():
    assert kb.running_kernel_error(KERNEL, [], {}, NEEDED_BY) is None
    assert kb.running_kernel_error(KERNEL, [HEADERS], {HEADERS: ["6.8.0-1015.16~22.04.1"]}, NEEDED_BY) is None


def test_the_message_names_package_kernel_what_the_archive_offers_and_the_fix():
    offered = {HEADERS: [], "linux-headers-azure": ["6.8.0-1065.73~22.04.1", "6.8.0-1064.72~22.04.1"]}
    assert kb.running_kernel_error(KERNEL, [HEADERS], offered, NEEDED_BY) == (
        "linux-headers-6.8.0-1015-azure (the running kernel 6.8.0-1015-azure's, uname -r; needed by role "
        "gpufabric.cluster.nvidia_driver for the driver's DKMS build) is neither installed nor offered by this host's "
        "repositories: the archive keeps the packages of each flavour's newest kernel only, and the running kernel is "
        "older. For the azure flavour they offer linux-headers-azure 6.8.0-1065.73~22.04.1: the flavour's current "
        "kernel. Install that kernel with its headers and reboot into it (apt-get install linux-image-azure "
        "linux-headers-azure && reboot), then apply again; or start the host from an image whose kernel is the "
        "archive's current one. Nothing was changed."
    )


def test_without_the_flavours_meta_package_the_message_says_so_and_names_the_distributions_kernel():
    message = kb.running_kernel_error(KERNEL, [HEADERS, EXTRA], {}, "role gpufabric.cluster.rdma_stack")
    assert message.startswith(f"{HEADERS}, {EXTRA} (the running kernel {KERNEL}'s, uname -r; needed by role ")
    assert "are neither installed nor offered" in message
    assert "They offer no linux-headers-azure either. Install the distribution's current kernel with its headers" in (
        message
    )
    assert message.endswith("Nothing was changed.")
    flavourless = kb.running_kernel_error("6.9.0", ["linux-headers-6.9.0"], {}, "the role")
    assert "They offer" not in flavourless and "Install the distribution's current kernel" in flavourless


class Reader:
    """An IndexReader double: dpkg's database a dict (globs matched as dpkg-query matches them), the index a dict."""

    def __init__(self, installed: dict[str, str], offered: dict[str, list[str]]) -> None:
        self.packages, self.index = installed, offered
        self.calls: list[str] = []

    def installed(self, names: list[str]) -> tuple[dict[str, list[dict[str, Any]]], set[str]]:
        self.calls.append("installed")
        found = {p: [{"version": v}] for p, v in self.packages.items() if any(fnmatch.fnmatch(p, n) for n in names)}
        return found, set()

    def refresh(self, repositories: tuple[()]) -> None:
        self.calls.append("refresh")

    def offered(self, names: list[str]) -> dict[str, list[str]]:
        self.calls.append(f"offered {' '.join(names)}")
        return {name: self.index[name] for name in names if name in self.index}


def test_no_package_of_the_running_kernel_reads_nothing():
    reader = Reader({}, {})
    assert kb.check_running_kernel(reader, ["gcc-12", "linux-headers-azure"], KERNEL, NEEDED_BY)["error"] == ""
    assert reader.calls == []


def test_an_installed_package_is_not_looked_up():
    reader = Reader({HEADERS: "6.8.0-1015.16~22.04.1"}, {})
    found = kb.check_running_kernel(reader, [HEADERS, "linux-headers-azure-6.8"], KERNEL, NEEDED_BY)
    assert (found["checked"], found["missing"], found["refreshed"], found["error"]) == ([HEADERS], [], False, "")
    assert reader.calls == ["installed"]


def test_a_missing_package_the_archive_offers_passes():
    reader = Reader({}, {HEADERS: ["6.8.0-1015.16~22.04.1"]})
    found = kb.check_running_kernel(reader, [HEADERS], KERNEL, NEEDED_BY)
    assert (found["missing"], found["refreshed"], found["error"]) == ([HEADERS], True, "")


def test_a_missing_package_the_archive_dropped_fails_naming_the_installed_metas_partner():
    reader = Reader(
        {"linux-image-azure-6.8": "6.8.0-1015.16~22.04.1"},
        {"linux-headers-azure-6.8": ["6.8.0-1065.73~22.04.1"], "linux-headers-azure": ["5.15.0.1089.83"]},
    )
    found = kb.check_running_kernel(reader, [HEADERS, "linux-headers-azure-6.8"], KERNEL, NEEDED_BY)
    assert reader.calls == ["installed", "refresh", "installed", f"offered {HEADERS} linux-headers-azure-6.8"]
    assert found["offered"] == {"linux-headers-azure-6.8": "6.8.0-1065.73~22.04.1"}
    assert "they offer linux-headers-azure-6.8 6.8.0-1065.73~22.04.1" in found["error"]
    assert "(apt-get install linux-image-azure-6.8 linux-headers-azure-6.8 && reboot)" in found["error"]


TOOLS = ("gpg", "gpgv", "dpkg-deb", "apt-ftparchive", "apt-get", "apt-cache")


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS), reason=f"needs {', '.join(TOOLS)}")
def test_real_apt_on_an_archive_that_moved_on(tmp_path):
    """apt-get update and apt-cache madison for real: the running kernel's headers gone, the flavour's meta there."""
    from tests.unit.test_vendor_packages_module import Host

    later = [
        aptrepo.Package("linux-headers-azure", "6.8.0-1065.73~22.04.1"),
        aptrepo.Package("linux-headers-6.8.0-1065-azure", "6.8.0-1065.73~22.04.1"),
    ]
    archive = aptrepo.build_repo(tmp_path / "archive", later)
    host = Host(tmp_path / "host")
    (tmp_path / "host/sources.list.d/ubuntu.sources").write_text(
        f"Types: deb\nURIs: file:{archive.path}\nSuites: {archive.suite}\nComponents: {archive.component}\n"
        f"Signed-By: {archive.key_file}\n"
    )
    found = kb.check_running_kernel(host.backend, [HEADERS, "dkms"], KERNEL, NEEDED_BY)
    assert found["missing"] == [HEADERS] and found["refreshed"]
    assert found["offered"] == {"linux-headers-azure": "6.8.0-1065.73~22.04.1"}
    assert "For the azure flavour they offer linux-headers-azure 6.8.0-1065.73~22.04.1" in found["error"]
    # Nothing written: no source, no preferences file beside the host's own source.
    assert sorted(p.name for p in (tmp_path / "host/sources.list.d").iterdir()) == ["ubuntu.sources"]
    assert list((tmp_path / "host/preferences.d").iterdir()) == []
    host.installed[HEADERS] = "6.8.0-1015.16~22.04.1"
    host.commands.clear()
    assert kb.check_running_kernel(host.backend, [HEADERS], KERNEL, NEEDED_BY)["error"] == ""
    assert [argv[0] for argv in host.commands] == ["dpkg-query"]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg")
def test_the_module_through_ansible_reads_the_running_kernel(ansible_env):
    """Through real ansible on this machine, in check mode: no package of the running kernel, nothing read."""
    args = {"packages": ["gpufabric-test-double-absent", "linux-headers-0.0.0-0-none"], "needed_by": "a test"}
    done = ansible_module.run(ansible_env, "kernel_packages", "-a", json.dumps(args), "--check")
    assert not done.get("failed") and done["changed"] is False
    assert done["kernel"] == Path("/proc/sys/kernel/osrelease").read_text().strip()
    assert (done["checked"], done["missing"], done["refreshed"]) == ([], [], False)
