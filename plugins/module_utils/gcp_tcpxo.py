# SPDX-License-Identifier: Apache-2.0
"""What the gcp_tcpxo role installs and checks on one a3-megagpu-8g host (GPUDirect-TCPXO / FasTrak).

Pure Python, run on the controller through the ``gcp_tcpxo_plan`` filter, so that the parts molecule
cannot reach (Ubuntu's kernel and package names, image references, the rules of Google's guest-config
checker, the NIC checks of a live host) are unit-tested.

Sources (see roles/gcp_tcpxo/README.md): GoogleCloudPlatform/container-engine-accelerators
gpudirect-tcpxo/README.md and best-practice.md (releases, RxDM flags, health check, checker rules),
GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/slurm-a3mega-image.yaml and
debian/slurm-a3mega-image.yaml (apt repositories, package, udev rule), GoogleCloudPlatform/slurm-gcp
tools/prologs-epilogs/receive-data-path-manager-mega (the VM invocation of the installer and RxDM).
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import fabric_nics, kernel_build, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.container_image import (
    DIGEST,
    IMAGE_NAME,
    TAG,
    image_reference,
)
from ansible_collections.gpufabric.cluster.plugins.module_utils.gcp_common import transport_packages
from ansible_collections.gpufabric.cluster.plugins.module_utils.host_plan import no_profile
from ansible_collections.gpufabric.cluster.plugins.module_utils.repo_key import pin_errors
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import (
    PackagePin,
    PackageStep,
    RepoKey,
    Repository,
)

FABRIC = "tcpxo"
# A registry path as the OCI distribution spec allows it (lowercase, no scheme; the image name: container_image).
REGISTRY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$")
DEBIAN_VERSION = re.compile(r"^[0-9][A-Za-z0-9.+~:-]*$")
# "6.1.0-37-cloud-amd64" (Debian), "6.8.0-1015-gcp" (Ubuntu): the flavour names the headers meta-package.
KERNEL_FLAVOUR = re.compile(r"^\d+\.\d+(?:\.\d+)?-\d+-([a-z0-9-]+)$")

# Distributions the role installs on: Debian 12/13 and Ubuntu 22.04/24.04 (Google's Slurm image is
# ubuntu-accelerator-2204); molecule runs the SIMULATED Ubuntu 22.04 identity, unit tests every release's facts.
SUPPORTED = {"Debian": ("12", "13"), "Ubuntu": ("22", "24")}
ARCHITECTURES = ("x86_64", "amd64")  # a3-megagpu-8g is x86 only

# Google pairs each NCCL plugin installer with one RxDM ("the tcpxo-daemon version is coupled with the
# NCCL plugin installer version"): gpudirect-tcpxo/README.md, release by release, newest first.
RELEASES = {
    "v1.0.15": "v1.0.21",  # Jan 9, 2026
    "v1.0.14": "v1.0.20",  # Nov 19, 2025
    "v1.0.12": "v1.0.18",  # Aug 21, 2025
    "v1.0.11": "v1.0.17",  # Jun 27, 2025
    "v1.0.9-1": "v1.0.15",  # May 01, 2025
    "v1.0.8-1": "v1.0.14",  # Feb 06, 2025
    "v1.0.7": "v1.0.13_1",  # Nov 27, 2024
    "v1.0.6": "v1.0.12",  # Oct 18, 2024
    "v1.0.5": "v1.0.11",  # Sept 19, 2024
    "v1.0.4": "v1.0.10",  # Aug 06, 2024
    "v1.0.3": "v1.0.09",  # Jun 27, 2024
    "v1.0.2": "v1.0.8",  # May 30, 2024
}

# What Google's guest-config checker and the plugin enforce (gpudirect-tcpxo/README.md):
# - NCCL_NVLSTREE_MAX_CHUNKSIZE=131072 with the default (NVLSTree) configs, from plugin v1.0.12 on:
#   "will enforce ... and will abort any workload where it is not set";
# - the default tuner and checker configs expect NCCL_PROTO=Simple,LL128, the *_simple ones NCCL_PROTO=Simple
#   and NCCL_NVLS_ENABLE=0 (best-practice.md);
# - a NCCL_TUNER_CONFIG_PATH that does not exist aborts the workload (Jun 27, 2024);
# - NCCL_ALGO is only flagged as unexpected.
NVLSTREE_CHUNKSIZE = "131072"
PROTO = {"default": "Simple,LL128", "simple": "Simple"}


def _check_key(prefix: str, settings: dict[str, Any], errors: list[str]) -> None:
    """A repository key: a file on the controller or a URL, pinned by fingerprint; a keyring apt can read."""
    key_src = str(settings.get(f"{prefix}_key_src", ""))
    key_url = str(settings.get(f"{prefix}_key_url", ""))
    checksum = str(settings.get(f"{prefix}_key_checksum", ""))
    keyring = str(settings.get(f"{prefix}_keyring", ""))
    if not re.match(r"^/[^\s]+\.(asc|gpg)$", keyring):
        errors.append(
            f"gcp_tcpxo_{prefix}_keyring {keyring!r} is not accepted; accepted: an absolute path ending in .asc "
            "(armored key) or .gpg (binary key), e.g. under /etc/apt/keyrings"
        )
    # A mirror's key from the controller is pinned too: the fingerprint is what makes any key trusted.
    errors.extend(pin_errors(f"gcp_tcpxo_{prefix}_key_fingerprints", settings.get(f"{prefix}_key_fingerprints")))
    if key_src:
        return
    if not key_url.startswith(("https://", "file:///")):
        errors.append(
            f"gcp_tcpxo_{prefix}_key_url {key_url!r} is not accepted; accepted: an https:// URL or a file:/// path "
            "on the host"
        )
    if checksum and not DIGEST.match(checksum):
        errors.append(
            f"gcp_tcpxo_{prefix}_key_checksum {checksum!r} is not accepted; accepted: empty (the fingerprints "
            f"decide), or sha256: and 64 hex digits of {key_url} as you verified it"
        )


def kernel_header_packages(kernel: str) -> list[str]:
    """Headers for the running kernel and the flavour's meta-package, so DKMS also builds for later kernels.

    Debian (Google's debian/slurm-a3mega-image.yaml installs linux-headers-$(uname -r) and
    linux-headers-cloud-amd64) and Ubuntu (linux-headers-<version>-gcp, meta linux-headers-gcp) name them alike.
    """
    packages = [f"linux-headers-{kernel}"]
    match = KERNEL_FLAVOUR.match(kernel)
    if match:
        packages.append(f"linux-headers-{match.group(1)}")
    return packages


# Linux 6.13 made MODULE_IMPORT_NS take a string literal ("module: Convert symbol namespace to string literal");
# dmabuf-import-helper's DKMS source has the identifier form MODULE_IMPORT_NS(DMA_BUF), so its build, run by the
# package's postinst, fails there and leaves the package half-configured. Google's a3-mega blueprint patches the
# source and builds it with dkms by hand for the 6.17 kernel of ubuntu-accelerator-2404
# (GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml,
# "Patch import-helper.c for kernel 6.17 compatibility", commit 1047080 of 2026-06-25).
STRING_NAMESPACE_KERNEL = (6, 13)


def import_helper_kernel_error(kernel: str, version: str, checked: bool) -> str:
    """Why dmabuf-import-helper would not build for this kernel ('' when it builds, or the check is off)."""
    match = re.match(r"^(\d+)\.(\d+)", kernel)
    if not checked or not match or (int(match.group(1)), int(match.group(2))) < STRING_NAMESPACE_KERNEL:
        return ""
    return (
        f"dmabuf-import-helper {version or '(any version)'} does not build for the running kernel {kernel}: its DKMS "
        "source uses MODULE_IMPORT_NS(DMA_BUF), which kernels from 6.13 refuse (they take the string "
        '"DMA_BUF"), so its install would fail half-way; accepted: a kernel older than 6.13 (Google\'s '
        "ubuntu-accelerator-2204 images), or gcp_tcpxo_import_helper_kernel_check false once the version you pin "
        "builds there (a release with the string form, or your mirror's package patched as Google's a3-mega "
        "blueprint patches it)"
    )


class DistroPlan(TypedDict):
    error: str  # why the role cannot install on this host ("" when it can)
    packages: list[str]  # the distribution's packages the role needs (podman, iptables)
    dkms_packages: list[str]
    kernel_header_packages: list[str]  # for the running kernel and its flavour's meta-package
    driver_lib_dir: str  # where the NVIDIA driver's libraries are
    iptables: str
    podman: str
    initramfs: str


def distro(facts: dict[str, Any]) -> DistroPlan:
    """Per-distribution choices; ``error`` is set when the host is not one the role supports."""
    name = str(facts.get("distribution", ""))
    major = str(facts.get("distribution_major_version", ""))
    arch = str(facts.get("architecture", ""))
    kernel = str(facts.get("kernel", ""))
    accepted = "Debian 12/13, Ubuntu 22.04/24.04"
    error = ""
    if major not in SUPPORTED.get(name, ()):
        version = facts.get("distribution_version", major)
        error = f"{name or 'this distribution'} {version} is not supported by gcp_tcpxo; accepted: {accepted}"
    elif arch not in ARCHITECTURES:
        error = f"architecture {arch!r} is not supported by gcp_tcpxo; accepted: x86_64 (a3-megagpu-8g)"
    return {
        "error": error,
        # Both families are merged-/usr systems with the same tools and multiarch library directory.
        "packages": ["podman", "iptables"],
        "dkms_packages": ["dkms"],
        "kernel_header_packages": kernel_header_packages(kernel) if kernel else [],
        "driver_lib_dir": "/usr/lib/x86_64-linux-gnu",
        "iptables": "/usr/sbin/iptables",
        "podman": "/usr/bin/podman",
        "initramfs": "/usr/sbin/update-initramfs",
    }


def _lib_dirs(value: str) -> list[str]:
    return [posixpath.normpath(part) for part in value.split(":") if part]


def guest_config_findings(env: dict[str, str], profile: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) for the catalog env against what the TCPXO plugin's checker enforces."""
    errors: list[str] = []
    warnings: list[str] = []
    where = f"the catalog env of {profile}"
    guest = env.get("NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE", "")
    tuner = env.get("NCCL_TUNER_CONFIG_PATH", "")
    if not guest:
        errors.append(
            f"{where} lacks NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE, the guest-config checker's file "
            "(a3plus_guest_config.textproto in the plugin directory)"
        )
    if env.get("NCCL_TUNER_PLUGIN") and not tuner:
        errors.append(
            f"{where} sets NCCL_TUNER_PLUGIN but lacks NCCL_TUNER_CONFIG_PATH "
            "(a3plus_tuner_config.textproto in the plugin directory); the plugin aborts without a valid path"
        )
    variants = {
        name: ("simple" if posixpath.basename(path).endswith("_simple.textproto") else "default")
        for name, path in (("NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE", guest), ("NCCL_TUNER_CONFIG_PATH", tuner))
        if path
    }
    if len(set(variants.values())) > 1:
        errors.append(
            f"{where} mixes config variants: "
            + ", ".join(f"{name} is the {variant} one" for name, variant in variants.items())
            + "; use both default (a3plus_*_config.textproto) or both simple (a3plus_*_config_simple.textproto)"
        )
    variant = variants.get("NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE", "default")
    proto = env.get("NCCL_PROTO")
    if guest and proto != PROTO[variant]:
        errors.append(
            f"{where} has NCCL_PROTO={proto if proto is not None else '(unset)'}; the {variant} guest config "
            f"expects NCCL_PROTO={PROTO[variant]}"
        )
    nvls = env.get("NCCL_NVLS_ENABLE")
    if variant == "default" and nvls != "0":
        chunk = env.get("NCCL_NVLSTREE_MAX_CHUNKSIZE")
        state = f"NCCL_NVLS_ENABLE={nvls}" if nvls is not None else "NCCL_NVLS_ENABLE unset"
        if chunk is None:
            errors.append(
                f"{where} lacks NCCL_NVLSTREE_MAX_CHUNKSIZE: with {state} Google's guest-config checker "
                f"(plugin v1.0.12 and later) aborts every NCCL job unless it is {NVLSTREE_CHUNKSIZE}"
            )
        elif chunk != NVLSTREE_CHUNKSIZE:
            errors.append(
                f"{where} has NCCL_NVLSTREE_MAX_CHUNKSIZE={chunk}; Google's guest-config checker enforces "
                f"{NVLSTREE_CHUNKSIZE} (with {state})"
            )
    if variant == "simple" and nvls != "0":
        errors.append(f"{where} uses the simple guest config, which expects NCCL_NVLS_ENABLE=0")
    if "NCCL_ALGO" in env:
        warnings.append(
            f"{where} sets NCCL_ALGO={env['NCCL_ALGO']}: the guest-config checker flags it as unexpected and "
            "Google recommends leaving it unset (plugin v1.0.12 and later)"
        )
    return errors, warnings


def plugin_lib_dir(env: dict[str, str], profile: str, errors: list[str]) -> str:
    """The directory the catalog env loads the plugin from: that of its tuner and checker configs."""
    paths = [
        env[name]
        for name in ("NCCL_TUNER_CONFIG_PATH", "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE")
        if env.get(name)
    ]
    dirs = sorted({posixpath.dirname(posixpath.normpath(path)) for path in paths})
    if not dirs:
        return ""
    if len(dirs) > 1:
        errors.append(
            f"the catalog env of {profile} puts the tuner and checker configs in different directories "
            f"({', '.join(dirs)}); the plugin installs both into one"
        )
        return ""
    lib_dir = dirs[0]
    if not lib_dir.startswith("/") or lib_dir == "/":
        errors.append(f"the catalog env of {profile} points the plugin configs at {lib_dir!r}; an absolute directory")
        return ""
    if lib_dir not in _lib_dirs(env.get("LD_LIBRARY_PATH", "")):
        errors.append(
            f"the catalog env of {profile} has LD_LIBRARY_PATH={env.get('LD_LIBRARY_PATH', '(unset)')}, "
            f"which lacks the plugin directory {lib_dir} its tuner and checker configs are in"
        )
    return lib_dir


def _check_image(kind: str, settings: dict[str, Any], errors: list[str]) -> str:
    registry = str(settings.get("registry", ""))
    name = str(settings.get(f"{kind}_image", ""))
    tag = str(settings.get(f"{kind}_tag", ""))
    digest = str(settings.get(f"{kind}_digest", ""))
    ok = bool(REGISTRY.match(registry))
    if not IMAGE_NAME.match(name):
        errors.append(f"gcp_tcpxo_{kind}_image {name!r} is not accepted; accepted: an image name without tag")
        ok = False
    if not TAG.match(tag):
        errors.append(f"gcp_tcpxo_{kind}_tag {tag!r} is not accepted; accepted: the release tag such as v1.0.21")
    if not DIGEST.match(digest):
        errors.append(
            f"gcp_tcpxo_{kind}_digest {digest!r} is not accepted; accepted: sha256: and 64 hex digits, the digest "
            f"of {registry}/{name}:{tag} (`podman pull` it on a trusted machine and read "
            "`podman image inspect --format '{{.Digest}}'`)"
        )
        ok = False
    return image_reference(registry, name, digest) if ok else ""


class _Refused(TypedDict):
    errors: list[str]
    warnings: list[str]
    profile: str


class GcpTcpxoPlan(_Refused, total=False):
    """The plan; a host without a catalog profile gets only errors, warnings and profile."""

    distro: DistroPlan
    interfaces: list[str]  # the host's names of the profile's GPU NICs (the plan's nic_names), in PCI order
    firewall_interfaces: list[str]  # the GPU NICs, then firewall_extra_interfaces (once each)
    mtu: int  # the GPU NICs' MTU to check (0: not checked)
    lib_dir: str  # the directory the catalog env loads the plugin from
    plugin_dir: str  # where the installer writes
    plugin_lib64: str
    tuner_config: str
    guest_config: str  # the guest-config checker's file the catalog env names
    rxdm_ref: str  # image reference by digest ("" when the settings are bad)
    plugin_ref: str
    gpu_devices: list[str]  # device nodes the RxDM gets
    driver_libraries: list[str]  # host paths of the driver libraries the RxDM gets
    first_install: PackageStep  # the transport and the distribution's packages, before the ar+https:// source
    tcpxo_install: PackageStep  # dmabuf-import-helper from the TCPXO repository
    supply: list[PackageStep]  # both, in order: what gpufabric plan shows
    artifacts: list[supply_chain.Artifact]  # the RxDM and plugin images by digest


def plan(settings: dict[str, Any], host_plan: dict[str, Any], facts: dict[str, Any]) -> GcpTcpxoPlan:
    """Everything the role installs and checks, plus ``errors`` (refused before any change) and ``warnings``.

    ``settings``: the role's variables without the prefix; ``host_plan``: the host's plan, gpufabric_plan;
    ``facts``: ansible_facts (distribution, distribution_major_version, architecture, kernel).
    """
    errors: list[str] = []
    warnings: list[str] = []
    profile = str(host_plan.get("profile", "unknown"))
    if profile == "unknown":
        errors.append(
            f"{no_profile(host_plan)}; accepted: a profile of fabric tcpxo "
            "such as gcp/a3-megagpu-8g (`gpufabric catalog list` shows them)"
        )
        return {"errors": errors, "warnings": warnings, "profile": profile}
    fabric = host_plan.get("fabric")
    if fabric != FABRIC:
        errors.append(
            f"profile {profile!r} has fabric {fabric!r}; gcp_tcpxo serves fabric {FABRIC!r} (gcp/a3-megagpu-8g)"
        )
    os_settings = distro(facts)
    if os_settings["error"]:
        errors.append(os_settings["error"])
    kernel_error = import_helper_kernel_error(
        str(facts.get("kernel", "")),
        str(settings.get("import_helper_version", "")),
        bool(settings.get("import_helper_kernel_check", True)),
    )
    if kernel_error:
        errors.append(kernel_error)

    env = {str(key): str(value) for key, value in (host_plan.get("env") or {}).items()}
    checker_errors, checker_warnings = guest_config_findings(env, profile)
    errors += checker_errors
    warnings += checker_warnings
    lib_dir = plugin_lib_dir(env, profile, errors)

    nics = host_plan.get("nics") or {}
    gpu_nics = nics.get("gpu") or {}
    interfaces = [str(name) for name in gpu_nics.get("interfaces") or []]
    count = int(gpu_nics.get("count") or 0)
    named = host_plan.get("nic_names") is not None
    if not named:
        # The catalog names no interface: without the host's names the env still holds {nics.*} placeholders.
        errors.append(
            f"the plan of profile {profile!r} has not named this host's GPU NICs (the plan role reads them with "
            'fabric_facts; docs/catalog.md, "NICs by identity"); set gpufabric_nic_names for an image bake'
        )
    elif len(interfaces) != count:
        errors.append(
            f"the plan of {profile} names {len(interfaces)} of this host's {count} GPU NICs; gcp_tcpxo checks and "
            "opens the firewall on each by name (the plan role names them from fabric_facts, by identity; "
            "gpufabric_nic_names gives them for an image bake)"
        )
    fastrak = env.get("NCCL_FASTRAK_IFNAME")
    if named and fastrak is not None and fastrak.split(",") != interfaces:
        errors.append(
            f"the catalog env of {profile} has NCCL_FASTRAK_IFNAME={fastrak} but this host's GPU NICs are "
            f"{','.join(interfaces) or '(none)'}; they must name the same interfaces in the same order"
        )
    management = str(next(iter((nics.get("management") or {}).get("interfaces") or []), ""))
    ctrl = env.get("NCCL_FASTRAK_CTRL_DEV")
    if ctrl is not None and management and ctrl != management:
        errors.append(
            f"the catalog env of {profile} has NCCL_FASTRAK_CTRL_DEV={ctrl} but the profile's management NIC "
            f"is {management}"
        )

    mtu_setting = int(settings.get("gpu_nic_mtu") or 0)
    if mtu_setting < 0:
        errors.append(f"gcp_tcpxo_gpu_nic_mtu {mtu_setting} is not accepted; accepted: 0 (the profile's) or an MTU")
    mtu = mtu_setting or int(gpu_nics.get("mtu") or 0)

    extra = [str(name) for name in settings.get("firewall_extra_interfaces") or []]
    for name in interfaces + extra:
        problem = fabric_nics.interface_problem(name)
        if problem:
            errors.append(
                f"interface name {name!r} is not accepted ({problem}); accepted: {fabric_nics.INTERFACE_ACCEPTED}"
            )

    version = str(settings.get("import_helper_version", ""))
    if not DEBIAN_VERSION.match(version):
        errors.append(
            f"gcp_tcpxo_import_helper_version {version!r} is not accepted; accepted: the exact Debian version of "
            "dmabuf-import-helper in Google's gpudirect-tcpxo-apt repository (after adding it, "
            "`apt-cache madison dmabuf-import-helper` lists them); there is no implicit version"
        )
    transport_version = str(settings.get("ar_transport_version", ""))
    if transport_version and not DEBIAN_VERSION.match(transport_version):
        errors.append(
            f"gcp_tcpxo_ar_transport_version {transport_version!r} is not accepted; accepted: empty (the "
            "repository's newest, not held) or an exact Debian version"
        )
    _check_key("repo", settings, errors)
    if settings.get("ar_transport"):
        _check_key("ar_transport", settings, errors)
    for name in ("repo_url", "ar_transport_repo_url"):
        url = str(settings.get(name, ""))
        if not re.match(r"^(ar\+https|https|http|file):", url):
            errors.append(
                f"gcp_tcpxo_{name} {url!r} is not accepted; accepted: an ar+https://, https://, http:// or file: "
                "APT repository URL"
            )
    for name in ("repo_suite", "ar_transport_repo_suite"):
        if not re.match(r"^[A-Za-z0-9._/-]+$", str(settings.get(name, ""))):
            errors.append(f"gcp_tcpxo_{name} {settings.get(name)!r} is not accepted; accepted: an APT suite name")
    timeout = int(settings.get("rxdm_ready_timeout") or 0)
    if timeout < 1:
        errors.append(f"gcp_tcpxo_rxdm_ready_timeout {timeout} is not accepted; accepted: seconds, at least 1")

    registry = str(settings.get("registry", ""))
    if not REGISTRY.match(registry):
        errors.append(
            f"gcp_tcpxo_registry {registry!r} is not accepted; accepted: a registry path such as "
            "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo (lowercase, no scheme, no tag)"
        )
    rxdm_ref = _check_image("rxdm", settings, errors)
    plugin_ref = _check_image("plugin", settings, errors)
    plugin_tag = str(settings.get("plugin_tag", ""))
    rxdm_tag = str(settings.get("rxdm_tag", ""))
    paired = RELEASES.get(plugin_tag)
    if paired and rxdm_tag in RELEASES.values() and paired != rxdm_tag:
        errors.append(
            f"gcp_tcpxo_rxdm_tag {rxdm_tag} does not belong with gcp_tcpxo_plugin_tag {plugin_tag}; Google couples "
            f"them and releases plugin {plugin_tag} with RxDM {paired}"
        )
    elif not paired:
        warnings.append(
            f"gcp_tcpxo_plugin_tag {plugin_tag} is not in the role's release table; make sure RxDM {rxdm_tag} is "
            "the one Google released with it (gpudirect-tcpxo/README.md)"
        )

    gpus = int((host_plan.get("gpus") or {}).get("count") or 0)
    plugin_dir = posixpath.normpath(str(settings.get("plugin_dir") or "/var/lib/tcpxo"))
    if not plugin_dir.startswith("/") or plugin_dir == "/":
        errors.append(f"gcp_tcpxo_plugin_dir {plugin_dir!r} is not accepted; accepted: an absolute directory")
    libs = [str(name) for name in settings.get("rxdm_driver_libraries") or []]
    for name in libs:
        if "/" in name or not name:
            errors.append(f"gcp_tcpxo_rxdm_driver_libraries entry {name!r} is not accepted; accepted: a file name")
    lib_source = str(settings.get("rxdm_driver_lib_dir") or os_settings["driver_lib_dir"])
    # podman runs the images, iptables the firewall rule; dkms, the kernel headers and the compiler that built the
    # running kernel (kernel_build: 24.04's HWE kernels are not built with the release's default gcc) build the
    # import-helper module.
    compiler = kernel_build.compiler_package(str(settings.get("kernel_version_text") or ""))
    build = os_settings["dkms_packages"] + os_settings["kernel_header_packages"] + ([compiler] if compiler else [])
    steps = installs(settings, os_settings["packages"] + (build if settings.get("kernel_headers") else []))
    return {
        "errors": errors,
        "warnings": warnings,
        "profile": profile,
        "distro": os_settings,
        "interfaces": interfaces,
        "firewall_interfaces": list(dict.fromkeys(interfaces + extra)),
        "mtu": mtu,
        "lib_dir": lib_dir,
        "plugin_dir": plugin_dir,
        "plugin_lib64": f"{plugin_dir}/lib64",
        "tuner_config": env.get("NCCL_TUNER_CONFIG_PATH", ""),
        "guest_config": env.get("NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE", ""),
        "rxdm_ref": rxdm_ref,
        "plugin_ref": plugin_ref,
        "gpu_devices": [f"/dev/nvidia{index}" for index in range(gpus)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"],
        "driver_libraries": [f"{lib_source.rstrip('/')}/{name}" for name in libs],
        "first_install": steps["first"],
        "tcpxo_install": steps["tcpxo"],
        "supply": [steps["first"], steps["tcpxo"]],
        # The images by digest: what `gpufabric plan` shows as fetched.
        "artifacts": [
            supply_chain.image_artifact(f"{kind} {settings.get(f'{kind}_tag', '')}", ref)
            for kind, ref in (("rxdm", rxdm_ref), ("plugin", plugin_ref))
        ],
    }


def nic_findings(hardware: dict[str, Any], interfaces: list[str], mtu: int) -> list[str]:
    """One sentence per GPU NIC that is missing, not up, or below the MTU (0: MTU not checked)."""
    nics = {nic.get("name"): nic for nic in hardware.get("nics") or []}
    out = []
    for name in interfaces:
        nic = nics.get(name)
        if nic is None:
            out.append(f"{name} is missing")
            continue
        state = nic.get("operstate")
        if state != "up":
            out.append(f"{name} is {state or 'in an unknown state'} (operstate), not up")
        if mtu and (nic.get("mtu") or 0) < mtu:
            out.append(f"{name} has MTU {nic.get('mtu')}, below {mtu}")
    return out


IMPORT_HELPER_PACKAGE = "dmabuf-import-helper"


TRANSPORT_REPO = "gpufabric-gcp-ar-transport"
TCPXO_REPO = "gpufabric-gcp-tcpxo"


def _key(settings: dict[str, Any], prefix: str, repository: str) -> RepoKey:
    """The repository's signing key as gpufabric.cluster.repo_key installs it (a controller file wins over the URL)."""
    src = str(settings.get(f"{prefix}_key_src") or "")
    return supply_chain.key(
        repository,
        str(settings.get(f"{prefix}_keyring") or ""),
        [str(item) for item in settings.get(f"{prefix}_key_fingerprints") or []],
        fingerprints_from=f"gcp_tcpxo_{prefix}_key_fingerprints",
        url="" if src else str(settings.get(f"{prefix}_key_url") or ""),
        src=src,
        checksum=str(settings.get(f"{prefix}_key_checksum") or ""),
    )


def installs(settings: dict[str, Any], distro_packages: list[str]) -> dict[str, PackageStep]:
    """The two gpufabric.cluster.vendor_packages runs, each with the key installed before it.

    ``first``: the Artifact Registry transport from its own repository (at its pin and held; unpinned, installed
    once and never moved or held) and the distribution's packages (podman, iptables, dkms, headers: installed when
    missing, never held), before apt can read the ar+https:// TCPXO source; ``tcpxo``: dmabuf-import-helper at its
    pin, held.
    """
    first: list[PackagePin] = []
    transport: list[Repository] = []
    transport_keys: list[RepoKey] = []
    if settings.get("ar_transport"):
        transport_keys = [_key(settings, "ar_transport", TRANSPORT_REPO)]
        transport = [
            supply_chain.repository(
                TRANSPORT_REPO,
                str(settings.get("ar_transport_repo_url") or ""),
                str(settings.get("ar_transport_repo_suite") or ""),
                transport_keys[0]["dest"],
                ["main"],
            )
        ]
        first = [
            supply_chain.package(entry["name"], entry["version"], TRANSPORT_REPO, hold=entry["hold"])
            for entry in transport_packages(str(settings.get("ar_transport_version") or ""))
        ]
    first += [supply_chain.package(name, hold=False) for name in distro_packages]
    tcpxo_key = _key(settings, "repo", TCPXO_REPO)
    tcpxo_repo = supply_chain.repository(
        TCPXO_REPO,
        str(settings.get("repo_url") or ""),
        str(settings.get("repo_suite") or ""),
        tcpxo_key["dest"],
        ["main"],
        ["all"],
    )
    helper = supply_chain.package(IMPORT_HELPER_PACKAGE, str(settings.get("import_helper_version", "")), TCPXO_REPO)
    return {
        "first": supply_chain.step(first, transport, transport_keys),
        "tcpxo": supply_chain.step([helper], [tcpxo_repo], [tcpxo_key]),
    }


EXPORT = re.compile(r"""^\s*export\s+([A-Z_][A-Z0-9_]*)=(?:"([^"]*)"|'([^']*)'|(\S*))\s*$""")


def env_differences(script: str, env: dict[str, str], lib_dir: str) -> list[str]:
    """Where Google's nccl-env-profile.sh (from the installer) and the catalog env disagree, one sentence each.

    Only NCCL_* exports are compared (LD_LIBRARY_PATH and CUDA_VISIBLE_DEVICES are per host or per job);
    ``${NCCL_LIB_DIR}`` is read as the directory the catalog env loads the plugin from.
    """
    exports: dict[str, str] = {}
    for line in script.splitlines():
        match = EXPORT.match(line)
        if match:
            value = next(group for group in match.groups()[1:] if group is not None)
            exports[match.group(1)] = value.replace("${NCCL_LIB_DIR}", lib_dir).replace("$NCCL_LIB_DIR", lib_dir)
    out = []
    for name, value in exports.items():
        if not name.startswith("NCCL_"):
            continue
        if name not in env:
            out.append(f"{name}={value} is in Google's profile but not in the catalog env")
        elif env[name] != value:
            out.append(f"{name} is {env[name]} in the catalog env, {value} in Google's profile")
    out += [
        f"{name}={value} is in the catalog env but not in Google's profile"
        for name, value in env.items()
        if name.startswith("NCCL_") and name not in exports and exports
    ]
    return out
