"""Full-system OS activity (paper 001): Debian images booted under QEMU/TCG with coreplane's plugins, kernel and user share of a workload's region of interest."""
