//! What Slurm's hosts run at their first boot, as text: the controllers' and login nodes' setup script,
//! the GPU nodes' join script, and the health check program Slurm runs on the nodes. PURE: the plan's
//! configuration in, scripts out; each cloud's backend puts them in its user data.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::catalog::Cloud;
use crate::model::{SlurmPlan, SlurmSpec};
use crate::redact::Secret;

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

impl Role {
    /// `controller` or `login`: what [`sync_program`] is told it runs on.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::Login => "login",
        }
    }
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The first-boot script of a controller or login node (its user data): sets its host name (slurmctld
/// serves only as a `SlurmctldHost`), installs Slurm's packages and munge where the image lacks them (apt
/// or dnf), says loudly when the installed Slurm is not the version the configuration is for, installs
/// [`sync_program`] with a timer and runs it (the configuration is in the cloud's metadata, where an
/// update changes it in place), writes the cluster's key, and starts munge and, on a controller, slurmctld.
/// `key` is the fabric's; a node without it cannot authenticate, so the script stops with a message.
pub fn setup_script(spec: &SlurmSpec, role: Role, host: &str, key: Option<&str>) -> String {
    let v = spec.version.version;
    let (binary, deb, rpm, services) = match role {
        Role::Controller => ("slurmctld", "slurmctld slurm-client munge", "slurm-slurmctld slurm munge", "munge slurmctld"),
        Role::Login => ("sinfo", "slurm-client munge", "slurm munge", "munge"),
    };
    let state = &spec.state_save_location;
    let what = role.as_str();
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
mkdir -p "$R/etc/slurm" "$R/var/log/slurm" "$R{state}" "$R{sbin}" "$R/etc/systemd/system"
put() {{ printf '%s' "$2" | base64 -d > "$R$1"; }}
"#,
        name = spec.name,
        sbin = SYNC_PATH.rsplit_once('/').map_or("/", |(d, _)| d),
    );
    let unit = format!(
        "[Unit]\nDescription=Slurm configuration from the cloud's metadata (terraform-provider-hpc)\nWants=network-online.target\n\
         After=network-online.target\n\n[Service]\nType=oneshot\nExecStart={SYNC_PATH} {what}\n"
    );
    let timer = "[Unit]\nDescription=Slurm configuration from the cloud's metadata, every minute\n\n[Timer]\nOnBootSec=2min\n\
                 OnUnitActiveSec=1min\n\n[Install]\nWantedBy=timers.target\n";
    let _ = writeln!(s, "put {SYNC_PATH} '{}'\nchmod 755 \"$R{SYNC_PATH}\"", b64(&sync_program(spec.fabric.cloud)));
    let _ = writeln!(s, "put /etc/systemd/system/hpc-slurm-sync.service '{}'", b64(&unit));
    let _ = writeln!(s, "put /etc/systemd/system/hpc-slurm-sync.timer '{}'", b64(timer));
    let _ = write!(
        s,
        r#"# The configuration, from the metadata the cluster was made with (the cloud may take a moment to serve it).
for _ in $(seq 60); do "$R{SYNC_PATH}" {what} && break; sleep 5; done
if [ ! -s "$R/etc/slurm/slurm.conf" ]; then echo "HPC SLURM ERROR: no Slurm configuration in this host's metadata"; exit 1; fi
"#
    );
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
systemctl daemon-reload
systemctl enable --now hpc-slurm-sync.timer
for unit in {services}; do systemctl enable "$unit"; systemctl restart "$unit"; done
echo "HPC SLURM READY: {host}"
"#
    );
    s
}

/// Where the controllers and login nodes install [`sync_program`].
pub const SYNC_PATH: &str = "/usr/local/sbin/hpc-slurm-sync";

/// The configuration a Slurm cluster's controllers and login nodes run, as the cloud's metadata carries it:
/// `payload` is the files (`# hpc-slurm-config <revision>`, then `@@ <file>` before each file's text),
/// gzip-compressed and base64-encoded; `revision` names the files' content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmConfig {
    pub revision: String,
    pub payload: String,
}

/// Where each cloud's metadata carries the configuration on the controllers and login nodes, and its revision:
/// AWS instance tags (read through the instance metadata service's tags): `hpc:slurm-config` is
/// `<revision> <chunks>` and `hpc:slurm-config-<i>` the payload in chunks of a tag value's 256 characters;
/// Google Cloud metadata items `hpc-slurm-config` and `hpc-slurm-config-revision`; Azure the VM's `userData`
/// (the payload) and its tag `hpc:slurm-config` (the revision); OCI instance metadata `hpc_slurm_config` and
/// `hpc_slurm_config_revision`.
pub mod channel {
    pub const AWS_TAG: &str = "hpc:slurm-config";
    /// EC2's longest tag value.
    pub const AWS_CHUNK: usize = 256;
    pub const GCP_KEY: &str = "hpc-slurm-config";
    pub const GCP_REVISION_KEY: &str = "hpc-slurm-config-revision";
    pub const AZURE_TAG: &str = "hpc:slurm-config";
    pub const OCI_KEY: &str = "hpc_slurm_config";
    pub const OCI_REVISION_KEY: &str = "hpc_slurm_config_revision";
}

/// The files of a plan's configuration under `/etc/slurm`, each ending with a new line.
fn config_files(plan: &SlurmPlan) -> Vec<(&'static str, String)> {
    let mut files = vec![("slurm.conf", &plan.slurm_conf), ("gres.conf", &plan.gres_conf), ("cgroup.conf", &plan.cgroup_conf)];
    if let Some(t) = &plan.topology.conf {
        files.push(("topology.conf", t));
    }
    if let Some(t) = &plan.topology.yaml {
        files.push(("topology.yaml", t));
    }
    files.into_iter().map(|(f, t)| (f, if t.ends_with('\n') || t.is_empty() { t.clone() } else { format!("{t}\n") })).collect()
}

/// A plan's configuration as the metadata carries it.
pub fn slurm_config(plan: &SlurmPlan) -> SlurmConfig {
    use std::io::Write as _;
    let mut body = String::new();
    for (file, text) in config_files(plan) {
        let _ = write!(body, "@@ {file}\n{text}");
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body.as_bytes());
    let revision: String = digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    let bundle = format!("# hpc-slurm-config {revision}\n{body}");
    // No file name and no time in the header: the same files give the same payload.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = gz.write_all(bundle.as_bytes());
    let bytes = gz.finish().unwrap_or_default();
    use base64::Engine;
    SlurmConfig { revision, payload: base64::engine::general_purpose::STANDARD.encode(bytes) }
}

/// The files a payload carries, by name: what a host's [`sync_program`] writes (None when it does not decode).
pub fn config_of_payload(payload: &str) -> Option<(String, BTreeMap<String, String>)> {
    use base64::Engine;
    use std::io::Read as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(payload.trim()).ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut text).ok()?;
    let mut lines = text.split_inclusive('\n');
    let revision = lines.next()?.trim_end().strip_prefix("# hpc-slurm-config ")?.to_owned();
    let mut files = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in lines {
        if let Some(name) = line.strip_prefix("@@ ") {
            current = Some(name.trim_end().to_owned());
            files.insert(name.trim_end().to_owned(), String::new());
        } else if let Some(f) = &current {
            files.get_mut(f)?.push_str(line);
        }
    }
    Some((revision, files))
}

/// The AWS tags that carry a configuration: the revision and chunk count, and the chunks.
pub fn aws_config_tags(config: &SlurmConfig) -> Vec<(String, String)> {
    let chunks: Vec<&str> =
        config.payload.as_bytes().chunks(channel::AWS_CHUNK).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
    let mut tags = vec![(channel::AWS_TAG.to_owned(), format!("{} {}", config.revision, chunks.len()))];
    tags.extend(chunks.into_iter().enumerate().map(|(i, c)| (aws_chunk_tag(i), c.to_owned())));
    tags
}

/// The payload an AWS instance's tags carry, its chunks joined (None when a chunk is missing).
pub fn aws_payload(tags: &BTreeMap<String, String>) -> Option<String> {
    let count: usize = tags.get(channel::AWS_TAG)?.split_whitespace().nth(1)?.parse().ok()?;
    (0..count).map(|i| tags.get(&aws_chunk_tag(i)).cloned()).collect()
}

/// The tag holding a configuration's chunk `i` (`hpc:slurm-config-0`, ...).
fn aws_chunk_tag(i: usize) -> String {
    format!("{}-{i}", channel::AWS_TAG)
}

/// The revision an AWS instance's tags carry (`hpc:slurm-config`'s first word).
pub fn aws_revision(tags: &BTreeMap<String, String>) -> Option<String> {
    tags.get(channel::AWS_TAG).and_then(|v| v.split_whitespace().next()).map(str::to_owned)
}

/// How the sync program reads the payload from the cloud's instance metadata service, as a shell function.
fn payload_fetch(cloud: Cloud) -> String {
    match cloud {
        Cloud::Aws => format!(
            r#"fetch() {{
  local t n i
  t=$(curl -sf -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token) || return 1
  n=$(curl -sf -m 5 -H "X-aws-ec2-metadata-token: $t" http://169.254.169.254/latest/meta-data/tags/instance/{tag}) || return 1
  n=${{n##* }}
  for i in $(seq 0 $((n - 1))); do
    curl -sf -m 5 -H "X-aws-ec2-metadata-token: $t" "http://169.254.169.254/latest/meta-data/tags/instance/{tag}-$i" || return 1
  done
}}"#,
            tag = channel::AWS_TAG
        ),
        Cloud::Gcp => format!(
            "fetch() {{ curl -sf -m 5 -H 'Metadata-Flavor: Google' \
             http://metadata.google.internal/computeMetadata/v1/instance/attributes/{}; }}",
            channel::GCP_KEY
        ),
        Cloud::Azure => "fetch() { curl -sf -m 5 -H Metadata:true \
                         'http://169.254.169.254/metadata/instance/compute/userData?api-version=2021-01-01&format=text'; }"
            .to_owned(),
        Cloud::Oci => format!(
            "fetch() {{ curl -sf -m 5 -H 'Authorization: Bearer Oracle' http://169.254.169.254/opc/v2/instance/metadata/{}; }}",
            channel::OCI_KEY
        ),
    }
}

/// `hpc-slurm-sync <controller|login>`: run at first boot and every minute by a timer on the controllers and
/// login nodes. Reads the configuration from the cloud's instance metadata; when its revision is new, writes
/// the files under /etc/slurm (a payload that does not decode, as one read while it was being rewritten,
/// changes nothing and is read again next time) and, on a controller whose slurmctld runs, restarts
/// slurmctld (its state is kept, running jobs go on) and sends the nodes the new configuration
/// (`scontrol reconfigure`: configless slurmd fetch it).
pub fn sync_program(cloud: Cloud) -> String {
    format!(
        r#"#!/bin/bash
# hpc-slurm-sync: this host's Slurm configuration from the cloud's metadata (terraform-provider-hpc).
set -uo pipefail
role=${{1:-login}}
R=${{HPC_SLURM_ROOT:-}}
{fetch}
data=$(fetch) || {{ echo "HPC SLURM: no configuration in this host's metadata yet"; exit 75; }}
bundle=$(printf '%s' "$data" | base64 -d 2>/dev/null | gzip -dc 2>/dev/null) || {{
  echo "HPC SLURM: the configuration in the metadata does not decode (being rewritten?); reading it again next time"; exit 75; }}
rev=$(printf '%s\n' "$bundle" | sed -n '1s/^# hpc-slurm-config //p')
if [ -z "$rev" ]; then echo "HPC SLURM ERROR: the metadata holds no Slurm configuration"; exit 1; fi
if [ "$rev" = "$(cat "$R/etc/slurm/.hpc-config-revision" 2>/dev/null)" ]; then exit 0; fi
mkdir -p "$R/etc/slurm" && new=$(mktemp -d "$R/etc/slurm/.hpc-new.XXXXXX") && [ -d "$new" ] || {{
  echo "HPC SLURM ERROR: cannot write under $R/etc/slurm"; exit 1; }}
printf '%s\n' "$bundle" | awk -v d="$new" 'NR == 1 {{ next }} /^@@ / {{ f = d "/" $2; printf "" > f; next }} f {{ print >> f }}'
if [ ! -s "$new/slurm.conf" ]; then echo "HPC SLURM ERROR: configuration $rev has no slurm.conf"; rm -rf "$new"; exit 1; fi
for f in topology.conf topology.yaml; do [ -e "$new/$f" ] || rm -f "$R/etc/slurm/$f"; done
for f in "$new"/*; do chmod 644 "$f"; mv -f "$f" "$R/etc/slurm/${{f##*/}}"; done
rmdir "$new"
printf '%s\n' "$rev" > "$R/etc/slurm/.hpc-config-revision"
echo "HPC SLURM CONFIG: $rev"
if [ "$role" = controller ] && systemctl is-active --quiet slurmctld; then
  systemctl restart slurmctld
  for _ in $(seq 30); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 2; done
  scontrol reconfigure && echo "HPC SLURM RECONFIGURED: $rev"
fi
exit 0
"#,
        fetch = payload_fetch(cloud)
    )
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
        key = join.key.as_ref().map(|k| k.expose_str()).unwrap_or_default(),
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
mkdir -p "$R/var/spool/slurmd" "$R/var/log/slurm" "$R/etc/systemd/system/slurmd.service.d"
# slurmd tries again until the controller knows this node: a node added to a cluster boots before the
# controller has the configuration that names it (it takes that within a minute of the Slurm cluster's apply).
printf '[Unit]\nStartLimitIntervalSec=0\n\n[Service]\nRestart=always\nRestartSec=30\n' > "$R/etc/systemd/system/slurmd.service.d/hpc-retry.conf"
systemctl daemon-reload
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
pub fn node_user_data(spec: &crate::model::ClusterSpec, azure_offset: u32) -> Option<Secret<String>> {
    match &spec.slurm {
        None => spec.user_data.clone(),
        Some(join) => Some(Secret::new(super::user_data::combined_with(
            &join_script(spec.fabric.cloud, &spec.name, join, azure_offset),
            JOIN_FILE_NAME,
            "HPC-SLURM",
            spec.user_data.as_ref().map(|u| u.expose_str()),
        ))),
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
