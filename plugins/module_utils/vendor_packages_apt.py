# SPDX-License-Identifier: Apache-2.0
"""The apt backend of vendor_packages: deb822 sources, preferences pins, apt-get, apt-cache, apt-mark, dpkg-query.

Every command is an argv list run through the module's run_command. Sources are written as deb822 files
directly (ansible.builtin.deb822_repository needs python3-debian on the host, which a fresh host lacks and
check mode could not install). apt-get is used rather than apt, whose command line is not stable; its own
E:/W: lines tell a refused signature apart from other failures (ansible's apt module retries and hides them).
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import PREFERENCES_DIR, SOURCES_DIR
from ansible_collections.gpufabric.cluster.plugins.module_utils.vendor_packages import (
    NAME,
    Package,
    Repository,
    Request,
    VendorPackagesError,
)

# No prompt, no pager, and the configuration files a package ships never replace local ones silently.
ENVIRONMENT = {"DEBIAN_FRONTEND": "noninteractive", "APT_LISTCHANGES_FRONTEND": "none", "LC_ALL": "C"}
INSTALL = [
    "apt-get", "install", "-y", "-q", "--no-install-recommends", "--allow-downgrades",
    "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
]  # fmt: skip
SIGNATURE_ERRORS = re.compile(r"NO_PUBKEY|not signed|BADSIG|EXPKEYSIG|signatures were invalid")
# apt-cache show's Depends and Pre-Depends entries pinned to one version: "name (= 1.0-1)", "name:amd64 (= 1.0-1)".
EXACT_DEPENDENCY = re.compile(r"([a-z0-9][a-z0-9+.-]+)(?::[a-z0-9]+)? \(= ([^)]+)\)")


def sources_file(repository: Repository, managed_by: str) -> str:
    lines = [
        f"# Managed by gpufabric ({repository.managed_by or managed_by}): local edits are overwritten.",
        "Types: deb",
        f"URIs: {' '.join(repository.uris)}",
        f"Suites: {' '.join(repository.suites)}",
    ]
    if repository.components:
        lines.append(f"Components: {' '.join(repository.components)}")
    if repository.architectures:
        lines.append(f"Architectures: {' '.join(repository.architectures)}")
    lines.append(f"Signed-By: {repository.signed_by}")
    return "\n".join(lines) + "\n"


def preferences_file(request: Request) -> str:
    out = f"# Managed by gpufabric ({request.managed_by}): these packages move only when their pin changes.\n"
    for package in sorted(request.packages, key=lambda p: p.name):
        if package.version:
            out += f"\nPackage: {package.name}\nPin: version {package.version}\nPin-Priority: {request.pin_priority}\n"
    return out


def pinned_names(content: str) -> list[str]:
    """The package names an APT preferences file pins ('Package:' lines); '*' and glob or regex entries, which name
    no one package, are left out."""
    names = [name for line in re.findall(r"(?mi)^Package:(.*)$", content) for name in line.split()]
    return sorted({name for name in names if NAME.fullmatch(name)})


def parse_dpkg_query(stdout: str) -> tuple[dict[str, list[dict[str, Any]]], set[str]]:
    """'name<TAB>version<TAB>want ok status' lines -> installed (package_facts layout) and the held names."""
    installed: dict[str, list[dict[str, Any]]] = {}
    held = set()
    for line in stdout.splitlines():
        name, _tab, rest = line.partition("\t")
        version, _tab, status = rest.partition("\t")
        words = status.split()
        if len(words) == 3 and words[2] in ("installed", "half-configured", "unpacked", "half-installed"):
            installed.setdefault(name, []).append({"version": version})
        if words[:1] == ["hold"]:
            held.add(name)
    return installed, held


def parse_madison(stdout: str) -> dict[str, list[str]]:
    """apt-cache madison's 'name | version | source' lines -> name -> versions, newest first, once each."""
    offered: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) >= 3 and fields[0] and fields[1]:
            versions = offered.setdefault(fields[0], [])
            if fields[1] not in versions:
                versions.append(fields[1])
    return offered


def parse_exact_dependencies(stdout: str) -> dict[str, str]:
    """Depends/Pre-Depends pinned with (= version) in apt-cache show output -> name -> 'name=version'."""
    found: dict[str, str] = {}
    for line in re.findall(r"(?m)^(?:Pre-)?Depends: (.*)$", stdout):
        for entry in line.split(","):
            # An alternative ("a (= 1) | b (= 1)") is apt's to choose: naming one would install it beside the
            # other (nvidia-driver accepts the proprietary or the open kernel module).
            match = None if "|" in entry else EXACT_DEPENDENCY.search(entry)
            if match:
                found.setdefault(match.group(1), f"{match.group(1)}={match.group(2)}")
    return found


def refusal(repositories: tuple[Repository, ...], rc: int, stdout: str, stderr: str) -> str | None:
    """One message when apt-get update failed or refused a signature, naming the repository and its keyring."""
    output = f"{stdout}\n{stderr}"
    lines = " ".join(line for line in output.splitlines() if re.match(r"^[EW]:", line))
    if rc == 0 and "GPG error" not in output:
        return None
    if SIGNATURE_ERRORS.search(output):
        named = [repo for repo in repositories if any(uri.rstrip("/") in lines for uri in repo.uris)]
        for repo in named or repositories[:1]:
            return (
                f"apt refused the repository {' '.join(repo.uris)} ({repo.name}): its signature is not trusted "
                f"(the key in {repo.signed_by} did not sign it). {lines}"
            )
        return f"apt refused a repository: its signature is not trusted. {lines}"
    return f"apt-get update failed (rc {rc}). {lines or stderr.strip()}"


class Apt:
    """The Backend of vendor_packages.converge() for apt; module is an AnsibleModule (or a test double)."""

    def __init__(self, module: Any, sources_dir: str = SOURCES_DIR, preferences_dir: str = PREFERENCES_DIR):
        self.module = module
        self.sources_dir = sources_dir
        self.preferences_dir = preferences_dir

    def _run(self, argv: list[str], what: str) -> str:
        rc, stdout, stderr = self.module.run_command(argv, environ_update=ENVIRONMENT)
        if rc != 0:
            raise VendorPackagesError(f"{what} failed (rc {rc}): {' '.join(argv)}: {stderr.strip() or stdout.strip()}")
        return str(stdout)

    def sources(self, request: Request) -> dict[str, str]:
        return {
            os.path.join(self.sources_dir, f"{repo.name}.sources"): sources_file(repo, request.managed_by)
            for repo in request.repositories
        }

    def pins(self, request: Request) -> dict[str, str]:
        if not request.preferences:
            return {}
        return {self.preferences_path(request.preferences): preferences_file(request)}

    def preferences_path(self, name: str) -> str:
        return os.path.join(self.preferences_dir, f"{name}.pref")

    def pinned_names(self, content: str) -> list[str]:
        return pinned_names(content)

    def remove_file(self, path: str) -> None:
        os.remove(path)

    def current_file(self, path: str) -> str | None:
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def write_file(self, path: str, content: str) -> None:
        directory = os.path.dirname(path)
        os.makedirs(directory, mode=0o755, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".vendor_packages-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(content)
        os.chmod(temporary, 0o644)
        self.module.atomic_move(temporary, path)

    def installed(self, names: list[str]) -> tuple[dict[str, list[dict[str, Any]]], set[str]]:
        if not names:
            return {}, set()
        # Exit status 1 only means some names are unknown to dpkg: not installed, as intended.
        argv = ["dpkg-query", "-W", "-f=${Package}\t${Version}\t${Status}\n", *names]
        rc, stdout, stderr = self.module.run_command(argv, environ_update=ENVIRONMENT)
        if rc not in (0, 1):
            raise VendorPackagesError(f"dpkg-query failed (rc {rc}): {stderr.strip()}")
        return parse_dpkg_query(stdout)

    def refresh(self, repositories: tuple[Repository, ...]) -> None:
        rc, stdout, stderr = self.module.run_command(["apt-get", "update", "-q"], environ_update=ENVIRONMENT)
        message = refusal(repositories, rc, stdout, stderr)
        if message:
            raise VendorPackagesError(message)

    def offered(self, names: list[str]) -> dict[str, list[str]]:
        return parse_madison(self._run(["apt-cache", "madison", *names], "apt-cache madison"))

    def dependencies(self, specs: list[str]) -> dict[str, str]:
        return parse_exact_dependencies(self._run(["apt-cache", "show", "--no-all-versions", *specs], "apt-cache show"))

    def spec(self, package: Package) -> str:
        return f"{package.name}={package.version}" if package.version else package.name

    def install(self, specs: list[str]) -> None:
        self._run([*INSTALL, *specs], "apt-get install")

    def set_holds(self, names: list[str], hold: bool) -> None:
        self._run(["apt-mark", "hold" if hold else "unhold", *names], "apt-mark")
