# SPDX-License-Identifier: Apache-2.0
"""Decisions of the gcp_gpudirect_rdma role (gIB NCCL plugin on a3-ultragpu-8g / a4-highgpu-8g).

Pure Python (standard library only) so that what molecule cannot reach is unit-tested: the
Ubuntu releases GCP images use, the Artifact Registry transport (needed only for ``ar+https``
repositories), the RDMA NIC checks on hardware facts, and the comparison of Google's
``set_nccl_env.sh`` with the catalog environment. The role calls these through the filters in
plugins/filter/gcp_gpudirect_rdma.py.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import adopt, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.adopt import Adoption
from ansible_collections.gpufabric.cluster.plugins.module_utils.gcp_common import (
    TRANSPORT_PACKAGE,
    transport_needed,
    transport_packages,
)
from ansible_collections.gpufabric.cluster.plugins.module_utils.host_plan import no_profile
from ansible_collections.gpufabric.cluster.plugins.module_utils.repo_key import pin_errors
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import PackageStep
from ansible_collections.gpufabric.cluster.plugins.module_utils.vendor_packages import pending

FABRIC = "gpudirect_rdma"
# Profiles of the built-in catalog with this fabric (named in error messages only).
BUILTIN_PROFILES = ("gcp/a3-ultragpu-8g", "gcp/a4-highgpu-8g")
PACKAGE = "nccl-gib"
# The role variable that selects install or adopt (adopt.MODES), named in the plan's messages.
MODE_VARIABLE = "gcp_gpudirect_rdma_provision"
# Adopt mode's record of what it holds: the image's nccl-gib at its installed version (the APT preferences file
# of that name, supply_chain.preferences_path).
ADOPT_PREFERENCES = "gpufabric-gib-adopted"
# Distributions and releases the role installs on: APT systems GCP offers for A3 Ultra and A4.
SUPPORTED = {"Debian": ("12", "13"), "Ubuntu": ("22.04", "24.04")}
REPO_SCHEMES = ("ar+https://", "https://", "http://", "file:")
FAIL_ON = ("error", "warning", "never")
SEVERITIES = {"error": ("error",), "warning": ("error", "warning"), "never": ()}
# Catalog variables that name a file the plugin reads; checked after install when absolute.
FILE_VARIABLES = ("NCCL_TUNER_CONFIG_PATH", "NCCL_NET_PLUGIN", "NCCL_TOPO_FILE")
PATH_VARIABLES = ("LD_LIBRARY_PATH", "PATH")
PLUGIN_PATTERN = "libnccl-net*.so"
# Set by the shell itself, not by the script.
SHELL_VARIABLES = frozenset({"_", "SHLVL", "PWD", "OLDPWD", "BASH_EXECUTION_STRING"})
ENV_MARKER = "--- gpufabric: after sourcing ---"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VERSION = re.compile(r"^[0-9][A-Za-z0-9.+~:-]*$")
IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"


def _finding(severity: str, check: str, subject: str, message: str) -> dict[str, str]:
    return {"severity": severity, "check": check, "subject": subject, "message": message}


# ---------------------------------------------------------------------------
# Host and repositories
# ---------------------------------------------------------------------------


def os_error(distribution: str, version: str, major_version: str) -> str | None:
    """Why the role cannot install on this OS, or None (Ubuntu by release, Debian by major version)."""
    releases = SUPPORTED.get(distribution)
    accepted = "; ".join(f"{name} {', '.join(versions)}" for name, versions in SUPPORTED.items())
    if releases is None:
        return f"distribution {distribution!r} is not supported; accepted: {accepted}"
    release = version if distribution == "Ubuntu" else major_version
    if release not in releases:
        return f"{distribution} {version} is not supported; accepted: {accepted}"
    return None


def keyring_error(variable: str, path: str) -> str | None:
    """apt reads a Signed-By keyring by its extension: .asc armored, .gpg binary; the path must be absolute."""
    if not path.startswith("/") or not path.endswith((".asc", ".gpg")):
        accepted = "an absolute path ending in .asc (armored) or .gpg (binary)"
        return f"{variable} {path!r} is not accepted; accepted: {accepted}"
    return None


class Repo(TypedDict):
    name: str  # the deb822 source's file name (without .sources)
    url: str
    suite: str
    components: list[str]
    key_url: str
    key_src: str  # a key file on the controller, instead of key_url
    key_checksum: str  # "sha256:<hex>" or ""
    key_fingerprints: list[str]
    key_variable: str  # the role variable that holds key_fingerprints, for repo_key's messages
    keyring: str


class Package(TypedDict):
    name: str
    version: str
    spec: str  # name=version


class GcpGpudirectRdmaPlan(TypedDict):
    profile: str
    errors: list[str]
    warnings: list[str]
    transport: bool  # the gIB repository is ar+https:// and needs the Artifact Registry transport first
    repos: list[Repo]  # transport first when needed, then gIB
    gib_repo: Repo
    transport_repo: Repo | None
    packages: list[Package]  # nccl-gib at its pin
    transport_packages: list[Package]
    holds: list[str]
    pending: list[str]  # packages not installed at their pin yet (needs facts.packages)
    transport_install: PackageStep | None  # the transport's key and vendor_packages run, before gIB's
    gib_install: PackageStep
    supply: list[PackageStep]  # both, in order: what gpufabric plan shows
    env: dict[str, str]  # the catalog environment of the profile
    lib_dirs: list[str]  # the env's LD_LIBRARY_PATH entries
    plugin_pattern: str  # file name pattern of the NCCL net plugin in lib_dirs
    files: list[str]  # absolute files the env names, checked after install
    nics: dict[str, Any]  # the profile's NICs
    adopt: Adoption  # adopt mode: the image's nccl-gib, adopted or refused; install mode's is empty


def _repo(settings: dict[str, Any], prefix: str, key_prefix: str, name: str, errors: list[str]) -> Repo:
    """One repository's coordinates from the role settings; errors name the role variable.

    The names are gcp_tcpxo's: <prefix>repo_url/_suite/_components and <key_prefix>key_url/_src/_checksum/
    _fingerprints and <key_prefix>keyring (the gIB repository: "" and "repo_"; the transport: "ar_transport_" twice).
    """
    var, key_var = f"gcp_gpudirect_rdma_{prefix}", f"gcp_gpudirect_rdma_{key_prefix}"
    url = str(settings.get(f"{prefix}repo_url") or "")
    key_url = str(settings.get(f"{key_prefix}key_url") or "")
    key_src = str(settings.get(f"{key_prefix}key_src") or "")
    checksum = str(settings.get(f"{key_prefix}key_checksum") or "").lower()
    keyring = str(settings.get(f"{key_prefix}keyring") or "")
    if not url.startswith(REPO_SCHEMES):
        errors.append(f"{var}repo_url {url!r} is not accepted; accepted: a URL starting with {', '.join(REPO_SCHEMES)}")
    if not str(settings.get(f"{prefix}repo_suite") or ""):
        errors.append(f"{var}repo_suite is empty; accepted: the repository's suite, e.g. gpudirect-gib-apt")
    if not key_src and not key_url:
        errors.append(f"{key_var}key_url and {key_var}key_src are both empty; the repository needs its signing key")
    if key_url and not key_src and not key_url.startswith(("https://", "file:")):
        errors.append(f"{key_var}key_url {key_url!r} is not accepted; accepted: an https:// or file: URL")
    if checksum.startswith("sha256:"):
        checksum = checksum[len("sha256:") :]
    if checksum and not re.fullmatch(r"[0-9a-f]{64}", checksum):
        errors.append(f"{key_var}key_checksum {checksum!r} is not accepted; accepted: empty or 64 hex digits (sha256)")
    error = keyring_error(f"{key_var}keyring", keyring)
    if error:
        errors.append(error)
    errors.extend(pin_errors(f"{key_var}key_fingerprints", settings.get(f"{key_prefix}key_fingerprints")))
    return {
        "name": name,
        "url": url,
        "suite": str(settings.get(f"{prefix}repo_suite") or ""),
        "components": [str(item) for item in settings.get(f"{prefix}repo_components") or []],
        "key_url": key_url,
        "key_src": key_src,
        "key_checksum": f"sha256:{checksum}" if checksum else "",
        "key_fingerprints": list(settings.get(f"{key_prefix}key_fingerprints") or []),
        "key_variable": f"{key_var}key_fingerprints",
        "keyring": keyring,
    }


def _package(name: str, version: str) -> Package:
    return {"name": name, "version": version, "spec": f"{name}={version}"}


def _install(repo: Repo, packages: list[dict[str, Any]]) -> PackageStep:
    """The repository's key, its deb822 source and its packages, pinned and held: one vendor_packages run."""
    source = supply_chain.repository(repo["name"], repo["url"], repo["suite"], repo["keyring"], repo["components"])
    signing_key = supply_chain.key(
        repo["name"],
        repo["keyring"],
        repo["key_fingerprints"],
        fingerprints_from=repo["key_variable"],
        url="" if repo["key_src"] else repo["key_url"],
        src=repo["key_src"],
        checksum=repo["key_checksum"],
    )
    pins = [
        supply_chain.package(entry["name"], entry["version"], repo["name"], hold=entry.get("hold", True))
        for entry in packages
    ]
    return supply_chain.step(pins, [source], [signing_key])


def _lib_dirs(env: dict[str, str]) -> list[str]:
    return [entry for entry in str(env.get("LD_LIBRARY_PATH") or "").split(":") if entry]


def env_errors(env: dict[str, str], profile: str) -> list[str]:
    """What the gIB plugin needs of the catalog environment; the catalog loader checks it too."""
    if _lib_dirs(env):
        return []
    return [
        f"the catalog environment of {profile!r} has no LD_LIBRARY_PATH; it must name the directory of the "
        "gIB plugin (/usr/local/gib/lib64)"
    ]


def plan(settings: dict[str, Any], host_plan: dict[str, Any], facts: dict[str, Any]) -> GcpGpudirectRdmaPlan:
    """What the role installs and checks on this host, plus every reason it must refuse to start.

    settings: the role's variables without the gcp_gpudirect_rdma_ prefix. host_plan: the host's plan,
    gpufabric_plan (profile, fabric, env, nics). facts: ansible_facts (distribution, distribution_version,
    distribution_major_version and, after package_facts, packages).
    """
    errors: list[str] = []
    profile = str(host_plan.get("profile") or "")
    if profile == "unknown":
        errors.append(
            f"{no_profile(host_plan)}; accepted: a profile whose "
            f"fabric is {FABRIC} ({', '.join(BUILTIN_PROFILES)} in the built-in catalog)"
        )
    elif host_plan.get("fabric") != FABRIC:
        errors.append(
            f"profile {profile!r} has fabric {host_plan.get('fabric')!r}; this role serves "
            f"{FABRIC} only, accepted: {', '.join(BUILTIN_PROFILES)} (gIB's NCCL_NET=gIB breaks NCCL elsewhere)"
        )
    error = os_error(
        str(facts.get("distribution", "")),
        str(facts.get("distribution_version", "")),
        str(facts.get("distribution_major_version", "")),
    )
    if error:
        errors.append(error)
    version = str(settings.get("version") or "")
    if not VERSION.match(version):
        errors.append(
            f"gcp_gpudirect_rdma_version {version!r} is not accepted; accepted: the exact Debian version of "
            f"{PACKAGE}, e.g. 1.1.0 (`apt-cache madison {PACKAGE}` lists them)"
        )
    mode = str(settings.get("mode") or "install")
    mode_error = adopt.mode_error(mode, MODE_VARIABLE)
    if mode_error:
        errors.append(mode_error)
    fail_on = settings.get("env_fail_on")
    if fail_on not in FAIL_ON:
        errors.append(f"gcp_gpudirect_rdma_env_fail_on {fail_on!r} is not accepted; accepted: {', '.join(FAIL_ON)}")

    # The repositories' settings matter only for installing: adopt mode holding the image's nccl-gib ignores them.
    repo_errors: list[str] = []
    gib = _repo(settings, "", "repo_", "gpufabric-gib", repo_errors)
    transport = transport_needed(gib["url"])
    repos = [gib]
    packages = [_package(PACKAGE, version)]
    transport_versioned: list[Package] = []
    # The transport's own vendor_packages run, before gIB's: apt reads an ar+https:// source only once it is installed.
    transport_install: PackageStep | None = None
    if transport:
        transport_repo = _repo(settings, "ar_transport_", "ar_transport_", "gpufabric-gib-transport", repo_errors)
        transport_version = str(settings.get("ar_transport_version") or "")
        if not VERSION.match(transport_version):
            repo_errors.append(
                f"gcp_gpudirect_rdma_ar_transport_version {transport_version!r} is not accepted; the ar+https "
                f"repository {gib['url']} needs {TRANSPORT_PACKAGE} at an exact version: run `apt-cache madison "
                f"{TRANSPORT_PACKAGE}` on a host with {transport_repo['url']} {transport_repo['suite']} configured, "
                "or set gcp_gpudirect_rdma_repo_url to a mirror or https:// repository that needs no transport"
            )
        else:
            transport_versioned = [_package(TRANSPORT_PACKAGE, transport_version)]
        transport_install = _install(
            transport_repo, transport_packages(transport_version) if transport_versioned else []
        )
        repos.insert(0, transport_repo)

    env = {str(key): str(value) for key, value in (host_plan.get("env") or {}).items()}
    lib_dirs = _lib_dirs(env)
    if host_plan.get("fabric") == FABRIC:
        errors += env_errors(env, profile)
    files = [env[name] for name in FILE_VARIABLES if env.get(name, "").startswith("/")]
    installed = facts.get("packages") or {}
    gib_install = _install(gib, [{"name": PACKAGE, "version": version}])
    # Adopt mode's record, when the host was adopted before: its pin would hold nccl-gib at the adopted version.
    gib_install["release"] = [ADOPT_PREFERENCES]
    result: GcpGpudirectRdmaPlan = {
        "profile": profile,
        "errors": errors + repo_errors,
        "warnings": [],
        "transport": transport,
        "repos": repos,
        "gib_repo": gib,
        "transport_repo": repos[0] if transport else None,
        "packages": packages,
        "transport_packages": transport_versioned,
        "holds": [package["name"] for package in transport_versioned + packages],
        "pending": pending([*transport_versioned, *packages], installed),
        "transport_install": transport_install,
        "gib_install": gib_install,
        "supply": [*([transport_install] if transport_install else []), gib_install],
        "env": env,
        "lib_dirs": lib_dirs,
        "plugin_pattern": PLUGIN_PATTERN,
        "files": files,
        "nics": host_plan.get("nics") or {},
        "adopt": adopt.adoption(),
    }
    if mode == "adopt" and not errors:
        result.update(_adopt(result, version, facts))  # type: ignore[typeddict-item]
    return result


def _adopt(result: GcpGpudirectRdmaPlan, floor: str, facts: dict[str, Any]) -> dict[str, Any]:
    """Adopt mode: the image's nccl-gib at the floor (gcp_gpudirect_rdma_version) or newer is held at its installed
    version, and no repository is configured; an older one is refused; none is installed as install mode would."""
    installed = adopt.installed_versions(facts)
    if installed is None:
        # `gpufabric plan` without --probe: the role reads the packages on the host (package_facts).
        return {
            "warnings": [
                f"{MODE_VARIABLE} 'adopt': whether the image ships {PACKAGE} is read on the host, so it is not known "
                "here (`gpufabric plan --probe` reads it); shown: nothing"
            ],
            "supply": [],
            "adopt": adopt.adoption("adopt"),
        }
    shipped = installed.get(PACKAGE)
    if shipped is None:
        # Installed as install mode would, pinned in adopt mode's file: the next run adopts the same version into
        # the same file, so it changes nothing.
        gib_install = {**result["gib_install"], "preferences": ADOPT_PREFERENCES, "release": []}
        return {
            "gib_install": gib_install,
            "supply": [*([result["transport_install"]] if result["transport_install"] else []), gib_install],
            "adopt": adopt.adoption("adopt", known=True, missing=[PACKAGE]),
        }
    if adopt.version_numbers(shipped) < adopt.version_numbers(floor):
        refusal = (
            f"{MODE_VARIABLE} 'adopt': the image's {PACKAGE} {shipped} is older than gcp_gpudirect_rdma_version "
            f"{floor}, the floor in adopt mode; accepted: {floor} or newer; lower gcp_gpudirect_rdma_version to "
            f"keep the image's, or {MODE_VARIABLE} 'install' replaces it"
        )
        return {
            "errors": [*result["errors"], refusal],  # the way out, install mode, needs the repository too
            "adopt": adopt.adoption("adopt", known=True, found={PACKAGE: shipped}, refused=refusal),
        }
    hold = adopt.hold_step({PACKAGE: shipped}, ADOPT_PREFERENCES)
    return {
        # Called only without other errors: what is left are the repositories' settings, which holding ignores.
        "errors": [],
        "transport": False,
        "repos": [],
        "transport_repo": None,
        "packages": [_package(PACKAGE, shipped)],
        "transport_packages": [],
        "holds": [PACKAGE],
        "pending": [],
        "transport_install": None,
        "gib_install": hold,
        "supply": [hold],
        "adopt": adopt.adoption("adopt", known=True, found={PACKAGE: shipped}),
    }


# ---------------------------------------------------------------------------
# RDMA NICs (live)
# ---------------------------------------------------------------------------


def _roce_v2_ipv4(port: dict[str, Any]) -> bool:
    """A RoCE v2 GID over an IPv4 address: what routed RoCE across the RDMA VPC's subnets uses."""
    return any(
        (gid.get("type") or "") == "RoCE v2" and str(gid.get("gid") or "").lower().startswith(IPV4_MAPPED)
        for gid in port.get("gids") or []
    )


def nic_findings(hardware: dict[str, Any], nics: dict[str, Any]) -> list[dict[str, str]]:
    """Every way the host's RDMA NICs fall short of gIB, each naming the device (empty: all good).

    The devices are the ones the profile names (nics.gpu.rdma_devices); without names, every
    ConnectX RDMA device (the management NIC of these machines is a gVNIC, so all of them are
    GPU NICs), at least nics.gpu.count of them.
    """
    spec = nics.get("gpu") or {}
    count = int(spec.get("count") or 0)
    mtu = spec.get("mtu")
    names = [str(name) for name in spec.get("rdma_devices") or []]
    devices = {dev["name"]: dev for dev in hardware.get("rdma_devices") or []}
    netdevs = {nic["name"]: nic for nic in hardware.get("nics") or []}
    out: list[dict[str, str]] = []
    if names:
        selected = [devices[name] for name in names if name in devices]
        for name in names:
            if name not in devices:
                out.append(_finding("error", "missing", name, f"{name}: RDMA device missing (the profile names it)"))
    else:
        selected = [dev for dev in devices.values() if dev.get("kind") == "connectx"]
        if len(selected) < count:
            found = ", ".join(dev["name"] for dev in selected) or "none"
            out.append(
                _finding(
                    "error",
                    "count",
                    "rdma_devices",
                    f"found {len(selected)} of {count} ConnectX RDMA devices ({found})",
                )
            )
    for dev in selected:
        out += _device_findings(dev, netdevs, mtu)
    return out


def _device_findings(dev: dict[str, Any], netdevs: dict[str, Any], mtu: Any) -> list[dict[str, str]]:
    name = dev["name"]
    out = []
    ports = dev.get("ports") or []
    if not ports:
        out.append(_finding("error", "port", name, f"{name} has no RDMA port"))
    netdev = dev.get("netdev")
    for port in ports:
        where = f"{name} port {port.get('port')}"
        layer = port.get("link_layer")
        if layer != "Ethernet":
            message = f"{where} link layer is {layer}; gIB needs RoCE (Ethernet)"
            out.append(_finding("error", "link_layer", name, message))
        if port.get("state") != "ACTIVE":
            message = f"{where} is {port.get('state')} ({port.get('phys_state')}); expected ACTIVE"
            out.append(_finding("error", "port_state", name, message))
        if "gids" in port:
            if not _roce_v2_ipv4(port):
                message = (
                    f"{where} has no RoCE v2 GID with an IPv4 address (does {netdev or 'its netdev'} have its "
                    "address on the RDMA subnet?)"
                )
                out.append(_finding("error", "gid", name, message))
        elif not port.get("gid_count"):
            out.append(_finding("error", "gid", name, f"{where} has no GID"))
    if not netdev or netdev not in netdevs:
        out.append(_finding("error", "netdev", name, f"{name} has no network interface; RoCE needs one"))
    elif mtu and netdevs[netdev].get("mtu") != mtu:
        message = f"{name}: {netdev} MTU is {netdevs[netdev].get('mtu')}; the profile's RDMA network needs {mtu}"
        out.append(_finding("error", "mtu", name, message))
    return out


# ---------------------------------------------------------------------------
# Google's set_nccl_env.sh against the catalog environment
# ---------------------------------------------------------------------------


def _parse_env(lines: list[str]) -> dict[str, str]:
    """`env` output; continuation lines of multi-line values (no NAME= prefix) are skipped."""
    values = {}
    for line in lines:
        name, sep, value = line.partition("=")
        if sep and ENV_NAME.match(name):
            values[name] = value
    return values


def script_exports(output: str) -> dict[str, Any]:
    """What sourcing the script changed: output is `env`, the marker line, then `env` again.

    Returns {"complete": bool, "exports": {name: value}}; complete is false when the second
    dump is missing (the script ran `exit` or was killed), so nothing can be compared.
    """
    lines = output.splitlines()
    if ENV_MARKER not in lines:
        return {"complete": False, "exports": {}}
    cut = lines.index(ENV_MARKER)
    before, after = _parse_env(lines[:cut]), _parse_env(lines[cut + 1 :])
    exports = {
        name: value for name, value in after.items() if name not in SHELL_VARIABLES and before.get(name) != value
    }
    return {"complete": True, "exports": exports}


def env_differences(
    exports: dict[str, str], catalog_env: dict[str, str], script: str = "set_nccl_env.sh"
) -> list[dict[str, str]]:
    """Where the script's exports and the catalog environment (written by nccl_env) differ.

    error: NCCL_NET set by the script to something else than the catalog has (NCCL would pick a
    different network than the one nccl_env configures). warning: any other variable the script
    sets to a value the catalog does not have. info: catalog variables the script leaves alone.
    Directory lists (LD_LIBRARY_PATH, PATH) only need the catalog's directories in the script's value.
    """
    out = []
    for name in sorted(set(exports) | set(catalog_env)):
        theirs, ours = exports.get(name), catalog_env.get(name)
        if name in PATH_VARIABLES:
            if theirs is None:
                continue  # nccl_env prepends the catalog's directories itself
            missing = [entry for entry in (ours or "").split(":") if entry and entry not in theirs.split(":")]
            if missing:
                message = f"{name}: {script} sets {theirs!r}, without the catalog's {':'.join(missing)}"
                out.append(_finding("warning", "env", name, message))
            continue
        if theirs == ours:
            continue
        if theirs is None:
            message = f"{name}: the catalog sets {ours!r}; {script} does not set it"
            out.append(_finding("info", "env", name, message))
            continue
        catalog = f"the catalog sets {ours!r}" if ours is not None else "the catalog does not set it"
        severity = "error" if name == "NCCL_NET" else "warning"
        out.append(_finding(severity, "env", name, f"{name}: {script} sets {theirs!r}; {catalog}"))
    return out


def blocking(findings: list[dict[str, str]], fail_on: str) -> list[dict[str, str]]:
    """The findings at or above the fail_on severity."""
    return [item for item in findings if item["severity"] in SEVERITIES.get(fail_on, ())]
