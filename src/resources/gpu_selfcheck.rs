//! `data "hpc_gpu_selfcheck"`: a boot-time self-check for GPU nodes, as user data. The node counts its GPUs
//! and its RDMA devices against the catalog figures of its instance type, and a node that comes up short
//! takes itself out (powers off) before a job can land on it. The check is composed with the user's own
//! cloud-init or script into one MIME multipart document. The data source is pure (no cloud credentials, no
//! network); the node publishes its verdict to the cloud where the cluster's refresh reads it (`publish_verdict`).
//!
//! What the script checks, and why each check looks where it does:
//! - GPUs: `nvidia-smi -L` prints one `GPU <n>: <model> (UUID: ...)` line per GPU the driver brought up;
//!   on AMD (MI300X) `amd-smi list` prints one `GPU: <n>` line per GPU, and the older `rocm-smi --showid`
//!   one or more `GPU[<n>]` lines. The count must equal the instance type's GPU count exactly.
//! - EFA (AWS): the efa kernel driver registers each interface as an RDMA device named `rdmap<bus>s<slot>`
//!   in `/sys/class/infiniband`; at least the expected number must be there. When libfabric's `fi_info`
//!   is installed (the EFA installer puts it in `/opt/amazon/efa/bin`), it must also open the `efa`
//!   provider on as many devices (distinct `domain:` lines of `fi_info -p efa -t FI_EP_RDM`): NCCL reaches
//!   EFA only through libfabric, so a device the kernel sees but libfabric cannot open is no use to a job.
//! - InfiniBand (Azure ND) and RoCE (GCP A3 Ultra/A4, OCI): every HCA or RDMA NIC is an entry of
//!   `/sys/class/infiniband`. Other Mellanox functions (Azure's accelerated networking VF, OCI's primary
//!   NIC) can be there too, hence "at least". When the catalog does not know the count, at least one.
//! - GPUDirect-TCPX/TCPXO (GCP A3 High/Mega): no RDMA; the GPU NICs are gVNICs. Interface names differ
//!   between images (`eth1`, `ens5`, ...), so the check counts the entries of `/sys/class/net` whose
//!   driver is `gve`: the GPU NICs plus the host NIC.
//!
//! - Rack-scale NVLink (GB200/GB300 NVL72): every GPU must have joined the NVLink fabric of its rack
//!   (`nvidia-smi -q`, section `Fabric`: `State` Completed and `Status` Success on every GPU, one
//!   `ClusterUUID` and one `CliqueId` for all of them, the UUID not all zeros), and NVIDIA's IMEX service that
//!   shares GPU memory across the domain's nodes must be installed. Under Slurm it runs per job (Slurm's
//!   prolog, `node/hpc-slurm-prolog`, starts it with the job's nodes, as NVIDIA recommends), so a node at boot
//!   has no IMEX peers; where its node list (`/etc/nvidia-imex/nodes_config.cfg`) names peers, the service
//!   must run and, where `nvidia-imex-ctl` is installed, have them READY (`nvidia-imex-ctl -N`; the output
//!   format is UNCONFIRMED against a real node). The
//!   node logs its `ClusterUUID.CliqueId`, the same id NVIDIA's GPU feature discovery labels as
//!   `nvidia.com/gpu.clique`, so the domain it landed in can be compared with the planned one.
//!
//! Devices can appear some time into the boot (driver load, link training), so the script polls for up to
//! five minutes before it decides. The sysfs root, the log file, the wait and the failure action can be
//! overridden through `HPC_SELFCHECK_*` environment variables, so the script can be tested off a GPU node, and
//! Slurm's health check runs it with `HPC_SELFCHECK_ON_FAILURE=log` (it drains; it never powers a node off).

use std::fmt::Write;

use async_trait::async_trait;

use crate::catalog::{Fabric, Sku, limits};
use crate::framework::{Attribute, AttributePath, Block, Context, DataSource, Diagnostics, Schema, Type, Value, one_of};
use crate::planner::spec;

pub struct GpuSelfcheck;

/// The image started when `install_dcgm_exporter` is true and `dcgm_exporter_image` is not set. A tag
/// NVIDIA published for its Kubernetes DaemonSet; not verified by this provider: pin your own.
pub const DEFAULT_DCGM_EXPORTER_IMAGE: &str = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04";

/// Where the script logs on the node (besides stdout, which cloud-init copies to the console).
pub const LOG_FILE: &str = "/var/log/hpc-selfcheck.log";

/// How long the script waits for the GPUs and RDMA devices to appear before it decides.
pub const WAIT_SECONDS: u32 = 300;

/// The self-check's file name in the MIME document. cloud-init runs the shell-script parts in file name
/// order, so this sorts before whatever name the user's part gets.
const SCRIPT_FILE_NAME: &str = crate::clouds::user_data::SELFCHECK_FILE_NAME;

/// What a node that fails the check does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnFailure {
    /// Powers the node off, so it cannot join a job.
    Poweroff,
    /// Only logs the failure (and fails the cloud-init script).
    Log,
}

impl OnFailure {
    const NAMES: [&'static str; 2] = ["poweroff", "log"];

    fn as_str(self) -> &'static str {
        match self {
            OnFailure::Poweroff => "poweroff",
            OnFailure::Log => "log",
        }
    }

    fn parse(s: &str) -> Option<OnFailure> {
        [OnFailure::Poweroff, OnFailure::Log].into_iter().find(|a| a.as_str() == s)
    }
}

/// The validated configuration.
struct Inputs<'a> {
    sku: &'static Sku,
    /// The exporter image, when the exporter is to be started.
    dcgm_exporter_image: Option<&'a str>,
    /// The user's own user data; `None` when absent or empty.
    user_data: Option<&'a str>,
    on_failure: OnFailure,
    /// RDMA devices (or GPU NICs) to expect; `None` when not known.
    rdma_devices: Option<u32>,
    /// Whether the node publishes its verdict to the cloud (`publish_verdict`).
    publish: bool,
}

/// The configuration, checked attribute by attribute; `None` when a value is still unknown or an error was
/// added. Unknown values are tolerated (they are checked once known).
fn inputs<'a>(config: &'a Value, diags: &mut Diagnostics) -> Option<Inputs<'a>> {
    let mut d = Diagnostics::new();
    let attr = |name: &str| config.get(name);
    let unknown = [
        "cloud",
        "instance_type",
        "install_dcgm_exporter",
        "dcgm_exporter_image",
        "user_data",
        "on_failure",
        "rdma_interfaces",
        "publish_verdict",
    ]
    .into_iter()
    .any(|a| attr(a).is_unknown());

    let cloud = attr("cloud").as_str().and_then(|c| spec::check_cloud(c, AttributePath::attr("cloud"), &mut d));
    let sku = match (cloud, attr("instance_type").as_str()) {
        (Some(cloud), Some(name)) => spec::check_instance_type(cloud, name, None, &mut d),
        _ => None,
    };

    let on_failure = match attr("on_failure") {
        Value::String(s) => OnFailure::parse(s).or_else(|| {
            let detail = format!("{s:?} is not a failure action. Valid values: {}.", one_of(&OnFailure::NAMES));
            d.error_at(AttributePath::attr("on_failure"), "Unsupported failure action", detail);
            None
        }),
        _ => Some(OnFailure::Poweroff),
    };

    let install = attr("install_dcgm_exporter").as_bool().unwrap_or(false);
    let image = match attr("dcgm_exporter_image") {
        Value::String(s) if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            let detail = format!("{s:?} is not a container image reference: give one like {DEFAULT_DCGM_EXPORTER_IMAGE:?}.");
            d.error_at(AttributePath::attr("dcgm_exporter_image"), "Invalid container image", detail);
            None
        }
        Value::String(s) => Some(s.as_str()),
        _ => Some(DEFAULT_DCGM_EXPORTER_IMAGE),
    };
    if install && let Some(sku) = sku.filter(|s| is_amd(s)) {
        d.error_at(
            AttributePath::attr("install_dcgm_exporter"),
            "DCGM exporter needs NVIDIA GPUs",
            format!(
                "{} carries AMD {} GPUs, which DCGM does not support. Remove install_dcgm_exporter, and run AMD's own metrics exporter \
                 from your user_data instead.",
                sku.name, sku.gpu_model
            ),
        );
    }

    let rdma_devices = match (sku, attr("rdma_interfaces").as_number()) {
        (Some(sku), Some(n)) => {
            let max = sku.rdma_interfaces.unwrap_or(64);
            match n.as_i64().and_then(|n| u32::try_from(n).ok()).filter(|n| *n <= max) {
                Some(n) => Some(n),
                None => {
                    d.error_at(
                        AttributePath::attr("rdma_interfaces"),
                        "Unsupported RDMA interface count",
                        format!("{} has at most {max} RDMA interfaces, so rdma_interfaces can be 0 to {max}; got {n}.", sku.name),
                    );
                    None
                }
            }
        }
        (Some(sku), None) => sku.rdma_interfaces,
        (None, _) => None,
    };

    let user_data = attr("user_data").as_str().filter(|u| !u.trim().is_empty());
    if let Some(u) = user_data
        && crate::clouds::user_data::is_mime(u)
        && crate::clouds::user_data::split_mime(u).is_none()
    {
        d.error_at(
            AttributePath::attr("user_data"),
            "Invalid MIME user data",
            "user_data starts with a Content-Type header but has no blank line ending its headers. Give a complete MIME document, \
             or a script or cloud-config on its own.",
        );
    }

    let failed = d.has_errors();
    diags.extend(d);
    if unknown || failed {
        return None;
    }
    Some(Inputs {
        sku: sku?,
        dcgm_exporter_image: if install { image } else { None },
        user_data,
        on_failure: on_failure?,
        rdma_devices: if sku?.fabric == Fabric::None { None } else { rdma_devices },
        publish: attr("publish_verdict").as_bool().unwrap_or(true),
    })
}

fn is_amd(sku: &Sku) -> bool {
    sku.gpu_model.starts_with("MI")
}

/// What the RDMA check counts on a node of `sku`, and how many it needs: `None` when there is no check.
fn rdma_requirement(sku: &Sku, expected: Option<u32>) -> Option<(&'static str, u32)> {
    if expected == Some(0) {
        return None;
    }
    let what = match sku.fabric {
        Fabric::Efa => "EFA devices",
        Fabric::InfiniBand => "InfiniBand devices",
        Fabric::Roce => "RoCE devices",
        // The GPU NICs and the host NIC are all gVNICs.
        Fabric::GpuDirectTcpx | Fabric::GpuDirectTcpxo => return Some(("gVNIC interfaces", expected.unwrap_or(1) + 1)),
        Fabric::None => return None,
    };
    // When the count is not known, at least the fabric must be there.
    Some((what, expected.unwrap_or(1)))
}

/// `s` as one single-quoted shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The bash self-check for a node of `sku`.
fn script(sku: &Sku, rdma_devices: Option<u32>, on_failure: OnFailure, dcgm_exporter_image: Option<&str>, publish: bool) -> String {
    let (rdma_what, rdma_min) = rdma_requirement(sku, rdma_devices).unwrap_or(("RDMA devices", 0));
    let fabric = if rdma_min == 0 { "none" } else { sku.fabric.as_str() };
    let mut s = String::with_capacity(SCRIPT_BODY.len() + 1024);
    let _ = write!(
        s,
        "#!/bin/bash\n\
         {marker} (data \"hpc_gpu_selfcheck\").\n\
         # {name} on {cloud}: {gpus} {model} GPUs; fabric {fabric_name}. On failure: {action}.\n\
         set -euo pipefail\n\
         shopt -s nullglob\n\
         \n\
         INSTANCE_TYPE={name_q}\n\
         EXPECTED_GPUS={gpus}\n\
         GPU_VENDOR={vendor}\n\
         FABRIC={fabric}\n\
         RDMA_MIN={rdma_min}\n\
         RDMA_WHAT={rdma_what_q}\n\
         NVLINK_DOMAIN_NODES={domain_nodes}\n\
         ON_FAILURE=${{HPC_SELFCHECK_ON_FAILURE:-{action}}}\n\
         CLOUD={cloud}\n\
         PUBLISH={publish}\n\
         DCGM_EXPORTER_IMAGE={image}\n",
        marker = crate::clouds::user_data::SELFCHECK_MARKER,
        name = sku.name,
        name_q = shell_quote(sku.name),
        cloud = sku.cloud,
        gpus = sku.gpu_count,
        model = sku.gpu_model,
        fabric_name = sku.fabric.as_str(),
        action = on_failure.as_str(),
        vendor = if is_amd(sku) { "amd" } else { "nvidia" },
        rdma_what_q = shell_quote(rdma_what),
        domain_nodes = sku.nvlink_domain.map_or(0, |d| d.nodes),
        image = dcgm_exporter_image.map(shell_quote).unwrap_or_default(),
        publish = u8::from(publish),
    );
    let _ = write!(
        s,
        "# For tests off a GPU node.\n\
         SYSFS=${{HPC_SELFCHECK_SYSFS:-/sys}}\n\
         LOG=${{HPC_SELFCHECK_LOG:-{LOG_FILE}}}\n\
         WAIT_SECONDS=${{HPC_SELFCHECK_WAIT_SECONDS:-{WAIT_SECONDS}}}\n\
         DRY_RUN=${{HPC_SELFCHECK_DRY_RUN:-0}}\n"
    );
    s.push_str(SCRIPT_BODY);
    s
}

/// The part of the script that does not depend on the configuration. Each check is explained in the
/// module documentation; the comments here are kept short because user data is limited (16 KB on AWS).
const SCRIPT_BODY: &str = r#"PATH=$PATH:/opt/amazon/efa/bin:/opt/rocm/bin
mkdir -p "${LOG%/*}" 2>/dev/null || true

# To the log file, to stdout (cloud-init copies it to the console) and to syslog.
log() {
  local line
  line="$(date -u +%Y-%m-%dT%H:%M:%SZ) hpc-selfcheck: $*"
  printf '%s\n' "$line" | tee -a "$LOG" 2>/dev/null || true
  logger -t hpc-selfcheck -- "$*" 2>/dev/null || true
}

# The verdict, to the cloud's own per-instance channel, where the provider's refresh reads it
# (hpc_gpu_cluster.selfcheck): a tag (AWS, OCI), a label (Google Cloud), the health probe (Azure). ok or fail-<what>.
publish() {
  if [[ $PUBLISH != 1 || $DRY_RUN == 1 ]]; then log "verdict $1 (not published)"; return 0; fi
  local ok=0 md=http://169.254.169.254 t id region name zone tags
  case $CLOUD in
    aws)
      t=$(curl -sf -m 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' $md/latest/api/token) &&
        id=$(curl -sf -m 5 -H "X-aws-ec2-metadata-token: $t" $md/latest/meta-data/instance-id) &&
        region=$(curl -sf -m 5 -H "X-aws-ec2-metadata-token: $t" $md/latest/meta-data/placement/region) &&
        aws ec2 create-tags --region "$region" --resources "$id" --tags "Key=hpc:selfcheck,Value=$1" && ok=1 ;;
    gcp)
      md=http://metadata.google.internal/computeMetadata/v1/instance
      name=$(curl -sf -m 5 -H 'Metadata-Flavor: Google' $md/name) && zone=$(curl -sf -m 5 -H 'Metadata-Flavor: Google' $md/zone) &&
        gcloud compute instances add-labels "$name" --zone "${zone##*/}" --labels "hpc-selfcheck=$1" --quiet && ok=1 ;;
    oci)
      # UpdateInstance replaces the freeform tags: the ones the instance has, with the verdict.
      t=$(curl -sf -m 5 -H 'Authorization: Bearer Oracle' $md/opc/v2/instance/) &&
        id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' <<<"$t") &&
        tags=$(python3 -c 'import json,sys; t=json.loads(sys.argv[2]).get("freeformTags") or {}; t["hpc:selfcheck"]=sys.argv[1]; print(json.dumps(t))' "$1" "$t") &&
        oci compute instance update --auth instance_principal --instance-id "$id" --freeform-tags "$tags" --force >/dev/null && ok=1 ;;
    azure)
      # The scale set's Application Health extension probes 127.0.0.1:8477/hpc-selfcheck (Rich Health
      # States); a small responder answers it with the verdict, carried in customMetrics.
      # A unit, so that it answers after a reboot too (the check itself runs once per instance).
      t=/var/lib/hpc-selfcheck
      mkdir -p $t && printf '%s' "$1" >$t/verdict && printf '%s' "$AZURE_RESPONDER" >$t/responder.py &&
        printf '[Service]\nExecStart=/usr/bin/python3 %s/responder.py\nRestart=always\n[Install]\nWantedBy=multi-user.target\n' $t \
          >/etc/systemd/system/hpc-selfcheck-health.service &&
        systemctl daemon-reload && systemctl enable --now hpc-selfcheck-health && ok=1 ;;
  esac
  if (( ok )); then log "verdict $1 published"; else log "WARNING: could not publish the verdict $1 (see data hpc_gpu_selfcheck: the node's identity needs permission)"; fi
}

AZURE_RESPONDER='
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        v = open("/var/lib/hpc-selfcheck/verdict").read().strip()
        body = json.dumps({"ApplicationHealthState": "Healthy" if v == "ok" else "Unhealthy", "customMetrics": json.dumps({"hpcSelfcheck": v})}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 8477), H).serve_forever()
'

verdict=
fail() {
  [[ -n $verdict ]] || verdict="fail-$1"
  reasons+=("$2")
}

reported=0
take_out() {
  reported=1
  log "HPC SELFCHECK FAILED: $1"
  publish "${verdict:-fail-error}"
  if [[ $ON_FAILURE == poweroff ]]; then
    if [[ $DRY_RUN == 1 ]]; then
      log "HPC_SELFCHECK_DRY_RUN=1: would power off (systemctl poweroff)"
    else
      log "powering off so that this node joins no job"
      sync
      systemctl poweroff || poweroff
    fi
  fi
  exit 1
}
# A check that could not finish is a failed check.
on_exit() {
  local rc=$?
  if (( rc != 0 && reported == 0 )); then take_out "self-check error (exit $rc)"; fi
}
trap on_exit EXIT

# GPUs the driver brought up: one "GPU <n>: ..." line each (amd-smi: "GPU: <n>"; rocm-smi: "GPU[<n>]").
count_gpus() {
  if [[ $GPU_VENDOR == amd ]]; then
    if command -v amd-smi >/dev/null; then
      amd-smi list 2>/dev/null | grep -cE '^GPU: ?[0-9]+' || true
    else
      rocm-smi --showid 2>/dev/null | grep -oE '^GPU\[[0-9]+\]' | sort -u | wc -l || true
    fi
  else
    nvidia-smi -L 2>/dev/null | grep -cE '^GPU [0-9]+:' || true
  fi
}

# EFA: rdmap* RDMA devices. InfiniBand, RoCE: any RDMA device. TCPX/TCPXO: NICs driven by gve.
count_rdma() {
  local devs=() d
  case $FABRIC in
    efa) devs=("$SYSFS"/class/infiniband/rdmap*) ;;
    infiniband | roce) devs=("$SYSFS"/class/infiniband/*) ;;
    gpudirect-tcpx*)
      for d in "$SYSFS"/class/net/*; do
        if [[ $(readlink -f "$d/device/driver" 2>/dev/null) == */gve ]]; then devs+=("$d"); fi
      done
      ;;
  esac
  echo "${#devs[@]}"
}

# Rack-scale NVLink: the "Fabric" section of each GPU in nvidia-smi -q, as "key=value" lines.
nvlink_fabric() {
  nvidia-smi -q 2>/dev/null | awk '
    /^ *Fabric *$/ { inside = 1; depth = index($0, "F"); next }
    inside { d = match($0, /[^ ]/); if (d <= depth) { inside = 0; next } }
    inside && /:/ { k = $0; sub(/ *:.*/, "", k); sub(/^ */, "", k); v = $0; sub(/^[^:]*: */, "", v); print k "=" v }' || true
}
fabric_completed() {
  if (( NVLINK_DOMAIN_NODES == 0 )); then echo "$EXPECTED_GPUS"; return; fi
  nvlink_fabric | grep -c '^State=Completed$' || true
}

log "checking $INSTANCE_TYPE: $EXPECTED_GPUS GPUs, at least $RDMA_MIN $RDMA_WHAT; waiting up to ${WAIT_SECONDS}s"
deadline=$((SECONDS + WAIT_SECONDS))
while :; do
  gpus=$(count_gpus)
  rdma=$(count_rdma)
  joined=$(fabric_completed)
  if (( (gpus == EXPECTED_GPUS && rdma >= RDMA_MIN && joined >= EXPECTED_GPUS) || SECONDS >= deadline )); then break; fi
  sleep 5
done

reasons=()
(( gpus == EXPECTED_GPUS )) || fail "gpus-$gpus-of-$EXPECTED_GPUS" "expected $EXPECTED_GPUS GPUs, found $gpus"
(( rdma >= RDMA_MIN )) || fail "rdma-$rdma-of-$RDMA_MIN" "expected at least $RDMA_MIN $RDMA_WHAT, found $rdma"
# EFA user space: NCCL reaches EFA through libfabric, which must open every device.
if [[ $FABRIC == efa ]] && command -v fi_info >/dev/null; then
  domains=$(fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -oE 'domain: *[^ ]+' | sort -u | wc -l || true)
  (( domains >= RDMA_MIN )) || fail "libfabric-$domains-of-$RDMA_MIN" "expected libfabric to open at least $RDMA_MIN EFA devices, fi_info -p efa lists $domains"
fi
if (( NVLINK_DOMAIN_NODES > 0 )); then
  fabric=$(nvlink_fabric)
  (( joined >= EXPECTED_GPUS )) || fail "nvlink-$joined-of-$EXPECTED_GPUS" "NVLink fabric not completed: $joined of $EXPECTED_GPUS GPUs report State Completed (nvidia-smi -q, Fabric)"
  failed=$(grep '^Status=' <<<"$fabric" | grep -vc '^Status=Success$' || true)
  (( failed == 0 )) || fail "nvlink-status" "NVLink fabric Status not Success on $failed GPUs"
  uuids=$(grep '^ClusterUUID=' <<<"$fabric" | sort -u | wc -l || true)
  cliques=$(grep '^CliqueId=' <<<"$fabric" | sort -u | wc -l || true)
  domain="$(grep -m1 '^ClusterUUID=' <<<"$fabric" | cut -d= -f2-).$(grep -m1 '^CliqueId=' <<<"$fabric" | cut -d= -f2-)"
  if (( uuids != 1 || cliques != 1 )) || [[ $domain == 00000000-0000-0000-0000-000000000000.* ]]; then
    fail "nvlink-domain" "GPUs are not in one NVLink domain: $uuids ClusterUUIDs, $cliques CliqueIds"
  fi
  # IMEX runs per job under Slurm (hpc-slurm-prolog starts it with the job's nodes of the domain) and across
  # the domain where its node list names peers (nodes_config.cfg): only then must it run with them READY.
  imex_peers=$(grep -cv '^[[:space:]]*\(#\|$\)' "${HPC_IMEX_NODES_CONFIG:-/etc/nvidia-imex/nodes_config.cfg}" 2>/dev/null || true)
  if ! command -v nvidia-imex >/dev/null; then
    fail "imex" "NVIDIA's IMEX service (nvidia-imex) is not installed: multi-node NVLink jobs need it on every node of the domain"
  elif (( ${imex_peers:-0} > 0 )); then
    systemctl is-active --quiet nvidia-imex || fail "imex" "the nvidia-imex service is not active while its node list names $imex_peers peers"
    if command -v nvidia-imex-ctl >/dev/null; then
      ready=$(nvidia-imex-ctl -N 2>/dev/null | grep -c 'READY' || true)
      (( ready >= imex_peers )) || fail "imex-$ready-of-$imex_peers" "IMEX domain has $ready of $imex_peers nodes READY (nvidia-imex-ctl -N)"
    fi
  else
    log "IMEX installed; its domain is set per job (no peers in /etc/nvidia-imex/nodes_config.cfg)"
  fi
  log "NVLink domain $domain"
fi
if (( ${#reasons[@]} > 0 )); then
  msg=$(printf '%s; ' "${reasons[@]}")
  take_out "${msg%; }"
fi
log "HPC SELFCHECK PASSED: $gpus GPUs, $rdma $RDMA_WHAT"
publish ok

# Monitoring is not health: a node whose exporter does not start still joins, with a warning.
if [[ -n $DCGM_EXPORTER_IMAGE ]]; then
  if ! command -v docker >/dev/null; then
    log "WARNING: docker not found, DCGM exporter not started (the image needs docker and the NVIDIA container toolkit)"
  else
    docker rm -f hpc-dcgm-exporter >/dev/null 2>&1 || true
    if docker run -d --name hpc-dcgm-exporter --gpus all --restart unless-stopped --cap-add SYS_ADMIN -p 9400:9400 "$DCGM_EXPORTER_IMAGE" >/dev/null; then
      log "DCGM exporter started from $DCGM_EXPORTER_IMAGE, metrics on port 9400"
    else
      log "WARNING: docker run $DCGM_EXPORTER_IMAGE failed, no GPU metrics on port 9400"
    fi
  fi
fi
"#;

/// The self-check and the user's data as one `multipart/mixed` document for cloud-init, the self-check
/// first. The boundary is chosen so it occurs in neither part, and stays the same from read to read.
fn combined_user_data(script: &str, user_data: Option<&str>) -> String {
    crate::clouds::user_data::combined_with(script, SCRIPT_FILE_NAME, "HPC-SELFCHECK", user_data)
}

#[async_trait]
impl DataSource for GpuSelfcheck {
    fn type_name(&self) -> &'static str {
        "hpc_gpu_selfcheck"
    }

    fn schema(&self) -> Schema {
        Schema::new(
            0,
            Block::new(
                "A boot-time GPU self-check for user data: each node counts its GPUs and RDMA devices against the catalog figures of \
                 its instance type, and a node that comes up short powers itself off before it can join a job. Composed with your \
                 own cloud-init or script into one MIME multipart document for `hpc_gpu_cluster.user_data`. The check itself needs no \
                 cloud credentials or network; its verdict is published to the cloud for the cluster's refresh (`publish_verdict`).",
            )
            .attribute(Attribute::required("cloud", Type::String, "Cloud of the nodes: `aws`, `azure`, `gcp` or `oci`."))
            .attribute(Attribute::required(
                "instance_type",
                Type::String,
                "Instance type (shape, machine type, VM size) of the nodes, as in the GPU catalog.",
            ))
            .attribute(Attribute::optional(
                "rdma_interfaces",
                Type::Number,
                "RDMA interfaces (GPU NICs on GPUDirect-TCPX/TCPXO) to expect per node; 0 skips the RDMA check. Default: the \
                 catalog's figure. Set it when you lowered `rdma_interfaces` on the cluster (AWS).",
            ))
            .attribute(Attribute::optional(
                "install_dcgm_exporter",
                Type::Bool,
                "Start NVIDIA's DCGM exporter (Prometheus metrics on port 9400) with docker once the check passes. Needs docker and \
                 the NVIDIA container toolkit in the image; a node without them still joins, with a warning in the log. NVIDIA GPUs \
                 only. Default: false.",
            ))
            .attribute(Attribute::optional(
                "dcgm_exporter_image",
                Type::String,
                "Container image of the DCGM exporter. The default, `nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04`, is \
                 not verified by this provider: pin a tag you have tested (or your registry's copy).",
            ))
            .attribute(
                Attribute::optional(
                    "user_data",
                    Type::String,
                    "Your own user data to run after the check: a script (`#!`), `#cloud-config`, another cloud-init format or a \
                     MIME document.",
                )
                .sensitive(),
            )
            .attribute(Attribute::optional(
                "on_failure",
                Type::String,
                "What a node that fails the check does after logging the reason: `poweroff` (default: it takes itself out \
                 rather than joining a job; on AWS the instance stops, or terminates when its shutdown behaviour says so) or \
                 `log`.",
            ))
            .attribute(Attribute::optional(
                "publish_verdict",
                Type::Bool,
                "Publish the verdict (`ok` or `fail-<what>`, e.g. `fail-gpus-7-of-8`) where the cluster's refresh reads it \
                 (`hpc_gpu_cluster.selfcheck`, `unhealthy_nodes`), through the cloud's own per-instance channel: the instance's \
                 `hpc:selfcheck` tag on AWS (the node's role needs `ec2:CreateTags` on itself and the aws CLI), its `hpc-selfcheck` \
                 label on Google Cloud (`compute.instances.setLabels` and gcloud), its scale-set VM on Azure (see the README's \
                 Day 2 section), its `hpc:selfcheck` freeform tag on OCI (an instance principal allowed to update the instance, \
                 and the oci CLI). A node that cannot publish logs a warning and the check's outcome stands. Default: true.",
            ))
            .attribute(Attribute::computed(
                "script",
                Type::String,
                "The self-check as a bash script. It logs to `/var/log/hpc-selfcheck.log`, the console and syslog, waits up to \
                 300 seconds for the devices, and logs `HPC SELFCHECK PASSED` or `HPC SELFCHECK FAILED: <reason>`.",
            ))
            .attribute(
                Attribute::computed(
                    "combined_user_data",
                    Type::String,
                    "A MIME multipart cloud-init document: the self-check first, then `user_data` (if any). Pass it as the \
                     cluster's `user_data`.",
                )
                .sensitive(),
            )
            .attribute(Attribute::computed("expected_gpus", Type::Number, "GPUs the check expects on each node."))
            .attribute(Attribute::computed(
                "expected_rdma_devices",
                Type::Number,
                "RDMA devices (EFA interfaces, InfiniBand HCAs, RoCE NICs) the check expects at least on each node; on \
                 GPUDirect-TCPX/TCPXO, GPU NICs (the check counts them with the host NIC). Null when the catalog does not know \
                 the count (the check then asks for at least one) or there is no RDMA fabric.",
            )),
        )
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        inputs(config, diags);
    }

    async fn read(&self, _ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Value {
        let Some(i) = inputs(config, diags) else { return Value::Null };
        let script = script(i.sku, i.rdma_devices, i.on_failure, i.dcgm_exporter_image, i.publish);
        if let Some(u) = i.user_data
            && !crate::clouds::user_data::is_mime(u)
            && crate::clouds::user_data::content_type(u).is_none()
        {
            diags.warning_at(
                AttributePath::attr("user_data"),
                "User data is not a script",
                "user_data starts with neither `#!` nor a cloud-init marker such as `#cloud-config`, so it is passed as a shell \
                 script, which cloud-init can only run if it starts with `#!` (for example `#!/bin/bash`).",
            );
        }
        let combined = combined_user_data(&script, i.user_data);
        let (max, rule) = limits::user_data_limit(i.sku.cloud);
        if combined.len() > max {
            diags.warning_at(
                AttributePath::attr("user_data"),
                "Combined user data too large",
                format!(
                    "{rule}; the self-check with this user_data is {} bytes (the self-check alone is {}). Keep a small bootstrap \
                     that fetches the rest.",
                    combined.len(),
                    script.len()
                ),
            );
        }
        let mut state = config.as_map().cloned().unwrap_or_default();
        state.insert("script".into(), Value::from(script));
        state.insert("combined_user_data".into(), Value::from(combined));
        state.insert("expected_gpus".into(), Value::int(i64::from(i.sku.gpu_count)));
        state.insert("expected_rdma_devices".into(), Value::from(i.rdma_devices.map(i64::from)));
        Value::Map(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Cloud;

    #[test]
    fn shell_quote_survives_quotes() {
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
        assert_eq!(shell_quote("nvcr.io/x:1"), "'nvcr.io/x:1'");
    }

    #[test]
    fn boundary_avoids_the_parts() {
        let user = "#!/bin/sh\necho ==HPC-SELFCHECK==\n";
        let doc = combined_user_data("#!/bin/bash\ntrue", Some(user));
        assert!(doc.starts_with("Content-Type: multipart/mixed; boundary=\"==HPC-SELFCHECK.1==\"\n"), "{doc}");
        assert!(doc.ends_with("\n--==HPC-SELFCHECK.1==--\n"), "{doc}");
    }

    #[test]
    fn mime_user_data_nests_with_its_own_headers() {
        let user = "Content-Type: multipart/mixed; boundary=\"inner\"\nMIME-Version: 1.0\n\n--inner\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n--inner--\n";
        let doc = combined_user_data("#!/bin/bash\ntrue", Some(user));
        assert!(
            doc.contains("--==HPC-SELFCHECK==\nContent-Type: multipart/mixed; boundary=\"inner\"\nMIME-Version: 1.0\n\n--inner\n"),
            "{doc}"
        );
        assert_eq!(crate::clouds::user_data::split_mime("Content-Type: x\r\n\r\nbody"), Some(("Content-Type: x\r\n", "body")));
        assert_eq!(crate::clouds::user_data::split_mime("Content-Type: x"), None);
    }

    #[test]
    fn a_cluster_plan_sees_the_script_alone_or_composed_and_whether_it_publishes() {
        use crate::clouds::user_data::{Selfcheck, selfcheck};
        let sku = crate::catalog::find_sku(Cloud::Aws, "p5.48xlarge").unwrap();
        for publishes in [true, false] {
            let s = script(sku, Some(32), OnFailure::Poweroff, None, publishes);
            for doc in [combined_user_data(&s, Some("#!/bin/bash\necho hi")), combined_user_data(&s, None), s] {
                assert_eq!(selfcheck(&doc), Selfcheck::Carried { publishes }, "{doc}");
            }
        }
    }

    #[test]
    fn content_types_follow_cloud_init_markers() {
        assert_eq!(crate::clouds::user_data::content_type("#cloud-config\n"), Some("text/cloud-config"));
        assert_eq!(crate::clouds::user_data::content_type("#cloud-config-archive\n"), Some("text/cloud-config-archive"));
        assert_eq!(crate::clouds::user_data::content_type("#!/bin/bash\n"), Some("text/x-shellscript"));
        assert_eq!(crate::clouds::user_data::content_type("echo hi\n"), None);
    }

    #[test]
    fn rdma_requirements_per_fabric() {
        let sku = |cloud, name| crate::catalog::find_sku(cloud, name).unwrap();
        assert_eq!(rdma_requirement(sku(Cloud::Aws, "p5.48xlarge"), Some(32)), Some(("EFA devices", 32)));
        assert_eq!(rdma_requirement(sku(Cloud::Gcp, "a3-megagpu-8g"), Some(8)), Some(("gVNIC interfaces", 9)));
        assert_eq!(rdma_requirement(sku(Cloud::Oci, "BM.GPU.L40S.4"), None), Some(("RoCE devices", 1)));
        assert_eq!(rdma_requirement(sku(Cloud::Aws, "p5.48xlarge"), Some(0)), None);
        assert_eq!(rdma_requirement(sku(Cloud::Gcp, "a3-highgpu-8g"), Some(0)), None);
        assert!(is_amd(sku(Cloud::Oci, "BM.GPU.MI300X.8")) && !is_amd(sku(Cloud::Oci, "BM.GPU.H100.8")));
    }
}
