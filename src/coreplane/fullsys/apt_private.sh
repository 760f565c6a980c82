#!/bin/sh
# Runs apt-get against Debian's package registry through a private configuration under WORK (its
# own sources.list for this machine's suite with its updates and security suites, its own lists
# and cache): what the full-system parts fetch (the qemu source for the plugin header, the kernel
# of the minimal image) never touches the system's apt configuration or state.
# Usage: apt_private.sh WORK deb|deb-src APT-GET-ARGUMENTS...   (runs `update` first)
set -eu
work=$(realpath -m "$1"); kind=$2; shift 2
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
mkdir -p "$work/etc/parts" "$work/state/lists/partial" "$work/cache/archives/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
{
    echo "$kind [signed-by=$keyring] http://deb.debian.org/debian $suite main"
    echo "$kind [signed-by=$keyring] http://deb.debian.org/debian $suite-updates main"
    echo "$kind [signed-by=$keyring] http://deb.debian.org/debian-security $suite-security main"
} > "$work/etc/sources.list"
# The sandbox user _apt cannot write into a root-owned WORK: downloads run as the caller.
apt_private() {
    apt-get -qq -o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts="$work/etc/parts" \
        -o Dir::State="$work/state" -o Dir::Cache="$work/cache" -o APT::Sandbox::User="$(id -un)" "$@"
}
apt_private update
apt_private "$@"
