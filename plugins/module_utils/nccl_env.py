# SPDX-License-Identifier: Apache-2.0
"""Where each variable of a host's fabric environment goes, and the process limits each fabric needs.

Pure Python (stdlib only); the nccl_env role calls plan() through the ``nccl_env_plan`` filter
(plugins/filter/nccl_env.py: ``nccl_env__settings | nccl_env_plan(plan=gpufabric_plan, facts=ansible_facts)``)
and writes each part to its file. The environment is the host plan's
(gpufabric_plan.env: the catalog tier's, with what the fabric roles contribute, e.g. the plugin directory in
LD_LIBRARY_PATH) merged with the site's nccl_env_extra: this module is the one place that splits it.

Why each destination (sources in roles/nccl_env/README.md):

- NCCL_* -> /etc/nccl.conf. NCCL reads ``$NCCL_CONF_FILE`` (else ``~/.nccl.conf``) and then /etc/nccl.conf into
  its own process environment with setenv(name, value, 0) the first time it reads a variable, so a value the
  process already has wins, then the user's file, then /etc/nccl.conf (NVIDIA/nccl src/misc/param.cc,
  initEnvFunc/setEnvFile; docs "Environment Variables", NCCL_CONF_FILE since 2.23). A net plugin NCCL loads
  afterwards (TCPX/TCPXO/gIB, aws-ofi-nccl) reads NCCL_* keys from that same environment.
- LD_LIBRARY_PATH -> /etc/ld.so.conf.d/. The dynamic loader reads LD_LIBRARY_PATH once, at process start;
  NCCL's setenv comes too late for dlopen of the plugin, so the directories go to the loader's cache (ldconfig).
- Any other variable (FI_*, UCX_*, ...) -> the process environment: libfabric and UCX read them themselves,
  and MPI_Init (before NCCL starts) already initialises them, so /etc/nccl.conf is too late. They go to
  /etc/environment, which pam_env reads for every PAM session (ssh with or without a command, su, sudo): the
  non-login ssh that mpirun starts its daemons with gets them. Other path variables (PATH) stay in the
  interactive shell script only: /etc/environment cannot prepend.
- Containers see none of the host's files: one env file (``KEY=VALUE`` lines, no quoting) that docker/podman
  ``--env-file`` and enroot's environ.d both read holds NCCL_* and the other variables; never library paths
  (a container has its own; the plugin directory must be mounted into it).
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# fabric_nics' placeholders ({nics.gpu}, ...): the plan role fills them; one left over is never written.
NIC_PLACEHOLDER = re.compile(r"\{\s*nics[^{}]*\}")
LIBRARY_PATH = "LD_LIBRARY_PATH"

# One place for the limits each fabric needs; values in limits.conf(5) units (stack in KiB).
# memlock unlimited: RDMA registers (pins) its buffers, and the 8 MiB default makes ibv_reg_mr fail with
# "Cannot allocate memory" (NVIDIA/nccl-tests#206; NCCL troubleshooting, InfiniBand). nofile 1048576 and a
# 64 MiB stack: Google's images for its GPU fabrics (cluster-toolkit A4 image: memlock unlimited, nofile raised;
# Google's HPC image limits.d sets nofile 1048576; Google's TCPX/TCPXO workload containers run with
# --ulimit stack=67108864). 1048576 is also the kernel's default fs.nr_open, the most a hard nofile can be.
RDMA_LIMITS: dict[str, int | str] = {"memlock": "unlimited", "nofile": 1048576, "stack": 65536}
# Fabrics that pin memory: InfiniBand, RoCE, GCP GPUDirect-RDMA (gIB), AWS EFA (libfabric efa) and
# GPUDirect-TCPXO (Google's images set memlock unlimited). tcpx and a plain-TCP host get none.
FABRIC_LIMITS: dict[str, dict[str, int | str]] = {
    fabric: RDMA_LIMITS for fabric in ("infiniband", "roce", "gpudirect_rdma", "efa", "tcpxo")
}


class Limit(TypedDict):
    item: str
    value: str  # limits.conf(5) value
    systemd: str  # system.conf(5) DefaultLimit<ITEM>= value


class EnvPlan(TypedDict):
    error: str
    nccl_conf: dict[str, str]
    library_dirs: list[str]
    process_env: dict[str, str]
    container_env: dict[str, str]
    shell_env: dict[str, str]
    limits: list[Limit]


def _systemd_value(item: str, value: int | str) -> str:
    if value == "unlimited":
        return "infinity"
    # limits.conf counts stack (and memlock) in KiB; systemd takes bytes.
    return str(int(value) * 1024) if item in ("stack", "memlock") else str(value)


def limits(fabric: str) -> list[Limit]:
    """The limits the fabric needs, in the order limits.conf lists them; none for a fabric without RDMA."""
    return [
        {"item": item, "value": str(value), "systemd": _systemd_value(item, value)}
        for item, value in sorted(FABRIC_LIMITS.get(fabric, {}).items())
    ]


def plan(settings: dict[str, Any], host_plan: dict[str, Any] | None, facts: dict[str, Any] | None) -> EnvPlan:
    """The role's plan from its settings (``extra``: nccl_env_extra, ``path_variables``) and the host's plan
    (its ``env`` and ``fabric``); nothing of the facts is needed."""
    host = host_plan or {}
    result = split(
        host.get("env") or {},
        settings.get("extra") or {},
        str(host.get("fabric") or ""),
        list(settings.get("path_variables") or []),
    )
    merged = {**(host.get("env") or {}), **(settings.get("extra") or {})}
    unresolved = [key for key, value in merged.items() if value is not None and NIC_PLACEHOLDER.search(str(value))]
    if unresolved and not result["error"]:
        result["error"] = (
            f"{', '.join(unresolved)} of profile {host.get('profile')} name NICs by placeholder "
            f"({', '.join(str(merged[key]) for key in unresolved)[:300]}) and the plan has not named this host's NICs "
            "(the plan role reads them with fabric_facts; gpufabric_nic_names gives them for an image bake)"
        )
    return result


def split(env: dict[str, Any], extra: dict[str, Any], fabric: str, path_variables: list[str]) -> EnvPlan:
    """Split the host plan's environment, with the site's overrides (null drops a variable), by destination."""
    result: EnvPlan = {
        "error": "",
        "nccl_conf": {},
        "library_dirs": [],
        "process_env": {},
        "container_env": {},
        "shell_env": {},
        "limits": limits(fabric),
    }
    merged = {**(env or {}), **(extra or {})}
    values = {str(key): str(value) for key, value in merged.items() if value is not None}
    for key in sorted(values):
        value = values[key]
        if key.startswith("NCCL_"):
            result["nccl_conf"][key] = value
            result["container_env"][key] = value
            continue
        result["shell_env"][key] = value
        if key == LIBRARY_PATH:
            dirs = [part for part in value.split(":") if part]
            relative = [part for part in dirs if not part.startswith("/")]
            if relative:
                result["error"] = (
                    f"LD_LIBRARY_PATH '{value}' (host plan and nccl_env_extra) names {', '.join(relative)}: "
                    "the dynamic loader's configuration takes absolute directories only"
                )
                return result
            result["library_dirs"] = list(dict.fromkeys(dirs))
        elif key not in (path_variables or []):
            result["process_env"][key] = value
            result["container_env"][key] = value
    return result
