# SPDX-License-Identifier: Apache-2.0
"""One way to install vendor packages: repositories, exact versions, holds, upgrades when a pin moves.

The request (what the vendor_packages module was asked for) is checked here, once, for every role and every
package manager; ``converge()`` then walks one order of steps through a backend that speaks the package
manager:

1. write the repository sources a backend renders;
2. refresh the package index when something must be installed or a source changed, refusing a repository
   whose signature is not trusted;
3. refuse a pinned version no repository offers, naming the versions it does offer;
4. release what the request no longer manages (below), write the pins (apt preferences), release the holds on
   what moves, install the exact versions, hold again.

What a request no longer manages loses its hold, so that nothing stays held that no pin of gpufabric's explains:
the packages its preferences file pinned before and the request no longer lists (a package dropped from a role's
set), and every package pinned in the preferences files named by ``release`` (what the role's other provision mode
wrote: adopt mode's record of an image's stack, when a host goes back to install mode) that the request does not
hold itself; those files are removed. dpkg does not remove a held package, so an install that replaces an adopted
stack needs its holds released first.

Check mode walks the same steps without writing: files are compared, not written; the index is refreshed only
when the sources are already in place (a source that would change cannot be consulted before it is written, so
the versions are then reported unverified); nothing is installed or held.

Backends: ``vendor_packages_apt.Apt`` (Debian, Ubuntu). A dnf backend goes beside it as
``vendor_packages_dnf.Dnf`` with the same methods (``sources``, ``pins``, ``installed``, ``refresh``, ``offered``,
``dependencies``, ``install``, ``set_holds``, ``preferences_path``, ``pinned_names``, ``remove_file``: .repo
files, ``dnf makecache``, ``dnf list --showduplicates``, ``dnf versionlock``); the module picks the backend by the
host's package manager.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ansible_collections.gpufabric.cluster.plugins.module_utils.repo_key import keyring_error

# Debian policy's package names; dnf's are a superset, checked by dnf itself.
NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
# A version must not hold what would change the request's meaning (spaces, '=' or a shell metacharacter); '*' is
# a glob, as in an APT preferences 'Pin: version' line: 570.133.20-* is any revision of upstream 570.133.20.
VERSION = re.compile(r"^[A-Za-z0-9.+:~_*-]+$")
# A repository name becomes a file name.
REPO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class VendorPackagesError(Exception):
    """A request or a repository the module refuses; the message names the value and what is accepted."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.outcome = Outcome(verified=False)  # what converge() had done before it refused (a source written)


@dataclass(frozen=True)
class Repository:
    name: str
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]
    architectures: tuple[str, ...]
    signed_by: str
    managed_by: str = ""  # the source file's header: who manages it ('' for the request's managed_by)


@dataclass(frozen=True)
class Package:
    name: str
    version: str  # '' installs whatever the repositories offer when the package is missing
    hold: bool
    repository: str = ""  # the repository (of the request's) it comes from; '' for the distribution's archive


@dataclass(frozen=True)
class Request:
    repositories: tuple[Repository, ...]
    packages: tuple[Package, ...]
    preferences: str  # name of the preferences file pinning every versioned package; '' for none
    pin_priority: int
    managed_by: str
    pins_from: str
    offer_hint: str
    release: tuple[str, ...] = ()  # preferences files (names) of the role's other mode: released and removed


@dataclass
class Outcome:
    """What changed (or, in check mode, would change)."""

    files: list[str] = field(default_factory=list)
    install: list[str] = field(default_factory=list)
    unhold: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)  # held packages the request no longer manages: holds released
    removed: list[str] = field(default_factory=list)  # the release files removed
    hold: list[str] = field(default_factory=list)
    refreshed: bool = False
    verified: bool = True  # False when check mode could not consult a repository that is not in place yet
    # Each package pinned by a glob: the exact version it resolved to (the installed one that matches, or the newest
    # the repositories offer); absent while check mode could not consult the repositories.
    resolved: dict[str, str] = field(default_factory=dict)
    diff: list[dict[str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.files or self.install or self.unhold or self.released or self.hold)


class Backend(Protocol):
    """What converge() needs from a package manager."""

    def sources(self, request: Request) -> dict[str, str]: ...
    def pins(self, request: Request) -> dict[str, str]: ...
    def current_file(self, path: str) -> str | None: ...
    def write_file(self, path: str, content: str) -> None: ...
    def installed(self, names: list[str]) -> tuple[dict[str, list[dict[str, Any]]], set[str]]: ...
    def refresh(self, repositories: tuple[Repository, ...]) -> None: ...
    def offered(self, names: list[str]) -> dict[str, list[str]]: ...
    def dependencies(self, specs: list[str]) -> dict[str, str]: ...
    def spec(self, package: Package) -> str: ...
    def install(self, specs: list[str]) -> None: ...
    def set_holds(self, names: list[str], hold: bool) -> None: ...
    def preferences_path(self, name: str) -> str: ...
    def pinned_names(self, content: str) -> list[str]: ...
    def remove_file(self, path: str) -> None: ...


def _strings(value: Any, where: str, required: bool) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value or [])
    if any(not isinstance(item, str) or not item or re.search(r"\s", item) for item in items):
        raise VendorPackagesError(f"{where} is {value!r}; accepted: a list of non-empty words without spaces")
    if required and not items:
        raise VendorPackagesError(f"{where} is empty; accepted: at least one value")
    return tuple(items)


def parse_repository(entry: dict[str, Any]) -> Repository:
    name = str(entry.get("name") or "")
    if not REPO_NAME.match(name):
        raise VendorPackagesError(
            f"repositories: name {name!r} is not accepted; accepted: letters, digits, '.', '_', '-' (a file name)"
        )
    where = f"repositories[{name}]"
    signed_by = str(entry.get("signed_by") or "")
    error = keyring_error(signed_by)
    if error:
        raise VendorPackagesError(f"{where}.signed_by: {error} (install it with gpufabric.cluster.repo_key)")
    return Repository(
        name=name,
        uris=_strings(entry.get("uris"), f"{where}.uris", True),
        suites=_strings(entry.get("suites"), f"{where}.suites", True),
        components=_strings(entry.get("components"), f"{where}.components", False),
        architectures=_strings(entry.get("architectures"), f"{where}.architectures", False),
        signed_by=signed_by,
        managed_by=str(entry.get("managed_by") or ""),
    )


def parse_package(entry: dict[str, Any], pins_from: str) -> Package:
    name = str(entry.get("name") or "")
    if not NAME.match(name):
        raise VendorPackagesError(
            f"packages: name {name!r} ({pins_from}) is not a package name; accepted: lowercase letters, "
            "digits, '+', '-', '.'"
        )
    version = entry.get("version")
    version = "" if version is None else str(version)
    if version and not VERSION.match(version):
        raise VendorPackagesError(
            f"packages: {name} version {version!r} ({pins_from}) is not accepted; accepted: an exact package "
            "version such as 2.9.1-1 or 1:570.133.20-1, a glob such as 570.133.20-* (any revision the repositories "
            "offer), or empty for any version"
        )
    return Package(
        name=name, version=version, hold=bool(entry.get("hold", True)), repository=str(entry.get("repository") or "")
    )


def parse_request(params: dict[str, Any]) -> Request:
    """The module's parameters as a Request; VendorPackagesError names the first bad value."""
    pins_from = params.get("pins_from") or "the packages option"
    repositories = tuple(parse_repository(entry) for entry in params.get("repositories") or [])
    packages = tuple(parse_package(entry, pins_from) for entry in params.get("packages") or [])
    for kind, names in (("repositories", [r.name for r in repositories]), ("packages", [p.name for p in packages])):
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise VendorPackagesError(f"{kind}: {', '.join(twice)} listed twice ({pins_from}); accepted: once each")
    named = {repository.name for repository in repositories}
    for package in packages:
        if package.repository and package.repository not in named:
            raise VendorPackagesError(
                f"packages: {package.name} repository {package.repository!r} ({pins_from}) is not one of the "
                f"repositories; accepted: {', '.join(sorted(named)) or 'none'}, or empty for the distribution's archive"
            )
    preferences = str(params.get("preferences") or "")
    if preferences and not REPO_NAME.match(preferences):
        raise VendorPackagesError(f"preferences {preferences!r} is not accepted; accepted: a file name without '/'")
    release = _strings(params.get("release"), "release", False)
    for name in release:
        if not REPO_NAME.match(name) or name == preferences:
            raise VendorPackagesError(
                f"release {name!r} is not accepted; accepted: the name of another preferences file (without '/'), "
                f"not this request's own ({preferences or 'none'})"
            )
    return Request(
        repositories=repositories,
        packages=packages,
        preferences=preferences,
        pin_priority=int(params.get("pin_priority") or 1001),
        managed_by=str(params.get("managed_by") or "gpufabric.cluster.vendor_packages"),
        pins_from=pins_from,
        offer_hint=str(params.get("offer_hint") or ""),
        release=release,
    )


def matches(pin: str, version: str) -> bool:
    """Whether a version satisfies a pin: equal to it, or, for a pin with '*', matched by it as APT matches a
    'Pin: version' glob (against the whole version, epoch included)."""
    return fnmatch.fnmatchcase(version, pin) if "*" in pin else version == pin


def pending(packages: list[dict[str, Any]], installed: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Names of the packages not installed at their pin (any version when the pin is empty; for a glob, any
    version it matches).

    installed is in ansible.builtin.package_facts' layout (name -> [{version, release?}]), which the backends
    produce too: the roles' plans and the module agree on what moves.
    """
    out = []
    for package in packages:
        versions = installed.get(package["name"], [])
        have = {str(entry.get("version", "")) for entry in versions}
        have |= {f"{entry.get('version')}-{entry.get('release')}" for entry in versions if entry.get("release")}
        wanted = package.get("version") or ""
        if (wanted and not any(matches(wanted, version) for version in have)) or not versions:
            out.append(package["name"])
    return out


def not_offered(request: Request, wanted: list[Package], offered: dict[str, list[str]]) -> str | None:
    """One message for every pinned version the repositories lack, naming what they offer."""

    def lacks(package: Package) -> bool:
        versions = offered.get(package.name, [])
        return not any(matches(package.version, v) for v in versions) if package.version else not versions

    missing = [package for package in wanted if lacks(package)]
    if not missing:
        return None
    lines = [
        f"{package.name}{f' version {package.version!r}' if package.version else ''} is not in "
        f"{_origin(package)} ({request.pins_from}); available: {', '.join(offered.get(package.name, [])) or 'none'}."
        for package in missing
    ]
    return " ".join(lines + ([request.offer_hint] if request.offer_hint else [])) + " Nothing was installed."


def resolve(wanted: list[Package], offered: dict[str, list[str]]) -> dict[str, str]:
    """Each package pinned by a glob -> the newest offered version it matches (offered lists newest first, as
    apt-cache madison does): the version to install, and the one apt's preferences then select too."""
    resolved = {}
    for package in wanted:
        if "*" in package.version:
            match = next((v for v in offered.get(package.name, []) if matches(package.version, v)), None)
            if match is not None:
                resolved[package.name] = match
    return resolved


def _installed_matches(packages: tuple[Package, ...], installed: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Each package pinned by a glob that is installed at a version the glob matches -> that version."""
    found = {}
    for package in packages:
        if "*" in package.version:
            for entry in installed.get(package.name, []):
                if matches(package.version, str(entry.get("version", ""))):
                    found[package.name] = str(entry["version"])
    return found


def _origin(package: Package) -> str:
    return f"repository {package.repository}" if package.repository else "the repositories"


def converge(request: Request, backend: Backend, check_mode: bool) -> Outcome:
    """Bring the host to the request (or, in check mode, say what that would change); idempotent."""
    outcome = Outcome()
    # Sources are written first (the index is refreshed from them); pins only once the versions are checked.
    sources_changed = bool(_files(backend, backend.sources(request), outcome, write=not check_mode))

    names = [package.name for package in request.packages]
    installed, held = backend.installed(names)
    moving = pending([{"name": p.name, "version": p.version} for p in request.packages], installed)
    wanted = [package for package in request.packages if package.name in moving]
    outcome.resolved = _installed_matches(tuple(p for p in request.packages if p.name not in moving), installed)
    offered: dict[str, list[str]] = {}
    if check_mode and sources_changed:
        # The index cannot know a source before it is written: the pinned versions are reported unverified.
        outcome.verified = not wanted
    elif wanted or sources_changed:
        # A changed source is refreshed even with nothing to install, so that a refused signature shows now.
        try:
            outcome.verified = False
            backend.refresh(request.repositories)
            outcome.refreshed = True
            if wanted:
                offered = backend.offered([p.name for p in wanted])
            error = not_offered(request, wanted, offered)
            outcome.verified = True
            if error:
                raise VendorPackagesError(error)
        except VendorPackagesError as problem:
            problem.outcome = outcome
            raise
        # A glob installs as the exact version it resolved to.
        resolved = resolve(wanted, offered)
        outcome.resolved |= resolved
        wanted = [replace(p, version=resolved.get(p.name, p.version)) for p in wanted]

    _release(request, backend, outcome)
    # The pins and holds are of the resolved versions: the next run, which finds them installed, writes the same
    # file. A glob stays in the file only while check mode could not consult the repositories.
    pinned = replace(
        request, packages=tuple(replace(p, version=outcome.resolved.get(p.name, p.version)) for p in request.packages)
    )
    _files(backend, backend.pins(pinned), outcome, write=not check_mode)
    specs = {package.name: backend.spec(package) for package in wanted}
    if specs and outcome.refreshed:
        # Dependencies pinned with (= version) are named too: apt would otherwise pick their newest version
        # (a repository with several releases) and refuse the pinned package. A pin given here wins.
        for name, spec in backend.dependencies(list(specs.values())).items():
            if name not in specs or specs[name] == name:
                specs[name] = spec
    outcome.install = list(specs.values())
    # Held packages without a pin of their own move with what is installed (a dependency several levels down).
    moving_names = set(specs) | ({p.name for p in request.packages if not p.version} if specs else set())
    outcome.unhold = sorted(name for name in held if name in moving_names)
    outcome.hold = [p.name for p in request.packages if p.hold and (p.name not in held or p.name in moving_names)]
    if outcome.install or outcome.hold:
        before = _package_lines(request, installed, held)
        after = _package_lines(request, {**installed, **_pinned(wanted)}, set(held) | set(outcome.hold))
        outcome.diff.append({"before_header": "packages", "after_header": "packages", "before": before, "after": after})
    if not check_mode:
        # Released first: apt may have to remove a held package of the other mode's to install this request's.
        if outcome.released:
            backend.set_holds(outcome.released, hold=False)
        for path in outcome.removed:
            backend.remove_file(path)
        if outcome.unhold:
            backend.set_holds(outcome.unhold, hold=False)
        if outcome.install:
            backend.install(outcome.install)
        if outcome.hold:
            backend.set_holds(outcome.hold, hold=True)
    return outcome


def _release(request: Request, backend: Backend, outcome: Outcome) -> None:
    """Record in outcome what the request no longer manages: held packages its own preferences file pinned and it
    no longer lists, and the files in request.release with the held packages they pin that it does not hold."""
    listed = {package.name for package in request.packages}
    kept = {package.name for package in request.packages if package.hold}
    names: set[str] = set()
    if request.preferences:
        own = backend.current_file(backend.preferences_path(request.preferences))
        names |= set(backend.pinned_names(own or "")) - listed
    for name in request.release:
        path = backend.preferences_path(name)
        content = backend.current_file(path)
        if content is None:
            continue
        names |= set(backend.pinned_names(content)) - kept
        outcome.files.append(path)
        outcome.removed.append(path)
        removal = {"before_header": path, "after_header": f"{path} (removed)", "before": content, "after": ""}
        outcome.diff.append(removal)
    if not names:
        return
    _installed, held = backend.installed(sorted(names))
    outcome.released = sorted(held & names)
    if outcome.released:
        outcome.diff.append(
            {
                "before_header": "holds",
                "after_header": "holds",
                "before": "".join(f"{name} (hold)\n" for name in outcome.released),
                "after": "".join(f"{name}\n" for name in outcome.released),
            }
        )


def _files(backend: Backend, files: dict[str, str], outcome: Outcome, write: bool) -> list[str]:
    """Write the files whose content differs (when write), recording them and their diff; the changed paths."""
    changed = []
    for path, content in files.items():
        before = backend.current_file(path)
        if before == content:
            continue
        changed.append(path)
        outcome.files.append(path)
        outcome.diff.append({"before_header": path, "after_header": path, "before": before or "", "after": content})
        if write:
            backend.write_file(path, content)
    return changed


def _pinned(packages: list[Package]) -> dict[str, list[dict[str, Any]]]:
    return {package.name: [{"version": package.version or "(newest)"}] for package in packages}


def _package_lines(request: Request, installed: dict[str, list[dict[str, Any]]], held: set[str]) -> str:
    lines = []
    for package in request.packages:
        versions = [str(entry.get("version")) for entry in installed.get(package.name, [])]
        state = ", ".join(versions) or "not installed"
        lines.append(f"{package.name}: {state}{' (hold)' if package.name in held else ''}\n")
    return "".join(lines)
