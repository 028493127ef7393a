# SPDX-License-Identifier: Apache-2.0
"""gcp_tcpx's logic that molecule cannot reach: image references and digests from the defaults, registry
mirrors, docker instead of podman, Ubuntu and other distributions, the RxDM command line and its quoting,
and refusals of inputs that would leave NCCL unable to find the RxDM or the plugin."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from gpufabric.collection import module_utils, plugin_utils
from tests.conftest import image_nic_names, recorded_facts

tcpx = module_utils("gcp_tcpx")
REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "gcp_tcpx"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
CATALOG = plugin_utils("fabric_catalog").load_catalog()
DEBIAN12 = {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12"}
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


def fabric(profile: str = "gcp/a3-highgpu-8g", image: str | None = "cos") -> dict:
    """The plan the plan role hands gcp_tcpx on a host of ``image``, its NICs named as that image names them
    (tests/fixtures/nic_names.yml; the plan role names them on the host, fabric_nics); None: a plan whose NICs no one
    has named. Container-Optimized OS (and net.ifnames=0) gives the names of the RxDM's a3vm preset, eth0-eth4;
    Google's Ubuntu images give others."""
    names = image_nic_names(profile, image) if image else None
    hostvars = {"gpufabric_profile": profile, **({"gpufabric_nic_names": names} if names else {})}
    return plugin_utils("fabric_plan").plan_host(hostvars, CATALOG)


def settings(**overrides) -> dict:
    values = {key.removeprefix("gcp_tcpx_"): value for key, value in DEFAULTS.items()}
    values.update(rxdm_digest=DIGEST_A, plugin_digest=DIGEST_B)
    values.update(overrides)
    return values


def plan(facts: dict | None = None, profile: str = "gcp/a3-highgpu-8g", **overrides) -> dict:
    tcpx_profile = profile in ("gcp/a3-highgpu-8g", "gcp/a3-edgegpu-8g")
    return tcpx.plan(settings(**overrides), fabric(profile, "cos" if tcpx_profile else None), facts or DEBIAN12)


# ---------------------------------------------------------------- defaults and images


def test_defaults_name_googles_current_image_pair_and_pin_no_digest():
    # container-engine-accelerators gpudirect-tcpx/README.md: plugin v3.1.12 with RxDM v2.0.15.
    assert DEFAULTS["gcp_tcpx_registry"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx"
    assert DEFAULTS["gcp_tcpx_rxdm_image"] == "tcpgpudmarxd-dev"
    assert DEFAULTS["gcp_tcpx_rxdm_tag"] == "v2.0.15"
    assert DEFAULTS["gcp_tcpx_plugin_image"] == "nccl-plugin-gpudirecttcpx-dev"
    assert DEFAULTS["gcp_tcpx_plugin_tag"] == "v3.1.12"
    # No public source pins a digest: the defaults must not pretend one.
    assert DEFAULTS["gcp_tcpx_rxdm_digest"] == "" and DEFAULTS["gcp_tcpx_plugin_digest"] == ""
    assert DEFAULTS["gcp_tcpx_sysctls"] == {"net.core.optmem_max": 131072}
    assert "gcp_tcpx_profile" not in DEFAULTS, "the profile comes from gpufabric_plan"


def test_defaults_alone_are_refused_naming_both_digests_and_how_to_read_them():
    values = {key.removeprefix("gcp_tcpx_"): value for key, value in DEFAULTS.items()}
    result = tcpx.plan(values, fabric(), DEBIAN12)
    assert len(result["errors"]) == 2
    rxdm, plugin = result["errors"]
    assert rxdm.startswith("gcp_tcpx_rxdm_digest is empty: pin us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/")
    assert "tcpgpudmarxd-dev:v2.0.15" in rxdm and "gcloud artifacts docker images describe" in rxdm
    assert plugin.startswith("gcp_tcpx_plugin_digest is empty") and "nccl-plugin-gpudirecttcpx-dev:v3.1.12" in plugin


def test_images_are_pulled_and_run_by_digest_and_the_stamp_records_the_installer():
    result = plan()
    assert result["errors"] == []
    rxdm = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev@" + DIGEST_A
    installer = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev@" + DIGEST_B
    assert result["images"]["rxdm"] == {
        "reference": rxdm,
        "tagged": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15",
    }
    assert result["images"]["plugin"]["reference"] == installer
    assert result["stamp"] == installer + "\n"
    assert rxdm in result["rxdm_exec_lines"]


def test_a_mirror_registry_replaces_googles():
    result = plan(registry="mirror.example.org:5000/gce-ai-infra/gpudirect-tcpx/")
    assert result["errors"] == []
    assert result["images"]["rxdm"]["reference"] == (
        "mirror.example.org:5000/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev@" + DIGEST_A
    )
    assert result["installer_argv"][-3] == (
        "mirror.example.org:5000/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev@" + DIGEST_B
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"rxdm_digest": "sha256:" + "A" * 64}, "gcp_tcpx_rxdm_digest 'sha256:AAAA"),
        ({"rxdm_digest": "a" * 64}, "is not an image digest; accepted: sha256: and 64"),
        ({"plugin_digest": "sha256:abc"}, "gcp_tcpx_plugin_digest 'sha256:abc' is not an image digest"),
        ({"registry": "https://us-docker.pkg.dev/x"}, "gcp_tcpx_registry 'https://us-docker.pkg.dev/x' is not"),
        ({"rxdm_tag": "v2.0.15@sha256:x"}, "gcp_tcpx_rxdm_tag 'v2.0.15@sha256:x' is not an image tag"),
        ({"plugin_image": "Nccl"}, "gcp_tcpx_plugin_image 'Nccl' is not a repository name"),
    ],
)
def test_bad_image_settings_are_refused_by_name(overrides, expected):
    errors = plan(**overrides)["errors"]
    assert len(errors) == 1 and expected in errors[0], errors


# ---------------------------------------------------------------- runtimes and distributions


def test_podman_from_the_distribution_unpinned_by_default():
    result = plan()
    assert result["runtime"] == {
        "name": "podman",
        "binary": "/usr/bin/podman",
        "service": None,
        "packages": [
            {"name": "podman", "version": "", "hold": False, "repository": ""},
            {"name": "iptables", "version": "", "hold": False, "repository": ""},
            {"name": "ethtool", "version": "", "hold": False, "repository": ""},
        ],
    }
    # What gpufabric plan shows: one vendor_packages run, from the distribution, no repository of its own.
    assert result["supply"] == [
        {
            "keys": [],
            "repositories": [],
            "packages": result["runtime"]["packages"],
            "preferences": "",
            "pin_priority": 1001,
            "release": [],
        }
    ]


def test_a_runtime_version_is_pinned_with_apt_syntax_and_held():
    runtime = plan(container_runtime_version="4.3.1+ds1-8+deb12u1")["runtime"]
    assert runtime["packages"][0] == {
        "name": "podman",
        "version": "4.3.1+ds1-8+deb12u1",
        "hold": True,
        "repository": "",
    }
    assert [package["name"] for package in runtime["packages"] if package["hold"]] == ["podman"]


def test_docker_uses_docker_io_and_its_daemon():
    result = plan(container_runtime="docker")
    assert result["runtime"]["packages"][0]["name"] == "docker.io"
    assert result["runtime"]["service"] == "docker.service"
    assert result["rxdm_exec_lines"][0].startswith("/usr/bin/docker run --rm --name gpufabric-tcpx-rxdm")
    assert result["installer_argv"][0] == "/usr/bin/docker"


def test_an_unknown_runtime_is_refused():
    errors = plan(container_runtime="containerd")["errors"]
    assert errors == ["gcp_tcpx_container_runtime 'containerd' is not supported; accepted: podman, docker"]


@pytest.mark.parametrize(
    ("distribution", "major"),
    [("Debian", "12"), ("Debian", "13"), ("Ubuntu", "22"), ("Ubuntu", "24")],
)
def test_supported_distributions_plan_the_same_without_warning(distribution, major):
    facts = {"os_family": "Debian", "distribution": distribution, "distribution_major_version": major}
    result = plan(facts)
    assert result["errors"] == [] and result["warnings"] == []
    assert [package["name"] for package in result["runtime"]["packages"]] == ["podman", "iptables", "ethtool"]
    assert result["iptables"] == "/usr/sbin/iptables"


# Over the facts ansible-core gathers from each OS's real release files (tests/fixtures/os_release/): the Debian
# releases molecule/gcp_tcpx no longer runs on (it runs the Ubuntu 22.04 identity image), and both Ubuntu releases.
@pytest.mark.parametrize("target", ["debian12", "debian13", "ubuntu2204", "ubuntu2404"])
def test_recorded_facts_plan_without_warning(target):
    result = plan(recorded_facts(target))
    assert result["errors"] == [] and result["warnings"] == []
    assert [package["name"] for package in result["runtime"]["packages"]] == ["podman", "iptables", "ethtool"]


def test_other_apt_systems_warn_and_other_families_are_refused():
    old = plan({"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "20"})
    assert old["errors"] == [] and "Ubuntu 20 is not one of" in old["warnings"][0]
    rhel = plan({"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "9"})
    assert rhel["errors"] == [
        "Rocky 9 (RedHat): this role installs on APT systems only; accepted: Debian 12, 13, Ubuntu 22.04, 24.04"
    ]


# ---------------------------------------------------------------- the RxDM unit


def test_rxdm_command_line_matches_googles_vm_setup():
    result = plan()
    argv = tcpx.rxdm_run_argv("/usr/bin/podman", "img@" + DIGEST_A, 8, tcpx.STAGE_DIR, settings())
    assert argv[:7] == [
        "/usr/bin/podman",
        "run",
        "--rm",
        "--name",
        "gpufabric-tcpx-rxdm",
        "--pull=missing",
        "--privileged",
    ]
    for flag in ("--cap-add=NET_ADMIN", "--network=host"):
        assert flag in argv
    devices = [argv[index + 1] for index, arg in enumerate(argv) if arg == "--device"]
    assert devices == [f"/dev/nvidia{n}:/dev/nvidia{n}" for n in range(8)] + [
        "/dev/nvidiactl:/dev/nvidiactl",
        "/dev/nvidia-uvm:/dev/nvidia-uvm",
    ]
    assert "/run/gpufabric-tcpx/nvidia/lib64:/usr/local/nvidia/lib64:ro" in argv
    assert "/run/tcpx:/run/tcpx" in argv
    assert argv[argv.index("--entrypoint") + 1] == "/tcpgpudmarxd/build/app/tcpgpudmarxd"
    assert argv[argv.index("img@" + DIGEST_A) + 1 :] == [
        "--gpu_nic_preset",
        "a3vm",
        "--gpu_shmem_type",
        "fd",
        "--uds_path",
        "/run/tcpx",
        "--setup_param",
        "--verbose 128 2 0",
    ]
    assert result["rxdm_exec_lines"][-1] == '--setup_param "--verbose 128 2 0"'
    assert result["uds_runtime_directory"] == "tcpx"
    assert result["devices"][-2:] == ["/dev/nvidiactl", "/dev/nvidia-uvm"]


def test_extra_run_arguments_go_right_after_run():
    result = plan(container_run_args=["--runtime", "crun", "--cgroups=disabled"])
    assert result["rxdm_exec_lines"][1] == "--runtime crun --cgroups=disabled"
    assert result["installer_argv"][:8] == [
        "/usr/bin/podman",
        "run",
        "--rm",
        "--pull=missing",
        "--runtime",
        "crun",
        "--cgroups=disabled",
        "--network=none",
    ]
    assert result["installer_argv"][-2:] == ["install", "--install-nccl"]


@pytest.mark.parametrize(
    ("arg", "quoted"),
    [
        ("--network=host", "--network=host"),
        ("--verbose 128 2 0", '"--verbose 128 2 0"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("100%", '"100%%"'),
        ("$HOME", '"$$HOME"'),
        ("a\\b", '"a\\\\b"'),
    ],
)
def test_systemd_quoting(arg, quoted):
    assert tcpx.systemd_quote(arg) == quoted


def test_a_topology_file_replaces_the_preset_and_is_mounted_read_only():
    topology = "/etc/gpufabric/gpu_rxq_configuration.textproto"
    result = plan(rxdm_gpu_nic_topology=topology)
    assert result["rxdm_args"][:4] == ["--gpu_nic_preset", "manual", "--gpu_nic_topology", topology]
    assert f"--volume {topology}:{topology}:ro" in result["rxdm_exec_lines"]


def test_the_a3vm_preset_refuses_a_host_whose_nics_are_not_eth1_to_eth4():
    ubuntu = fabric(image="ubuntu")  # Google's Ubuntu images
    errors = tcpx.plan(settings(), ubuntu, DEBIAN12)["errors"]
    assert len(errors) == 1 and "hard-codes the GPU NICs eth1, eth2, eth3, eth4" in errors[0]
    assert "this host names them enp6s0, enp12s0, enp134s0, enp140s0" in errors[0]
    assert "net.ifnames=0" in errors[0]
    manual = tcpx.plan(settings(rxdm_gpu_nic_topology="/etc/topology.textproto"), ubuntu, DEBIAN12)
    assert manual["errors"] == []
    assert manual["firewall_interfaces"] == ["enp6s0", "enp12s0", "enp134s0", "enp140s0"]


def test_a_plan_that_has_not_named_the_hosts_nics_is_refused():
    errors = tcpx.plan(settings(), fabric(image=None), DEBIAN12)["errors"]
    assert len(errors) == 1
    assert errors[0].startswith("the plan of profile 'gcp/a3-highgpu-8g' has not named this host's GPU NICs")


def test_a_host_library_directory_is_mounted_instead_of_staging():
    result = plan(rxdm_driver_lib_dir="/var/lib/nvidia/lib64")
    assert result["nvidia"] == {
        "staged": False,
        "mount_dir": "/var/lib/nvidia/lib64",
        "libraries": ["libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"],
        "link": "/usr/local/nvidia/lib64",
    }
    assert "--volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64:ro" in result["rxdm_exec_lines"]
    same = plan(rxdm_driver_lib_dir="/usr/local/nvidia/lib64")
    assert same["nvidia"]["link"] == ""


# ---------------------------------------------------------------- refusals against the catalog


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"rxdm_uds_path": "/tmp/tcpx"}, "gcp_tcpx_rxdm_uds_path '/tmp/tcpx' is not a directory below /run"),
        ({"rxdm_uds_path": "/run/../etc"}, "is not a directory below /run"),
        (
            {"rxdm_uds_path": "/run/tcpx2"},
            "differs from the profile's NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX '/run/tcpx'",
        ),
        (
            {"plugin_link": "/opt/tcpx/lib64"},
            "gcp_tcpx_plugin_link '/opt/tcpx/lib64' is not in the profile's LD_LIBRARY_PATH",
        ),
        ({"rxdm_driver_libraries": ["cuda"]}, "gcp_tcpx_rxdm_driver_libraries ['cuda'] are not sonames"),
        (
            {"firewall_extra_interfaces": ["eth1; reboot"]},
            "gcp_tcpx_firewall_extra_interfaces ['eth1; reboot'] are not interface names",
        ),
        ({"sysctls": {"net.core.optmem_max": "1; reboot"}}, "gcp_tcpx_sysctls has bad entries"),
        ({"container_run_args": ["--runtime", ""]}, "gcp_tcpx_container_run_args"),
    ],
)
def test_inputs_nccl_could_not_use_are_refused(overrides, expected):
    errors = plan(**overrides)["errors"]
    assert len(errors) == 1 and expected in errors[0], errors


def test_extra_firewall_interfaces_are_added_to_the_gpu_nics_once():
    result = plan(firewall_extra_interfaces=["eth0", "eth1"])
    assert result["errors"] == []
    assert result["firewall_interfaces"] == ["eth1", "eth2", "eth3", "eth4", "eth0"]


def test_profiles_of_other_fabrics_and_unknown_profiles_are_refused():
    mega = plan(profile="gcp/a3-megagpu-8g")["errors"]
    assert mega[0].startswith("profile 'gcp/a3-megagpu-8g' has fabric 'tcpxo'; this role serves only fabric 'tcpx'")
    unknown = plan(profile="gcp/a9-nonexistent")["errors"]
    # The host plan says which profile was asked for and where from (the role's settings hold no profile).
    assert unknown[0].startswith(
        "profile 'gcp/a9-nonexistent' from host var gpufabric_profile is not in the catalog; "
        "`gpufabric catalog list` shows the accepted names"
    )


def test_a3_edge_is_served_like_a3_high():
    high, edge = plan(), plan(profile="gcp/a3-edgegpu-8g")
    assert edge["errors"] == []
    for key in ("devices", "interfaces", "mtu", "firewall_interfaces", "rxdm_exec_lines", "installer_argv"):
        assert edge[key] == high[key], key
    assert edge["mtu"] == 8244 and edge["interfaces"] == ["eth1", "eth2", "eth3", "eth4"]


def test_the_filter_plugin_returns_the_plan():
    module = importlib.import_module("ansible_collections.gpufabric.cluster.plugins.filter.gcp_tcpx")
    gcp_tcpx_plan = module.FilterModule().filters()["gcp_tcpx_plan"]
    assert gcp_tcpx_plan(settings(), plan=fabric(), facts=DEBIAN12) == plan()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"plan": None, "facts": DEBIAN12}, "gcp_tcpx_plan: plan= is NoneType None; accepted: gpufabric_plan"),
        ({"plan": {}, "facts": "Debian"}, "gcp_tcpx_plan: facts= is str 'Debian'; accepted: ansible_facts"),
    ],
)
def test_the_filter_plugin_refuses_inputs_that_are_not_dictionaries(arguments, message):
    module = importlib.import_module("ansible_collections.gpufabric.cluster.plugins.filter.gcp_tcpx")
    gcp_tcpx_plan = module.FilterModule().filters()["gcp_tcpx_plan"]
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        gcp_tcpx_plan(settings(), **arguments)
    with pytest.raises(AnsibleFilterError, match="gcp_tcpx_plan: its input is list"):
        gcp_tcpx_plan([], plan=fabric(), facts=DEBIAN12)


# ---------------------------------------------------------------- templates, rendered for docker


def render(name: str, result: dict, **variables) -> str:
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(ROLE / "templates"), keep_trailing_newline=True)
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
    plan = {"profile": "gcp/a3-highgpu-8g"}
    context = {**DEFAULTS, **role_vars, "gpufabric_plan": plan, "gcp_tcpx__plan": result, **variables}
    return environment.get_template(name).render(context)


def test_the_docker_unit_requires_the_daemon_and_runs_docker():
    unit = render("gpufabric-tcpx-rxdm.service.j2", plan(container_runtime="docker"))
    assert "\nRequires=docker.service\nAfter=docker.service\n" in unit
    assert (
        "\nExecStart=/usr/bin/docker run --rm --name gpufabric-tcpx-rxdm --pull=missing \\\n    --privileged \\\n"
        in unit
    )
    assert "\nExecStartPre=-/usr/bin/docker rm -f gpufabric-tcpx-rxdm\n" in unit
    assert '\n    --setup_param "--verbose 128 2 0"\nExecStop=/usr/bin/docker stop -t 30 gpufabric-tcpx-rxdm\n' in unit


def test_the_podman_unit_has_no_daemon_and_is_ordered_after_the_firewall_and_driver():
    unit = render("gpufabric-tcpx-rxdm.service.j2", plan())
    assert "Requires=" not in unit
    assert (
        "\nAfter=network-online.target systemd-modules-load.service nvidia-persistenced.service "
        "nvidia-fabricmanager.service gpufabric-tcpx-firewall.service\n"
    ) in unit
    assert "\nRuntimeDirectory=tcpx gpufabric-tcpx\n" in unit
    without_firewall = render("gpufabric-tcpx-rxdm.service.j2", plan(), gcp_tcpx_firewall=False)
    assert "gpufabric-tcpx-firewall.service" not in without_firewall


def test_the_firewall_script_lists_the_profiles_gpu_nics():
    script = render("tcpx-firewall.sh.j2", plan())
    assert '\ninterfaces="eth1 eth2 eth3 eth4"\n' in script
    assert "\niptables=/usr/sbin/iptables\n" in script
    assert '-C INPUT -i "$nic" -p tcp -m comment --comment "$tag" -j ACCEPT' in script
    assert '-I INPUT 1 -i "$nic" -p tcp -m comment --comment "$tag" -j ACCEPT' in script


def test_the_prepare_script_checks_every_device_and_requires_libcuda():
    script = render("tcpx-rxdm-prepare.sh.j2", plan())
    assert "for node in /dev/nvidia0 /dev/nvidia1" in script and "/dev/nvidiactl /dev/nvidia-uvm; do" in script
    assert "\nrequired=libcuda.so.1\n" in script
    assert "\nstage=/run/gpufabric-tcpx/nvidia/lib64\n" in script
    host_dir = render("tcpx-rxdm-prepare.sh.j2", plan(rxdm_driver_lib_dir="/var/lib/nvidia/lib64"))
    assert "ldconfig" not in host_dir and "/var/lib/nvidia/lib64/libcuda.so.1" in host_dir
