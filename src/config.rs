//! The `provider "hpc"` block: one optional block per cloud with an endpoint override and credentials
//! (sensitive), plus `default_tags`. Validation here is static: formats, pairs that belong together,
//! reserved tag prefixes. Unknown values (from other resources) are accepted and checked later.

use std::collections::BTreeMap;

use crate::catalog::Cloud;
use crate::framework::{Attribute, AttributePath, Block, Diagnostics, NestedBlock, Schema, Type, Value};
use crate::redact::Secret;

/// Tag keys the provider writes itself to find its pieces again; users may not set them.
pub const RESERVED_TAG_PREFIX: &str = "hpc:";

pub fn schema() -> Schema {
    let endpoint = |cloud: &str, credentials: &str| {
        Attribute::optional(
            "endpoint",
            Type::String,
            &format!(
                "Base URL that replaces the {cloud} API endpoints, for emulators and private endpoints: https://, or http:// only to this machine (127.0.0.1, [::1], localhost), since credentials would otherwise cross the network in clear. Leave it out to use the real cloud. {credentials}"
            ),
        )
    };
    let aws = Block::new("Amazon Web Services (EC2 and FSx for Lustre).")
        .attribute(Attribute::optional("region", Type::String, "Region, e.g. `us-east-1`. Defaults to the AWS SDK's region chain."))
        .attribute(endpoint(
            "AWS",
            "AWS signs every request, an emulator's too: without `access_key` and `secret_key` the credentials come from the AWS SDK's chain (`profile`, the standard AWS environment variables, the shared files, SSO, the instance's role), whatever the endpoint.",
        ))
        .attribute(Attribute::optional("profile", Type::String, "Named profile from the shared AWS config files."))
        .attribute(Attribute::optional("access_key", Type::String, "Access key id; set together with `secret_key`.").sensitive())
        .attribute(Attribute::optional("secret_key", Type::String, "Secret access key.").sensitive())
        .attribute(Attribute::optional("token", Type::String, "Session token for temporary credentials.").sensitive());
    let azure = Block::new("Microsoft Azure (Azure Resource Manager and Azure Managed Lustre).")
        .attribute(Attribute::optional("subscription_id", Type::String, "Subscription id (a UUID)."))
        .attribute(Attribute::optional("tenant_id", Type::String, "Microsoft Entra tenant id (a UUID)."))
        .attribute(Attribute::optional("client_id", Type::String, "Application (client) id of a service principal."))
        .attribute(Attribute::optional("client_secret", Type::String, "Client secret of the service principal.").sensitive())
        .attribute(Attribute::optional("use_cli", Type::Bool, "Use the Azure CLI's logged-in account."))
        .attribute(Attribute::optional("use_msi", Type::Bool, "Use the managed identity of the machine running the CLI."))
        .attribute(endpoint(
            "Azure Resource Manager",
            "Without a service principal, `use_msi` or `use_cli`, an endpoint on this machine (an emulator) is called with no Azure identity, and one elsewhere with the Azure CLI's logged-in account, as the real cloud is.",
        ));
    let gcp = Block::new("Google Cloud (Compute Engine and Google Cloud Managed Lustre).")
        .attribute(Attribute::optional("project", Type::String, "Project id."))
        .attribute(Attribute::optional("region", Type::String, "Default region, e.g. `us-central1`."))
        .attribute(Attribute::optional("zone", Type::String, "Default zone, e.g. `us-central1-a`; must lie in `region`."))
        .attribute(
            Attribute::optional(
                "credentials",
                Type::String,
                "Service-account key (JSON text). Defaults to Application Default Credentials.",
            )
            .sensitive(),
        )
        .attribute(endpoint(
            "Google Cloud",
            "Without `credentials`, an endpoint on this machine (an emulator) is called with no Google identity, and one elsewhere (a Private Service Connect endpoint, say) with Application Default Credentials, as the real cloud is.",
        ));
    let oci = Block::new("Oracle Cloud Infrastructure (Core and File Storage with Lustre).")
        .attribute(Attribute::optional("tenancy_ocid", Type::String, "Tenancy OCID (`ocid1.tenancy...`)."))
        .attribute(Attribute::optional("user_ocid", Type::String, "User OCID (`ocid1.user...`)."))
        .attribute(Attribute::optional("fingerprint", Type::String, "Fingerprint of the API signing key (`aa:bb:...`, 16 pairs)."))
        .attribute(
            Attribute::optional("private_key", Type::String, "API signing key (PEM text). Conflicts with `private_key_path`.").sensitive(),
        )
        .attribute(Attribute::optional("private_key_path", Type::String, "Path to the API signing key (PEM file)."))
        .attribute(Attribute::optional("config_file_profile", Type::String, "Profile in `~/.oci/config` to read the values above from."))
        .attribute(Attribute::optional("region", Type::String, "Region, e.g. `us-ashburn-1`."))
        .attribute(endpoint(
            "OCI",
            "OCI signs every request, an emulator's too: the API key comes from this block or the OCI config file's profile, whatever the endpoint.",
        ));
    Schema::new(
        0,
        Block::new("Configures the clouds terraform-provider-hpc builds GPU clusters in. Only the blocks of clouds you use are needed.")
            .attribute(Attribute::optional(
                "default_tags",
                Type::map(Type::String),
                "Tags (labels on Google Cloud, freeform tags on OCI) added to everything this provider creates.",
            ))
            .attribute(Attribute::optional(
                "prices",
                Type::map(Type::Number),
                "Your prices for the cost estimates, over the catalog's list prices: USD per node-hour by instance type (`\"p5.48xlarge\" = 41.5`), USD per GB-month by Lustre tier (`\"aws-lustre-500\" = 0.30`, keys `<cloud>-lustre-<MB/s per TiB>`).",
            ))
            .attribute(Attribute::optional(
                "quota_check",
                Type::String,
                "What a plan does when a cluster it grows needs more quota than the cloud has free (AWS Service Quotas, Compute Engine \
                 regional quotas, Azure compute usages, OCI service limits; read once per quota and region per run, only for clusters \
                 that grow): `error` (the default: refused before any apply), `warning`, or `off` (no call).",
            ))
            .block(NestedBlock::single("aws", aws))
            .block(NestedBlock::single("azure", azure))
            .block(NestedBlock::single("gcp", gcp))
            .block(NestedBlock::single("oci", oci)),
    )
}

/// The attributes of the cloud blocks the schema marks sensitive: they are kept in
/// [`CloudSettings::secrets`], never among the plain settings (a test holds the two lists together).
pub const SENSITIVE: [&str; 6] = ["access_key", "secret_key", "token", "client_secret", "credentials", "private_key"];

/// One cloud's settings after validation. Credentials are kept as given, redacted from every `Debug`;
/// clients are built later.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CloudSettings {
    pub endpoint: Option<String>,
    /// Every other attribute of the cloud's block that was set, by name, but the sensitive ones.
    pub settings: BTreeMap<String, String>,
    /// The sensitive attributes that were set ([`SENSITIVE`]), by name.
    pub secrets: BTreeMap<String, Secret<String>>,
}

/// Where a cloud's client takes the identity it presents from. Decided from the block alone, so that an
/// `endpoint` never drops the credentials a user meant to use: only an endpoint on this machine (an emulator)
/// is called with none, and only where the cloud's requests are not signed with a key (Azure, Google Cloud).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialSource {
    /// The block's own: AWS keys, an Azure service principal (or `use_msi`, `use_cli`), a Google
    /// service-account key, an OCI API key (with the config file's profile filling what the block leaves out).
    Block,
    /// The cloud's standard chain: the AWS SDK's, the Azure CLI's account, Application Default Credentials,
    /// the OCI config file's profile.
    Chain,
    /// None: the endpoint is this machine (127.0.0.0/8, [::1], localhost), an emulator.
    Emulator,
}

impl CloudSettings {
    /// Where `cloud`'s client takes its credentials from ([`CredentialSource`]).
    pub fn credential_source(&self, cloud: Cloud) -> CredentialSource {
        let set = |k: &str| self.settings.contains_key(k) || self.secrets.contains_key(k);
        let on = |k: &str| self.settings.get(k).map(String::as_str) == Some("true");
        let local = self.endpoint.as_deref().is_some_and(endpoint_is_local);
        let own = match cloud {
            Cloud::Aws => set("access_key") && set("secret_key"),
            Cloud::Azure => (set("tenant_id") && set("client_id") && set("client_secret")) || on("use_msi") || on("use_cli"),
            Cloud::Gcp => set("credentials"),
            Cloud::Oci => set("private_key") || set("private_key_path"),
        };
        // AWS and OCI sign each request with a key, an emulator's too.
        let signed = matches!(cloud, Cloud::Aws | Cloud::Oci);
        match (own, local && !signed) {
            (true, _) => CredentialSource::Block,
            (false, true) => CredentialSource::Emulator,
            (false, false) => CredentialSource::Chain,
        }
    }

    /// A sensitive attribute's value.
    pub fn secret(&self, name: &str) -> Option<&Secret<String>> {
        self.secrets.get(name)
    }

    /// What tells two configurations' clients apart (the process keeps one client per key): the endpoint,
    /// the plain settings and a SHA-256 of the secrets, so the key holds no credential itself.
    pub fn client_key(&self) -> String {
        let mut digest = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        for (name, value) in &self.secrets {
            digest.update(name.as_bytes());
            digest.update(&[0]);
            digest.update(value.expose().as_bytes());
            digest.update(&[0]);
        }
        let hex: String = digest.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("{:?}|{:?}|{hex}", self.endpoint, self.settings)
    }
}

/// The configured provider, shared with every resource through the call context.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderConfig {
    pub terraform_version: String,
    pub default_tags: BTreeMap<String, String>,
    /// `prices`: USD per node-hour by instance type, USD per GB-month by `<cloud>-lustre-<tier>`.
    pub prices: BTreeMap<String, f64>,
    pub clouds: BTreeMap<Cloud, CloudSettings>,
    /// `quota_check`.
    pub quota_check: QuotaCheck,
    /// Quota readings and the clusters' claims on them, shared by every resource of one run.
    pub quotas: QuotaCache,
}

/// `quota_check`: what a plan short of quota does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuotaCheck {
    #[default]
    Error,
    Warning,
    Off,
}

impl QuotaCheck {
    pub const NAMES: [&'static str; 3] = ["error", "warning", "off"];

    pub fn parse(s: &str) -> Option<QuotaCheck> {
        match s {
            "error" => Some(QuotaCheck::Error),
            "warning" => Some(QuotaCheck::Warning),
            "off" => Some(QuotaCheck::Off),
            _ => None,
        }
    }
}

/// What one run has read of the clouds' quotas (each read at most once) and what each cluster planned in
/// this run takes of them, so that two clusters in one region are checked against the quota together.
#[derive(Clone, Default)]
pub struct QuotaCache {
    pub inner: std::sync::Arc<tokio::sync::Mutex<QuotaLedger>>,
}

/// By quota (`<cloud>/<scope>/<id>`, lowercased): its reading as (limit, used), or why it failed; and the
/// claims by cluster id. A read may bring more than it was asked for (Azure's usages list has every quota
/// of the location), and all of it is kept, so the place is not read again in the run.
#[derive(Default)]
pub struct QuotaLedger {
    pub readings: BTreeMap<String, Result<(u64, u64), String>>,
    pub claims: BTreeMap<String, BTreeMap<String, u64>>,
}

impl std::fmt::Debug for QuotaCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QuotaCache")
    }
}

/// A cache is state of the run, not configuration: any two compare equal.
impl PartialEq for QuotaCache {
    fn eq(&self, _other: &QuotaCache) -> bool {
        true
    }
}

impl ProviderConfig {
    /// The Google Cloud project the `gcp` block names, which the planner needs for network profiles.
    pub fn gcp_project(&self) -> Option<String> {
        self.clouds.get(&Cloud::Gcp).and_then(|g| g.settings.get("project").cloned())
    }

    pub fn from_value(config: &Value, terraform_version: &str) -> Self {
        let default_tags = config
            .get("default_tags")
            .as_map()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
            .unwrap_or_default();
        let prices = config
            .get("prices")
            .as_map()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_number()?.as_f64()))).collect())
            .unwrap_or_default();
        let mut clouds = BTreeMap::new();
        for cloud in Cloud::ALL {
            let Some(block) = config.get(cloud.as_str()).as_map() else { continue };
            let mut settings: BTreeMap<String, String> = block
                .iter()
                .filter_map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        Value::Bool(b) => b.to_string(),
                        _ => return None,
                    };
                    Some((k.clone(), text))
                })
                .collect();
            let endpoint = settings.remove("endpoint");
            let secrets = SENSITIVE.iter().filter_map(|k| Some(((*k).to_owned(), Secret::new(settings.remove(*k)?)))).collect();
            clouds.insert(cloud, CloudSettings { endpoint, settings, secrets });
        }
        let quota_check = config.get("quota_check").as_str().and_then(QuotaCheck::parse).unwrap_or_default();
        Self { terraform_version: terraform_version.to_owned(), default_tags, prices, clouds, quota_check, quotas: QuotaCache::default() }
    }
}

pub fn validate(config: &Value, diags: &mut Diagnostics) {
    validate_tags(config.get("default_tags"), AttributePath::attr("default_tags"), diags);
    if let Some(prices) = config.get("prices").as_map() {
        for (key, value) in prices {
            let Some(n) = value.as_number().map(|n| n.as_f64()) else { continue };
            if !n.is_finite() || n < 0.0 {
                diags.error_at(
                    AttributePath::attr("prices").and_key(key),
                    "Invalid price",
                    format!(
                        "The price for {key:?} is {n}: give USD per node-hour (instance types) or per GB-month (Lustre tiers), 0 or more."
                    ),
                );
            }
        }
    }
    if let Some(mode) = config.get("quota_check").as_str()
        && QuotaCheck::parse(mode).is_none()
    {
        diags.error_at(
            AttributePath::attr("quota_check"),
            "Unsupported quota check",
            format!(
                "{mode:?} is not a quota check. Valid values: {} (error: a plan short of quota is refused; warning: it is planned with a \
                 warning; off: quotas are not read).",
                crate::framework::one_of(&QuotaCheck::NAMES)
            ),
        );
    }
    for cloud in Cloud::ALL {
        let block = config.get(cloud.as_str());
        if !block.is_present() {
            continue;
        }
        let at = |attr: &str| AttributePath::attr(cloud.as_str()).and_attr(attr);
        let s = |attr: &str| block.get(attr).as_str();
        if let Some(endpoint) = s("endpoint")
            && let Err(why) = check_endpoint(endpoint)
        {
            diags.error_at(
                at("endpoint"),
                "Invalid endpoint",
                format!("{endpoint:?} {why}. Give a base URL such as \"http://127.0.0.1:4566\" or \"https://management.example.com\"."),
            );
        }
        match cloud {
            Cloud::Aws => validate_aws(block, &at, diags),
            Cloud::Azure => validate_azure(block, &at, diags),
            Cloud::Gcp => validate_gcp(block, &at, diags),
            Cloud::Oci => validate_oci(block, &at, diags),
        }
    }
}

fn validate_aws(block: &Value, at: &dyn Fn(&str) -> AttributePath, diags: &mut Diagnostics) {
    if let Some(region) = block.get("region").as_str()
        && !is_aws_region(region)
    {
        diags.error_at(
            at("region"),
            "Invalid AWS region",
            format!("{region:?} is not an AWS region name. Region names look like \"us-east-1\" or \"eu-central-2\"."),
        );
    }
    both_or_neither(block, at, "access_key", "secret_key", diags);
}

fn validate_azure(block: &Value, at: &dyn Fn(&str) -> AttributePath, diags: &mut Diagnostics) {
    for attr in ["subscription_id", "tenant_id", "client_id"] {
        if let Some(id) = block.get(attr).as_str()
            && !is_uuid(id)
        {
            diags.error_at(
                at(attr),
                "Invalid Azure id",
                format!("{attr} must be a UUID such as \"00000000-0000-0000-0000-000000000000\"; got {id:?}."),
            );
        }
    }
    if block.get("client_secret").is_present() {
        for needed in ["client_id", "tenant_id"] {
            if block.get(needed).is_null() {
                diags.error_at(
                    at(needed),
                    "Missing service principal setting",
                    format!("client_secret authenticates a service principal, which also needs {needed}. Set {needed}, or remove client_secret to use the Azure CLI or a managed identity."),
                );
            }
        }
    }
}

fn validate_gcp(block: &Value, at: &dyn Fn(&str) -> AttributePath, diags: &mut Diagnostics) {
    if let Some(project) = block.get("project").as_str()
        && !is_gcp_project(project)
    {
        diags.error_at(
            at("project"),
            "Invalid Google Cloud project id",
            format!("{project:?} is not a project id: 6 to 30 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen."),
        );
    }
    if let (Some(region), Some(zone)) = (block.get("region").as_str(), block.get("zone").as_str())
        && !zone.strip_prefix(region).is_some_and(|rest| rest.len() == 2 && rest.starts_with('-'))
    {
        diags.error_at(
            at("zone"),
            "Zone outside region",
            format!("Zone {zone:?} is not in region {region:?}. Zones of {region:?} are named \"{region}-a\", \"{region}-b\", ..."),
        );
    }
    if let Some(credentials) = block.get("credentials").as_str()
        && serde_json::from_str::<serde_json::Value>(credentials).is_err()
    {
        diags.error_at(
            at("credentials"),
            "Invalid Google Cloud credentials",
            "credentials must be the JSON text of a service-account key (use file(\"key.json\") to read one). The value given is not JSON.",
        );
    }
}

fn validate_oci(block: &Value, at: &dyn Fn(&str) -> AttributePath, diags: &mut Diagnostics) {
    for (attr, prefix) in [("tenancy_ocid", "ocid1.tenancy."), ("user_ocid", "ocid1.user.")] {
        if let Some(ocid) = block.get(attr).as_str()
            && !ocid.starts_with(prefix)
        {
            diags.error_at(at(attr), "Invalid OCID", format!("{attr} must start with {prefix:?}; got {ocid:?}."));
        }
    }
    if let Some(fp) = block.get("fingerprint").as_str()
        && !is_fingerprint(fp)
    {
        diags.error_at(
            at("fingerprint"),
            "Invalid key fingerprint",
            format!(
                "{fp:?} is not an API key fingerprint: 16 pairs of hex digits separated by colons, as shown in the console (aa:bb:cc:...)."
            ),
        );
    }
    if block.get("private_key").is_present() && block.get("private_key_path").is_present() {
        diags.error_at(
            at("private_key_path"),
            "Conflicting attributes",
            "Set either private_key (the PEM text) or private_key_path (a file), not both.",
        );
    }
}

fn both_or_neither(block: &Value, at: &dyn Fn(&str) -> AttributePath, a: &str, b: &str, diags: &mut Diagnostics) {
    for (set, missing) in [(a, b), (b, a)] {
        if block.get(set).is_present() && block.get(missing).is_null() {
            diags.error_at(
                at(missing),
                "Incomplete credentials",
                format!("{set} is set but {missing} is not: set both, or neither to use the default credential chain."),
            );
        }
    }
}

/// Tag rules every cloud accepts: AWS is the strictest on length; `hpc:` is ours.
pub fn validate_tags(tags: &Value, path: AttributePath, diags: &mut Diagnostics) {
    let Some(tags) = tags.as_map() else { return };
    for (key, value) in tags {
        let at = path.clone().and_key(key);
        if key.is_empty() || key.chars().count() > 128 {
            diags.error_at(at.clone(), "Invalid tag key", format!("Tag keys must be 1 to 128 characters; {key:?} is not."));
        }
        if key.starts_with(RESERVED_TAG_PREFIX) || key.to_ascii_lowercase().starts_with("aws:") {
            diags.error_at(
                at.clone(),
                "Reserved tag key",
                format!("Tag key {key:?} uses a reserved prefix: \"hpc:\" tags are written by this provider to find what it created, and \"aws:\" is reserved by AWS. Choose another key."),
            );
        }
        if let Some(v) = value.as_str()
            && v.chars().count() > 256
        {
            diags.error_at(
                at,
                "Invalid tag value",
                format!("Tag values may be at most 256 characters; the value of {key:?} has {}.", v.chars().count()),
            );
        }
    }
}

/// Whether an endpoint URL names this machine (see [`is_loopback`]).
pub fn endpoint_is_local(endpoint: &str) -> bool {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, rest)| rest);
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // Credentials before the host (`user@host`) are not the host.
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    is_loopback(host)
}

/// Whether an endpoint's `host[:port]` is this machine: 127.0.0.0/8, [::1] or localhost.
fn is_loopback(host: &str) -> bool {
    let name = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or_default()
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn check_endpoint(endpoint: &str) -> Result<(), &'static str> {
    let plain = endpoint.strip_prefix("http://");
    let rest = plain.or_else(|| endpoint.strip_prefix("https://")).ok_or("does not start with http:// or https://")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() {
        return Err("has no host");
    }
    if plain.is_some() && !is_loopback(host) {
        // The cloud's credentials (bearer tokens, signed requests) would cross the network in clear.
        return Err("is plain http:// to a host that is not this machine: credentials would cross the network in clear. Use https://, \
                    or http:// only for an emulator on 127.0.0.1, [::1] or localhost");
    }
    if host.chars().any(|c| c.is_whitespace()) {
        return Err("contains white space");
    }
    if let Some((_, port)) = host.rsplit_once(':')
        && !host.ends_with(']')
        && port.parse::<u16>().is_err()
    {
        return Err("has an invalid port");
    }
    Ok(())
}

fn is_aws_region(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[..parts.len() - 1].iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
        && parts[parts.len() - 1].parse::<u8>().is_ok()
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5 && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_gcp_project(p: &str) -> bool {
    (6..=30).contains(&p.len())
        && p.starts_with(|c: char| c.is_ascii_lowercase())
        && !p.ends_with('-')
        && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn is_fingerprint(f: &str) -> bool {
    let pairs: Vec<&str> = f.split(':').collect();
    pairs.len() == 16 && pairs.iter().all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(json: serde_json::Value) -> Value {
        let bytes = serde_json::to_vec(&json).unwrap();
        crate::framework::codec::decode_json(&bytes, &schema().value_type()).unwrap()
    }

    fn errors(config: &Value) -> Vec<(String, String)> {
        let mut d = Diagnostics::new();
        validate(config, &mut d);
        d.iter().map(|d| (d.path.as_ref().map(|p| p.to_string()).unwrap_or_default(), d.summary.clone())).collect()
    }

    #[test]
    fn the_sensitive_attributes_of_the_schema_are_the_ones_kept_as_secrets() {
        let mut marked: Vec<String> =
            schema().block.blocks.iter().flat_map(|b| b.block.attributes.iter().filter(|a| a.sensitive).map(|a| a.name.clone())).collect();
        marked.sort();
        marked.dedup();
        let mut kept: Vec<String> = SENSITIVE.iter().map(|s| (*s).to_owned()).collect();
        kept.sort();
        assert_eq!(marked, kept);
    }

    #[test]
    fn credentials_are_kept_apart_and_redacted_from_debug() {
        let config = cfg(serde_json::json!({
            "aws": {"region": "us-east-1", "access_key": "AKIAEXAMPLE", "secret_key": "aws-s3cr3t", "token": "sess-t0ken"},
            "azure": {"subscription_id": "00000000-0000-0000-0000-000000000001", "tenant_id": "00000000-0000-0000-0000-000000000002",
                      "client_id": "00000000-0000-0000-0000-000000000003", "client_secret": "azure-s3cr3t"},
            "gcp": {"project": "p", "credentials": "{\"private_key\": \"gcp-s3cr3t\"}"},
            "oci": {"tenancy_ocid": "ocid1.tenancy.oc1..aaaa", "private_key": "oci-s3cr3t"}
        }));
        let pc = ProviderConfig::from_value(&config, "1.12.6");
        let shown = format!("{pc:?}");
        for secret in ["AKIAEXAMPLE", "aws-s3cr3t", "sess-t0ken", "azure-s3cr3t", "gcp-s3cr3t", "oci-s3cr3t"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("00000000-0000-0000-0000-000000000003"), "the plain settings still show: {shown}");
        assert_eq!(pc.clouds[&Cloud::Azure].secret("client_secret").map(|s| s.expose_str()), Some("azure-s3cr3t"));
        assert!(!pc.clouds[&Cloud::Azure].settings.contains_key("client_secret"));
        let key = pc.clouds[&Cloud::Aws].client_key();
        assert!(!key.contains("aws-s3cr3t") && !key.contains("AKIAEXAMPLE"), "{key}");
        let mut other = pc.clouds[&Cloud::Aws].clone();
        other.secrets.insert("secret_key".into(), Secret::new("another".into()));
        assert_ne!(other.client_key(), key, "other credentials, another client");
    }

    #[test]
    fn a_full_valid_configuration_passes() {
        let config = cfg(serde_json::json!({
            "default_tags": {"team": "ml", "cost-center": "42"},
            "aws": {"region": "us-east-1", "endpoint": "http://127.0.0.1:5000", "access_key": "test", "secret_key": "test"},
            "azure": {"subscription_id": "00000000-0000-0000-0000-000000000001", "tenant_id": "00000000-0000-0000-0000-000000000002",
                      "client_id": "00000000-0000-0000-0000-000000000003", "client_secret": "s", "endpoint": "https://127.0.0.1:8443"},
            "gcp": {"project": "ml-platform-1", "region": "us-central1", "zone": "us-central1-a", "endpoint": "http://127.0.0.1:9000/"},
            "oci": {"tenancy_ocid": "ocid1.tenancy.oc1..aaaa", "user_ocid": "ocid1.user.oc1..bbbb",
                    "fingerprint": "12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0", "private_key_path": "/k.pem", "region": "us-ashburn-1"}
        }));
        assert_eq!(errors(&config), vec![]);
        let pc = ProviderConfig::from_value(&config, "1.12.6");
        assert_eq!(pc.clouds[&Cloud::Aws].endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(pc.clouds[&Cloud::Aws].settings["region"], "us-east-1");
        assert_eq!(pc.default_tags["team"], "ml");
        assert_eq!(pc.clouds.len(), 4);
    }

    #[test]
    fn each_rule_points_at_its_attribute() {
        let config = cfg(serde_json::json!({
            "default_tags": {"hpc:cluster": "x"},
            "aws": {"region": "us-east", "endpoint": "127.0.0.1:5000", "access_key": "a"},
            "azure": {"tenant_id": "not-a-uuid", "client_secret": "s"},
            "gcp": {"project": "ML", "region": "us-central1", "zone": "europe-west4-a", "credentials": "{not json"},
            "oci": {"tenancy_ocid": "ocid1.user.x", "fingerprint": "12:34", "private_key": "k", "private_key_path": "/k"}
        }));
        let got = errors(&config);
        let expect = [
            (r#"default_tags["hpc:cluster"]"#, "Reserved tag key"),
            ("aws.endpoint", "Invalid endpoint"),
            ("aws.region", "Invalid AWS region"),
            ("aws.secret_key", "Incomplete credentials"),
            ("azure.tenant_id", "Invalid Azure id"),
            ("azure.client_id", "Missing service principal setting"),
            ("gcp.project", "Invalid Google Cloud project id"),
            ("gcp.zone", "Zone outside region"),
            ("gcp.credentials", "Invalid Google Cloud credentials"),
            ("oci.tenancy_ocid", "Invalid OCID"),
            ("oci.fingerprint", "Invalid key fingerprint"),
            ("oci.private_key_path", "Conflicting attributes"),
        ];
        for (path, summary) in expect {
            assert!(got.iter().any(|(p, s)| p == path && s == summary), "missing {path}: {summary} in {got:?}");
        }
        assert_eq!(got.len(), expect.len(), "{got:?}");
    }

    /// An endpoint never drops the block's credentials, and only an endpoint on this machine goes without
    /// any, on the clouds whose requests are not signed with a key.
    #[test]
    fn an_endpoint_elsewhere_keeps_the_clouds_credential_chain() {
        let source = |cloud: Cloud, block: serde_json::Value| {
            let config = serde_json::Value::Object([(cloud.as_str().to_owned(), block)].into_iter().collect());
            let pc = ProviderConfig::from_value(&cfg(config), "1.12.6");
            pc.clouds[&cloud].credential_source(cloud)
        };
        let (local, remote) = ("http://127.0.0.1:9000", "https://api.private.example.com");
        use CredentialSource::{Block, Chain, Emulator};
        for (cloud, own, on_this_machine) in [
            (Cloud::Aws, serde_json::json!({"access_key": "a", "secret_key": "s"}), Chain),
            (Cloud::Azure, serde_json::json!({"tenant_id": "t", "client_id": "c", "client_secret": "s"}), Emulator),
            (Cloud::Gcp, serde_json::json!({"credentials": "{}"}), Emulator),
            (Cloud::Oci, serde_json::json!({"private_key_path": "/k.pem"}), Chain),
        ] {
            assert_eq!(source(cloud, serde_json::json!({})), Chain, "{cloud}: no endpoint");
            assert_eq!(source(cloud, serde_json::json!({"endpoint": remote})), Chain, "{cloud}: {remote}");
            assert_eq!(source(cloud, serde_json::json!({"endpoint": local})), on_this_machine, "{cloud}: {local}");
            let mut given = own.clone();
            given["endpoint"] = serde_json::json!(remote);
            assert_eq!(source(cloud, given), Block, "{cloud}: its own credentials");
            let mut given = own;
            given["endpoint"] = serde_json::json!(local);
            assert_eq!(source(cloud, given), Block, "{cloud}: its own credentials, to an emulator");
        }
        assert_eq!(source(Cloud::Azure, serde_json::json!({"use_cli": true, "endpoint": local})), Block);
        for host in ["https://localhost:8443/x", "http://[::1]:1", "http://127.3.0.1", "https://user@127.0.0.1:1"] {
            assert!(endpoint_is_local(host), "{host}");
        }
        for host in ["https://127.0.0.1.example.com", "https://localhost.example.com", "https://127.0.0.1@example.com", "https://10.0.0.1"]
        {
            assert!(!endpoint_is_local(host), "{host}");
        }
    }

    #[test]
    fn unknown_values_are_not_judged_yet() {
        let config = Value::object([(
            "aws",
            Value::object([("region", Value::Unknown), ("endpoint", Value::Unknown), ("access_key", Value::Unknown)]),
        )]);
        assert_eq!(errors(&config), vec![]);
    }

    #[test]
    fn endpoint_checks() {
        assert!(check_endpoint("http://127.0.0.1:4566").is_ok());
        assert!(check_endpoint("https://[::1]:8443/base").is_ok());
        assert!(check_endpoint("ftp://x").is_err());
        // Plain http only to this machine: elsewhere the credentials would travel in clear.
        for local in ["http://localhost:8080", "http://127.9.0.1:1/x", "http://[::1]:9000"] {
            assert!(check_endpoint(local).is_ok(), "{local}");
        }
        for remote in ["http://10.0.0.5:4566", "http://management.example.com", "http://[2001:db8::1]:80", "http://127.0.0.1.example.com"] {
            assert!(check_endpoint(remote).unwrap_err().contains("in clear"), "{remote}");
        }
        assert!(check_endpoint("https://management.example.com").is_ok());
        assert!(check_endpoint("http://").is_err());
        assert!(check_endpoint("http://host:port").is_err());
    }
}
