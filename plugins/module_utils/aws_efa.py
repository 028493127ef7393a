# SPDX-License-Identifier: Apache-2.0
"""What the aws_efa role downloads, how it runs AWS's EFA installer, and how it reads the result.

Pure Python (stdlib only) so that what molecule cannot reach is unit-tested: the installer flags
for bake and live mode, which installer versions support which distribution and bundle
aws-ofi-nccl, the checksums AWS published, the installer's version marker, and the output of
``fi_info -p efa``. The role calls it through the filters of plugins/filter/aws_efa.py: ``aws_efa_plan``
(plan()), ``aws_efa_install`` (install_decision()), ``aws_efa_libraries`` (library_findings()) and
``aws_efa_fi_info`` (fi_info_report()).

Facts and their sources (see roles/aws_efa/README.md for the full list):

- Flags -y/-n/-l/-k/-m/-d/-g and /opt/amazon/efa_installed_packages ("# EFA installer version: X"):
  efa_installer.sh itself (usage() and write_package_file()).
- --mpi=openmpi4: AWS EC2 User Guide, "Get started with EFA and NCCL" (efa-start-nccl).
- Distribution support and the first versions that bundle aws-ofi-nccl (libnccl-ofi): AWS EC2 User
  Guide, "Elastic Fabric Adapter release notes" (efa-changelog).
- Published SHA256 checksums: AWS ParallelCluster's cookbook (aws/aws-parallelcluster-cookbook,
  attributes/environment.rb), which copies them from the EC2 User Guide page efa-verify.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import adopt, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.adopt import Adoption
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import Artifact, PackageStep

DEFAULT_BASE_URL = "https://efa-installer.amazonaws.com"
VERIFY_DOC = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-verify.html"
SIGNING_KEY_URL = "https://efa-installer.amazonaws.com/aws-efa-installer.key"
SIGNING_KEY_FINGERPRINT = "4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC"
MARKER_FILE = "/opt/amazon/efa_installed_packages"
# The role variable that selects install or adopt (adopt.MODES), named in the refusals.
MODE_VARIABLE = "aws_efa_provision"
# The fact `gpufabric plan --probe` puts the marker's text in ('' when absent); a play's facts do not have it.
PROBED_MARKER = "efa_installer"
# Adopt mode's record of what it holds: the image's EFA packages pinned at their installed versions (the APT
# preferences file of that name, supply_chain.preferences_path).
PREFERENCES = "gpufabric-aws-efa-adopted"

# SHA256 of aws-efa-installer-<version>.tar.gz as AWS publishes them in the checksum table of the EC2 user
# guide's efa-verify page (VERIFY_DOC); AWS ParallelCluster's cookbook quotes the same values for 1.38.0,
# 1.38.1 and 1.41.0. Only versions that bundle aws-ofi-nccl (1.38.0 and later) are listed.
PUBLISHED_SHA256 = {
    "1.38.0": "4f436954f35ad53754b4d005fd8d0be63de3b4184de41a695b504bdce0fecb22",
    "1.38.1": "83923374afd388b1cfcf4b3a21a2b1ba7cf46a01a587f7b519b8386cb95e4f81",
    "1.39.0": "2cbc028c03064633bb990782b47c36156637769e2f48704417a9c700a7a32101",
    "1.40.0": "30491b0fe7c3470d4439594538855c981b05fa69862d74f8c05eb9b97912368a",
    "1.41.0": "3506354cdfbe31ff552fe75f5d0d9bb7efd29cf79bd99457347d29c751c38f9f",
    "1.42.0": "4114fe612905ee05083ae5cb391a00a012510f3abfecc642d86c9a5ae4be9008",
    "1.43.0": "786df3458c499237be33bb8e50ffd4da7c18c20e254380ffc80fb90833d8cc73",
    "1.43.1": "54211eda0c193138ee8ed09b5fb41c41fc76fe0a77935fa4ec8d989466342740",
    "1.43.2": "de15c5bdbc83b952afbde876110830c604ad0796680e5157c05f7c1979a41069",
    "1.43.3": "6c470ebce254c7165347b5048895ac2996c88567271642297f4c597738300652",
    "1.44.0": "f129a5b44a49d593d247e55a59eb9bcb57121566e1c2e42b832a4e794fa83d8a",
    "1.45.0": "25ba26a0877fe3317390dc126aad2f23e27fc461cf0b940004f032cb342fa539",
    "1.45.1": "9aeb20c645135b6039cc08986d8f14e63280f7839e882a74df5e83627ffeaa17",
    "1.46.0": "8302bd7849afb95c903a875d7dcb6f85b3d7629e9a8b67d020031cfc6f4d0ee1",
    "1.47.0": "2df4201e046833c7dc8160907bee7f52b76ff80ed147376a2d0ed8a0dd66b2db",
}

# Which installer versions support a distribution (efa-changelog): (first, first without it); None = open.
DISTRO_SUPPORT: dict[str, tuple[str | None, str | None]] = {
    "ubuntu-20.04": (None, "1.43.0"),
    "ubuntu-22.04": ("1.18.0", None),
    "ubuntu-24.04": ("1.33.0", None),
    "debian-10": ("1.23.0", "1.40.0"),
    "debian-11": ("1.24.0", "1.51.0"),
    "debian-12": ("1.36.0", None),
    "debian-13": ("1.46.0", None),
    "amazon-2": (None, "1.50.0"),
    "amazon-2023": ("1.25.0", None),
    "rocky-8": ("1.20.0", None),
    "rocky-9": ("1.21.0", None),
    "redhat-9": ("1.26.0", None),
}
DISTRO_NAMES = {
    "ubuntu": "Ubuntu",
    "debian": "Debian",
    "amazon": "Amazon Linux",
    "rocky": "Rocky Linux",
    "redhat": "RHEL",
}

# First installer version that ships aws-ofi-nccl (libnccl-ofi) at /opt/amazon/ofi-nccl (efa-changelog):
# 1.38.0 added it; 1.40.0 added it on ARM for Ubuntu and Amazon Linux 2023; 1.46.0 on RHEL 9, Rocky 9, Debian 13.
PLUGIN_SINCE_DEFAULT = "1.38.0"
PLUGIN_SINCE = {"debian-13": "1.46.0", "redhat-9": "1.46.0", "rocky-9": "1.46.0"}
PLUGIN_SINCE_ARM = {"ubuntu": "1.40.0", "amazon": "1.40.0"}

# Instance types that need a newer plugin than the installer's default support: libnccl-ofi 1.15.0
# (installer 1.42.0) "Added Amazon EC2 P6-B200 platform support" (efa-changelog).
INSTANCE_MIN_VERSION = {"p6-b200.48xlarge": ("1.42.0", "aws-ofi-nccl 1.15.0 (installer 1.42.0) added P6-B200 support")}
# --mpi= selects the Open MPI flavours; the installer installs both without it since 1.30.0.
MPI_SINCE = "1.30.0"
MPI_CHOICES = ("openmpi4", "openmpi5")

# Flags the role sets from its own variables; aws_efa_extra_flags may not repeat them.
MANAGED_FLAGS = {
    "-y": "always set",
    "--yes": "always set",
    "-l": "always set (the role writes the memlock limits)",
    "--skip-limit-conf": "always set (the role writes the memlock limits)",
    "-n": "aws_efa_bake",
    "--no-verify": "aws_efa_bake",
    "-k": "aws_efa_kmod",
    "--skip-kmod": "aws_efa_kmod",
    "-m": "aws_efa_minimal",
    "--minimal": "aws_efa_minimal",
    "--mpi": "aws_efa_mpi",
    "-u": "never (it uninstalls)",
    "--uninstall": "never (it uninstalls)",
}

# Debian/Ubuntu packages put aws-ofi-nccl under lib/<multiarch>; the catalog names .../lib.
MULTIARCH = {
    "x86_64": "x86_64-linux-gnu",
    "amd64": "x86_64-linux-gnu",
    "aarch64": "aarch64-linux-gnu",
    "arm64": "aarch64-linux-gnu",
}
PLUGIN_DIR = "/opt/amazon/ofi-nccl/lib"
PLUGIN_LIBRARIES = ("libnccl-net.so", "libnccl-net-ofi.so")
LIBFABRIC_DIR = "/opt/amazon/efa/lib"
OPENMPI4_DIR = "/opt/amazon/openmpi/lib"
SOCKET_FALLBACK = (
    "NCCL then falls back to its Socket transport (NET/OFI No eligible providers were found), about 100x slower"
)

VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
MARKER_RE = re.compile(r"^#\s*EFA installer version:\s*(\S+)\s*$", re.MULTILINE)


def parse_version(version: str) -> tuple[int, ...]:
    """'1.41.0' -> (1, 41, 0); ValueError for anything that is not X.Y.Z."""
    if not VERSION_RE.match(str(version)):
        raise ValueError(version)
    return tuple(int(part) for part in str(version).split("."))


def at_least(version: str, minimum: str | None) -> bool:
    return minimum is None or parse_version(version) >= parse_version(minimum)


def tarball_name(version: str) -> str:
    return f"aws-efa-installer-{version}.tar.gz"


def installer_url(base_url: str, version: str, url: str = "") -> str:
    """The tarball's URL: the explicit URL, else base URL / aws-efa-installer-<version>.tar.gz."""
    return url or f"{base_url.rstrip('/')}/{tarball_name(version)}"


def distro_key(distribution: str, version: str) -> str:
    """('Ubuntu', '22.04') -> 'ubuntu-22.04'; ('Debian', '12.8') -> 'debian-12'; ('Amazon', '2023') -> 'amazon-2023'."""
    name = distribution.lower().replace(" ", "")
    name = {"redhatenterpriselinux": "redhat", "rhel": "redhat", "rockylinux": "rocky"}.get(name, name)
    if name == "ubuntu":
        return f"ubuntu-{'.'.join(str(version).split('.')[:2])}"
    return f"{name}-{str(version).split('.', maxsplit=1)[0]}"


def distro_label(key: str) -> str:
    name, _sep, version = key.partition("-")
    return f"{DISTRO_NAMES.get(name, name)} {version}"


def plugin_since(key: str, architecture: str) -> str | None:
    """First installer version that bundles aws-ofi-nccl on this distribution; None when AWS does not say."""
    if MULTIARCH.get(architecture) == "aarch64-linux-gnu":
        return PLUGIN_SINCE_ARM.get(key.partition("-")[0])
    return PLUGIN_SINCE.get(key, PLUGIN_SINCE_DEFAULT)


def multiarch(os_family: str, architecture: str) -> str:
    """The multiarch directory Debian-family packages install libraries into; '' elsewhere."""
    return MULTIARCH.get(architecture, "") if os_family == "Debian" else ""


def installer_flags(*, bake: bool, kmod: bool, minimal: bool, mpi: list[str], extra: list[str]) -> list[str]:
    """efa_installer.sh arguments.

    Always -y (unattended) and --skip-limit-conf (the role writes the memlock limits itself). Bake adds
    --no-verify: an image builder has no EFA device for the installer's post-install check. --skip-kmod
    when the AWS kernel module is not wanted (containers; the distribution kernel's in-tree efa module
    instead). --minimal installs only the module and rdma-core; otherwise --mpi= picks Open MPI.
    """
    flags = ["-y", "--skip-limit-conf"]
    if bake:
        flags.append("--no-verify")
    if not kmod:
        flags.append("--skip-kmod")
    if minimal:
        flags.append("--minimal")
    elif mpi:
        flags.append("--mpi=" + ",".join(mpi))
    return flags + list(extra)


def installed_version(marker_text: str) -> str | None:
    """The version in /opt/amazon/efa_installed_packages ('# EFA installer version: 1.41.0'), or None."""
    match = MARKER_RE.search(marker_text or "")
    return match.group(1) if match else None


def read_state(text: str) -> dict[str, Any] | None:
    """The role's own record of its last install (JSON), or None when absent or unreadable."""
    try:
        state = json.loads(text) if text else None
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def install_reason(installed: str | None, state: dict[str, Any] | None, version: str, flags: list[str]) -> str:
    """Why the installer must run, or '' when the host already has the pinned version installed this way.

    A host whose marker shows the pin but that the role did not install (e.g. an AMI with EFA preinstalled)
    is kept as it is: the library checks that follow still prove what the catalog needs is there.
    """
    if installed is None:
        return f"no EFA software installed ({MARKER_FILE} absent)"
    if installed != version:
        return f"EFA installer {installed} is installed; the pin is {version}"
    if state and state.get("version") == version and state.get("flags") != flags:
        return f"installed with flags {' '.join(state.get('flags') or [])}; the role now runs {' '.join(flags)}"
    return ""


def _check_inputs(inputs: dict[str, Any]) -> list[str]:
    """Every bad setting, each as a sentence naming the value, the variable and what is accepted."""
    errors = []
    version = str(inputs.get("version", ""))
    if not VERSION_RE.match(version):
        errors.append(
            f"aws_efa_version '{version}' is not a release version; accepted: X.Y.Z such as 1.41.0 "
            "(never 'latest', which moves under a pin)"
        )
    sha256 = str(inputs.get("sha256") or "").lower()
    url = installer_url(inputs.get("base_url") or DEFAULT_BASE_URL, version, inputs.get("url") or "")
    published = PUBLISHED_SHA256.get(version)
    if not sha256:
        errors.append(
            f"aws_efa_sha256 is empty; accepted: the SHA256 AWS publishes for {tarball_name(version)} "
            f"({VERIFY_DOC}), after checking the tarball's GPG signature {url}.sig with {SIGNING_KEY_URL} "
            f"(fingerprint {SIGNING_KEY_FINGERPRINT})"
        )
    elif not SHA256_RE.match(sha256):
        errors.append(f"aws_efa_sha256 '{sha256}' is not a SHA256; accepted: 64 hexadecimal characters")
    elif published and published != sha256:
        errors.append(
            f"aws_efa_sha256 '{sha256}' is not the checksum AWS published for {tarball_name(version)}; "
            f"accepted: {published} (change aws_efa_version and aws_efa_sha256 together)"
        )
    for flavour in inputs.get("mpi") or []:
        if flavour not in MPI_CHOICES:
            errors.append(f"aws_efa_mpi '{flavour}' is not an Open MPI flavour; accepted: {', '.join(MPI_CHOICES)}")
    for flag in inputs.get("extra_flags") or []:
        name = str(flag).split("=", 1)[0]
        if name in MANAGED_FLAGS:
            errors.append(
                f"aws_efa_extra_flags '{flag}' is managed by the role ({MANAGED_FLAGS[name]}); accepted: other "
                "efa_installer.sh options such as -d (debug packages) or --enable-ngc"
            )
    return errors


def _check_support(inputs: dict[str, Any], key: str) -> str:
    version = str(inputs.get("version", ""))
    support = DISTRO_SUPPORT.get(key)
    if support is None:
        known = ", ".join(distro_label(k) for k in DISTRO_SUPPORT)
        given = f"{inputs.get('distribution', '')} {inputs.get('distribution_version', '')}".strip()
        return f"{given} is not supported by the EFA installer; accepted: {known}"
    first, dropped = support
    if not at_least(version, first) or (dropped and at_least(version, dropped)):
        accepted = " and ".join(
            part for part in (f"{first} or newer" if first else "", f"older than {dropped}" if dropped else "") if part
        )
        return f"aws_efa_version {version} does not support {distro_label(key)}; accepted: {accepted}"
    if not inputs.get("minimal"):
        since = plugin_since(key, inputs.get("architecture", "x86_64"))
        if since and not at_least(version, since):
            return (
                f"aws_efa_version {version} does not bundle aws-ofi-nccl on {distro_label(key)}, and the catalog "
                f"environment loads NCCL's plugin from /opt/amazon/ofi-nccl; accepted: {since} or newer, or "
                "aws_efa_minimal=true with the plugin from elsewhere"
            )
        if inputs.get("mpi") and not at_least(version, MPI_SINCE):
            return f"aws_efa_mpi needs installer {MPI_SINCE} or newer (version {version}); accepted: [] before it"
    instance = str(inputs.get("profile", "")).rpartition("/")[2]
    if instance in INSTANCE_MIN_VERSION:
        minimum, why = INSTANCE_MIN_VERSION[instance]
        if not at_least(version, minimum):
            return f"aws_efa_version {version} is too old for {instance} ({why}); accepted: {minimum} or newer"
    return ""


class AwsEfaPlan(TypedDict, total=False):
    """The installer run for one host; with errors, only errors and warnings."""

    errors: list[str]  # one message per bad input; the role asserts it is empty before any change
    warnings: list[str]
    mode: str  # install or adopt (aws_efa_provision)
    adopt: Adoption  # adopt mode: what the image ships, when the facts say (gpufabric plan --probe); else unknown
    distro: str  # the installer's name of the distribution, such as debian-12
    version: str
    sha256: str
    url: str  # the installer tarball's
    tarball: str
    unpack_dir: str
    installer_dir: str  # where efa_installer.sh is once unpacked
    flags: list[str]  # efa_installer.sh's arguments
    multiarch_plugin_dir: str  # where Debian/Ubuntu packages put aws-ofi-nccl ('' elsewhere)
    components: list[str]  # what the installer installs besides the kernel module and rdma-core
    ld_library_path: str  # the tier's LD_LIBRARY_PATH (catalog environment)
    library_candidates: list[str]  # the files that prove each LD_LIBRARY_PATH directory holds its library
    artifacts: list[Artifact]  # the installer tarball, by its SHA256: what `gpufabric plan` shows as fetched


class InstallDecision(TypedDict):
    installed: str | None  # the EFA installer version on the host (its marker), None when absent
    reason: str  # why the installer must run; '' when it need not
    adopt: Adoption  # adopt mode: what the image's installer put there, adopted or refused
    hold: list[PackageStep]  # adopt mode: the image's EFA packages held at their installed versions (one step)
    release: list[str]  # before the installer runs: adopt mode's record (preferences), removed, its holds released


def plan(
    settings: dict[str, Any], host_plan: dict[str, Any] | None = None, facts: dict[str, Any] | None = None
) -> AwsEfaPlan:
    """Everything the role needs for one host, or the errors of its inputs.

    settings: the role's variables without the aws_efa_ prefix (version, sha256, base_url, url, bake, kmod, minimal,
    mpi, extra_flags, work_dir); host_plan: gpufabric_plan (profile, env's LD_LIBRARY_PATH); facts: ansible_facts
    (distribution, distribution_version, os_family, architecture).
    """
    host_plan = host_plan or {}
    facts = facts or {}
    inputs = {
        **settings,
        "profile": str(host_plan.get("profile") or ""),
        **{key: facts.get(key, "") for key in ("distribution", "distribution_version", "os_family", "architecture")},
    }
    errors = _check_inputs(inputs)
    mode = str(inputs.get("mode") or "install")
    mode_error = adopt.mode_error(mode, MODE_VARIABLE)
    errors += [mode_error] if mode_error else []
    if mode == "adopt" and inputs["os_family"] != "Debian":
        errors.append(
            f"{MODE_VARIABLE} 'adopt' holds the image's EFA packages with apt, and {inputs['distribution']} has "
            f"none; accepted there: {MODE_VARIABLE} 'install'"
        )
    key = distro_key(str(inputs["distribution"]), str(inputs["distribution_version"]))
    if not errors:
        # Which versions support what only means something for a valid version.
        error = _check_support(inputs, key)
        errors = [error] if error else []
    if errors:
        return {"errors": errors, "warnings": []}
    version = str(inputs.get("version", ""))
    minimal = bool(inputs.get("minimal"))
    flags = installer_flags(
        bake=bool(inputs.get("bake")),
        kmod=bool(inputs.get("kmod", True)),
        minimal=minimal,
        mpi=list(inputs.get("mpi") or []),
        extra=[str(flag) for flag in inputs.get("extra_flags") or []],
    )
    work_dir = str(inputs.get("work_dir") or "/var/cache/gpufabric/aws-efa").rstrip("/")
    arch_dir = multiarch(str(inputs["os_family"]), str(inputs["architecture"]))
    ld_library_path = str((host_plan.get("env") or {}).get("LD_LIBRARY_PATH") or "")
    result: AwsEfaPlan = {
        "errors": [],
        "warnings": [],
        "mode": mode,
        "distro": key,
        "version": version,
        "sha256": str(inputs.get("sha256") or "").lower(),
        "url": installer_url(inputs.get("base_url") or DEFAULT_BASE_URL, version, inputs.get("url") or ""),
        "tarball": f"{work_dir}/{tarball_name(version)}",
        "unpack_dir": f"{work_dir}/{version}",
        "installer_dir": f"{work_dir}/{version}/aws-efa-installer",
        "flags": flags,
        "multiarch_plugin_dir": f"{PLUGIN_DIR}/{arch_dir}" if arch_dir else "",
        "components": components(minimal, list(inputs.get("mpi") or []), flags),
        "ld_library_path": ld_library_path,
        "library_candidates": library_candidates(ld_library_path),
        "adopt": adopt.adoption(mode),
    }
    # What the installer tasks download (get_url with this checksum) when the installer runs.
    result["artifacts"] = [
        supply_chain.artifact("tarball", f"aws-efa-installer {version}", result["url"], f"sha256:{result['sha256']}")
    ]
    if mode == "adopt" and "packages" in facts and PROBED_MARKER in facts:
        # `gpufabric plan --probe` read the marker and the packages: the decision the role makes on the host.
        decision = install_decision(result, str(facts[PROBED_MARKER]), "", mode, facts["packages"])
        result["adopt"] = decision["adopt"]
        if not decision["reason"]:
            result["artifacts"] = []  # the image's installer is kept: nothing is downloaded
    return result


def install_decision(
    efa_plan: dict[str, Any],
    marker: str,
    state: str,
    mode: str = "install",
    packages: dict[str, Any] | None = None,
) -> InstallDecision:
    """Whether the plan's installer run is needed on this host, from the text of the installer's version marker
    (MARKER_FILE, '' when absent) and of the role's record of its last install ('' when absent).

    In adopt mode (``mode``, the value of aws_efa_provision) an image's EFA installed at the pin or later is kept:
    no installer run, its packages held at the versions dpkg has (``packages``: package_facts' layout). Nothing
    installed: the installer runs exactly as in install mode.
    """
    installed = installed_version(marker)
    decision: InstallDecision = {
        "installed": installed,
        "reason": "",
        "adopt": adopt.adoption(mode),
        "hold": [],
        "release": [],
    }
    if mode != "adopt" or installed is None:
        decision["reason"] = install_reason(
            installed, read_state(state), str(efa_plan["version"]), list(efa_plan["flags"])
        )
        if decision["reason"]:
            # The installer removes what it recorded before installing its release, and dpkg does not remove a
            # held package: what adopt mode held (when the host was adopted before) is released first.
            decision["release"] = [PREFERENCES]
        if mode == "adopt":
            decision["adopt"] = adopt.adoption("adopt", known=True, missing=["EFA installer " + efa_plan["version"]])
        return decision
    return decision | _adopt(efa_plan, marker, installed, packages)


def recorded_packages(marker: str) -> dict[str, str]:
    """Package -> version the installer recorded under '# Packages installed:' on Debian and Ubuntu, where it
    writes each as its .deb file name without the suffix, name_version_arch ('ibacm_25.0-1_amd64')."""
    found: dict[str, str] = {}
    for line in (marker or "").splitlines():
        if line.startswith("#"):
            continue
        for word in line.split():
            name, _sep, rest = word.partition("_")
            version, _sep, arch = rest.rpartition("_")
            if name and version and arch:
                found[name] = version
    return found


def _adopt(efa_plan: dict[str, Any], marker: str, installed: str, packages: dict[str, Any] | None) -> dict[str, Any]:
    """Adopt mode on a host whose image ran the EFA installer: accepted and held, or refused with the way out."""
    version = str(efa_plan["version"])

    def refused(why: str) -> dict[str, Any]:
        return {"adopt": adopt.adoption("adopt", known=packages is not None, refused=f"{MODE_VARIABLE} 'adopt': {why}")}

    if not VERSION_RE.match(installed):
        return refused(
            f"the image's EFA installer records version '{installed}' ({MARKER_FILE}), not a release version X.Y.Z "
            f"to hold to the floor aws_efa_version {version}; {MODE_VARIABLE} 'install' replaces it"
        )
    if not at_least(installed, version):
        return refused(
            f"the image's EFA installer {installed} ({MARKER_FILE}) is older than aws_efa_version {version}, the "
            f"floor in adopt mode; accepted: {version} or newer; lower aws_efa_version to keep the image's, or "
            f"{MODE_VARIABLE} 'install' replaces it"
        )
    live = adopt.installed_versions({"packages": packages}) if packages is not None else None
    if live is None:
        raise ValueError("adopt mode needs the installed packages (package_facts) to hold the image's EFA packages")
    recorded = recorded_packages(marker)
    gone = sorted(name for name in recorded if name not in live)
    if not recorded or gone:
        what = f"recorded {', '.join(gone)}, which dpkg does not have" if gone else "recorded no Debian packages"
        return refused(
            f"the image's EFA installer {installed} {what} ({MARKER_FILE}); {MODE_VARIABLE} 'install' runs the "
            "installer again"
        )
    found = {name: live[name] for name in recorded}
    return {
        "adopt": adopt.adoption("adopt", known=True, found=found),
        "hold": [adopt.hold_step(found, PREFERENCES)],
    }


def components(minimal: bool, mpi: list[str], flags: list[str]) -> list[str]:
    """What the installer puts on the host besides the kernel module and rdma-core."""
    if minimal:
        return []
    found = ["libfabric"]
    if "--skip-plugin" not in flags:
        found.append("aws-ofi-nccl")
    if "--skip-mpi" not in flags:
        found += mpi or list(MPI_CHOICES)
    return found


# ---------------------------------------------------------------------------
# What the catalog environment needs, and what is there
# ---------------------------------------------------------------------------

# Which component each catalog LD_LIBRARY_PATH directory holds, and the file that proves it.
CATALOG_DIRS = {
    PLUGIN_DIR: ("aws-ofi-nccl", PLUGIN_LIBRARIES),
    LIBFABRIC_DIR: ("libfabric", ("libfabric.so.1", "libfabric.so")),
    OPENMPI4_DIR: ("openmpi4", ("libmpi.so.40", "libmpi.so")),
}
# Without these NCCL cannot use EFA; without Open MPI only MPI-launched jobs (nccl-tests with MPI=1) suffer.
REQUIRED_FOR_NCCL = ("aws-ofi-nccl", "libfabric")


def library_candidates(ld_library_path: str) -> list[str]:
    """The library files that prove each catalog LD_LIBRARY_PATH directory holds what it should."""
    dirs = [d.rstrip("/") for d in ld_library_path.split(":") if d]
    return [f"{d}/{name}" for d in dirs if d in CATALOG_DIRS for name in CATALOG_DIRS[d][1]]


def library_findings(ld_library_path: str, found: list[str], wanted: list[str]) -> list[dict[str, str]]:
    """Check the catalog's LD_LIBRARY_PATH against the files found there (resolved paths of regular files).

    found: paths of the libraries present in those directories (symlinks already resolved to files).
    wanted: what the installer was asked to install (plan 'components').
    Returns findings {severity, message}: error when NCCL could not use EFA, warning otherwise.
    """
    names_by_dir: dict[str, set[str]] = {}
    for path in found:
        directory, _sep, name = str(path).rpartition("/")
        names_by_dir.setdefault(directory, set()).add(name)
    findings = []
    for directory in [d.rstrip("/") for d in ld_library_path.split(":") if d]:
        if directory not in CATALOG_DIRS:
            continue
        component, files = CATALOG_DIRS[directory]
        present = names_by_dir.get(directory, set())
        if any(name in present for name in files):
            continue
        if component not in wanted:
            findings.append(
                {
                    "severity": "warning",
                    "message": (
                        f"the catalog environment puts {directory} on LD_LIBRARY_PATH, but the role did not install "
                        f"{component} there (aws_efa_minimal, aws_efa_mpi or aws_efa_extra_flags exclude it)"
                        + (f"; on this host {SOCKET_FALLBACK}" if component in REQUIRED_FOR_NCCL else "")
                    ),
                }
            )
            continue
        severity = "error" if component in REQUIRED_FOR_NCCL else "warning"
        consequence = f"; {SOCKET_FALLBACK}" if severity == "error" else "; MPI-launched jobs will not find Open MPI"
        findings.append(
            {
                "severity": severity,
                "message": (
                    f"{component} is not in {directory} (expected one of {', '.join(files)}), the directory the "
                    f"catalog environment puts on LD_LIBRARY_PATH{consequence}"
                ),
            }
        )
    return findings


# ---------------------------------------------------------------------------
# fi_info
# ---------------------------------------------------------------------------


def parse_fi_info(text: str) -> list[dict[str, str]]:
    """Split `fi_info` output into entries: each starts at 'provider:' and holds its 'key: value' lines."""
    entries: list[dict[str, str]] = []
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition(":")
        if not sep or not key or " " in key:
            continue
        if key == "provider":
            entries.append({})
        if entries:
            entries[-1].setdefault(key, value.strip())
    return entries


def efa_domains(text: str) -> list[str]:
    """The EFA devices fi_info lists: one RDM domain per device (efa_0-rdm, rdmap16s27-rdm, ...)."""
    domains = set()
    for entry in parse_fi_info(text):
        provider = entry.get("provider", "").split(";")[0]
        if provider != "efa" or "domain" not in entry:
            continue
        if entry.get("type", "FI_EP_RDM") != "FI_EP_RDM":
            continue
        domains.add(entry["domain"])
    return sorted(domains)


def fi_info_report(text: str, expected: int, profile: str) -> dict[str, Any]:
    """{'domains', 'count', 'expected', 'ok', 'message'}; the message says what is missing and what it costs."""
    domains = efa_domains(text)
    ok = len(domains) >= expected
    if ok:
        message = (
            f"fi_info -p efa lists {len(domains)} EFA device(s) ({', '.join(domains)}); {profile} expects {expected}"
        )
    elif not domains:
        message = (
            f"fi_info -p efa lists no EFA device; {profile} expects {expected}. Libfabric cannot open EFA "
            f"(efa kernel module, the devices attached at launch, /dev/infiniband), so {SOCKET_FALLBACK}"
        )
    else:
        message = (
            f"fi_info -p efa lists {len(domains)} EFA device(s) ({', '.join(domains)}); {profile} expects {expected}. "
            f"NCCL would use only {len(domains)} of {expected} EFA links, at most {len(domains)}/{expected} of the "
            "bandwidth; check that every network card was attached as EFA at launch"
        )
    return {"domains": domains, "count": len(domains), "expected": expected, "ok": ok, "message": message}
