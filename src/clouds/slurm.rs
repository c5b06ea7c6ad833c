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
/// slurmdbd's port (`DbdPort`, `AccountingStoragePort`): Slurm's default.
pub const SLURMDBD_PORT: u16 = 6819;

/// Slurm's `HealthCheckProgram` for the nodes (`node/hpc-slurm-healthcheck`): the boot-time self-check run
/// again at once without its failure action; a node that fails it is drained with its reason (never powered
/// off: a drain lets running jobs finish), and the self-check publishes its verdict, so the cluster's next plan
/// repairs the node; one it had drained is resumed when it passes again.
pub fn healthcheck_program() -> String {
    HEALTHCHECK.to_owned()
}

/// Where the nodes install Slurm's `Prolog` and `Epilog` (`node/hpc-slurm-prolog`, `node/hpc-slurm-epilog`): on
/// rack-scale nodes they start and stop the job's IMEX domain, elsewhere they do nothing.
pub const PROLOG_PATH: &str = "/usr/local/sbin/hpc-slurm-prolog";
pub const EPILOG_PATH: &str = "/usr/local/sbin/hpc-slurm-epilog";

/// The feature that names a rack-scale node's NVLink domain in slurm.conf (`nvlink-<domain>`), which the prolog
/// reads to make a job's IMEX domain of the job's nodes in that NVLink domain.
pub const NVLINK_FEATURE_PREFIX: &str = "nvlink-";

/// Slurm's `Prolog` and `Epilog` on the GPU nodes (`node/hpc-slurm-prolog`, `node/hpc-slurm-epilog`).
pub fn prolog_program() -> &'static str {
    PROLOG
}

pub fn epilog_program() -> &'static str {
    EPILOG
}

/// `hpc-metadata-lock` (`node/hpc-metadata-lock`), without its comments: every host of a Slurm cluster runs it
/// at first boot (`--install`: and at every boot after), so that only root reaches the instance metadata
/// service, and with it the host's user data and cloud credentials.
pub fn metadata_lock_program() -> String {
    compact(LOCK)
}

/// Where the hosts install [`metadata_lock_program`].
pub const LOCK_PATH: &str = "/usr/local/sbin/hpc-metadata-lock";

/// The node-side programs, as files (`node/`): shellcheck reads them, the tests run them.
const HEALTHCHECK: &str = include_str!("../../node/hpc-slurm-healthcheck");
const PROLOG: &str = include_str!("../../node/hpc-slurm-prolog");
const EPILOG: &str = include_str!("../../node/hpc-slurm-epilog");
const SETUP: &str = include_str!("../../node/slurm-setup.sh");
const SYNC: &str = include_str!("../../node/hpc-slurm-sync");
const JOIN: &str = include_str!("../../node/slurm-join.sh");
const LOCK: &str = include_str!("../../node/hpc-metadata-lock");

/// `s` quoted for a POSIX shell (single quotes; a quote inside as `'\''`).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A script as user data: a header line, its settings as exported shell variables, then the script's own text
/// without its first line (its `#!`) and without its comments and blank lines (user data is small: 16 KB on
/// AWS), except inside here-documents. The settings are quoted, whatever they hold.
pub fn with_settings(header: &str, settings: &[(&str, String)], script: &str) -> String {
    let mut out = format!("#!/bin/bash\n# {header}\n");
    if settings.iter().any(|(_, v)| v.contains('$') || v.contains('`')) {
        // The settings are data: what looks like an expansion in them is meant as written.
        out.push_str("# shellcheck disable=SC2016\n");
    }
    for (name, value) in settings {
        let _ = writeln!(out, "export {name}={}", shell_quote(value));
    }
    out.push_str(&without_comments(script));
    out
}

/// A node program as a host installs it: its `#!` line, then its text without comments and blank lines
/// ([`without_comments`]); the file in `node/` is where it is read and documented.
pub fn compact(program: &str) -> String {
    let first = program.lines().next().unwrap_or_default();
    format!("{first}\n{}", without_comments(program))
}

/// A script without its first line, full-line comments and blank lines, except in here-documents (whose
/// lines are kept as they are).
pub fn without_comments(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut heredoc: Option<String> = None;
    for line in script.lines().skip(1) {
        if let Some(end) = &heredoc {
            out.push_str(line);
            out.push('\n');
            if line == end {
                heredoc = None;
            }
            continue;
        }
        let t = line.trim_start();
        if t.is_empty() || (t.starts_with('#') && !t.starts_with("#!")) {
            continue;
        }
        if let Some(at) = line.find("<<'") {
            heredoc = line[at + 3..].split('\'').next().map(str::to_owned);
        }
        out.push_str(line);
        out.push('\n');
    }
    out
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

/// The first-boot script of a controller or login node (its user data): `node/slurm-setup.sh` with this
/// host's settings. It sets the host name (slurmctld serves only as a `SlurmctldHost`), installs Slurm's
/// packages and munge where the image lacks them, installs [`sync_program`] with a timer and runs it until the
/// configuration is in the cloud's metadata (where an update changes it in place), says loudly when the
/// installed Slurm is not the version the configuration is for, writes the cluster's key, starts munge and,
/// on a controller, slurmctld, and says whether Slurm answers. `key` is the fabric's; a host without it
/// cannot authenticate, so the script stops with a message.
pub fn setup_script(spec: &SlurmSpec, role: Role, host: &str, key: Option<&str>) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    with_settings(
        &format!(
            "hpc_slurm_cluster {}: {} {host} (terraform-provider-hpc), for Slurm {}; the script is node/slurm-setup.sh",
            spec.name,
            role.as_str(),
            spec.version.version
        ),
        &[
            ("HPC_SLURM_CLUSTER", spec.name.clone()),
            ("HPC_SLURM_ROLE", role.as_str().to_owned()),
            ("HPC_SLURM_HOST", host.to_owned()),
            ("HPC_SLURM_CLOUD", spec.fabric.cloud.as_str().to_owned()),
            ("HPC_SLURM_VERSION", spec.version.version.to_owned()),
            ("HPC_SLURM_STATE", spec.state_save_location.clone()),
            ("HPC_SLURM_KEY", key.unwrap_or_default().to_owned()),
            ("HPC_SLURM_SYNC", b64(&compact(&sync_program()))),
            ("HPC_SLURM_LOCK", b64(&metadata_lock_program())),
        ],
        SETUP,
    )
}

/// Where the controllers and login nodes install [`sync_program`].
pub const SYNC_PATH: &str = "/usr/local/sbin/hpc-slurm-sync";

/// The configuration a Slurm cluster's controllers and login nodes run, as the cloud's metadata carries it:
/// `payload` is the files (`# hpc-slurm-config <revision>`, then `# hpc-slurm-mac <mac>`, then `@@ <file>`
/// before each file's text), gzip-compressed and base64-encoded; `revision` names the files' content. The MAC
/// ([`config_mac`]) lets a host refuse a configuration that whoever may write its tags or metadata put there.
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
    if let Some(t) = &plan.slurmdbd_conf {
        files.push(("slurmdbd.conf", t));
    }
    files.into_iter().map(|(f, t)| (f, if t.ends_with('\n') || t.is_empty() { t.clone() } else { format!("{t}\n") })).collect()
}

/// The line of a payload that carries its MAC, after the revision's.
pub const MAC_LINE: &str = "# hpc-slurm-mac ";

/// The MAC of a configuration (`signed`: the payload's text without its [`MAC_LINE`]), lowercase hex:
/// HMAC-SHA256 under a key derived from the cluster's munge key (`key`, the bytes of `/etc/munge/munge.key`)
/// for this use alone, `HMAC-SHA256(key, "hpc-slurm-config")`. A host holds the munge key root-only, so the
/// MAC needs no secret of its own; `hpc-slurm-sync` computes the same and refuses what differs.
pub fn config_mac(key: &[u8], signed: &[u8]) -> String {
    use aws_lc_rs::hmac;
    let derived = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), b"hpc-slurm-config");
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()), signed);
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A plan's configuration as the metadata carries it, authenticated under the cluster's munge key (`key`,
/// base64, as the fabric holds it). Without a key (a plan, before the fabric has made it) the MAC is of an
/// empty key: the payload has its size, and no host is given it (a host without the key stops first).
pub fn slurm_config(plan: &SlurmPlan, key: Option<&str>) -> SlurmConfig {
    use base64::Engine;
    let key = key.and_then(|k| base64::engine::general_purpose::STANDARD.decode(k.trim()).ok()).unwrap_or_default();
    config_payload(&config_files(plan), &key)
}

/// The payload of `files` (name, text ending with a new line), its MAC under the munge key `key` (its bytes).
pub fn config_payload(files: &[(&str, String)], key: &[u8]) -> SlurmConfig {
    use base64::Engine;
    use std::io::Write as _;
    let mut body = String::new();
    for (file, text) in files {
        let _ = write!(body, "@@ {file}\n{text}");
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body.as_bytes());
    let revision: String = digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    let header = format!("# hpc-slurm-config {revision}\n");
    let mac = config_mac(key, format!("{header}{body}").as_bytes());
    let bundle = format!("{header}{MAC_LINE}{mac}\n{body}");
    // No file name and no time in the header: the same files give the same payload.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = gz.write_all(bundle.as_bytes());
    let bytes = gz.finish().unwrap_or_default();
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

/// `hpc-slurm-sync` (`node/hpc-slurm-sync`): run at first boot and every minute by a timer on the controllers
/// and login nodes. Reads the configuration from the cloud's instance metadata (the cloud and the host's role
/// are in `/etc/default/hpc-slurm-sync`, which the setup writes); when its revision is new, writes the files
/// under /etc/slurm (a payload that does not decode, as one read while it was being rewritten, changes nothing
/// and is read again next time) and, on a controller whose slurmctld runs, restarts slurmctld (its state is
/// kept, running jobs go on) and sends the nodes the new configuration (`scontrol reconfigure`: configless
/// slurmd fetch it).
pub fn sync_program() -> String {
    SYNC.to_owned()
}

/// The join script's file name in the nodes' user data: after the self-check (`00-hpc-selfcheck.sh`), so a
/// node that fails it is gone before it joins; before the user's own scripts.
pub const JOIN_FILE_NAME: &str = "50-hpc-slurm-join.sh";

/// The first-boot script that joins a GPU node to the Slurm cluster (`node/slurm-join.sh` with its settings):
/// installs slurmd and munge where the image lacks them, writes the cluster's key, learns the node's Slurm name
/// from the cloud's metadata (its Name tag, instance name or display name; on Azure the name the provider wrote
/// into the VM's own userData, `hpc-node-name=<name>`), installs the health check program, starts slurmd
/// configless (`--conf-server` the controllers) and waits until the node is registered, or says why it is not.
/// Runs again after a remake, so a replaced node joins as the one it replaces. `_azure_offset` is no longer
/// used (an Azure node's name no longer follows from its scale set's first node); it goes once its callers
/// drop it.
pub fn join_script(cloud: Cloud, cluster: &str, join: &crate::model::SlurmJoin, _azure_offset: u32) -> String {
    use base64::Engine;
    let servers = join.controllers.iter().map(|c| format!("{c}:{SLURMCTLD_PORT}")).collect::<Vec<_>>().join(",");
    let mut settings = vec![
        ("HPC_SLURM_CLUSTER", cluster.to_owned()),
        ("HPC_SLURM_CLOUD", cloud.as_str().to_owned()),
        ("HPC_SLURM_SERVERS", servers),
        ("HPC_SLURM_KEY", join.key.as_ref().map(|k| k.expose_str().to_owned()).unwrap_or_default()),
        ("HPC_SLURM_HEALTHCHECK", base64::engine::general_purpose::STANDARD.encode(compact(&healthcheck_program()))),
        ("HPC_SLURM_PROLOG", base64::engine::general_purpose::STANDARD.encode(compact(prolog_program()))),
        ("HPC_SLURM_EPILOG", base64::engine::general_purpose::STANDARD.encode(compact(epilog_program()))),
        ("HPC_SLURM_LOCK", base64::engine::general_purpose::STANDARD.encode(metadata_lock_program())),
    ];
    if cloud == Cloud::Azure {
        // The provider writes an Azure node's name once its scale set's write is done.
        settings.push(("HPC_SLURM_WAIT", AZURE_NAME_WAIT_SECONDS.to_string()));
    }
    with_settings(
        &format!("hpc-slurm-join: node of cluster {cluster} (terraform-provider-hpc); the script is node/slurm-join.sh"),
        &settings,
        JOIN,
    )
}

/// How long an Azure node waits for its name in its userData (and then for its registration), in seconds:
/// longer than elsewhere, because the provider writes the name only once the write of the node's whole scale
/// set has ended, which lasts until every VM of the set is provisioned (our choice of bound, not Azure's).
pub const AZURE_NAME_WAIT_SECONDS: u32 = 1800;

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

/// The value of `export NAME='...'` in a script [`with_settings`] wrote (quoted by [`shell_quote`]).
pub fn setting_in(script: &str, name: &str) -> Option<String> {
    let quoted = script.lines().find_map(|l| l.strip_prefix(&format!("export {name}=")))?;
    let inner = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
    Some(inner.replace(r"'\''", "'"))
}

/// The Slurm join a node's user data carries ([`node_user_data`]: the join script with the controllers and
/// the cluster's key), as `(controller addresses, key)`: what an import adopts, so that the key is never made
/// anew for a running cluster. None when the user data has no join.
pub fn join_in(user_data: &str) -> Option<(Vec<String>, String)> {
    // The join script, alone (Google Cloud's `user-data` item) or a part of the nodes' user data.
    if !user_data.contains("\n# hpc-slurm-join: ") {
        return None;
    }
    let servers = setting_in(user_data, "HPC_SLURM_SERVERS")?;
    let key = setting_in(user_data, "HPC_SLURM_KEY").filter(|k| !k.is_empty())?;
    let controllers = servers.split(',').filter_map(|s| s.rsplit_once(':').map(|(a, _)| a.to_owned())).collect();
    Some((controllers, key))
}

/// [`join_in`] as the `slurm` attribute (`slurm_join`'s shape) an import records.
pub fn join_value(user_data: Option<&str>) -> crate::framework::Value {
    use crate::framework::Value;
    match user_data.and_then(join_in) {
        Some((controllers, key)) => {
            Value::object([("controller_addresses", Value::list(controllers.into_iter().map(Value::from))), ("key", Value::from(key))])
        }
        None => Value::Null,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An import reads back the join a node was made with: the controllers and the key, whatever the key holds.
    #[test]
    fn the_join_a_node_boots_with_is_read_back_from_its_user_data() {
        for key in ["c2VjcmV0a2V5MTIzNDU2Nzg5MA==", "it's a 'quoted' key"] {
            let join = crate::model::SlurmJoin {
                controllers: vec!["10.0.255.244".into(), "10.0.255.245".into()],
                key: Some(Secret::new(key.to_owned())),
            };
            let script = join_script(Cloud::Gcp, "train", &join, 0);
            let doc = super::super::user_data::combined_with(&script, JOIN_FILE_NAME, "HPC-SLURM", Some("#!/bin/sh\necho mine\n"));
            assert_eq!(join_in(&doc), Some((join.controllers.clone(), key.to_owned())));
            assert_eq!(user_part(Some(doc)).as_deref(), Some("#!/bin/sh\necho mine\n"));
        }
        assert_eq!(join_in("#!/bin/sh\nexport HPC_SLURM_KEY='x'\n"), None, "no join part: no join");
    }
}
