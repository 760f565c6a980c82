#!/bin/sh
# coreplane's init in full-system images: mounts what a workload needs, announces the boot on the
# serial console, runs the node's script from the workload disk (/dev/vdb, made per run by
# coreplane: programs, the node's role, room for its outputs) when there is one, powers off.
# The workload lives on its own disk so that changing it never rebuilds an image.
# The initramfs has moved its own mounts here already; these are for a boot without one.
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sys /sys 2>/dev/null
mount -t devtmpfs dev /dev 2>/dev/null
echo "coreplane-fullsys: booted debian $(cat /etc/debian_version) kernel $(uname -r)"
if [ -b /dev/vdb ] && mount -t ext4 /dev/vdb /mnt; then
    sh /mnt/run
    echo "coreplane-fullsys: workload exit $?"
    umount /mnt
fi
sync
# sysrq 'o' powers off at once: QEMU exits and the plugin writes its counts.
echo o > /proc/sysrq-trigger
sleep 60 2>/dev/null
