# SPDX-License-Identifier: Apache-2.0
"""gcp_tcpxo's defaults are the releases and digests its README cites, and its templates render what Google runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import jinja2
import yaml

from gpufabric.collection import module_utils, plugin_utils
from tests.conftest import image_nic_names

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "gcp_tcpxo"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
README = (ROLE / "README.md").read_text(encoding="utf-8")
tcpxo = module_utils("gcp_tcpxo")
UBUNTU = {"distribution": "Ubuntu", "distribution_major_version": "24", "architecture": "x86_64", "kernel": "6.8.0-1"}

# Google's release of Jan 9, 2026 (container-engine-accelerators gpudirect-tcpxo/README.md) and the public
# files that pin those tags by digest (NVIDIA/aicr).
RXDM = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev"
PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev"
RXDM_DIGEST = "sha256:8d9e10fd589a34ab8a0aa64f7e70ad075c8f1c69bea176350f8d211367697e3d"
PLUGIN_DIGEST = "sha256:4c9f0de3f39455a2ea35e844e0fc92564ca5629f6b03250fde40e8160719dae4"
# Google's udev rule (cluster-toolkit examples/machine-learning/a3-megagpu-8g/slurm-a3mega-image.yaml).
GOOGLE_RULE = """\
ACTION=="add", SUBSYSTEM=="pci", ATTR{vendor}=="0x1ae0", ATTR{device}=="0x0084", TAG+="systemd", \\
    RUN+="/usr/bin/mkdir --mode=0755 -p /dev/aperture_devices", \\
    RUN+="/usr/bin/systemd-mount --type=none --options=bind --collect %S/%p /dev/aperture_devices/%k", \\
    RUN+="/usr/bin/bash -c '/usr/bin/chmod 0666 /dev/aperture_devices/%k/resource*'"
"""


def test_images_are_googles_jan_2026_release_pinned_by_digest():
    assert DEFAULTS["gcp_tcpxo_registry"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo"
    assert f"{DEFAULTS['gcp_tcpxo_registry']}/{DEFAULTS['gcp_tcpxo_rxdm_image']}" == RXDM
    assert f"{DEFAULTS['gcp_tcpxo_registry']}/{DEFAULTS['gcp_tcpxo_plugin_image']}" == PLUGIN
    assert (DEFAULTS["gcp_tcpxo_rxdm_tag"], DEFAULTS["gcp_tcpxo_rxdm_digest"]) == ("v1.0.21", RXDM_DIGEST)
    assert (DEFAULTS["gcp_tcpxo_plugin_tag"], DEFAULTS["gcp_tcpxo_plugin_digest"]) == ("v1.0.15", PLUGIN_DIGEST)
    assert tcpxo.RELEASES[DEFAULTS["gcp_tcpxo_plugin_tag"]] == DEFAULTS["gcp_tcpxo_rxdm_tag"]
    assert DEFAULTS["gcp_tcpxo_rxdm_args"] == ["--num_hops=2", "--num_nics=8"]
    assert DEFAULTS["gcp_tcpxo_plugin_install_args"] == ["install", "--install-nccl"]
    for text in (f"{RXDM}:v1.0.21@{RXDM_DIGEST}", f"{PLUGIN}:v1.0.15@{PLUGIN_DIGEST}"):
        assert text in README


def test_repositories_are_googles_lines_and_nothing_is_invented():
    assert DEFAULTS["gcp_tcpxo_repo_url"] == "ar+https://us-apt.pkg.dev/projects/gce-ai-infra"
    assert DEFAULTS["gcp_tcpxo_repo_suite"] == "gpudirect-tcpxo-apt"
    assert DEFAULTS["gcp_tcpxo_ar_transport_repo_url"] == "https://packages.cloud.google.com/apt"
    assert DEFAULTS["gcp_tcpxo_ar_transport_repo_suite"] == "apt-transport-artifact-registry-stable"
    assert DEFAULTS["gcp_tcpxo_ar_transport_key_url"] == "https://packages.cloud.google.com/apt/doc/apt-key.gpg"
    assert DEFAULTS["gcp_tcpxo_repo_key_url"] == "https://us-apt.pkg.dev/doc/repo-signing-key.gpg"
    # Google's instructions dearmor both keys (cluster-toolkit saves the first as cloud.google.asc): armored.
    assert DEFAULTS["gcp_tcpxo_ar_transport_keyring"].endswith(".asc")
    assert DEFAULTS["gcp_tcpxo_repo_keyring"].endswith(".asc")
    # Both keys are pinned by Artifact Registry's fingerprint (sources in defaults and README); a file checksum
    # is optional on top, and no primary source gives one.
    assert DEFAULTS["gcp_tcpxo_ar_transport_key_fingerprints"] == ["35BA A0B3 3E9E B396 F59C A838 C0BA 5CE6 DC63 15A3"]
    assert DEFAULTS["gcp_tcpxo_repo_key_fingerprints"] == DEFAULTS["gcp_tcpxo_ar_transport_key_fingerprints"]
    assert DEFAULTS["gcp_tcpxo_ar_transport_key_checksum"] == ""
    assert DEFAULTS["gcp_tcpxo_repo_key_checksum"] == ""
    assert DEFAULTS["gcp_tcpxo_import_helper_version"] == ""
    assert DEFAULTS["gcp_tcpxo_ar_transport_version"] == ""
    for text in ("trusted=yes", "gcp_tcpxo_repo_key_checksum", "gcp_tcpxo_import_helper_version", "UNVERIFIED"):
        assert text in README


def mega_plan() -> dict:
    """The plan the plan role hands gcp_tcpxo for a3-megagpu-8g tier best, the NICs named as Google's Ubuntu images
    name them (tests/fixtures/nic_names.yml): the catalog names none, the plan role reads them on the host."""
    names = image_nic_names("gcp/a3-megagpu-8g", "ubuntu")
    catalog = plugin_utils("fabric_catalog").load_catalog()
    return plugin_utils("fabric_plan").plan_host(
        {"gpufabric_profile": "gcp/a3-megagpu-8g", "gpufabric_nic_names": names}, catalog, tier="best"
    )


def test_defaults_are_refused_only_for_the_unpublished_values():
    plan = mega_plan()
    facts = {
        "distribution": "Ubuntu",
        "distribution_major_version": "22",
        "architecture": "x86_64",
        "kernel": "6.8.0-1",
    }
    settings = {key.removeprefix("gcp_tcpxo_"): value for key, value in DEFAULTS.items()}
    errors = tcpxo.plan(settings, plan, facts)["errors"]
    assert [error.split(" ", 1)[0] for error in errors] == ["gcp_tcpxo_import_helper_version"]


def _render(name: str, **variables: object) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROLE / "templates"), trim_blocks=True)
    env.filters["basename"] = os.path.basename
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
    return env.get_template(name).render({**DEFAULTS, **role_vars, **variables})


def test_udev_rule_is_googles():
    rendered = _render("00-a3-megagpu.rules.j2")
    rule = "\n".join(line for line in rendered.splitlines() if not line.startswith("#")) + "\n"
    assert rule == GOOGLE_RULE


def test_rxdm_unit_on_ubuntu_runs_the_digest_with_every_gpu():
    facts = {
        "distribution": "Ubuntu",
        "distribution_major_version": "24",
        "architecture": "x86_64",
        "kernel": "6.8.0-1",
    }
    settings = {key.removeprefix("gcp_tcpxo_"): value for key, value in DEFAULTS.items()}
    settings.update(
        import_helper_version="1.0.0-1",
        repo_key_checksum="sha256:" + "0" * 64,
        ar_transport_key_checksum="sha256:" + "0" * 64,
    )
    plan = tcpxo.plan(settings, mega_plan(), facts)
    assert plan["errors"] == []
    unit = _render("gpufabric-tcpxo-rxdm.service.j2", gcp_tcpxo__plan=plan)
    exec_start = re.search(r"^ExecStart=(.*?[^\\])$", unit, re.MULTILINE | re.DOTALL).group(1)
    words = exec_start.replace("\\\n", " ").split()
    assert words[:2] == ["/usr/bin/podman", "run"]
    assert words[-3:] == [f"{RXDM}@{RXDM_DIGEST}", "--num_hops=2", "--num_nics=8"]
    assert [w for w in words if w.startswith("--device=")] == [
        *(f"--device=/dev/nvidia{i}" for i in range(8)),
        "--device=/dev/nvidiactl",
        "--device=/dev/nvidia-uvm",
        "--device=/dev/dmabuf_import_helper",
    ]
    assert "--volume=/usr/lib/x86_64-linux-gnu/libcuda.so.1:/usr/local/nvidia/lib64/libcuda.so.1:ro" in words
    assert {"--network=host", "--cap-add=NET_ADMIN", "--cap-add=NET_BIND_SERVICE"} <= set(words)
    assert "--env=HEALTH_CHECK_LOG_FILE=/run/tcpxo/health-check" in words
    assert "--privileged" not in words
