# SPDX-License-Identifier: Apache-2.0
"""Build TEST-DOUBLE tarballs shaped like AWS's aws-efa-installer-<version>.tar.gz.

Nothing here is AWS's software. Each tarball unpacks to aws-efa-installer/ with an env.sh naming its
version, TEST-DOUBLE .deb packages under DEBS/<DISTRO>/<arch>/ (files under /opt/amazon only, each
saying TEST DOUBLE), and an efa_installer.sh that parses the real installer's options, refuses what
the real one refuses (no -y, an unsupported OS, no EFA device without --no-verify), installs the
packages the options select with dpkg, writes /opt/amazon/efa_installed_packages in the real format,
writes /etc/security/limits.d/efa.conf unless --skip-limit-conf, and records the options it got in
/opt/amazon/TEST-DOUBLE-efa_installer.args.

    python build_installer.py OUT VERSION [VERSION ...]

writes OUT/aws-efa-installer-<version>.tar.gz and OUT/aws-efa-installer-<version>.tar.gz.sha256.
Needs dpkg-deb.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# The real installer's package directories, DEBS/<DISTRO>/<arch> (its setup_install_package_paths():
# DEBS/UBUNTU2204/${arch}, DEBS/DEBIAN11/${arch}, ...; public builds install from
# aws-efa-installer/DEBS/UBUNTU2204/x86_64/). UBUNTU2404 and DEBIAN12/13 follow the same naming (UNVERIFIED: no
# listing of a release that supports them was found).
DISTROS = ("DEBIAN12", "DEBIAN13", "UBUNTU2204", "UBUNTU2404")
ARCH = "x86_64"
# Component versions of each TEST-DOUBLE release (shaped like the real ones, not claimed to be them).
RELEASES = {
    "1.99.0": {"efa": "3.0.0", "libfabric": "2.4.0amzn1.0", "ofi": "1.18.0", "ompi4": "4.1.8", "ompi5": "5.0.9"},
    "1.99.1": {"efa": "3.1.0", "libfabric": "2.4.0amzn3.0", "ofi": "1.19.1", "ompi4": "4.1.8", "ompi5": "5.0.9"},
}
MARK = "TEST DOUBLE, not AWS's software"

INSTALLER = r"""#!/bin/bash
# TEST DOUBLE of AWS's efa_installer.sh (built by gpufabric's molecule/aws_efa/build_installer.py).
# It is not AWS's installer: it takes the same options, installs TEST-DOUBLE packages with dpkg and
# writes the files the real installer writes, so that the aws_efa role can be tested in a container.
set -eu
cd "$(dirname "$0")"
. ./env.sh

usage() {
    cat <<EOF
usage: $(basename "$0") [options]   (TEST DOUBLE)
 -y, --yes  -n, --no-verify  -l, --skip-limit-conf  -k, --skip-kmod  -m, --minimal  -d, --debug-packages
 -g, --enable-gdr  --mpi=openmpi4,openmpi5  --skip-plugin  --skip-mpi
EOF
}

YES=0 NO_VERIFY=0 SKIP_LIMITS=0 SKIP_KMOD=0 MINIMAL=0 DEBUG=no MPI=openmpi4,openmpi5 SKIP_PLUGIN=0 SKIP_MPI=0
for arg in "$@"; do
    case "$arg" in
    -y | --yes) YES=1 ;;
    -n | --no-verify) NO_VERIFY=1 ;;
    -l | --skip-limit-conf) SKIP_LIMITS=1 ;;
    -k | --skip-kmod) SKIP_KMOD=1 ;;
    -m | --minimal) MINIMAL=1 ;;
    -d | --debug-packages) DEBUG=yes ;;
    -g | --enable-gdr) ;;
    --mpi=*) MPI="${arg#--mpi=}" ;;
    --skip-plugin) SKIP_PLUGIN=1 ;;
    --skip-mpi) SKIP_MPI=1 ;;
    *)
        echo "Error: unknown option $arg" >&2
        usage >&2
        exit 1
        ;;
    esac
done

if [ "$YES" -ne 1 ]; then
    echo "Error: the real installer would prompt for confirmation here; run with -y (TEST DOUBLE)" >&2
    exit 1
fi

. /etc/os-release
case "$ID-$VERSION_ID" in
debian-12) PKG_DIR="DEBS/DEBIAN12/$(uname -m)" ;;
debian-13) PKG_DIR="DEBS/DEBIAN13/$(uname -m)" ;;
ubuntu-22.04) PKG_DIR="DEBS/UBUNTU2204/$(uname -m)" ;;
ubuntu-24.04) PKG_DIR="DEBS/UBUNTU2404/$(uname -m)" ;;
*)
    echo "Unsupported operating system. (TEST DOUBLE: Debian 12/13, Ubuntu 22.04/24.04 only)" >&2
    exit 1
    ;;
esac

if [ "$NO_VERIFY" -ne 1 ]; then
    found=0
    for dev in /sys/bus/pci/devices/*; do
        if [ "$(cat "$dev/vendor" 2>/dev/null)" = 0x1d0f ]; then
            case "$(cat "$dev/device" 2>/dev/null)" in 0xefa*) found=1 ;; esac
        fi
    done
    if [ "$found" -ne 1 ]; then
        echo "Error: no EFA device (1d0f:efa*) found; run with --no-verify to skip the check (TEST DOUBLE)" >&2
        exit 1
    fi
fi

packages=(efa-config efa-profile)
[ "$SKIP_KMOD" -eq 1 ] || packages+=(efa)
if [ "$MINIMAL" -ne 1 ]; then
    packages+=(libfabric-aws)
    [ "$SKIP_PLUGIN" -eq 1 ] || packages+=(libnccl-ofi)
    if [ "$SKIP_MPI" -ne 1 ]; then
        for flavour in ${MPI//,/ }; do
            case "$flavour" in
            openmpi4) packages+=(openmpi40-aws) ;;
            openmpi5) packages+=(openmpi50-aws) ;;
            *)
                echo "Error: unknown MPI $flavour" >&2
                exit 1
                ;;
            esac
        done
    fi
fi

# Like the real installer: remove what an earlier run installed before installing this release.
if [ -f /opt/amazon/efa_installed_packages ]; then
    old=$(grep -v '^#' /opt/amazon/efa_installed_packages | tr ' ' '\n' | sed -n 's/_.*//p')
    if [ -n "$old" ]; then
        # shellcheck disable=SC2086
        dpkg --purge $old
    fi
fi

debs=()
installed=()
for name in "${packages[@]}"; do
    deb=$(echo "$PKG_DIR/${name}"_*.deb)
    debs+=("$deb")
    installed+=("$(basename "$deb" .deb)")
done
dpkg -i "${debs[@]}"

if [ "$SKIP_LIMITS" -ne 1 ]; then
    printf '* soft memlock unlimited\n* hard memlock unlimited\n' >/etc/security/limits.d/efa.conf
fi

mkdir -p /opt/amazon
cat <<EOF >/opt/amazon/efa_installed_packages
# EFA installer version: ${EFA_INSTALLER_VERSION}
# Debug packages installed: ${DEBUG}
# Packages installed:
${installed[*]}
EOF
echo "$*" >/opt/amazon/TEST-DOUBLE-efa_installer.args
echo "EFA installation complete. (TEST DOUBLE ${EFA_INSTALLER_VERSION})"
"""


def deb(work: Path, out: Path, name: str, version: str, files: dict[str, str], links: dict[str, str]) -> None:
    root = work / f"{name}_{version}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: gpufabric tests <test-double@gpufabric.invalid>\n"
        f"Description: TEST DOUBLE of AWS's {name} package\n This is a {MARK}.\n",
        encoding="utf-8",
    )
    for path, content in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        target.chmod(0o755 if content.startswith("#!") else 0o644)
    for path, target in links.items():
        link = root / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(out / f"{name}_{version}_all.deb")],
        check=True,
        capture_output=True,
    )


def packages(release: dict[str, str]) -> list[tuple[str, str, dict[str, str], dict[str, str]]]:
    ofi = "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
    text = f"{MARK}\n"
    return [
        ("efa-config", "1.18-1", {"/opt/amazon/efa/share/TEST-DOUBLE-efa-config": text}, {}),
        ("efa-profile", "1.7-1", {"/opt/amazon/efa/share/TEST-DOUBLE-efa-profile": text}, {}),
        ("efa", f"{release['efa']}-1", {f"/usr/src/efa-{release['efa']}/TEST-DOUBLE": text}, {}),
        (
            "libfabric-aws",
            f"{release['libfabric']}-1",
            {
                "/opt/amazon/efa/lib/libfabric.so.1.0.0": f"{MARK}: libfabric {release['libfabric']}\n",
                "/opt/amazon/efa/bin/fi_info": f"#!/bin/sh\necho 'fi_info: {MARK}' >&2\nexit 1\n",
            },
            {"/opt/amazon/efa/lib/libfabric.so.1": "libfabric.so.1.0.0"},
        ),
        # Debian and Ubuntu builds of aws-ofi-nccl install under lib/<multiarch>, with libnccl-net.so
        # linked to libnccl-net-ofi.so (the plugin's name since 1.15.0).
        (
            "libnccl-ofi",
            f"{release['ofi']}-1",
            {f"{ofi}/libnccl-net-ofi.so": f"{MARK}: aws-ofi-nccl {release['ofi']}\n"},
            {f"{ofi}/libnccl-net.so": "libnccl-net-ofi.so"},
        ),
        ("openmpi40-aws", f"{release['ompi4']}-1", {"/opt/amazon/openmpi/lib/libmpi.so.40": f"{MARK}\n"}, {}),
        ("openmpi50-aws", f"{release['ompi5']}-1", {"/opt/amazon/openmpi5/lib/libmpi.so.40": f"{MARK}\n"}, {}),
    ]


def build(out: Path, version: str) -> Path:
    release = RELEASES[version]
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp) / "aws-efa-installer"
        top.mkdir()
        (top / "env.sh").write_text(f"EFA_INSTALLER_VERSION={version}\n", encoding="utf-8")
        (top / "TEST-DOUBLE").write_text(f"aws-efa-installer {version}: {MARK}\n", encoding="utf-8")
        (top / "efa_installer.sh").write_text(INSTALLER, encoding="utf-8")
        (top / "efa_installer.sh").chmod(0o755)
        for distro in DISTROS:
            pool = top / "DEBS" / distro / ARCH
            pool.mkdir(parents=True)
            for name, pkg_version, files, links in packages(release):
                deb(Path(tmp) / "build" / distro, pool, name, pkg_version, files, links)
        tarball = out / f"aws-efa-installer-{version}.tar.gz"
        with tarfile.open(tarball, "w:gz") as tar:
            tar.add(top, arcname="aws-efa-installer")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    (out / f"{tarball.name}.sha256").write_text(f"{digest}  {tarball.name}\n", encoding="utf-8")
    return tarball


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for version in argv[1:]:
        print(build(out, version))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
