#!/bin/sh
# Build one TEST-DOUBLE image inside the test host: a tiny root file system (sh and the few tools the
# double's script uses, with their libraries) plus the script, imported into the host's podman storage.
# Usage: build-double.sh IMAGE:TAG ENTRYPOINT SCRIPT [RELEASE]
set -eu
image=$1 entrypoint=$2 script=$3 release=${4:-1}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for tool in sh dash cat cp ls mkdir sleep touch; do
    binary=$(readlink -f "$(command -v "$tool")")
    for file in "$binary" $(ldd "$binary" | grep -o '/[^ ]*'); do
        mkdir -p "$root$(dirname "$file")"
        cp -L "$file" "$root$file"
    done
    mkdir -p "$root/usr/bin"
    [ -e "$root/usr/bin/$tool" ] || ln -s "$binary" "$root/usr/bin/$tool"
done
ln -s usr/bin "$root/bin"
mkdir -p "$root$(dirname "$entrypoint")" "$root/tmp"
cp "$script" "$root$entrypoint"
chmod 0755 "$root$entrypoint"
echo "$release" > "$root/TEST-DOUBLE-RELEASE"
tar -C "$root" -c . | podman import --change "ENTRYPOINT [\"$entrypoint\"]" - "$image" >/dev/null
podman image inspect --format '{{.Digest}}' "$image"
