# SPDX-License-Identifier: Apache-2.0
"""nccl_env's plan (plugins/module_utils/nccl_env.py): which file each variable of a host's environment goes to,
and the process limits per fabric, for the catalog's real profiles."""

from __future__ import annotations

import pytest

from gpufabric.collection import module_utils, plugin_utils

nccl_env = module_utils("nccl_env")
catalog = plugin_utils("fabric_catalog").load_catalog()
fabric_plan = plugin_utils("fabric_plan")
PATHS = ["LD_LIBRARY_PATH", "PATH"]


def host_plan(profile: str, tier: str = "best") -> dict:
    return fabric_plan.plan_host({"gpufabric_profile": profile}, catalog, tier=tier)


def test_efa_splits_nccl_keys_library_directories_and_libfabric_keys() -> None:
    host = host_plan("aws/p5.48xlarge")
    planned = nccl_env.split(host["env"], {}, host["fabric"], PATHS)
    assert planned["error"] == ""
    assert planned["library_dirs"] == ["/opt/amazon/ofi-nccl/lib", "/opt/amazon/efa/lib", "/opt/amazon/openmpi/lib"]
    # libfabric reads FI_PROVIDER itself (MPI_Init starts it before NCCL): the process environment, not nccl.conf.
    assert planned["process_env"] == {"FI_PROVIDER": "efa"}
    assert "FI_PROVIDER" not in planned["nccl_conf"]
    assert planned["nccl_conf"] == {key: value for key, value in host["env"].items() if key.startswith("NCCL_")}
    assert planned["container_env"] == {**planned["nccl_conf"], "FI_PROVIDER": "efa"}
    assert "LD_LIBRARY_PATH" not in planned["container_env"]
    assert planned["shell_env"] == {key: value for key, value in host["env"].items() if not key.startswith("NCCL_")}


def test_every_profile_puts_each_variable_somewhere_and_nccl_keys_only_in_nccl_conf() -> None:
    for name in catalog.names():
        for tier in ("best", "standard"):
            host = host_plan(name, tier)
            planned = nccl_env.split(host["env"], {}, host["fabric"], PATHS)
            assert planned["error"] == "", name
            placed = {**planned["nccl_conf"], **planned["shell_env"]}
            assert placed == host["env"], name
            assert all(key.startswith("NCCL_") for key in planned["nccl_conf"]), name
            assert not any(key.startswith("NCCL_") for key in planned["process_env"]), name


def test_site_overrides_win_and_null_drops_a_variable() -> None:
    planned = nccl_env.split(
        {"NCCL_DEBUG": "WARN", "UCX_NET_DEVICES": "mlx5_0:1", "LD_LIBRARY_PATH": "/a:/b:/a"},
        {"NCCL_DEBUG": "INFO", "UCX_NET_DEVICES": None, "PATH": "/opt/bin", "NCCL_IB_QPS_PER_CONNECTION": 4},
        "infiniband",
        PATHS,
    )
    assert planned["nccl_conf"] == {"NCCL_DEBUG": "INFO", "NCCL_IB_QPS_PER_CONNECTION": "4"}
    assert planned["library_dirs"] == ["/a", "/b"]
    # PATH cannot be prepended in /etc/environment or a container: login shells only.
    assert planned["process_env"] == {}
    assert planned["shell_env"] == {"LD_LIBRARY_PATH": "/a:/b:/a", "PATH": "/opt/bin"}


def test_a_relative_library_directory_is_refused_naming_it() -> None:
    planned = nccl_env.split({"LD_LIBRARY_PATH": "/opt/lib:lib64"}, {}, "efa", PATHS)
    assert planned["error"] == (
        "LD_LIBRARY_PATH '/opt/lib:lib64' (host plan and nccl_env_extra) names lib64: "
        "the dynamic loader's configuration takes absolute directories only"
    )


@pytest.mark.parametrize("fabric", ["infiniband", "roce", "gpudirect_rdma", "efa", "tcpxo"])
def test_every_rdma_fabric_gets_unlimited_memlock_and_raised_nofile_and_stack(fabric: str) -> None:
    assert nccl_env.limits(fabric) == [
        {"item": "memlock", "value": "unlimited", "systemd": "infinity"},
        {"item": "nofile", "value": "1048576", "systemd": "1048576"},
        {"item": "stack", "value": "65536", "systemd": "67108864"},
    ]


@pytest.mark.parametrize("fabric", ["tcpx", ""])
def test_a_fabric_that_pins_no_memory_gets_no_limits(fabric: str) -> None:
    assert nccl_env.limits(fabric) == []


def test_every_catalog_fabric_is_decided() -> None:
    """A new fabric in the catalog must be placed on one side: RDMA limits or none."""
    fabrics = {host_plan(name)["fabric"] for name in catalog.names()}
    assert fabrics <= set(nccl_env.FABRIC_LIMITS) | {"tcpx"}, fabrics


def test_the_role_plans_from_its_settings_and_the_host_plan() -> None:
    """plan(): the role's settings and gpufabric_plan reach split()."""
    host = host_plan("aws/p5.48xlarge")
    settings = {"extra": {"NCCL_DEBUG": "INFO"}, "path_variables": PATHS}
    assert nccl_env.plan(settings, host, {}) == nccl_env.split(host["env"], {"NCCL_DEBUG": "INFO"}, "efa", PATHS)
