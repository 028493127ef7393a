# SPDX-License-Identifier: Apache-2.0
"""What the nccl_tests role downloads and builds, and the mpirun command lines it runs.

Pure Python (stdlib only) so that what molecule cannot reach is unit-tested: the pinned release and the
checksums published for it, the ``make`` arguments of an MPI build, the Open MPI prefix per distribution,
message sizes, the algorithm and the largest size a catalog threshold needs, the run's own variables forwarded
to every rank (never the fabric's environment: the ranks read it from the host's files, as a job does), the
hostfile and the ``timeout … mpirun … <collective>_perf`` argument vector. The role calls it
through the filters of plugins/filter/nccl_tests.py: ``nccl_tests_plan`` (plan(): the install),
``nccl_tests_run_plan`` (run(): the runs) and ``nccl_tests_verdict`` (verdict_line()). Nothing here reads the
catalog: what the runs need from it (the tier's bandwidth thresholds, the GPU count) is in the host's plan,
gpufabric_plan.

Facts and their sources (see roles/nccl_tests/README.md):

- Build: ``make MPI=1 MPI_HOME=<dir> CUDA_HOME=<dir> NCCL_HOME=<dir>`` puts ``<collective>_perf`` in
  ``build/`` (NVIDIA/nccl-tests README; spack's nccl_tests package builds and installs ``./build`` the same way).
- Flags -b -e -f -g -c -n -w -T, sizes with K/M/G suffixes in powers of 1024, -T since v2.13.9:
  ../shared/reference/nccl-tests.md sections 1 and 6 (nccl-tests ``common.cu``).
- Published SHA256 of ``https://github.com/NVIDIA/nccl-tests/archive/v<version>.tar.gz``: spack's package
  recipe (spack/spack-packages, repos/spack_repo/builtin/packages/nccl_tests/package.py).
- Debian/Ubuntu Open MPI prefix ``/usr/lib/<multiarch>/openmpi`` (include/, lib/): the libopenmpi-dev package.
- CUDA compiler: NVIDIA's CUDA repositories ship it as ``cuda-nvcc-<X>-<Y>`` (``/usr/local/cuda-X.Y/bin/nvcc``) with
  the runtime headers and libcudart in ``cuda-cudart-dev-<X>-<Y>``, the pair public build scripts install to build
  against a CUDA release without the whole toolkit; NVIDIA's NCCL packages name the CUDA release they were built
  for (``2.28.7-1+cuda12.9``). Cloud accelerator images ship no nvcc (cluster-toolkit installs cuda-toolkit to build
  nccl-tests; ../shared/reference/real-images.md), AWS's DLAMIs a toolkit under /usr/local/cuda-X.Y.
- Two-node all_reduce may pick tree algorithms and read above the wire; NCCL_ALGO=Ring measures the network
  (nccl-tests issues #196, #290; nccl-tests.md section 5).
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import supply_chain

# Test programs of nccl-tests (build/<name>_perf), nccl-tests.md section 5.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
)
INSTALL_METHODS = ("source", "path")
ALGOS = ("auto", "default", "ring")
FAIL_ON = ("fail", "never")

DEFAULT_VERSION = "2.17.6"
DEFAULT_BASE_URL = "https://github.com/NVIDIA/nccl-tests/archive"
CHECKSUM_SOURCE = "spack/spack-packages repos/spack_repo/builtin/packages/nccl_tests/package.py"
# SHA256 of <DEFAULT_BASE_URL>/v<version>.tar.gz as spack's recipe pins them (CHECKSUM_SOURCE).
PUBLISHED_SHA256 = {
    "2.13.6": "52b472a58a4918d3221a9b8c4bd9335382643d7e241983918b64692d685cc3d1",
    "2.16.3": "ec373552e216c0df03414718bd588585a1719971b20a5939a2f9488c8ce767eb",
    "2.17.6": "38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0",
}
# -T/--timeout exists from this release on (nccl-tests.md section 1).
TIMEOUT_FLAG_SINCE = (2, 13, 9)

MULTIARCH = {
    "x86_64": "x86_64-linux-gnu",
    "amd64": "x86_64-linux-gnu",
    "aarch64": "aarch64-linux-gnu",
    "arm64": "aarch64-linux-gnu",
}
# make variables the role sets itself; nccl_tests_make_args may not repeat them.
MANAGED_MAKE_VARIABLES = ("MPI", "MPI_HOME", "CUDA_HOME", "NCCL_HOME")
# Used when no catalog threshold names a size for the collective (nccl-tests.md section 8: judge >= 1-8 GB).
FALLBACK_MAX_BYTES = 8 * 1024**3
KILL_AFTER_S = 30

VERSION_RE = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGkmg]?)[Bb]?\s*$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Where the role looks for nvcc when nccl_tests_cuda_home is empty, in this order: the /usr/local/cuda link that the
# toolkit packages and NVIDIA's installers keep, a versioned /usr/local/cuda-X.Y (newest first), and /usr (the
# distribution's nvidia-cuda-toolkit, /usr/bin/nvcc).
CUDA_LINK = "/usr/local/cuda"
CUDA_VERSIONED_RE = re.compile(r"^/usr/local/cuda-(\d+)\.(\d+)$")
CUDA_DISTRIBUTION_HOME = "/usr"
# The CUDA release an NVIDIA NCCL package was built for: 2.28.7-1+cuda12.9 -> (12, 9).
NCCL_CUDA_RE = re.compile(r"\+cuda(\d+)\.(\d+)")
SIZES = "accepted: bytes, or a number with K, M or G (powers of 1024)"
UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(value: Any) -> int:
    """'16G' -> 17179869184 (nccl-tests' parsesize: K, M, G are powers of 1024); ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value < 1:
            raise ValueError(value)
        return value
    match = SIZE_RE.match(str(value))
    if not match:
        raise ValueError(value)
    size = int(match.group(1)) * UNITS[match.group(2).upper()]
    if size < 1:
        raise ValueError(value)
    return size


def version_tuple(version: str) -> tuple[int, ...]:
    """'2.17.6' -> (2, 17, 6); the pre-release part of a test double ('0.0.0-test') is ignored."""
    return tuple(int(part) for part in str(version).split("-", 1)[0].split("."))


def binary_name(collective: str) -> str:
    return f"{collective}_perf"


def tarball_url(base_url: str, version: str, url: str = "") -> str:
    """The explicit URL, else <base>/v<version>.tar.gz (GitHub's tag archive, the URL spack pins)."""
    return url or f"{base_url.rstrip('/')}/v{version}.tar.gz"


def mpi_home_for(os_family: str, architecture: str) -> str:
    """Open MPI's prefix (include/mpi.h, lib/libmpi.so) from the distribution's packages; '' when unknown."""
    if os_family == "Debian" and architecture in MULTIARCH:
        return f"/usr/lib/{MULTIARCH[architecture]}/openmpi"
    # Elsewhere (RHEL's openmpi-devel splits /usr/include/openmpi-<arch> from /usr/lib64/openmpi, which nccl-tests'
    # MPI_HOME/include cannot express) the operator names a prefix, e.g. HPC-X's ompi directory.
    return ""


def cuda_home_found(nvcc_homes: list[str]) -> str:
    """The prefix whose bin/nvcc the build uses, of those that have one ('' when none does): CUDA_LINK, else the
    newest /usr/local/cuda-X.Y, else the distribution's /usr."""
    homes = {str(home).rstrip("/") or "/" for home in nvcc_homes or []}
    if CUDA_LINK in homes:
        return CUDA_LINK
    versioned = [(tuple(map(int, m.groups())), home) for home in homes if (m := CUDA_VERSIONED_RE.match(home))]
    if versioned:
        return max(versioned)[1]
    return CUDA_DISTRIBUTION_HOME if CUDA_DISTRIBUTION_HOME in homes else ""


def nccl_dev_version(packages: list[dict[str, Any]]) -> str:
    """The version of the installed NCCL development package, from package_facts' entries of libnccl-dev (dpkg:
    '2.28.7-1+cuda12.9') or libnccl-devel (rpm: version '2.28.7', release '1+cuda12.9'); '' when none."""
    for package in packages:
        if isinstance(package, dict) and package.get("version"):
            release = str(package.get("release") or "")
            return f"{package['version']}-{release}" if release else str(package["version"])
    return ""


def cuda_release_of_nccl(nccl_dev_version: str) -> tuple[int, int] | None:
    """(12, 9) for NVIDIA's '2.28.7-1+cuda12.9'; None for a version that names no CUDA release."""
    match = NCCL_CUDA_RE.search(str(nccl_dev_version or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def cuda_compiler_packages(release: tuple[int, int]) -> list[str]:
    """NVIDIA's packages of one CUDA release's compiler and runtime headers: cuda-nvcc-12-9, cuda-cudart-dev-12-9."""
    return [f"cuda-nvcc-{release[0]}-{release[1]}", f"cuda-cudart-dev-{release[0]}-{release[1]}"]


def _cuda_compiler(settings: dict[str, Any], errors: list[str]) -> tuple[str, list[str]]:
    """(cuda_home, packages to install first): the set prefix; else the one the host has; else the compiler of the
    CUDA release the host's NCCL was built for, when nccl_tests_cuda_install allows it."""
    explicit = str(settings.get("cuda_home") or "").rstrip("/")
    if explicit:
        return explicit, []
    if settings.get("nvcc_homes") is None:
        # Not read on a host (`gpufabric plan` without --probe): the role reads it before it plans.
        return "", []
    found = cuda_home_found(list(settings["nvcc_homes"]))
    if found:
        return found, []
    nccl_version = nccl_dev_version(settings.get("nccl_dev") or [])
    release = cuda_release_of_nccl(nccl_version)
    looked = f"{CUDA_LINK}, {CUDA_LINK}-X.Y and {CUDA_DISTRIBUTION_HOME} have no bin/nvcc"
    if release is None:
        errors.append(
            f"no CUDA compiler to build nccl-tests with ({looked}), and NCCL's development package "
            f"({'version ' + nccl_version if nccl_version else 'libnccl-dev / libnccl-devel, not installed'}) names "
            "no CUDA release to match; install NVIDIA's NCCL (the nccl role) and CUDA compiler, set "
            "nccl_tests_cuda_home to a CUDA toolkit prefix, or set nccl_tests_install path"
        )
        return "", []
    packages = cuda_compiler_packages(release)
    if not settings.get("cuda_install", True):
        errors.append(
            f"no CUDA compiler to build nccl-tests with ({looked}); install {' and '.join(packages)} from NVIDIA's "
            f"CUDA repository (the CUDA release of NCCL {nccl_version}), set nccl_tests_cuda_home, or set "
            "nccl_tests_cuda_install true to let the role install them"
        )
        return "", []
    return f"{CUDA_LINK}-{release[0]}.{release[1]}", packages


def make_argv(*, jobs: int, mpi_home: str, cuda_home: str, nccl_home: str, extra: list[str]) -> list[str]:
    """`make -j N MPI=1 MPI_HOME=… CUDA_HOME=… NCCL_HOME=… [extra]`, run in the source directory."""
    return [
        "make",
        "-j",
        str(jobs),
        "MPI=1",
        f"MPI_HOME={mpi_home}",
        f"CUDA_HOME={cuda_home}",
        f"NCCL_HOME={nccl_home}",
        *[str(arg) for arg in extra],
    ]


def _collectives_error(collectives: Any) -> str:
    if not isinstance(collectives, list) or not collectives:
        return f"nccl_tests_collectives {collectives!r} must be a non-empty list; accepted: {', '.join(COLLECTIVES)}"
    unknown = [c for c in collectives if c not in COLLECTIVES]
    if unknown:
        return f"nccl_tests_collectives has {', '.join(map(str, unknown))}; accepted: {', '.join(COLLECTIVES)}"
    if len(set(collectives)) != len(collectives):
        return f"nccl_tests_collectives {collectives!r} names a collective twice"
    return ""


class Prerequisite(TypedDict):
    path: str
    what: str
    variable: str  # the role variable that points elsewhere when the file is missing


class NcclTestsPlan(TypedDict, total=False):
    """The install plan. With errors, only errors, warnings and install; with install path, only those and
    version (None), bin_dir, binaries and timeout_flag (None: the binaries' release is not known)."""

    errors: list[str]  # one message per bad input; the role asserts it is empty before any change
    warnings: list[str]
    install: str  # source or path
    version: str | None
    sha256: str
    url: str  # the tarball's URL
    artifacts: list[supply_chain.Artifact]  # the tarball by its SHA256: what `gpufabric plan` shows as fetched
    published_sha256: str  # what spack pins for this version ('' when it pins none)
    tarball: str
    work_dir: str
    prefix: str
    install_dir: str  # <prefix>/<version>
    current_link: str  # <prefix>/current, pointing at the version
    bin_dir: str  # where the *_perf binaries are
    binaries: list[str]
    build_marker: str  # a binary that stands for the build in `creates:`
    mpi_home: str
    cuda_home: str
    cuda_packages: list[str]  # NVIDIA's compiler packages to install before the build (none when nvcc is there)
    nccl_home: str
    prerequisites: list[Prerequisite]
    make_argv: list[str]
    timeout_flag: bool | None  # whether this release has -T


def plan(
    settings: dict[str, Any], host_plan: dict[str, Any] | None = None, facts: dict[str, Any] | None = None
) -> NcclTestsPlan:
    """The install for one host: the role's settings (its variables without the nccl_tests_ prefix) and the
    host's os_family and architecture (facts). The install reads nothing of the host plan; the runs do (run())."""
    facts = facts or {}
    method = str(settings.get("install", ""))
    collectives = settings.get("collectives")
    errors: list[str] = []
    result: NcclTestsPlan = {"errors": errors, "warnings": [], "install": method}
    if method not in INSTALL_METHODS:
        errors.append(f"nccl_tests_install '{method}' is not an install method; accepted: source, path")
    error = _collectives_error(collectives)
    if error:
        errors.append(error)
    if method == "path":
        bin_dir = str(settings.get("bin_dir") or "").rstrip("/")
        if not bin_dir.startswith("/"):
            errors.append(
                f"nccl_tests_bin_dir '{bin_dir}' must be the absolute directory holding the *_perf binaries "
                "when nccl_tests_install is path"
            )
        if not errors:
            result.update(
                {
                    "version": None,
                    "bin_dir": bin_dir,
                    "binaries": [f"{bin_dir}/{binary_name(c)}" for c in collectives or []],
                    "timeout_flag": None,
                }
            )
        return result
    if method != "source":
        return result

    version = str(settings.get("version", ""))
    sha256 = str(settings.get("sha256", "")).strip().lower()
    if not VERSION_RE.match(version):
        errors.append(f"nccl_tests_version '{version}' is not a release version; accepted: X.Y.Z (a tag vX.Y.Z)")
    published = PUBLISHED_SHA256.get(version)
    url = tarball_url(str(settings.get("base_url") or DEFAULT_BASE_URL), version, str(settings.get("url") or ""))
    if not sha256:
        errors.append(
            f"nccl_tests_sha256 is empty for nccl-tests {version}; set the SHA256 of its tarball "
            f"(published for {', '.join(sorted(PUBLISHED_SHA256))} in {CHECKSUM_SOURCE}, or `sha256sum` of "
            "the tarball your mirror holds after checking it against the tag)"
        )
    elif not SHA256_RE.match(sha256):
        errors.append(f"nccl_tests_sha256 '{sha256}' is not a SHA256; accepted: 64 hexadecimal digits")
    elif published and published != sha256 and url == tarball_url(DEFAULT_BASE_URL, version):
        errors.append(
            f"nccl_tests_sha256 '{sha256}' is not the published SHA256 of nccl-tests {version} ({published}, "
            f"{CHECKSUM_SOURCE}); change the checksum together with nccl_tests_version"
        )
    jobs = settings.get("make_jobs", 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        errors.append(f"nccl_tests_make_jobs '{jobs}' must be a whole number of 1 or more")
    extra = [str(arg) for arg in settings.get("make_args") or []]
    for arg in extra:
        name = arg.split("=", 1)[0]
        if name in MANAGED_MAKE_VARIABLES:
            errors.append(
                f"nccl_tests_make_args sets {name}, which the role sets itself; use "
                f"{'the MPI build (always on)' if name == 'MPI' else 'nccl_tests_' + name.lower()} instead"
            )
    mpi_home = str(settings.get("mpi_home") or "") or mpi_home_for(
        str(facts.get("os_family", "")), str(facts.get("architecture", ""))
    )
    if not mpi_home:
        errors.append(
            f"nccl_tests_mpi_home is empty and no Open MPI prefix is known for {facts.get('os_family')} "
            f"{facts.get('architecture')}; set it to the directory holding include/mpi.h and lib/libmpi.so"
        )
    cuda_home, cuda_packages = _cuda_compiler(settings, errors)
    if errors:
        return result
    nvcc: Prerequisite = {
        "path": f"{cuda_home}/bin/nvcc",
        "what": "the CUDA compiler",
        "variable": "nccl_tests_cuda_home",
    }
    prefix = str(settings.get("prefix") or "/opt/nccl-tests").rstrip("/")
    install_dir = f"{prefix}/{version}"
    bin_dir = f"{install_dir}/build"
    nccl_home = str(settings.get("nccl_home") or "/usr").rstrip("/")
    work_dir = str(settings.get("work_dir") or "/var/cache/gpufabric/nccl-tests").rstrip("/")
    result.update(
        {
            "version": version,
            "sha256": sha256,
            "url": url,
            # What install-source.yml downloads (get_url with this checksum): `gpufabric plan` shows it.
            "artifacts": [supply_chain.artifact("tarball", f"nccl-tests {version}", url, f"sha256:{sha256}")],
            "published_sha256": published or "",
            "tarball": f"{work_dir}/nccl-tests-{version}.tar.gz",
            "work_dir": work_dir,
            "prefix": prefix,
            "install_dir": install_dir,
            "current_link": f"{prefix}/current",
            "bin_dir": bin_dir,
            "binaries": [f"{bin_dir}/{binary_name(c)}" for c in collectives or []],
            # make builds every test: the first one stands for the build in `creates:`.
            "build_marker": f"{bin_dir}/{binary_name(COLLECTIVES[0])}",
            "mpi_home": mpi_home.rstrip("/"),
            "cuda_home": cuda_home,
            "cuda_packages": cuda_packages,
            "nccl_home": nccl_home,
            # What the build needs, with what to do when it is missing.
            "prerequisites": [
                {
                    "path": f"{mpi_home.rstrip('/')}/include/mpi.h",
                    "what": "Open MPI headers",
                    "variable": "nccl_tests_mpi_home",
                },
                # Not when the role installs the compiler first: the packages bring nvcc.
                *([] if cuda_packages else [nvcc]),
                {
                    "path": f"{nccl_home}/include/nccl.h",
                    "what": "NCCL's header (libnccl-dev)",
                    "variable": "nccl_tests_nccl_home",
                },
            ],
            "make_argv": make_argv(
                jobs=jobs, mpi_home=mpi_home.rstrip("/"), cuda_home=cuda_home, nccl_home=nccl_home, extra=extra
            ),
            "timeout_flag": version_tuple(version) >= TIMEOUT_FLAG_SINCE,
        }
    )
    return result


def _matches(threshold: dict[str, Any], collective: str, nodes: int) -> bool:
    return (
        threshold.get("collective") == collective
        and int(threshold.get("min_nodes", 1)) <= nodes
        and (threshold.get("max_nodes") is None or nodes <= int(threshold["max_nodes"]))
    )


def choose_algo(thresholds: list[dict[str, Any]], collective: str, nodes: int, requested: str = "auto") -> str:
    """`default` or `ring` for one run.

    An explicit request wins. `auto` keeps NCCL's own choice where the catalog has a threshold for it at
    this node count, and forces rings where only a ring threshold exists (three or more nodes of a profile
    whose two-node figure would read above the wire).
    """
    if requested in ("default", "ring"):
        return requested
    matching = [t for t in thresholds or [] if _matches(t, collective, nodes)]
    if any(t.get("algo") == "default" for t in matching):
        return "default"
    if any(t.get("algo") == "ring" for t in matching):
        return "ring"
    return "default"


def auto_max_bytes(thresholds: list[dict[str, Any]], collective: str, nodes: int, algo: str) -> int:
    """The largest size the catalog judges this run at (its min_size_bytes), else FALLBACK_MAX_BYTES."""
    sizes = [
        int(t["min_size_bytes"])
        for t in thresholds or []
        if _matches(t, collective, nodes) and t.get("algo", "default") == algo and t.get("min_size_bytes")
    ]
    return max(sizes) if sizes else FALLBACK_MAX_BYTES


def launch_env(
    extra: dict[str, Any],
    algo: str,
    current_env: dict[str, Any],
    path_variables: list[str],
) -> dict[str, str]:
    """What a run forwards to every rank (``-x``): only what is this run's own, the operator's overrides
    (nccl_tests_env_extra, e.g. NCCL_DEBUG=INFO) over the standard tier's variables when the run is that
    baseline (run() passes them in ``extra``), and NCCL_ALGO=Ring for a ring run.

    The fabric's environment is never forwarded: the ranks get it from the host's files the way a job does
    (nccl_env: NCCL_* from /etc/nccl.conf, the plugin's directories from the loader's cache, FI_*/UCX_* from
    the session's /etc/environment), so a host without them is measured as a job would find it. A null
    override forwards an empty value: NCCL then leaves the variable's /etc/nccl.conf value unapplied (it never
    replaces a variable the process has) and most of its parameters take an empty value as unset. A directory
    list is prepended to the launcher's own value."""
    env: dict[str, Any] = dict(extra or {})
    if algo == "ring":
        env["NCCL_ALGO"] = "Ring"
    result: dict[str, str] = {}
    for key, value in env.items():
        text = "" if value is None else str(value)
        current = str((current_env or {}).get(key) or "")
        if text and key in (path_variables or []) and current and text not in current.split(":"):
            text = f"{text}:{current}"
        result[key] = text
    return dict(sorted(result.items()))


def hostfile(hosts: list[str], slots: int) -> str:
    """Open MPI hostfile: one `<address> slots=<GPUs per node>` line per node."""
    return "".join(f"{host} slots={slots}\n" for host in hosts)


def mpirun_argv(
    *,
    collective: str,
    bin_dir: str,
    hostfile_path: str,
    nodes: int,
    gpus_per_node: int,
    env_names: list[str],
    min_bytes: int,
    max_bytes: int,
    iters: int,
    warmup: int,
    nccl_timeout: int,
    timeout: int,
    mpirun: str = "mpirun",
    mpirun_args: list[str] | None = None,
    step_factor: int = 2,
) -> list[str]:
    """`timeout --kill-after=30 <s> mpirun … -x NAME … <bin>/<collective>_perf -b … -e … -f 2 -g 1 -c 1 …`.

    One process per GPU (-g 1), G processes per node (ppr:G:node), validation on (-c 1) so data errors
    show in #wrong. `-x NAME` exports the launcher's value of NAME, which the role sets to launch_env(): the
    run's own variables only, never the fabric's environment (the host's files give it, as to any job).
    The wall-clock timeout catches hangs that print nothing (nccl-tests.md section 4); -T (when > 0)
    makes nccl-tests abort a stuck collective itself and say so.
    """
    argv = [
        "timeout",
        f"--kill-after={KILL_AFTER_S}",
        f"{timeout}s",
        mpirun,
        "--allow-run-as-root",
        "--hostfile",
        hostfile_path,
        "-np",
        str(nodes * gpus_per_node),
        "--map-by",
        f"ppr:{gpus_per_node}:node",
        "--bind-to",
        "none",
        *[str(arg) for arg in mpirun_args or []],
    ]
    for name in env_names:
        argv += ["-x", name]
    argv += [
        f"{bin_dir.rstrip('/')}/{binary_name(collective)}",
        "-b",
        str(min_bytes),
        "-e",
        str(max_bytes),
        "-f",
        str(step_factor),
        "-g",
        "1",
        "-c",
        "1",
        "-n",
        str(iters),
        "-w",
        str(warmup),
    ]
    if nccl_timeout > 0:
        argv += ["-T", str(nccl_timeout)]
    return argv


def _positive_int(value: Any, name: str, minimum: int = 1) -> tuple[int, str]:
    if isinstance(value, bool):
        return 0, f"{name} '{value}' must be a whole number of {minimum} or more"
    try:
        number = int(value)
    except (TypeError, ValueError):
        return 0, f"{name} '{value}' must be a whole number of {minimum} or more"
    if number < minimum or str(number) != str(value).strip():
        return 0, f"{name} '{value}' must be a whole number of {minimum} or more"
    return number, ""


class RunSpec(TypedDict):
    """One collective's run."""

    collective: str
    algo: str  # default or ring
    nodes: int
    min_bytes: int
    max_bytes: int
    file: str  # the output's file name (in output_dir on the host, in the results directory on the controller)
    output: str  # the output's path on the launching host
    env: dict[str, str]  # what the run forwards to every rank with -x (launch_env()), over the host's files
    argv: list[str]  # timeout … mpirun … <collective>_perf …


class NcclTestsRun(TypedDict, total=False):
    """The run plan; with an error, only error and runs ([])."""

    error: str  # the first bad value ('' when none); the role asserts it is empty before anything runs
    runs: list[RunSpec]
    run_id: str
    nodes: int
    gpus_per_node: int
    hosts: list[str]  # the inventory names of the nodes
    addresses: list[str]  # what the hostfile names them by
    output_dir: str
    hostfile_path: str
    hostfile: str
    fail_on: str


# The role's run variables, without the nccl_tests_ prefix, that run() reads from its settings.
RUN_SETTINGS = (
    "collectives",
    "algo",
    "fail_on",
    "run_id",
    "gpus_per_node",
    "iters",
    "warmup_iters",
    "nccl_timeout",
    "timeout",
    "nodes",
    "min_bytes",
    "max_bytes",
    "env_extra",
    "path_variables",
    "output_dir",
    "mpirun",
    "mpirun_args",
)


def run(
    settings: dict[str, Any],
    install: dict[str, Any],
    hosts: list[str],
    addresses: list[str],
    host_plan: dict[str, Any],
    facts: dict[str, Any] | None = None,
) -> NcclTestsRun:
    """The runs from the role's run settings (RUN_SETTINGS), its install plan (plan()), the play's nodes and
    what they are called in the hostfile, the host plan (the tier's bandwidth thresholds, the GPU count) and the
    launching host's facts (its environment, for a directory list the run forwards)."""
    inputs = {key: settings.get(key) for key in RUN_SETTINGS}
    inputs.update(
        # A standard-tier run is the plain-TCP baseline (--compare standard,best), a measurement choice the host is
        # not configured for: that tier's variables (NCCL_NET=Socket, ...) are forwarded and win over the host's
        # /etc/nccl.conf. A best-tier run forwards none of the fabric's environment.
        baseline_env=(host_plan.get("env") or {}) if host_plan.get("tier") == "standard" else {},
        warmup=settings.get("warmup_iters"),
        # 0 (the default) means every GPU of the profile.
        gpus_per_node=settings.get("gpus_per_node") or (host_plan.get("gpus") or {}).get("count"),
        bandwidth=host_plan.get("bandwidth") or {},
        current_env=(facts or {}).get("env") or {},
        hosts=hosts,
        addresses=addresses,
        bin_dir=install.get("bin_dir"),
        timeout_flag=install.get("timeout_flag"),
        version=install.get("version"),
    )
    return run_plan(inputs)


def run_plan(inputs: dict[str, Any]) -> NcclTestsRun:
    """The runs on the launching host: hosts, hostfile, and per collective the algorithm, sizes, output
    file, environment and argv; ``error`` names the first bad value. ``bandwidth`` is the host plan's: its
    thresholds are the tier's already."""
    result: NcclTestsRun = {"error": "", "runs": []}
    collectives = inputs.get("collectives")
    error = _collectives_error(collectives)
    if error:
        return {**result, "error": error}
    algo = str(inputs.get("algo", "auto"))
    if algo not in ALGOS:
        return {**result, "error": f"nccl_tests_algo '{algo}' is not an algorithm choice; accepted: {', '.join(ALGOS)}"}
    fail_on = str(inputs.get("fail_on", "fail"))
    if fail_on not in FAIL_ON:
        return {**result, "error": f"nccl_tests_fail_on '{fail_on}' is not accepted; accepted: {', '.join(FAIL_ON)}"}
    run_id = str(inputs.get("run_id", ""))
    if not RUN_ID_RE.match(run_id):
        return {
            **result,
            "error": f"nccl_tests_run_id '{run_id}' must be letters, digits, '.', '_' or '-' (a directory name)",
        }
    numbers = {}
    for key, name, minimum in (
        ("gpus_per_node", "nccl_tests_gpus_per_node", 1),
        ("iters", "nccl_tests_iters", 1),
        ("warmup", "nccl_tests_warmup_iters", 0),
        ("nccl_timeout", "nccl_tests_nccl_timeout", 0),
        ("timeout", "nccl_tests_timeout", 1),
        ("nodes", "nccl_tests_nodes", 0),
    ):
        numbers[key], error = _positive_int(inputs.get(key), name, minimum)
        if error:
            return {**result, "error": error}
    try:
        min_bytes = parse_size(inputs.get("min_bytes"))
    except ValueError:
        return {**result, "error": f"nccl_tests_min_bytes '{inputs.get('min_bytes')}' is not a size; {SIZES}"}
    max_text = inputs.get("max_bytes")
    max_fixed = None
    if max_text not in (None, ""):
        try:
            max_fixed = parse_size(max_text)
        except ValueError:
            return {**result, "error": f"nccl_tests_max_bytes '{max_text}' is not a size; {SIZES}, or empty"}
    extra = inputs.get("env_extra") or {}
    bad = [key for key in extra if not ENV_NAME_RE.match(str(key))]
    if bad or any(isinstance(v, bool) or (isinstance(v, str) and "\n" in v) for v in extra.values()):
        return {
            **result,
            "error": f"nccl_tests_env_extra {extra!r} must map variable names to one-line strings or numbers, "
            "or to null to drop a variable (quote true/false)",
        }
    hosts = [str(host) for host in inputs.get("hosts") or []]
    if not hosts:
        return {**result, "error": "no host to run on: the play has no hosts left"}
    nodes = numbers["nodes"] or len(hosts)
    if nodes > len(hosts):
        return {
            **result,
            "error": f"nccl_tests_nodes {nodes} asks for more nodes than the play has "
            f"({len(hosts)}: {', '.join(hosts)})",
        }
    hosts = hosts[:nodes]
    addresses = [str(a) for a in (inputs.get("addresses") or hosts)][:nodes]
    gpus = numbers["gpus_per_node"]
    bin_dir = str(inputs.get("bin_dir", "")).rstrip("/")
    out_dir = f"{str(inputs.get('output_dir') or '/var/lib/gpufabric/nccl-tests').rstrip('/')}/{run_id}"
    hostfile_path = f"{out_dir}/hostfile"
    thresholds = list((inputs.get("bandwidth") or {}).get("thresholds") or [])
    timeout_flag = inputs.get("timeout_flag")
    if numbers["nccl_timeout"] and timeout_flag is False:
        return {
            **result,
            "error": f"nccl_tests_nccl_timeout {numbers['nccl_timeout']} needs nccl-tests 2.13.9 or newer (-T); "
            f"nccl_tests_version is {inputs.get('version')}: set nccl_tests_nccl_timeout to 0",
        }
    runs: list[RunSpec] = []
    for collective in collectives or []:
        run_algo = choose_algo(thresholds, collective, nodes, algo)
        max_bytes = max_fixed or auto_max_bytes(thresholds, collective, nodes, run_algo)
        if max_bytes < min_bytes:
            return {
                **result,
                "error": f"nccl_tests_max_bytes ({max_bytes}) is below nccl_tests_min_bytes ({min_bytes}) "
                f"for {collective}",
            }
        env = launch_env(
            {**(inputs.get("baseline_env") or {}), **extra},
            run_algo,
            inputs.get("current_env") or {},
            list(inputs.get("path_variables") or []),
        )
        name = f"{collective}-{nodes}n.txt"
        runs.append(
            {
                "collective": collective,
                "algo": run_algo,
                "nodes": nodes,
                "min_bytes": min_bytes,
                "max_bytes": max_bytes,
                "file": name,
                "output": f"{out_dir}/{name}",
                "env": env,
                "argv": mpirun_argv(
                    collective=collective,
                    bin_dir=bin_dir,
                    hostfile_path=hostfile_path,
                    nodes=nodes,
                    gpus_per_node=gpus,
                    env_names=list(env),
                    min_bytes=min_bytes,
                    max_bytes=max_bytes,
                    iters=numbers["iters"],
                    warmup=numbers["warmup"],
                    nccl_timeout=numbers["nccl_timeout"],
                    timeout=numbers["timeout"],
                    mpirun=str(inputs.get("mpirun") or "mpirun"),
                    mpirun_args=list(inputs.get("mpirun_args") or []),
                ),
            }
        )
    return {
        **result,
        "run_id": run_id,
        "nodes": nodes,
        "gpus_per_node": gpus,
        "hosts": hosts,
        "addresses": addresses,
        "output_dir": out_dir,
        "hostfile_path": hostfile_path,
        "hostfile": hostfile(addresses, gpus),
        "fail_on": fail_on,
        "runs": runs,
    }


def tier_thresholds(bandwidth: dict[str, Any] | None, tier: str) -> list[dict[str, Any]]:
    """The catalog's thresholds measure the fabric (tier best); a standard-tier run (TCP baseline) is judged
    for completeness and data errors only, so it gets none. The host plan's bandwidth holds these
    (plugin_utils/fabric_plan.py), and `gpufabric report` judges a record by them."""
    if tier != "best" or not bandwidth:
        return []
    return list(bandwidth.get("thresholds") or [])


class Verdict(TypedDict, total=False):
    """A run's verdict: nccl_judge.judge()'s, with the exit status of its mpirun."""

    status: str  # pass, warn, fail or unjudged
    collective: str | None
    nodes: int | None
    algo: str
    threshold: dict[str, Any] | None  # the catalog threshold it was judged by
    measured_busbw: float | None  # GB/s, the lowest out-of-place busbw at the threshold's sizes
    largest_size: int | None
    reasons: list[str]
    exit_code: int | None


def verdict_line(verdict: dict[str, Any], exit_code: int | None) -> Verdict:
    """One run's verdict as the role reports it: the judge's, made a fail when mpirun did not exit 0."""
    status = str(verdict.get("status", "unjudged"))
    reasons = [str(r) for r in verdict.get("reasons") or []]
    if exit_code not in (None, 0):
        meaning = {124: "the wall-clock timeout (nccl_tests_timeout) fired", 137: "killed after the timeout"}
        reasons.append(f"mpirun exited {exit_code}" + (f" ({meaning[exit_code]})" if exit_code in meaning else ""))
        status = "fail"
    result: Verdict = {**verdict, "status": status, "reasons": reasons, "exit_code": exit_code}  # type: ignore[typeddict-item]
    return result
