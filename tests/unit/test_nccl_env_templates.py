# SPDX-License-Identifier: Apache-2.0
"""The nccl_env templates hold any value the catalog accepts exactly: sh reads back what was written, NCCL too.

The templates are rendered with Jinja2 and Ansible's own `quote` filter (all they use besides Jinja's
builtins); the molecule scenario renders them through Ansible on a real host.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import jinja2
import pytest
from ansible.plugins.filter.core import quote

from gpufabric.collection import module_utils

TEMPLATES = Path(__file__).resolve().parents[2] / "roles" / "nccl_env" / "templates"
PLAN = {"profile": "gcp/a3-megagpu-8g", "tier": "best", "fabric": "tcpxo"}
# Values a catalog may hold (one printable line): shell metacharacters, quotes, '=' and '#' included.
AWKWARD = [
    "plain",
    "two words",
    "$(touch pwned)",
    "`touch pwned`",
    "it's",
    'say "hi"',
    "a;b&c|d>e<f",
    "=mlx5_0:1,mlx5_1:1",
    "# not a comment",
    "${HOME}",
    "",
    "naïve — ünïcode",
]


def render(name: str, **variables: object) -> str:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        keep_trailing_newline=True,
        trim_blocks=True,  # as Ansible's template
    )
    environment.filters["quote"] = quote
    return environment.get_template(name).render(gpufabric_plan=PLAN, **variables)


def nccl_reads(text: str) -> dict[str, str]:
    """NCCL's setEnvFile (src/misc/param.cc): each line split at its first '=', the rest verbatim."""
    values = {}
    for line in text.split("\n"):
        name, sep, value = line.partition("=")
        if sep:
            values[name] = value
    return values


def test_nccl_conf_holds_each_value_verbatim() -> None:
    env = {f"NCCL_V{index}": value for index, value in enumerate(AWKWARD)}
    assert nccl_reads(render("nccl.conf.j2", nccl_env__plan={"nccl_conf": env})) == env


@pytest.mark.parametrize("path_variables", [[], ["V0", "V2", "V10"]], ids=["plain", "path-variables"])
def test_the_login_script_sets_each_value_exactly(tmp_path: Path, path_variables: list[str]) -> None:
    env = {f"V{index}": value for index, value in enumerate(AWKWARD)}
    script = tmp_path / "env.sh"
    script.write_text(
        render(
            "fabric-env.sh.j2",
            nccl_env__plan={"shell_env": env},
            nccl_env_conf_path="/etc/nccl.conf",
            nccl_env_path_variables=path_variables,
        ),
        encoding="utf-8",
    )
    reader = "; ".join(f'printf "%s\\0" "${name}"' for name in env)
    done = subprocess.run(
        ["sh", "-c", f". {script}; {reader}"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=True,
    )
    assert done.stdout.decode("utf-8").split("\0")[:-1] == list(env.values())
    assert not (tmp_path / "pwned").exists()


def docker_env_file_reads(text: str) -> dict[str, str]:
    """docker/podman --env-file: '#' lines are comments, each other line is NAME=VALUE taken verbatim."""
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_the_container_env_file_holds_each_value_verbatim() -> None:
    env = {f"V{index}": value for index, value in enumerate(AWKWARD) if not value.startswith("#")}
    assert docker_env_file_reads(render("container.env.j2", nccl_env__plan={"container_env": env})) == env


def test_the_loader_configuration_lists_one_directory_a_line() -> None:
    text = render("ld.so.conf.j2", nccl_env__plan={"library_dirs": ["/usr/local/tcpxo/lib64", "/opt/x"]})
    assert [line for line in text.splitlines() if not line.startswith("#")] == ["/usr/local/tcpxo/lib64", "/opt/x"]


def test_the_limits_files_give_every_user_and_root_the_fabric_limits() -> None:
    limits = module_utils("nccl_env").limits("efa")
    variables = {"nccl_env__limits": limits, "nccl_env_systemd_limits_path": "/etc/systemd/system.conf.d/x.conf"}
    lines = [line.split() for line in render("limits.conf.j2", **variables).splitlines() if not line.startswith("#")]
    assert lines == [
        [domain, kind, item, value]
        for item, value in (("memlock", "unlimited"), ("nofile", "1048576"), ("stack", "65536"))
        for domain in ("*", "root")
        for kind in ("soft", "hard")
    ]
    dropin = [line for line in render("system-limits.conf.j2", **variables).splitlines() if not line.startswith("#")]
    assert dropin == [
        "[Manager]",
        "DefaultLimitMEMLOCK=infinity",
        "DefaultLimitNOFILE=1048576",
        "DefaultLimitSTACK=67108864",
    ]


def nccl_first(text: str) -> dict[str, str]:
    """What NCCL takes from a file with a variable twice: the first value (setEnvFile's setenv(..., 0))."""
    values: dict[str, str] = {}
    for line in text.split("\n"):
        name, sep, value = line.partition("=")
        if sep and not name.startswith("#"):
            values.setdefault(name, value)
    return values


def test_the_merge_script_puts_gpufabrics_block_first_once_and_keeps_the_images_lines(tmp_path: Path) -> None:
    """Where an image's unit owns /etc/nccl.conf (Azure's sku-customizations), the drop-in's script puts gpufabric's
    block first and the unit's lines after it; run again, it changes nothing; a block from an earlier profile goes."""
    ours = tmp_path / "gpufabric-nccl.conf"
    conf = tmp_path / "nccl.conf"
    script = tmp_path / "merge.sh"
    paths = {
        "nccl_env__conf_owner": "sku-customizations.service",
        "nccl_env_conf_path": str(conf),
        "nccl_env_conf_cooperate_path": str(ours),
    }
    ours.write_text(
        render("nccl.conf.j2", nccl_env__plan={"nccl_conf": {"NCCL_IB_PCI_RELAXED_ORDERING": "0"}}, **paths)
    )
    script.write_text(render("nccl-conf-merge.sh.j2", **paths))
    image = "NCCL_IB_PCI_RELAXED_ORDERING=1\nNCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml\n"
    earlier = render("nccl.conf.j2", nccl_env__plan={"nccl_conf": {"NCCL_OLD": "1"}}, **paths)
    for before in (image, earlier + image):
        conf.write_text(before)
        subprocess.run(["sh", str(script)], check=True, env={"PATH": "/usr/bin:/bin"})
        merged = conf.read_text()
        assert merged == ours.read_text() + image
        assert nccl_first(merged) == {
            "NCCL_IB_PCI_RELAXED_ORDERING": "0",
            "NCCL_TOPO_FILE": "/opt/microsoft/ndv5/topo.xml",
        }
        stamp = conf.stat().st_mtime_ns
        subprocess.run(["sh", str(script)], check=True, env={"PATH": "/usr/bin:/bin"})
        assert conf.read_text() == merged and conf.stat().st_mtime_ns == stamp
    conf.unlink()
    subprocess.run(["sh", str(script)], check=True, env={"PATH": "/usr/bin:/bin"})
    assert conf.read_text() == ours.read_text()
