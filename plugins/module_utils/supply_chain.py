# SPDX-License-Identifier: Apache-2.0
"""What a role installs and where it comes from: the one shape a role's plan gives its package tasks.

A role that installs packages puts ``supply``, a list of PackageStep, in its plan result. Its tasks hand each
step to the modules unchanged: every key to gpufabric.cluster.repo_key, then the repositories, packages,
preferences and pin priority to gpufabric.cluster.vendor_packages. `gpufabric plan` calls the same plan
functions and shows the same steps as the host's supply chain, so what a reviewer reads is what runs.

What a role fetches outside a package repository (an installer or source tarball checked by its SHA256, a
container image pulled by its digest) it lists as ``artifacts``, built here from the same values its tasks use.
"""

from __future__ import annotations

from typing import TypedDict
from urllib.parse import urlsplit

# Where APT reads preferences files (apt_preferences(5)); vendor_packages writes its pins there too.
PREFERENCES_DIR = "/etc/apt/preferences.d"
# Where vendor_packages writes each repository's deb822 source (NAME.sources).
SOURCES_DIR = "/etc/apt/sources.list.d"


class RepoKey(TypedDict):
    """One gpufabric.cluster.repo_key call: the signing key of one repository, pinned before it is trusted."""

    repository: str  # the Repository.name it signs
    url: str  # where it is fetched ('' when src is set)
    src: str  # a key file on the controller ('' when url is set)
    dest: str  # the keyring on the host: the repository's signed_by
    fingerprints: list[str]  # every primary key must be one of these
    fingerprints_from: str  # the role variable that holds them, named in repo_key's refusals
    checksum: str  # sha256:<hex> of the key file, for keys without fingerprints to pin; '' for none


class _RepositoryOwner(TypedDict, total=False):
    managed_by: str  # who manages the source file, when several roles configure it (absent: the configuring role)


class Repository(_RepositoryOwner):
    """vendor_packages' repositories[] option."""

    name: str
    uris: list[str]
    suites: list[str]
    components: list[str]
    architectures: list[str]
    signed_by: str


class PackagePin(TypedDict):
    """vendor_packages' packages[] option."""

    name: str
    version: str  # exact, as the repository publishes it; '' installs any version when missing
    hold: bool
    repository: str  # the Repository.name it comes from; '' for the host's other sources (the distribution's, or
    # a repository another role configured: SHARP comes from rdma_stack's DOCA repository)


class AptPin(TypedDict):
    """An APT preferences file a role writes before its packages (DOCA's dkms pinned away, a repository lowered)."""

    path: str
    content: str


class PackageStep(TypedDict):
    """One gpufabric.cluster.vendor_packages call and the keys installed before it."""

    keys: list[RepoKey]
    repositories: list[Repository]
    packages: list[PackagePin]
    preferences: str  # APT preferences file pinning the versioned packages; '' for none
    pin_priority: int
    release: list[str]  # preferences files of the role's other provision mode: removed, their holds released


class Artifact(TypedDict):
    """Something a role fetches outside a package repository, pinned by a checksum."""

    kind: str  # tarball (ansible.builtin.get_url with the checksum) or image (pulled by digest)
    name: str  # what it is, with its version: aws-efa-installer 1.43.2, the TCPX RxDM image
    source: str  # the URL, or the image reference registry/name@digest
    checksum: str  # sha256:<hex> of the file, or the image's digest


def artifact(kind: str, name: str, source: str, checksum: str) -> Artifact:
    return {"kind": kind, "name": name, "source": source, "checksum": checksum}


def image_artifact(name: str, reference: str) -> Artifact:
    """A container image pulled by ``reference`` (registry/name@digest): its checksum is the digest."""
    return artifact("image", name, reference, reference.rsplit("@", maxsplit=1)[-1])


def repository(
    name: str,
    uri: str,
    suite: str,
    signed_by: str,
    components: list[str] | None = None,
    architectures: list[str] | None = None,
    managed_by: str = "",
) -> Repository:
    source: Repository = {
        "name": name,
        "uris": [uri],
        "suites": [suite],
        "components": list(components or []),
        "architectures": list(architectures or []),
        "signed_by": signed_by,
    }
    if managed_by:
        source["managed_by"] = managed_by
    return source


def key(
    repository: str,
    dest: str,
    fingerprints: list[str],
    fingerprints_from: str = "",
    url: str = "",
    src: str = "",
    checksum: str = "",
) -> RepoKey:
    return {
        "repository": repository,
        "url": url,
        "src": src,
        "dest": dest,
        "fingerprints": list(fingerprints),
        "fingerprints_from": fingerprints_from,
        "checksum": checksum,
    }


def package(name: str, version: str = "", repository: str = "", hold: bool = True) -> PackagePin:
    return {"name": name, "version": version, "hold": hold, "repository": repository}


def step(
    packages: list[PackagePin],
    repositories: list[Repository] | None = None,
    keys: list[RepoKey] | None = None,
    preferences: str = "",
    pin_priority: int = 1001,
    release: list[str] | None = None,
) -> PackageStep:
    return {
        "keys": list(keys or []),
        "repositories": list(repositories or []),
        "packages": packages,
        "preferences": preferences,
        "pin_priority": pin_priority,
        "release": list(release or []),
    }


def origin_pin(url: str) -> str:
    """The APT preferences Pin selecting a repository by its host (apt_preferences(5) 'origin'); '' for a local
    repository (file:), which has no host to tell it from the distribution's mirror or other local ones."""
    host = urlsplit(url).hostname
    return f"origin {host}" if host else ""


def preferences_path(name: str) -> str:
    """Where the APT preferences file ``name`` (a PackageStep's ``preferences``, an apt_pin's name) is."""
    return f"{PREFERENCES_DIR}/{name}.pref"


def supply_files(steps: list[PackageStep], repositories: bool = True) -> list[str]:
    """Every file the steps make a role write on an APT host: each key's keyring, each repository's source and
    each step's preferences file, in that order, once each (what the fast drift check records of them). Without
    ``repositories``, the preferences files only: an adopt mode that pins the image's packages and configures no
    repository."""
    keys = [key["dest"] for step in steps for key in step["keys"]] if repositories else []
    sources = (
        [f"{SOURCES_DIR}/{repo['name']}.sources" for step in steps for repo in step["repositories"]]
        if repositories
        else []
    )
    preferences = [preferences_path(step["preferences"]) for step in steps if step["preferences"]]
    return list(dict.fromkeys(keys + sources + preferences))


def apt_pin(name: str, package: str, pin: str, priority: int, managed_by: str, why: str) -> AptPin:
    """The preferences file ``name`` giving ``package`` (or '*') from what ``pin`` selects ``priority``."""
    return {
        "path": preferences_path(name),
        "content": (
            f"# Managed by gpufabric ({managed_by}): local edits are overwritten.\n"
            f"# {why}\n"
            f"Package: {package}\nPin: {pin}\nPin-Priority: {priority}\n"
        ),
    }
