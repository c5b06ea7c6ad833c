#!/bin/bash
# Boots one emulated instance, as the emulated cloud's hypervisor would: the instance's root is an overlay of
# an image (a Debian root made with mmdebstrap) and a directory of its own, and systemd runs in it as PID 1
# in mount, UTS, IPC, PID, network and cgroup namespaces of its own. Started by `hpc_emulators::hosts`,
# never by hand.
#
#   boot.sh enter <dir> <image> <cgroup name>   moves itself into a cgroup of its own in every hierarchy
#                                                (below the caller's), then runs `boot` in new namespaces
#   boot.sh boot <dir> <image>                   (PID 1 of the new namespaces) mounts the root and execs
#                                                systemd once a line arrives on stdin (the network is up)
#
# <dir> holds upper/ and work/ (the instance's own layer), root/ (where the overlay is mounted), and
# boot.env: settings the harness writes (HPC_HOST_UUID for /sys/hypervisor/uuid, HPC_HOST_DEVICES: the
# stand-in device files as "path:major:minor" words, HPC_HOST_RDMA: the stand-in RDMA devices' names). Everything mounted here is in the instance's mount
# namespace and goes with it.
set -euo pipefail

mode=${1:?usage: boot.sh enter|boot <dir> <image> [cgroup name]}
dir=${2:?no directory}
image=${3:?no image}

# cgroup v1 hierarchies this machine mounts (and the unified one), by their mount point under /sys/fs/cgroup.
hierarchies() {
  local d
  for d in /sys/fs/cgroup/*; do
    [ -e "$d/cgroup.procs" ] && printf '%s\n' "${d##*/}"
  done
}

# The caller's cgroup in the hierarchy mounted at /sys/fs/cgroup/<name>.
own_cgroup() {
  local name=$1 want
  case $name in
    unified) want='^0::' ;;
    systemd) want='^[0-9]+:name=systemd:' ;;
    *) want="^[0-9]+:([^:]*,)?$name(,[^:]*)?:" ;;
  esac
  grep -E "$want" /proc/self/cgroup | head -n 1 | cut -d: -f3-
}

if [ "$mode" = enter ]; then
  cgroup=${4:?no cgroup name}
  while read -r h; do
    base=/sys/fs/cgroup/$h$(own_cgroup "$h")
    base=${base%/}
    mkdir -p "$base/$cgroup"
    if [ "$h" = cpuset ]; then
      cat "$base/cpuset.cpus" >"$base/$cgroup/cpuset.cpus"
      cat "$base/cpuset.mems" >"$base/$cgroup/cpuset.mems"
    fi
    echo $$ >"$base/$cgroup/cgroup.procs"
  done < <(hierarchies)
  exec unshare --mount --uts --ipc --net --pid --cgroup --fork --kill-child --propagation private "$0" boot "$dir" "$image"
fi

[ "$mode" = boot ] || { echo "boot.sh: unknown mode $mode" >&2; exit 2; }
# shellcheck source=/dev/null
. "$dir/boot.env"
root=$dir/root
mount -t overlay overlay -o "lowerdir=$image,upperdir=$dir/upper,workdir=$dir/work" "$root"

mount -t proc proc "$root/proc"
# /sys: this network namespace's sysfs, under a tmpfs so that cgroup hierarchies of this cgroup namespace and
# /sys/hypervisor (which this kernel's sysfs lacks) can be put beside it.
mkdir -p "$dir/sysfs"
mount -t sysfs sysfs "$dir/sysfs"
mount -t tmpfs -o mode=755,nosuid,nodev,noexec tmpfs "$root/sys"
for d in "$dir"/sysfs/*; do
  b=${d##*/}
  case $b in fs | class) continue ;; esac
  mkdir -p "$root/sys/$b"
  mount --rbind "$d" "$root/sys/$b"
done
# /sys/class entry by entry, so that the stand-in RDMA devices can sit beside them.
for d in "$dir"/sysfs/class/*; do
  b=${d##*/}
  mkdir -p "$root/sys/class/$b"
  mount --rbind "$d" "$root/sys/class/$b"
done
if [ -n "${HPC_HOST_RDMA:-}" ]; then
  mkdir -p "$root/sys/class/infiniband"
  mount -t tmpfs -o mode=755 tmpfs "$root/sys/class/infiniband"
  for rdma in $HPC_HOST_RDMA; do mkdir -p "$root/sys/class/infiniband/$rdma"; done
fi
mkdir -p "$root/sys/fs/cgroup"
mount -t tmpfs -o mode=755,nosuid,nodev,noexec tmpfs "$root/sys/fs/cgroup"
# The same hierarchies as this machine's, each rooted at this instance's cgroup (systemd finds them mounted and
# keeps to them; Slurm's cgroup/v1 plugin uses them).
while read -r h; do
  mkdir -p "$root/sys/fs/cgroup/$h"
  case $h in
    unified) mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup/$h" ;;
    systemd) mount -t cgroup -o none,name=systemd cgroup "$root/sys/fs/cgroup/$h" ;;
    *) mount -t cgroup -o "$h" cgroup "$root/sys/fs/cgroup/$h" ;;
  esac
done < <(hierarchies)
if [ -n "${HPC_HOST_UUID:-}" ]; then
  mkdir -p "$root/sys/hypervisor"
  printf '%s\n' "$HPC_HOST_UUID" >"$root/sys/hypervisor/uuid"
fi

# /dev of its own: the usual character devices of this machine, a pty instance, and the stand-in devices.
mount -t tmpfs -o mode=755,nosuid tmpfs "$root/dev"
for d in null zero full random urandom tty; do
  touch "$root/dev/$d"
  mount --bind "/dev/$d" "$root/dev/$d"
done
mkdir -p "$root/dev/pts" "$root/dev/shm" "$root/dev/mqueue"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o nosuid,nodev tmpfs "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
for spec in ${HPC_HOST_DEVICES:-}; do
  IFS=: read -r path major minor <<<"$spec"
  mkdir -p "$root$(dirname "$path")"
  mknod -m 666 "$root$path" c "$major" "$minor"
done
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"

# The harness brings the network up from outside, then says so.
read -r _
exec env -i container=hpc-emulated TERM=dumb /usr/sbin/chroot "$root" /lib/systemd/systemd --log-target=journal-or-kmsg
