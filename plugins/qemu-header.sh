#!/bin/sh
# Fetches qemu-plugin.h from Debian's `qemu` source package for this machine's suite into DEST,
# through a private apt configuration (own sources.list, state and cache under WORK): the binary
# packages ship no plugin header, and the system's apt configuration is never touched.
# Usage: qemu-header.sh WORK DEST
set -eu
work=$(realpath -m "$1"); dest=$(realpath -m "$2")
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
mkdir -p "$work/etc/parts" "$work/state/lists/partial" "$work/cache/archives/partial" "$work/src" "$(dirname "$dest")"
# The source package must be the one the installed qemu-system-x86 was built from: the plugin API
# version is checked when QEMU loads a plugin.
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
    > "$work/etc/sources.list"
for update in "$suite-updates" "$suite-security"; do
    mirror=http://deb.debian.org/debian; [ "$update" = "$suite-security" ] && mirror=http://deb.debian.org/debian-security
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $update main" >> "$work/etc/sources.list"
done
apt_private() {
    apt-get -qq -o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts="$work/etc/parts" \
        -o Dir::State="$work/state" -o Dir::Cache="$work/cache" "$@"
}
apt_private update
version=$(dpkg-query -W -f='${source:Version}' qemu-system-x86)
cd "$work/src"
rm -f ./*.dsc
# The orig tarball alone holds the header; --download-only skips unpacking the whole tree.
apt_private source --download-only "qemu=$version" 2>/dev/null || apt_private source --download-only qemu
orig=$(ls ./qemu_*.orig.tar.* | head -n 1)
tar -xf "$orig" --wildcards --no-anchored -O 'include/qemu/qemu-plugin.h' > "$dest.tmp"
grep -q QEMU_PLUGIN_VERSION "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "qemu-plugin.h from $(basename "$orig") (qemu $version, $suite)"
