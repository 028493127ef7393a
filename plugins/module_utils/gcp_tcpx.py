# SPDX-License-Identifier: Apache-2.0
"""What the gcp_tcpx role installs and runs on one GCP a3-highgpu-8g / a3-edgegpu-8g VM.

Pure Python (stdlib only) so that what molecule cannot reach is unit-tested: image references
and digest checks, the distribution's runtime packages, the RxDM container's argv for podman
and docker, and systemd's quoting of it.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import fabric_nics, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.container_image import (
    DIGEST,
    IMAGE_NAME,
    TAG,
    image_reference,
)
from ansible_collections.gpufabric.cluster.plugins.module_utils.host_plan import no_profile
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import PackagePin, PackageStep

FABRIC = "tcpx"
RUNTIMES = ("podman", "docker")
# (distribution, major version) pairs the role is written and tested for; other APT systems get a warning.
SUPPORTED = {("Debian", "12"), ("Debian", "13"), ("Ubuntu", "22"), ("Ubuntu", "24")}
# Per runtime on Debian and Ubuntu: the distribution's package, its binary, the daemon it needs.
RUNTIME_PACKAGES: dict[str, dict[str, Any]] = {
    "podman": {"package": "podman", "binary": "/usr/bin/podman", "service": None},
    "docker": {"package": "docker.io", "binary": "/usr/bin/docker", "service": "docker.service"},
}
# Host tools the role's units and live checks run (unpinned: security updates come from the distribution).
HOST_PACKAGES = ("iptables", "ethtool")
IPTABLES = "/usr/sbin/iptables"

# Fixed by the vendor images (sky sky/provision/gcp/constants.py; cea gpudirect-tcpx/nccl-tcpx-installer.yaml).
PLUGIN_DIR = "/var/lib/tcpx/lib64"  # where `install --install-nccl` writes, with /var/lib mounted
RXDM_ENTRYPOINT = "/tcpgpudmarxd/build/app/tcpgpudmarxd"
CONTAINER_NVIDIA_LIB = "/usr/local/nvidia/lib64"  # where the RxDM image looks for the driver's libraries
# google/tcpgpudmarxd src/a3vm_gpu_rxq_configurator.cc: the a3vm preset names these NICs.
A3VM_INTERFACES = ["eth1", "eth2", "eth3", "eth4"]

RXDM_CONTAINER = "gpufabric-tcpx-rxdm"
STAGE_DIR = "/run/gpufabric-tcpx/nvidia/lib64"

REGISTRY = re.compile(r"^[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*$")
RUN_DIR = re.compile(r"^/run/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")
SONAME = re.compile(r"^lib[A-Za-z0-9_+.-]+\.so(?:\.[0-9]+)*$")
SAFE_ARG = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def registry_errors(registry: str) -> list[str]:
    if REGISTRY.match((registry or "").rstrip("/")):
        return []
    return [
        f"gcp_tcpx_registry {registry!r} is not a registry path; accepted: host[:port]/path without a scheme, "
        "e.g. us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx or a mirror"
    ]


def image_errors(role_var: str, registry: str, name: str, tag: str, digest: str) -> list[str]:
    """Bad image settings, each message naming the variable, the value and what is accepted."""
    errors = []
    if not IMAGE_NAME.match(name or ""):
        errors.append(f"gcp_tcpx_{role_var}_image {name!r} is not a repository name; accepted: lower-case path")
    if not TAG.match(tag or ""):
        errors.append(f"gcp_tcpx_{role_var}_tag {tag!r} is not an image tag; accepted: e.g. v2.0.15")
    if not digest:
        errors.append(
            f"gcp_tcpx_{role_var}_digest is empty: pin {registry.rstrip('/')}/{name}:{tag} by its digest "
            "(sha256: and 64 hex digits). No public source pins one, so the role ships none; read it with "
            f"`gcloud artifacts docker images describe {registry.rstrip('/')}/{name}:{tag} "
            "--format='value(image_summary.digest)'` or `crane digest <image>:<tag>`"
        )
    elif not DIGEST.match(digest):
        errors.append(
            f"gcp_tcpx_{role_var}_digest {digest!r} is not an image digest; "
            "accepted: sha256: and 64 lower-case hex digits"
        )
    return errors


def systemd_quote(arg: str) -> str:
    """One argv element as systemd's Exec*= lines read it: quoted when needed, % and $ escaped."""
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if SAFE_ARG.match(arg):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_command(argv: list[str]) -> str:
    return " ".join(systemd_quote(arg) for arg in argv)


def gpu_devices(count: int) -> list[str]:
    """The device nodes the RxDM needs (sky sky/provision/gcp/constants.py: /dev/nvidia0..7, uvm, ctl)."""
    return [f"/dev/nvidia{index}" for index in range(count)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]


def rxdm_args(settings: dict[str, Any]) -> list[str]:
    """The RxDM's own arguments (sky constants.py; google/tcpgpudmarxd app/tcpgpudmarxd.cu for the flags)."""
    topology = settings.get("rxdm_gpu_nic_topology") or ""
    preset = (
        ["--gpu_nic_preset", "manual", "--gpu_nic_topology", topology]
        if topology
        else [
            "--gpu_nic_preset",
            str(settings.get("rxdm_gpu_nic_preset", "a3vm")),
        ]
    )
    uds = str(settings["rxdm_uds_path"])
    setup = str(settings.get("rxdm_setup_param", "--verbose 128 2 0"))
    return [*preset, "--gpu_shmem_type", "fd", "--uds_path", uds, "--setup_param", setup]


def rxdm_run_groups(
    binary: str, reference: str, gpu_count: int, lib_dir: str, settings: dict[str, Any]
) -> list[list[str]]:
    """The RxDM unit's `<runtime> run ...` in groups, one option with its value each (podman and docker alike)."""
    uds = str(settings["rxdm_uds_path"])
    groups = [[binary, "run", "--rm", "--name", RXDM_CONTAINER, "--pull=missing"]]
    extra = [str(arg) for arg in settings.get("container_run_args") or []]
    if extra:
        groups.append(extra)
    groups += [["--privileged"], ["--cap-add=NET_ADMIN"], ["--network=host"]]
    groups += [["--device", f"{device}:{device}"] for device in gpu_devices(gpu_count)]
    groups += [["--volume", f"{lib_dir}:{CONTAINER_NVIDIA_LIB}:ro"], ["--volume", f"{uds}:{uds}"]]
    topology = settings.get("rxdm_gpu_nic_topology") or ""
    if topology:
        groups.append(["--volume", f"{topology}:{topology}:ro"])
    groups += [["--env", f"LD_LIBRARY_PATH={CONTAINER_NVIDIA_LIB}"], ["--entrypoint", RXDM_ENTRYPOINT], [reference]]
    args = rxdm_args(settings)
    return groups + [args[index : index + 2] for index in range(0, len(args), 2)]


def rxdm_run_argv(binary: str, reference: str, gpu_count: int, lib_dir: str, settings: dict[str, Any]) -> list[str]:
    return [arg for group in rxdm_run_groups(binary, reference, gpu_count, lib_dir, settings) for arg in group]


def installer_argv(binary: str, reference: str, settings: dict[str, Any]) -> list[str]:
    """The plugin installer run; it only copies files, so it gets no network.

    sky constants.py: `docker run --rm -v /var/lib:/var/lib <image> install --install-nccl`.
    """
    extra = [str(arg) for arg in settings.get("container_run_args") or []]
    volume = ["--volume", "/var/lib:/var/lib"]
    return [
        binary,
        "run",
        "--rm",
        "--pull=missing",
        *extra,
        "--network=none",
        *volume,
        reference,
        "install",
        "--install-nccl",
    ]


def _path_list(value: Any) -> list[str]:
    return [part for part in str(value or "").split(":") if part]


def _profile_errors(host_plan: dict[str, Any]) -> list[str]:
    name = host_plan.get("profile", "unknown")
    if name == "unknown":
        return [f"{no_profile(host_plan)}; `gpufabric catalog list` shows the accepted names"]
    if host_plan.get("fabric") != FABRIC:
        return [
            f"profile {name!r} has fabric {host_plan.get('fabric')!r}; this role serves only fabric "
            "'tcpx' profiles (gcp/a3-highgpu-8g, gcp/a3-edgegpu-8g in the built-in catalog)"
        ]
    return []


class RuntimePlan(TypedDict):
    name: str  # podman or docker
    binary: str
    service: str | None  # the daemon the runtime needs (docker.service), None for podman
    packages: list[PackagePin]  # from the distribution's archive


class ImagePlan(TypedDict):
    reference: str  # registry/name@digest: what is pulled and run
    tagged: str  # registry/name:tag, for messages


class NvidiaPlan(TypedDict):
    staged: bool  # the driver's libraries are copied to STAGE_DIR (no rxdm_driver_lib_dir given)
    mount_dir: str  # the host directory mounted into the RxDM as CONTAINER_NVIDIA_LIB
    libraries: list[str]
    link: str  # driver_lib_link pointed at mount_dir ("" when none or the same path)


class GcpTcpxPlan(TypedDict):
    errors: list[str]
    warnings: list[str]
    runtime: RuntimePlan
    supply: list[PackageStep]  # the runtime's packages: what gpufabric plan shows
    images: dict[str, ImagePlan]  # per "rxdm" and "plugin"
    artifacts: list[supply_chain.Artifact]  # the images by digest: what `gpufabric plan` shows as fetched
    gpu_count: int
    devices: list[str]  # device nodes the RxDM gets
    interfaces: list[str]  # the host's names of the profile's GPU NICs (the plan's nic_names), in PCI order
    mtu: int | None  # the profile's GPU-NIC MTU
    firewall_interfaces: list[str]
    iptables: str
    plugin_dir: str  # where the installer writes the plugin (fixed by the image)
    uds_path: str
    uds_runtime_directory: str  # uds_path below /run, for systemd's RuntimeDirectory=
    nvidia: NvidiaPlan
    rxdm_exec_lines: list[str]  # the RxDM unit's ExecStart=, one option group a line (empty on errors)
    rxdm_args: list[str]
    installer_argv: list[str]
    container: str  # the RxDM container's name
    stamp: str  # the installed plugin image, as the stamp file holds it


def plan(settings: dict[str, Any], host_plan: dict[str, Any], facts: dict[str, Any]) -> GcpTcpxPlan:
    """Everything the role's tasks need, plus ``errors`` (bad input) and ``warnings``.

    ``settings``: the role's variables without the ``gcp_tcpx_`` prefix.
    ``host_plan``: the host's plan, gpufabric_plan (profile, fabric, env, gpus, nics).
    ``facts``: ansible_facts (os_family, distribution, distribution_major_version).
    """
    profile = host_plan.get("profile")
    errors = _profile_errors(host_plan)
    warnings: list[str] = []

    family, distribution = facts.get("os_family"), facts.get("distribution")
    major = str(facts.get("distribution_major_version", ""))
    if family != "Debian":
        errors.append(
            f"{distribution} {major} ({family}): this role installs on APT systems only; accepted: "
            "Debian 12, 13, Ubuntu 22.04, 24.04"
        )
    elif (distribution, major) not in SUPPORTED:
        warnings.append(
            f"{distribution} {major} is not one of Debian 12, 13, Ubuntu 22.04, 24.04; proceeding as Debian"
        )

    runtime = settings.get("container_runtime")
    if runtime not in RUNTIMES:
        errors.append(f"gcp_tcpx_container_runtime {runtime!r} is not supported; accepted: {', '.join(RUNTIMES)}")
        runtime = "podman"
    spec = RUNTIME_PACKAGES[runtime]
    version = str(settings.get("container_runtime_version") or "")
    # gpufabric.cluster.vendor_packages' layout: the runtime held only at a pin, the host tools never.
    packages = [supply_chain.package(spec["package"], version, hold=bool(version))]
    packages += [supply_chain.package(name, hold=False) for name in HOST_PACKAGES]
    run_args = settings.get("container_run_args") or []
    if not isinstance(run_args, list) or not all(isinstance(arg, str) and arg for arg in run_args):
        errors.append(f"gcp_tcpx_container_run_args {run_args!r} must be a list of non-empty strings")

    images = {}
    registry = str(settings.get("registry") or "")
    errors += registry_errors(registry)
    for key in ("rxdm", "plugin"):
        name = str(settings.get(f"{key}_image") or "")
        tag = str(settings.get(f"{key}_tag") or "")
        digest = str(settings.get(f"{key}_digest") or "")
        errors += image_errors(key, registry, name, tag, digest)
        images[key] = {
            "reference": image_reference(registry, name, digest),
            "tagged": f"{registry.rstrip('/')}/{name}:{tag}",
        }

    env = host_plan.get("env") or {}
    nics = host_plan.get("nics") or {}
    gpu_nics = nics.get("gpu") or {}
    interfaces = [str(name) for name in gpu_nics.get("interfaces") or []]
    gpu_count = int((host_plan.get("gpus") or {}).get("count") or 0)
    uds = str(settings.get("rxdm_uds_path") or "")
    topology = str(settings.get("rxdm_gpu_nic_topology") or "")
    preset = str(settings.get("rxdm_gpu_nic_preset") or "")
    lib_dir = str(settings.get("rxdm_driver_lib_dir") or "")
    lib_link = str(settings.get("driver_lib_link") or "")
    plugin_link = str(settings.get("plugin_link") or "")
    libraries = [str(name) for name in settings.get("rxdm_driver_libraries") or []]
    if not errors:  # the profile is a tcpx profile: its settings can be checked against the role's
        prefix = env.get("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX")
        if not RUN_DIR.match(uds) or posixpath.normpath(uds) != uds:
            errors.append(
                f"gcp_tcpx_rxdm_uds_path {uds!r} is not a directory below /run; accepted: e.g. /run/tcpx "
                "(systemd creates it for the RxDM and removes it when the RxDM stops)"
            )
        elif prefix is not None and prefix != uds:
            errors.append(
                f"gcp_tcpx_rxdm_uds_path {uds!r} differs from the profile's NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX "
                f"{prefix!r}: NCCL would not find the RxDM's sockets; accepted: {prefix!r}"
            )
        ld_path = _path_list(env.get("LD_LIBRARY_PATH"))
        if plugin_link and plugin_link not in ld_path:
            errors.append(
                f"gcp_tcpx_plugin_link {plugin_link!r} is not in the profile's LD_LIBRARY_PATH {ld_path}; "
                "accepted: one of those directories"
            )
        if (
            not plugin_link.startswith("/")
            or posixpath.normpath(plugin_link) != plugin_link
            or plugin_link == PLUGIN_DIR
        ):
            errors.append(f"gcp_tcpx_plugin_link {plugin_link!r} must be an absolute path other than {PLUGIN_DIR}")
        if gpu_count < 1:
            errors.append(f"profile {profile!r} has no GPUs (gpu.count {gpu_count})")
        if host_plan.get("nic_names") is None:
            errors.append(
                f"the plan of profile {profile!r} has not named this host's GPU NICs (the plan role reads them with "
                'fabric_facts; docs/catalog.md, "NICs by identity"); set gpufabric_nic_names for an image bake'
            )
        elif not topology and preset == "a3vm" and interfaces != A3VM_INTERFACES:
            errors.append(
                f"gcp_tcpx_rxdm_gpu_nic_preset 'a3vm' hard-codes the GPU NICs {', '.join(A3VM_INTERFACES)} "
                f"but this host names them {', '.join(interfaces) or '(none)'} (as Google's Ubuntu images do); boot "
                "the image with net.ifnames=0 (eth0-eth4 as on Container-Optimized OS) or set "
                "gcp_tcpx_rxdm_gpu_nic_topology to a GpuRxqConfigurationList textproto for these names"
            )
        if not topology and not preset:
            errors.append("gcp_tcpx_rxdm_gpu_nic_preset is empty; accepted: a3vm, or a topology file instead")
        if topology and (not topology.startswith("/") or posixpath.normpath(topology) != topology):
            errors.append(f"gcp_tcpx_rxdm_gpu_nic_topology {topology!r} must be an absolute path on the host")
        if lib_dir and (not lib_dir.startswith("/") or posixpath.normpath(lib_dir) != lib_dir):
            errors.append(f"gcp_tcpx_rxdm_driver_lib_dir {lib_dir!r} must be an absolute path or empty")
        if not lib_dir and not libraries:
            errors.append(
                "gcp_tcpx_rxdm_driver_libraries is empty; accepted: sonames such as libcuda.so.1 (first one required)"
            )
        bad_libraries = [name for name in libraries if not SONAME.match(name)]
        if bad_libraries:
            errors.append(
                f"gcp_tcpx_rxdm_driver_libraries {bad_libraries} are not sonames; accepted: e.g. libcuda.so.1"
            )
        if lib_link and (not lib_link.startswith("/") or posixpath.normpath(lib_link) != lib_link):
            errors.append(f"gcp_tcpx_driver_lib_link {lib_link!r} must be an absolute path or empty")

    # As in gcp_tcpxo: the GPU NICs always, then the extra interfaces (once each).
    extra_interfaces = [str(name) for name in settings.get("firewall_extra_interfaces") or []]
    firewall_interfaces = list(dict.fromkeys(interfaces + extra_interfaces))
    if settings.get("firewall") and not errors:
        bad = [name for name in firewall_interfaces if fabric_nics.interface_problem(name)]
        if not firewall_interfaces:
            errors.append(
                f"profile {profile!r} names no GPU NICs and gcp_tcpx_firewall_extra_interfaces is "
                "empty; accepted: the interface names to accept TCP on"
            )
        elif bad:
            errors.append(
                f"gcp_tcpx_firewall_extra_interfaces {bad} are not interface names; "
                f"accepted: {fabric_nics.INTERFACE_ACCEPTED}"
            )

    sysctls = settings.get("sysctls") or {}
    bad_sysctls = [key for key, value in sysctls.items() if not re.match(r"^[a-z0-9_]+(\.[a-z0-9_-]+)+$", str(key))]
    bad_sysctls += [key for key, value in sysctls.items() if not re.match(r"^[0-9A-Za-z _.-]+$", str(value))]
    if bad_sysctls:
        errors.append(f"gcp_tcpx_sysctls has bad entries {sorted(set(bad_sysctls))}; accepted: dotted.key: value")

    staged = not lib_dir
    mount_dir = lib_dir or STAGE_DIR
    return {
        "errors": errors,
        "warnings": warnings,
        "runtime": {
            "name": runtime,
            "binary": spec["binary"],
            "service": spec["service"],
            "packages": packages,
        },
        "supply": [supply_chain.step(packages)],
        "images": images,
        "artifacts": [
            supply_chain.image_artifact(f"{key} {image['tagged']}", image["reference"]) for key, image in images.items()
        ],
        "gpu_count": gpu_count,
        "devices": gpu_devices(gpu_count),
        "interfaces": interfaces,
        "mtu": gpu_nics.get("mtu"),
        "firewall_interfaces": firewall_interfaces,
        "iptables": IPTABLES,
        "plugin_dir": PLUGIN_DIR,
        "uds_path": uds,
        "uds_runtime_directory": uds[len("/run/") :] if uds.startswith("/run/") else "",
        "nvidia": {
            "staged": staged,
            "mount_dir": mount_dir,
            "libraries": libraries,
            "link": "" if lib_link == mount_dir else lib_link,
        },
        # One line per option group, for a readable unit file and --diff.
        "rxdm_exec_lines": [
            systemd_command(group)
            for group in rxdm_run_groups(spec["binary"], images["rxdm"]["reference"], gpu_count, mount_dir, settings)
        ]
        if not errors
        else [],
        "rxdm_args": rxdm_args(settings) if not errors else [],
        "installer_argv": installer_argv(spec["binary"], images["plugin"]["reference"], settings),
        "container": RXDM_CONTAINER,
        "stamp": f"{images['plugin']['reference']}\n",
    }
