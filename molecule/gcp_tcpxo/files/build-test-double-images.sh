#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build the TEST-DOUBLE RxDM and NCCL plugin-installer images inside the molecule container: a busybox
# rootfs with one entrypoint script each, imported under Google's image names and release tags. Prints
# "<name> <digest>" per image. Needs podman and busybox-static.
set -eu
out=/var/tmp/gcp-tcpxo-test-doubles
rm -rf "$out"

rootfs() {
    dir="$out/$1"
    mkdir -p "$dir/bin" "$dir/dev" "$dir/proc" "$dir/sys" "$dir/run" "$dir/tmp" "$dir/var/lib"
    cp /bin/busybox "$dir/bin/busybox"
    for applet in $(/bin/busybox --list); do
        [ "$applet" = busybox ] || ln -s busybox "$dir/bin/$applet"
    done
    echo "TEST DOUBLE image built by gpufabric's molecule scenario gcp_tcpxo" > "$dir/TEST-DOUBLE"
}

# RxDM: checks what the unit hands it, then writes the health-check log line the real one writes.
rootfs rxdm
mkdir -p "$out/rxdm/fts"
cat > "$out/rxdm/fts/entrypoint_rxdm_container.sh" <<'SCRIPT'
#!/bin/sh
# TEST DOUBLE of the RxDM entrypoint (tcpgpudmarxd-dev). Not Google's code.
set -eu
fail() { echo "RxDM TEST DOUBLE: $*" >&2; exit 2; }
echo "RxDM TEST DOUBLE: arguments: $*"
[ "$*" = "--num_hops=2 --num_nics=8" ] || fail "unexpected arguments: $*"
[ -n "${HEALTH_CHECK_LOG_FILE:-}" ] || fail "HEALTH_CHECK_LOG_FILE is not set"
[ "${LD_LIBRARY_PATH:-}" = /usr/local/nvidia/lib64 ] || fail "LD_LIBRARY_PATH is ${LD_LIBRARY_PATH:-unset}"
for node in /dev/nvidia0 /dev/nvidia1 /dev/nvidia2 /dev/nvidia3 /dev/nvidia4 /dev/nvidia5 /dev/nvidia6 \
        /dev/nvidia7 /dev/nvidiactl /dev/nvidia-uvm /dev/dmabuf_import_helper; do
    [ -c "$node" ] || fail "device $node is missing"
done
[ -d /dev/aperture_devices ] || fail "/dev/aperture_devices is missing"
[ -d /hostsysfs/class/net ] || fail "/hostsysfs is not the host's /sys"
[ -d /hostprocsysfs/net ] || fail "/hostprocsysfs is not the host's /proc/sys"
for library in libcuda.so.1 libnvidia-ml.so.1; do
    grep -q "TEST DOUBLE" "/usr/local/nvidia/lib64/$library" || fail "driver library $library is missing"
done
caps=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
[ $(( (0x$caps >> 12) & 1 )) = 1 ] || fail "no CAP_NET_ADMIN (CapEff $caps)"
[ $(( (0x$caps >> 10) & 1 )) = 1 ] || fail "no CAP_NET_BIND_SERVICE (CapEff $caps)"
sleep 2
echo "I0000 00:00:00.000000 1 fastrak_gpumem_manager.cu.cc:284] Buffer manager initialization completed. (TEST DOUBLE)" \
    > "$HEALTH_CHECK_LOG_FILE"
trap 'exit 0' TERM INT
while :; do sleep 1; done
SCRIPT
chmod 0755 "$out/rxdm/fts/entrypoint_rxdm_container.sh"

# Plugin installer: writes TEST-DOUBLE files under the names Google's installer writes.
rootfs installer
mkdir -p "$out/installer/scripts"
cat > "$out/installer/scripts/container_entry.sh" <<'SCRIPT'
#!/bin/sh
# TEST DOUBLE of the NCCL plugin installer entrypoint (nccl-plugin-gpudirecttcpx-dev). Not Google's code.
set -eu
[ "$*" = "install --install-nccl" ] || { echo "installer TEST DOUBLE: unexpected arguments: $*" >&2; exit 2; }
lib=/var/lib/tcpxo/lib64
mkdir -p "$lib"
for file in libnccl.so.2 libnccl-net.so libnccl-tuner.so a3plus_tuner_config.textproto \
        a3plus_guest_config.textproto a3plus_tuner_config_simple.textproto a3plus_guest_config_simple.textproto; do
    echo "# TEST DOUBLE $file written by the gcp_tcpxo molecule installer double" > "$lib/$file"
done
ln -sf libnccl.so.2 "$lib/libnccl.so"
# The variables of Google's Jan 2026 profile (gpudirect-tcpxo/README.md); the real file's layout is not known.
cat > "$lib/nccl-env-profile.sh" <<'PROFILE'
# TEST DOUBLE of nccl-env-profile.sh
export NCCL_FASTRAK_CTRL_DEV=eth0
export NCCL_FASTRAK_IFNAME=eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8
export NCCL_SOCKET_IFNAME=eth0
export NCCL_CROSS_NIC=0
export NCCL_PROTO=Simple,LL128
export NCCL_MIN_NCHANNELS=4
export NCCL_TUNER_PLUGIN=libnccl-tuner.so
export NCCL_TUNER_CONFIG_PATH=${NCCL_LIB_DIR}/a3plus_tuner_config.textproto
export NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE=${NCCL_LIB_DIR}/a3plus_guest_config.textproto
export NCCL_NVLSTREE_MAX_CHUNKSIZE=131072
export NCCL_P2P_NET_CHUNKSIZE=524288
export NCCL_P2P_PCI_CHUNKSIZE=524288
export NCCL_P2P_NVL_CHUNKSIZE=1048576
export NCCL_FASTRAK_NUM_FLOWS=2
export NCCL_FASTRAK_USE_SNAP=1
export NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS=600000
export NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL=0
export NCCL_BUFFSIZE=8388608
export NCCL_NET_GDR_LEVEL=PIX
export NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING=0
export NCCL_FASTRAK_USE_LLCM=1
export NCCL_NVLS_ENABLE=1
export NCCL_DEBUG=WARN
export NCCL_DEBUG_SUBSYS=INIT,NET,ENV,COLL,GRAPH
PROFILE
echo "installer TEST DOUBLE: installed into $lib"
SCRIPT
chmod 0755 "$out/installer/scripts/container_entry.sh"

build() {
    tar -C "$out/$1" -c . | podman import --quiet --change "ENTRYPOINT [\"$2\"]" - "localhost/$3" >/dev/null
    echo "$1 $(podman image inspect --format '{{.Digest}}' "localhost/$3")"
}
build rxdm /fts/entrypoint_rxdm_container.sh tcpgpudmarxd-dev:v1.0.21
build installer /scripts/container_entry.sh nccl-plugin-gpudirecttcpx-dev:v1.0.15
