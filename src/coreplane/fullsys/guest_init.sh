#!/bin/sh
# coreplane's init in full-system images: mounts what a workload needs, announces the boot on the
# serial console, (booted for a snapshot) waits for a workload disk, runs the node's script from
# the workload disk (/dev/vdb, made per run by coreplane: programs, the node's role, room for its
# outputs) when there is one, powers off.
# The workload lives on its own disk so that changing it never rebuilds an image.
# The initramfs has moved its own mounts here already; these are for a boot without one.
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sys /sys 2>/dev/null
mount -t devtmpfs dev /dev 2>/dev/null
echo "coreplane-fullsys: booted debian $(cat /etc/debian_version) kernel $(uname -r)"
# Booted for a snapshot (fullsys/snapshot.py): the host saves the guest while it waits here, on a
# blank workload disk; a run restored from it brings its own disk, whose ext4 magic (53 ef at byte
# 1080) the next look finds, read past the page cache, which still holds the blank disk's blocks.
if grep -q coreplane.snapshot /proc/cmdline; then
    echo "coreplane-fullsys: waiting for a workload disk"
    until blockdev --flushbufs /dev/vdb && \
          [ "$(dd if=/dev/vdb bs=1 skip=1080 count=2 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 53ef ]; do
        sleep 0.1
    done
fi
if [ -b /dev/vdb ] && mount -t ext4 /dev/vdb /mnt; then
    sh /mnt/run
    echo "coreplane-fullsys: workload exit $?"
    umount /mnt
fi
sync
# sysrq 'o' powers off at once: QEMU exits and the plugin writes its counts.
echo o > /proc/sysrq-trigger
sleep 60 2>/dev/null
