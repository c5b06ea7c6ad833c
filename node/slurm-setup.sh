#!/bin/bash
# hpc-slurm-setup: the first boot of a Slurm controller or login node of an hpc_slurm_cluster
# (terraform-provider-hpc). Its settings come from the environment, which the provider's user data sets
# before this script (src/clouds/slurm.rs, `setup_script`):
#   HPC_SLURM_CLUSTER   the Slurm cluster's name           HPC_SLURM_ROLE   controller | login
#   HPC_SLURM_HOST      this host's name (a SlurmctldHost) HPC_SLURM_CLOUD  aws | gcp | azure | oci
#   HPC_SLURM_VERSION   the Slurm version the configuration is written for (22.05, ...)
#   HPC_SLURM_STATE     StateSaveLocation (controllers)
#   HPC_SLURM_KEY       the cluster's munge key, base64 (empty: the fabric has none)
#   HPC_SLURM_SYNC      the program hpc-slurm-sync (node/hpc-slurm-sync), base64
#   HPC_SLURM_LOCK      the program hpc-metadata-lock (node/hpc-metadata-lock), base64
# It locks the instance metadata service to root (hpc-metadata-lock), sets the host name (slurmctld serves
# only as a SlurmctldHost), installs Slurm and munge where the image
# lacks them, installs hpc-slurm-sync with a timer and runs it until the configuration is in the cloud's
# metadata (refusing one whose MAC does not verify under the key), starts munge, with accounting MariaDB and
# slurmdbd (on the controller slurmdbd.conf names) and (on a controller) slurmctld, and says whether Slurm
# answers.
set -euo pipefail

: "${HPC_SLURM_CLUSTER:?}" "${HPC_SLURM_ROLE:?}" "${HPC_SLURM_HOST:?}" "${HPC_SLURM_CLOUD:?}"
: "${HPC_SLURM_VERSION:?}" "${HPC_SLURM_STATE:?}" "${HPC_SLURM_SYNC:?}" "${HPC_SLURM_LOCK:?}"
HPC_SLURM_KEY=${HPC_SLURM_KEY:-}
# How long to wait for the configuration in the metadata, and (login nodes) for the controller, in seconds.
HPC_SLURM_WAIT=${HPC_SLURM_WAIT:-300}

mkdir -p /var/log
exec > >(tee -a /var/log/hpc-slurm-setup.log) 2>&1
say() { printf 'HPC SLURM %s\n' "$*"; }
say "setting up $HPC_SLURM_ROLE $HPC_SLURM_HOST of Slurm cluster $HPC_SLURM_CLUSTER (Slurm $HPC_SLURM_VERSION, $HPC_SLURM_CLOUD)"

# Only root reaches the metadata service from here on (and at every boot): it serves this host's user data
# and cloud credentials to whoever asks, and many people share this host.
printf '%s' "$HPC_SLURM_LOCK" | base64 -d >/usr/local/sbin/hpc-metadata-lock
chmod 755 /usr/local/sbin/hpc-metadata-lock
if ! /usr/local/sbin/hpc-metadata-lock --install; then
  say "ERROR: the instance metadata service could not be locked to root on this host; stopping here"
  exit 1
fi

case $HPC_SLURM_ROLE in
  controller)
    binary=slurmctld deb=(slurmctld slurm-client munge) rpm=(slurm-slurmctld slurm munge) services=(munge slurmctld) ;;
  login)
    binary=sinfo deb=(slurm-client munge) rpm=(slurm munge) services=(munge) ;;
  *)
    say "ERROR: unknown role $HPC_SLURM_ROLE"
    exit 2 ;;
esac

# A controller gives StateSaveLocation to slurm recursively (chown -R below): never the machine's root, however it
# is spelled (//, /., /.., a link to /).
if [ "$HPC_SLURM_ROLE" = controller ] && [ "$(realpath -m -- "$HPC_SLURM_STATE")" = / ]; then
  say "ERROR: the state directory $HPC_SLURM_STATE is the root directory: set state_save_location to a directory of its own"
  exit 1
fi

if [ -z "$HPC_SLURM_KEY" ]; then
  say "ERROR: no key: set slurm = true on the fabric and apply it first"
  exit 1
fi

hostnamectl set-hostname "$HPC_SLURM_HOST" 2>/dev/null || hostname "$HPC_SLURM_HOST"

if ! command -v "$binary" >/dev/null; then
  if command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q "${deb[@]}"
  elif command -v dnf >/dev/null; then
    dnf install -y epel-release oracle-epel-release-el8 oracle-epel-release-el9 2>/dev/null || true
    dnf install -y "${rpm[@]}"
  fi
fi

install -d -m 755 /etc/slurm /var/log/slurm /usr/local/sbin /etc/systemd/system
printf '%s' "$HPC_SLURM_SYNC" | base64 -d >/usr/local/sbin/hpc-slurm-sync
chmod 755 /usr/local/sbin/hpc-slurm-sync
printf 'HPC_SLURM_CLOUD=%s\nHPC_SLURM_ROLE=%s\n' "$HPC_SLURM_CLOUD" "$HPC_SLURM_ROLE" >/etc/default/hpc-slurm-sync
cat >/etc/systemd/system/hpc-slurm-sync.service <<'EOF'
[Unit]
Description=Slurm configuration from the cloud's metadata (terraform-provider-hpc)
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/hpc-slurm-sync
EOF
cat >/etc/systemd/system/hpc-slurm-sync.timer <<'EOF'
[Unit]
Description=Slurm configuration from the cloud's metadata, every minute

[Timer]
OnBootSec=2min
OnUnitActiveSec=1min

[Install]
WantedBy=timers.target
EOF

# The key, root-only (munge's own): hpc-slurm-sync checks the configuration's MAC with it.
install -d -m 700 /etc/munge
printf '%s' "$HPC_SLURM_KEY" | base64 -d >/etc/munge/munge.key
chown munge:munge /etc/munge /etc/munge/munge.key 2>/dev/null || true
chmod 400 /etc/munge/munge.key

# The configuration, from the metadata the host was made with (the cloud may take a moment to serve it).
# Waits are measured on the clock, not by counting sleeps: a call can itself take long.
deadline=$((SECONDS + HPC_SLURM_WAIT))
until /usr/local/sbin/hpc-slurm-sync; do
  if [ "$SECONDS" -ge "$deadline" ]; then break; fi
  sleep 5
done
if [ ! -s /etc/slurm/slurm.conf ]; then
  say "ERROR: no Slurm configuration in this host's metadata after ${HPC_SLURM_WAIT} s"
  exit 1
fi

# The installed version, read once a configuration exists (Slurm's commands read it even for -V).
have=$("$binary" -V 2>/dev/null | awk '{print $2}' | cut -d. -f1-2) || true
if [ "$have" != "$HPC_SLURM_VERSION" ]; then
  say "WARNING: Slurm ${have:-none} is installed and the configuration is written for $HPC_SLURM_VERSION: set slurm_version to the version the images run, or use an image with Slurm $HPC_SLURM_VERSION"
fi

if [ "$HPC_SLURM_ROLE" = controller ]; then
  install -d -m 755 "${HPC_SLURM_STATE:?}"
  chown -R slurm:slurm "${HPC_SLURM_STATE:?}" /var/log/slurm 2>/dev/null || true
fi
# Job accounting, on the controller slurmdbd.conf names (DbdHost): MariaDB beside it, which knows the slurm user
# by its local socket (no password), then slurmdbd, before slurmctld registers the cluster with it.
if [ "$HPC_SLURM_ROLE" = controller ] && grep -qx "DbdHost=$HPC_SLURM_HOST" /etc/slurm/slurmdbd.conf 2>/dev/null; then
  if ! command -v slurmdbd >/dev/null || ! command -v mariadb >/dev/null; then
    if command -v apt-get >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmdbd mariadb-server
    elif command -v dnf >/dev/null; then
      dnf install -y slurm-slurmdbd mariadb-server
    fi
  fi
  systemctl enable munge mariadb
  systemctl restart munge mariadb
  mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED VIA unix_socket; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  chown slurm:slurm /etc/slurm/slurmdbd.conf
  chmod 600 /etc/slurm/slurmdbd.conf
  systemctl enable slurmdbd
  systemctl restart slurmdbd
  # A slurmdbd that stops or does not answer in time is said at once, with its own words: slurmctld does not
  # serve before it has its cluster's id from slurmdbd (24.11 and later), so the setup stops here.
  deadline=$((SECONDS + HPC_SLURM_WAIT))
  until timeout 10 sacctmgr -n -P show cluster >/dev/null 2>&1; do
    if systemctl is-failed --quiet slurmdbd || [ "$SECONDS" -ge "$deadline" ]; then
      say "ERROR: accounting: slurmdbd does not run on $HPC_SLURM_HOST (accounting = false runs the cluster without it):"
      tail -n 5 /var/log/slurm/slurmdbd.log 2>/dev/null || journalctl -u slurmdbd --no-pager -n 5 || true
      exit 1
    fi
    sleep 2
  done
  timeout 30 sacctmgr -i add cluster "$HPC_SLURM_CLUSTER" >/dev/null 2>&1 || true
  say "ACCOUNTING: slurmdbd on $HPC_SLURM_HOST"
fi

systemctl daemon-reload
systemctl enable --now hpc-slurm-sync.timer
for unit in "${services[@]}"; do
  systemctl enable "$unit"
  systemctl restart "$unit"
done

# Say whether Slurm answers: the controller itself, or (login) the controller from here.
deadline=$((SECONDS + HPC_SLURM_WAIT))
until timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    if [ "$HPC_SLURM_ROLE" = controller ]; then
      say "ERROR: slurmctld does not answer on $HPC_SLURM_HOST:"
      systemctl status slurmctld --no-pager -l 2>&1 | tail -n 20 || true
      tail -n 20 /var/log/slurm/slurmctld.log 2>/dev/null || true
      exit 1
    fi
    say "WARNING: no controller answers yet; sinfo will once one does"
    break
  fi
  sleep 5
done
say "READY: $HPC_SLURM_HOST"
