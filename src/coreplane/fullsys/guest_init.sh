#!/bin/sh
# coreplane's init in full-system images: mounts what the workload needs, announces the boot on
# the serial console, runs the matrix multiply the kernel command line asks for, powers off.
# The initramfs has moved its own mounts here already; these are for a boot without one.
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sys /sys 2>/dev/null
mount -t devtmpfs dev /dev 2>/dev/null
echo "coreplane-fullsys: booted debian $(cat /etc/debian_version) kernel $(uname -r)"
size=
threads=1
for word in $(cat /proc/cmdline); do
    case $word in
        coreplane.size=*) size=${word#*=} ;;
        coreplane.threads=*) threads=${word#*=} ;;
    esac
done
if [ -n "$size" ]; then
    /coreplane/matmul "$size" "$threads"
    echo "coreplane-fullsys: workload exit $?"
fi
# sysrq 'o' powers off at once: QEMU exits and the plugin writes its counts.
echo o > /proc/sysrq-trigger
sleep 60 2>/dev/null
