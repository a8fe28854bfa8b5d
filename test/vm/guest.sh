#!/bin/sh
# PID 1 of the cgroup v2 VM (test/vm/cgroup2.sh): the mounts a system has, cgroup v2 as the only
# hierarchy with its controllers handed down, then the tests from a group of their own, then power off.
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmp /tmp
mount -t tmpfs shm /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
echo "+memory +cpu +pids" >/sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/tests
export HOME=/root LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
cd /app
echo "ROCK-VM-BEGIN $(uname -r), cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
# The tests in a group that is not the root one (as a service's or a container's is).
sh -c 'echo $$ >/sys/fs/cgroup/tests/cgroup.procs && exec sh .vm-run'
echo "ROCK-VM-EXIT $?"
sync
echo o >/proc/sysrq-trigger
sleep 10
