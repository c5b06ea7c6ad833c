#!/bin/bash
# hpc-slurm-join: joins a GPU node to its Slurm cluster at first boot (terraform-provider-hpc). Its settings
# come from the environment, which the provider's user data sets before this script (src/clouds/slurm.rs,
# `join_script`):
#   HPC_SLURM_CLUSTER      the GPU cluster's name             HPC_SLURM_CLOUD  aws | gcp | azure | oci
#   HPC_SLURM_SERVERS      the controllers, host:port[,host:port] (slurmd --conf-server)
#   HPC_SLURM_KEY          the Slurm cluster's munge key, base64
#   HPC_SLURM_HEALTHCHECK  the program hpc-slurm-healthcheck (node/hpc-slurm-healthcheck), base64
#   HPC_SLURM_LOCK         the program hpc-metadata-lock (node/hpc-metadata-lock), base64
#   HPC_SLURM_PROLOG, HPC_SLURM_EPILOG  Slurm's Prolog and Epilog (node/hpc-slurm-prolog, -epilog), base64
#   HPC_SLURM_WAIT         how long to wait for the node's name and for its registration, in seconds (300)
# It locks the instance metadata service to root (hpc-metadata-lock), installs slurmd and munge where the
# image lacks them, writes the key, learns the node's Slurm name from
# the cloud's metadata, installs the health check, and starts slurmd configless, so that the node registers
# under its name (its address comes from the registration; no DNS is needed). It waits until the controller
# has the node registered and says so, or says why not. Runs again after a remake, so a replaced node joins
# as the one it replaces.
set -euo pipefail

: "${HPC_SLURM_CLUSTER:?}" "${HPC_SLURM_CLOUD:?}" "${HPC_SLURM_SERVERS:?}" "${HPC_SLURM_KEY:?}" "${HPC_SLURM_HEALTHCHECK:?}" "${HPC_SLURM_LOCK:?}"
# How long to wait for the node's name in the metadata and for its registration, in seconds.
HPC_SLURM_WAIT=${HPC_SLURM_WAIT:-300}

mkdir -p /var/log
exec > >(tee -a /var/log/hpc-slurm-join.log) 2>&1
say() { printf 'HPC SLURM %s\n' "$*"; }
md=http://169.254.169.254

# Only root reaches the metadata service from here on (and at every boot): it serves this host's user data
# and cloud credentials to whoever asks, and many people share this host.
printf '%s' "$HPC_SLURM_LOCK" | base64 -d >/usr/local/sbin/hpc-metadata-lock
chmod 755 /usr/local/sbin/hpc-metadata-lock
if ! /usr/local/sbin/hpc-metadata-lock --install; then
  say "ERROR: the instance metadata service could not be locked to root on this host; stopping here"
  exit 1
fi

if ! command -v slurmd >/dev/null; then
  if command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q slurmd slurm-client munge
  elif command -v dnf >/dev/null; then
    dnf install -y epel-release oracle-epel-release-el8 oracle-epel-release-el9 2>/dev/null || true
    dnf install -y slurm-slurmd slurm munge
  fi
fi
install -d -m 700 /etc/munge
printf '%s' "$HPC_SLURM_KEY" | base64 -d >/etc/munge/munge.key
chown munge:munge /etc/munge /etc/munge/munge.key 2>/dev/null || true
chmod 400 /etc/munge/munge.key

# This node's name in the cluster: its Name tag (AWS, with instance tags in its metadata), its name (Google),
# its display name (OCI), or on Azure the line hpc-node-name=<name> of the VM's own userData (base64), which
# the provider writes once it has named the VM (empty until then: the loop below waits).
node_name() {
  local t
  case $HPC_SLURM_CLOUD in
    aws)
      t=$(curl -sf -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$md/latest/api/token") &&
        curl -sf -m 5 -H "X-aws-ec2-metadata-token: $t" "$md/latest/meta-data/tags/instance/Name" ;;
    gcp)
      curl -sf -m 5 -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/name ;;
    oci)
      curl -sf -m 5 -H 'Authorization: Bearer Oracle' "$md/opc/v2/instance/displayName" ;;
    azure)
      curl -sf -m 5 -H Metadata:true "$md/metadata/instance/compute/userData?api-version=2021-01-01&format=text" |
        base64 -d | sed -n 's/^hpc-node-name=//p' | head -n 1 ;;
    *)
      return 1 ;;
  esac
}
node=
# Waits are measured on the clock: a call can itself take long (scontrol without a configuration looks the
# controller up in DNS first, and each lookup times out).
deadline=$((SECONDS + HPC_SLURM_WAIT))
until node=$(node_name 2>/dev/null) && [ -n "$node" ]; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    say "ERROR: this node's name is not in the cloud's metadata"
    exit 1
  fi
  sleep 5
done

install -d -m 755 /usr/local/sbin
printf '%s' "$HPC_SLURM_HEALTHCHECK" | base64 -d >/usr/local/sbin/hpc-slurm-healthcheck
printf '%s' "${HPC_SLURM_PROLOG:-}" | base64 -d >/usr/local/sbin/hpc-slurm-prolog
printf '%s' "${HPC_SLURM_EPILOG:-}" | base64 -d >/usr/local/sbin/hpc-slurm-epilog
chmod 755 /usr/local/sbin/hpc-slurm-healthcheck /usr/local/sbin/hpc-slurm-prolog /usr/local/sbin/hpc-slurm-epilog

options="--conf-server $HPC_SLURM_SERVERS -N $node"
# Debian and Ubuntu read SLURMD_OPTIONS from /etc/default/slurmd, Oracle Linux and RHEL from /etc/sysconfig/slurmd.
for f in /etc/default/slurmd /etc/sysconfig/slurmd; do
  if [ -d "${f%/*}" ]; then echo "SLURMD_OPTIONS=\"$options\"" >"$f"; fi
done
install -d -m 755 /var/spool/slurmd /var/log/slurm /etc/systemd/system/slurmd.service.d
# A configless node has no /etc/slurm/slurm.conf, which some packagings make a condition of slurmd's unit
# (Debian 12's slurmd.service: ConditionPathExists=/etc/slurm/slurm.conf); an empty assignment clears it.
# slurmd tries again until the controller knows this node: a node added to a cluster boots before the
# controller has the configuration that names it (it takes that within a minute of the Slurm cluster's apply).
cat >/etc/systemd/system/slurmd.service.d/hpc-join.conf <<'EOF'
[Unit]
ConditionPathExists=
StartLimitIntervalSec=0

[Service]
Restart=always
RestartSec=30
EOF
systemctl daemon-reload
systemctl enable munge slurmd
systemctl restart munge
# slurmd's start fails while the controller does not know this node yet (a unit of Type=notify, as Debian 13's,
# says so to systemctl); systemd starts it again every 30 s (above) and the wait below follows it.
if ! systemctl restart slurmd; then
  say "slurmd did not start yet (the controller may not know $node yet); it is started again every 30 s"
fi

# Registered: the controller has the node answering (not powered down, not down, not unresponsive). The
# configuration slurmd fetched is under /run/slurm/conf.
state() {
  SLURM_CONF=/run/slurm/conf/slurm.conf timeout 10 scontrol show node -o "$node" 2>/dev/null | tr ' ' '\n' | sed -n 's/^State=//p'
}
deadline=$((SECONDS + HPC_SLURM_WAIT))
while :; do
  # slurmd may be between restarts: a node added to a cluster boots before the controller has the configuration
  # that names it, and slurmd tries again every 30 s until it does.
  s=$(state) || s=
  case $s in
    *INVAL*)
      # The controller refused the registration (the node is not what the configuration says it is).
      reason=$(SLURM_CONF=/run/slurm/conf/slurm.conf timeout 10 scontrol show node "$node" 2>/dev/null | sed -n 's/^ *Reason=//p')
      say "ERROR: the controller refused $node's registration ($s): ${reason:-no reason given}"
      grep -m 1 'CPUs=' /var/log/slurm/slurmd.log 2>/dev/null || true
      exit 1 ;;
    '' | *NOT_RESPONDING* | *POWERED_DOWN* | *POWERING_UP* | *POWER_DOWN* | DOWN* | *FUTURE*) ;;
    *)
      reason=$(SLURM_CONF=/run/slurm/conf/slurm.conf timeout 10 scontrol show node "$node" 2>/dev/null | sed -n 's/^ *Reason=//p')
      if [[ $s == *DRAIN* ]]; then
        say "JOINED: $node, drained: ${reason:-no reason given}"
      else
        say "JOINED: $node ($s)"
      fi
      exit 0 ;;
  esac
  if [ "$SECONDS" -ge "$deadline" ]; then
    if systemctl is-active --quiet slurmd; then
      say "ERROR: slurmd runs but $node is not registered with $HPC_SLURM_SERVERS after ${HPC_SLURM_WAIT} s (state ${s:-unknown}); slurmd keeps trying"
    else
      say "ERROR: slurmd does not stay up on $node (state ${s:-unknown} at $HPC_SLURM_SERVERS after ${HPC_SLURM_WAIT} s); it is started again every 30 s"
      systemctl status slurmd --no-pager -l 2>&1 | tail -n 12 || true
    fi
    tail -n 20 /var/log/slurm/slurmd.log 2>/dev/null || journalctl -u slurmd --no-pager -n 20 2>/dev/null || true
    exit 1
  fi
  sleep 5
done
