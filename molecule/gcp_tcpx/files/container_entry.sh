#!/bin/sh
# TEST DOUBLE of the GPUDirect-TCPX NCCL plugin installer (no vendor code). `install --install-nccl`
# with the host's /var/lib mounted writes placeholder libraries where the real installer puts the plugin
# and NCCL, and logs each run so that tests can count them.
set -eu
if [ "${1:-}" != install ]; then
    echo "TEST DOUBLE installer: unknown command: $*" >&2
    exit 2
fi
release=$(cat /TEST-DOUBLE-RELEASE)
mkdir -p /var/lib/tcpx/lib64
echo "TEST DOUBLE libnccl-net.so (GPUDirect-TCPX plugin placeholder, release $release)" > /var/lib/tcpx/lib64/libnccl-net.so
echo "TEST DOUBLE libnccl.so.2 (NCCL placeholder, release $release)" > /var/lib/tcpx/lib64/libnccl.so.2
echo "release $release: $*" >> /var/lib/tcpx/TEST-DOUBLE-runs
