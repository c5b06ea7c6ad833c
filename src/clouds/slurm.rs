//! What Slurm's hosts run at their first boot, as text: the controllers' and login nodes' setup script,
//! the GPU nodes' join script, and the health check program Slurm runs on the nodes. PURE: the plan's
//! configuration in, scripts out; each cloud's backend puts them in its user data.

use std::fmt::Write;

use crate::catalog::Cloud;
use crate::model::{SlurmPlan, SlurmSpec};

/// Where the nodes install the health check program Slurm runs (`HealthCheckProgram`).
pub const HEALTHCHECK_PATH: &str = "/usr/local/sbin/hpc-slurm-healthcheck";

/// The health check's settings file, which slurmd's empty environment cannot carry (the nodes write none;
/// an image or a test may).
pub const HEALTHCHECK_SETTINGS: &str = "/etc/default/hpc-slurm-healthcheck";

/// Where cloud-init keeps the boot-time self-check (`data "hpc_gpu_selfcheck"`, its part's file name), which
/// the health check runs again.
pub const SELFCHECK_PATH: &str = "/var/lib/cloud/instance/scripts/00-hpc-selfcheck.sh";

/// The drain reason's prefix: a node the health check drained is resumed by it once it passes again; one
/// drained for another reason (an administrator's) is left as it is.
pub const DRAIN_PREFIX: &str = "hpc-selfcheck:";

/// Slurm's ports, as its own defaults.
pub const SLURMCTLD_PORT: u16 = 6817;
pub const SLURMD_PORT: u16 = 6818;

/// Slurm's `HealthCheckProgram` for the nodes: the boot-time self-check run again at once (no wait), a node
/// that fails it drained with its reason (and the self-check publishes its verdict, so the cluster's next
/// plan repairs the node), one it had drained resumed when it passes again.
pub fn healthcheck_program() -> String {
    format!(
        r#"#!/bin/bash
# hpc-slurm-healthcheck: Slurm's HealthCheckProgram (terraform-provider-hpc).
# Runs the node's self-check (data "hpc_gpu_selfcheck") again without waiting. A node that fails is drained
# with the self-check's reason, and the self-check publishes its verdict, so the cluster's next plan repairs
# the node; a node this program drained is resumed once it passes. A node without the self-check passes.
# slurmd runs it with no environment but SLURMD_NODENAME: {settings} may set
# PATH, SLURM_CONF, HPC_SELFCHECK_PROGRAM and the self-check's HPC_SELFCHECK_* settings.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
set -a
[[ -r {settings} ]] && . {settings}
set +a
if [[ -z ${{SLURM_CONF:-}} && -e /run/slurm/conf/slurm.conf ]]; then export SLURM_CONF=/run/slurm/conf/slurm.conf; fi
SELFCHECK=${{HPC_SELFCHECK_PROGRAM:-{selfcheck}}}
node=${{SLURMD_NODENAME:-$(hostname -s)}}
[[ -x $SELFCHECK ]] || exit 0
if out=$(HPC_SELFCHECK_WAIT_SECONDS=0 "$SELFCHECK" 2>&1); then
  reason=$(scontrol show node "$node" 2>/dev/null | sed -n 's/^ *Reason=\(.*\) \[.*/\1/p')
  if [[ $reason == {prefix}* ]]; then
    scontrol update nodename="$node" state=resume
  fi
  exit 0
fi
why=$(printf '%s\n' "$out" | sed -n 's/.*HPC SELFCHECK FAILED: //p' | tail -n 1)
scontrol update nodename="$node" state=drain reason="{prefix} ${{why:-failed}}"
exit 1
"#,
        selfcheck = SELFCHECK_PATH,
        prefix = DRAIN_PREFIX,
        settings = HEALTHCHECK_SETTINGS,
    )
}

/// What a controller or login node is set up as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Controller,
    Login,
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The first-boot script of a controller or login node (its user data): sets its host name (slurmctld
/// serves only as a `SlurmctldHost`), installs Slurm's packages and munge where the image lacks them (apt
/// or dnf), says loudly when the installed Slurm is not the version the configuration is for, writes the
/// configuration and the cluster's key, and starts munge and, on a controller, slurmctld. `key` is the
/// fabric's; a node without it cannot authenticate, so the script stops with a message.
pub fn setup_script(spec: &SlurmSpec, plan: &SlurmPlan, role: Role, host: &str, key: Option<&str>) -> String {
    let v = spec.version.version;
    let (binary, deb, rpm, services) = match role {
        Role::Controller => ("slurmctld", "slurmctld slurm-client munge", "slurm-slurmctld slurm munge", "munge slurmctld"),
        Role::Login => ("sinfo", "slurm-client munge", "slurm munge", "munge"),
    };
    let state = &spec.state_save_location;
    let what = if role == Role::Controller { "controller" } else { "login node" };
    let mut s = format!(
        r#"#!/bin/bash
# hpc_slurm_cluster {name}: {what} {host} (terraform-provider-hpc), for Slurm {v}.
set -euo pipefail
# Every path under R (empty on a host; a test's directory off one).
R=${{HPC_SLURM_ROOT:-}}
mkdir -p "$R/var/log"
exec > >(tee -a "$R/var/log/hpc-slurm-setup.log") 2>&1
hostnamectl set-hostname {host} 2>/dev/null || hostname {host}
if ! command -v {binary} >/dev/null; then
  if command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q {deb}
  elif command -v dnf >/dev/null; then
    dnf install -y epel-release oracle-epel-release-el8 oracle-epel-release-el9 2>/dev/null || true
    dnf install -y {rpm}
  fi
fi
have=$({binary} -V 2>/dev/null | awk '{{print $2}}' | cut -d. -f1-2)
if [ "$have" != "{v}" ]; then
  echo "HPC SLURM WARNING: Slurm ${{have:-none}} is installed and the configuration is written for {v}: set slurm_version to the version the images run, or use an image with Slurm {v}"
fi
mkdir -p "$R/etc/slurm" "$R/var/log/slurm" "$R{state}"
put() {{ printf '%s' "$2" | base64 -d > "$R$1"; }}
"#,
        name = spec.name,
    );
    let mut files =
        vec![("slurm.conf", plan.slurm_conf.as_str()), ("gres.conf", plan.gres_conf.as_str()), ("cgroup.conf", plan.cgroup_conf.as_str())];
    if let Some(t) = &plan.topology.conf {
        files.push(("topology.conf", t));
    }
    if let Some(t) = &plan.topology.yaml {
        files.push(("topology.yaml", t));
    }
    for (file, text) in files {
        let _ = writeln!(s, "put /etc/slurm/{file} '{}'", b64(text));
    }
    match key {
        Some(k) => {
            let _ = writeln!(
                s,
                "mkdir -p \"$R/etc/munge\"\nprintf '%s' '{k}' | base64 -d > \"$R/etc/munge/munge.key\"\n\
                 chown munge:munge \"$R/etc/munge/munge.key\" 2>/dev/null || true\nchmod 400 \"$R/etc/munge/munge.key\""
            );
        }
        None => s.push_str("echo 'HPC SLURM ERROR: no key: set slurm = true on the fabric and apply it first'\nexit 1\n"),
    }
    let _ = write!(
        s,
        r#"chown -R slurm:slurm "$R{state}" "$R/var/log/slurm" 2>/dev/null || true
for unit in {services}; do systemctl enable "$unit"; systemctl restart "$unit"; done
echo "HPC SLURM READY: {host}"
"#
    );
    s
}

/// The join script's file name in the nodes' user data: after the self-check (`00-hpc-selfcheck.sh`), so a
/// node that fails it is gone before it joins; before the user's own scripts.
pub const JOIN_FILE_NAME: &str = "50-hpc-slurm-join.sh";

/// How a node learns its Slurm node name (its name in the cluster) from the cloud's metadata service: the
/// instance's `Name` tag (AWS, with instance tags in its metadata), its name (Google Cloud), its display
/// name (OCI), or on Azure from its instance id in its scale set, whose first node is `azure_offset`
/// (node `<cluster>-<offset + id>`: a scale set numbers its VMs from 0 upwards, and node names follow).
fn node_name_lookup(cloud: Cloud, cluster: &str, azure_offset: u32) -> String {
    match cloud {
        Cloud::Aws => {
            r#"t=$(curl -sf -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token) &&
    curl -sf -m 5 -H "X-aws-ec2-metadata-token: $t" http://169.254.169.254/latest/meta-data/tags/instance/Name"#
                .to_owned()
        }
        Cloud::Gcp => {
            "curl -sf -m 5 -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/name".to_owned()
        }
        Cloud::Oci => r#"curl -sf -m 5 -H 'Authorization: Bearer Oracle' http://169.254.169.254/opc/v2/instance/displayName"#.to_owned(),
        Cloud::Azure => format!(
            r#"vm=$(curl -sf -m 5 -H Metadata:true 'http://169.254.169.254/metadata/instance/compute/name?api-version=2021-02-01&format=text') &&
    echo "{}""#,
            crate::nodes::node_name_in_shell(cluster, &format!("$(( {azure_offset} + ${{vm##*_}} ))"))
        ),
    }
}

/// The first-boot script that joins a GPU node to the Slurm cluster: installs slurmd and munge where the
/// image lacks them, writes the cluster's key, learns the node's Slurm name from the cloud, installs the
/// health check program, and starts slurmd configless (`--conf-server` the controllers), so the node
/// registers under its name and gets its address from the registration. Runs again after a remake, so a
/// replaced node joins as the one it replaces.
pub fn join_script(cloud: Cloud, cluster: &str, join: &crate::model::SlurmJoin, azure_offset: u32) -> String {
    let servers = join.controllers.iter().map(|c| format!("{c}:{SLURMCTLD_PORT}")).collect::<Vec<_>>().join(",");
    let mut s = format!(
        r#"#!/bin/bash
# hpc-slurm-join: joins this node of cluster {cluster} to its Slurm cluster (terraform-provider-hpc).
set -euo pipefail
# Every path under R (empty on a node; a test's directory off one).
R=${{HPC_SLURM_ROOT:-}}
mkdir -p "$R/var/log"
exec > >(tee -a "$R/var/log/hpc-slurm-join.log") 2>&1
if ! command -v slurmd >/dev/null; then
  if command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q slurmd slurm-client munge
  elif command -v dnf >/dev/null; then
    dnf install -y epel-release oracle-epel-release-el8 oracle-epel-release-el9 2>/dev/null || true
    dnf install -y slurm-slurmd slurm munge
  fi
fi
mkdir -p "$R/etc/munge"
printf '%s' '{key}' | base64 -d > "$R/etc/munge/munge.key"
chown munge:munge "$R/etc/munge/munge.key" 2>/dev/null || true
chmod 400 "$R/etc/munge/munge.key"
node=
for _ in $(seq 60); do
  node=$({lookup} 2>/dev/null) && [ -n "$node" ] && break
  sleep 5
done
if [ -z "$node" ]; then echo "HPC SLURM ERROR: this node's name is not in the cloud's metadata"; exit 1; fi
"#,
        key = join.key.as_deref().unwrap_or_default(),
        lookup = node_name_lookup(cloud, cluster, azure_offset),
    );
    let _ = writeln!(
        s,
        "mkdir -p \"$R{dir}\"\nprintf '%s' '{}' | base64 -d > \"$R{HEALTHCHECK_PATH}\"\nchmod 755 \"$R{HEALTHCHECK_PATH}\"",
        b64(&healthcheck_program()),
        dir = HEALTHCHECK_PATH.rsplit_once('/').map_or("/", |(d, _)| d)
    );
    let _ = write!(
        s,
        r#"options="--conf-server {servers} -N $node"
# Debian and Ubuntu read SLURMD_OPTIONS from /etc/default/slurmd, Oracle Linux and RHEL from /etc/sysconfig/slurmd.
for f in "$R/etc/default/slurmd" "$R/etc/sysconfig/slurmd"; do [ -d "${{f%/*}}" ] && echo "SLURMD_OPTIONS=\"$options\"" > "$f"; done
mkdir -p "$R/var/spool/slurmd" "$R/var/log/slurm"
for unit in munge slurmd; do systemctl enable "$unit"; systemctl restart "$unit"; done
echo "HPC SLURM JOINED: $node"
"#
    );
    s
}

/// The command that logs in: SSH to the first login node (or the controller when there is none).
pub fn login_command(user: &str, address: &str) -> String {
    format!("ssh {user}@{address}")
}

/// The user data a cluster's nodes boot with (cloud-init): the user's own, and when the nodes join Slurm the
/// join script before it, as one MIME document. `azure_offset` is the first node of the Azure scale set the
/// user data is for (0 elsewhere).
pub fn node_user_data(spec: &crate::model::ClusterSpec, azure_offset: u32) -> Option<String> {
    match &spec.slurm {
        None => spec.user_data.clone(),
        Some(join) => Some(super::user_data::combined_with(
            &join_script(spec.fabric.cloud, &spec.name, join, azure_offset),
            JOIN_FILE_NAME,
            "HPC-SLURM",
            spec.user_data.as_deref(),
        )),
    }
}

/// What an import reads back as the user's `user_data` from user data [`node_user_data`] composed: the
/// user's own part, without the join script (None when there was only the join).
pub fn user_part(user_data: Option<String>) -> Option<String> {
    let doc = user_data?;
    if !doc.contains(JOIN_FILE_NAME) || !super::user_data::is_mime(&doc) {
        return Some(doc);
    }
    super::user_data::without_part(&doc, JOIN_FILE_NAME)
}
