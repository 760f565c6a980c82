#!/bin/sh
# The minimal image's initramfs (fullsys/minimal.py): loads the kernel modules the guest needs in
# dependency order, mounts the root disk read-only and hands over to coreplane's init there, as
# Debian's initramfs does for the mmdebstrap images.
mount -t devtmpfs dev /dev
mount -t proc proc /proc
mount -t sysfs sys /sys
while read -r module; do
    insmod "/modules/$module" || echo "coreplane-minimal: insmod $module failed"
done < /modules/order
# virtio_blk creates /dev/vda while it probes; the bounded poll only covers a slower probe.
tries=0
while [ ! -b /dev/vda ] && [ "$tries" -lt 100 ]; do sleep 0.05; tries=$((tries + 1)); done
if ! mount -t ext4 -o ro /dev/vda /root; then
    echo "coreplane-minimal: cannot mount the root disk /dev/vda"
    echo o > /proc/sysrq-trigger
fi
mount --move /dev /root/dev
umount /proc /sys
exec switch_root /root /coreplane/init
