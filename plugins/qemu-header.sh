#!/bin/sh
# Fetches qemu-plugin.h from Debian's `qemu` source package for this machine's suite into DEST,
# through a private apt configuration under WORK (src/coreplane/fullsys/apt_private.sh): the
# binary packages ship no plugin header, and the system's apt configuration is never touched.
# Usage: qemu-header.sh WORK DEST
set -eu
work=$(realpath -m "$1"); dest=$(realpath -m "$2")
apt_private="$(realpath "$(dirname "$0")")/../src/coreplane/fullsys/apt_private.sh"
mkdir -p "$work/src" "$(dirname "$dest")"
# The source package must be the one the installed qemu-system-x86 was built from: the plugin API
# version is checked when QEMU loads a plugin.
version=$(dpkg-query -W -f='${source:Version}' qemu-system-x86)
cd "$work/src"
rm -f ./*.dsc
# The orig tarball alone holds the header; --download-only skips unpacking the whole tree.
sh "$apt_private" "$work" deb-src source --download-only "qemu=$version" 2>/dev/null ||
    sh "$apt_private" "$work" deb-src source --download-only qemu
orig=$(ls ./qemu_*.orig.tar.* | head -n 1)
tar -xf "$orig" --wildcards --no-anchored -O 'include/qemu/qemu-plugin.h' > "$dest.tmp"
grep -q QEMU_PLUGIN_VERSION "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "qemu-plugin.h from $(basename "$orig") (qemu $version)"
