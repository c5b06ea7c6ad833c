//! Who a caller of the OCI emulator is, and what an instance may read. Three parts:
//!
//! - Identity (`/20160918`, on OCI's identity host): compartments, dynamic groups and policies, created, read,
//!   listed and deleted as the Identity API has them (CreateCompartment, CreateDynamicGroup, CreatePolicy, ...).
//! - Instance principals, as the `oci` SDK's `InstancePrincipalsSecurityTokenSigner` uses them: each instance's
//!   metadata service serves a leaf certificate, its private key and the intermediate certificate that signed
//!   it (`/opc/v2/identity/cert.pem`, `key.pem`, `intermediate.pem`); the auth service's federation endpoint
//!   (`POST /v1/x509`, signed with the leaf's key as `<tenancy>/fed-x509/<SHA-1 fingerprint>`) exchanges the
//!   leaf and a session public key for a security token (a JWT); a request signed with
//!   `keyId="ST$<token>"` by the session key is that instance's.
//! - The grant check: an instance may read a secret's bundle only when a policy statement, in the small grammar
//!   [`parse_statement`] documents, allows a dynamic group whose matching rule ([`parse_rule`]) names the
//!   instance. A statement or rule outside that grammar grants nothing.
//!
//! The leaf's subject holds the instance's OCID (CN), `opc-tenant:<tenancy>` (OU, which the SDK reads) and
//! `opc-certtype:instance` (O); OCI's own leaves carry several OUs, which the certificate library here cannot
//! write. The emulator's intermediate certificate is process-wide and self-signed. This module must not
//! answer for Vault or Core resources: it only says who is asking and what a policy grants.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use super::{Reply, Req, Store, finished, json_body, listing, now_rfc3339, ocid, require, state_of};

/// How long a security token is good for (OCI's instance principal tokens last 20 minutes).
const TOKEN_LIFETIME: Duration = Duration::from_secs(20 * 60);

/// The Identity collections served, with their operation names: (path, singular, plural, model).
const COLLECTIONS: [(&str, &str, &str); 3] = [
    ("compartments", "Compartment", "Compartments"),
    ("dynamicGroups", "DynamicGroup", "DynamicGroups"),
    ("policies", "Policy", "Policies"),
];

/// An instance's identity material, made on first request.
pub(super) struct Leaf {
    cert_pem: String,
    key_pem: String,
    /// The certificate's DER in base64, as the SDK sends it to the federation endpoint.
    cert_b64: String,
    /// SHA-1 of the DER as `AA:BB:...`, the fingerprint in the federation request's keyId.
    fingerprint: String,
    public_key: Vec<u8>,
    tenancy: String,
}

/// A security token handed out: whose it is and the session key its requests are signed with.
struct Session {
    instance: String,
    public_key: Vec<u8>,
    expires: SystemTime,
}

#[derive(Default)]
pub(super) struct Directory {
    /// Compartments, dynamic groups and policies by OCID: (collection path, model as shown).
    objects: BTreeMap<String, (&'static str, Value)>,
    leaves: BTreeMap<String, Leaf>,
    sessions: BTreeMap<String, Session>,
}

/// The emulator's intermediate certificate authority.
struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

fn ca() -> Result<&'static Ca, String> {
    static CA: OnceLock<Result<Ca, String>> = OnceLock::new();
    CA.get_or_init(|| {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).map_err(|e| e.to_string())?;
        let mut params = rcgen::CertificateParams::default();
        let mut subject = rcgen::DistinguishedName::new();
        subject.push(rcgen::DnType::CommonName, "PKISVC Identity Intermediate emulator");
        subject.push(rcgen::DnType::OrganizationName, "Oracle Corporation");
        params.distinguished_name = subject;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
        Ok(Ca { pem: cert.pem(), issuer: rcgen::Issuer::new(params, key) })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The tenancy a compartment is in: the first id up its chain of parents that is not a compartment made here.
pub(super) fn tenancy_of(store: &Store, compartment: &str) -> String {
    let mut at = compartment.to_owned();
    for _ in 0..64 {
        match store.identity.objects.get(&at) {
            Some(("compartments", c)) => at = c["compartmentId"].as_str().unwrap_or_default().to_owned(),
            _ => break,
        }
    }
    at
}

/// Whether `inner` is `outer` or a compartment beneath it.
fn within(store: &Store, inner: &str, outer: &str) -> bool {
    let mut at = inner.to_owned();
    for _ in 0..64 {
        if at == outer {
            return true;
        }
        match store.identity.objects.get(&at) {
            Some(("compartments", c)) => at = c["compartmentId"].as_str().unwrap_or_default().to_owned(),
            _ => return false,
        }
    }
    false
}

/// `(operation, id)` for an Identity request under `/20160918`, or None when it is not one served.
pub(super) fn route(method: &str, segs: &[&str]) -> Option<(String, String)> {
    let (_, one, many) = COLLECTIONS.iter().find(|(p, _, _)| *p == segs[0])?;
    let operation = match (method, &segs[1..]) {
        ("POST", []) => format!("Create{one}"),
        ("GET", []) => format!("List{many}"),
        ("GET", [_]) => format!("Get{one}"),
        ("DELETE", [_]) => format!("Delete{one}"),
        _ => return None,
    };
    Some((operation, segs.get(1).copied().unwrap_or_default().to_owned()))
}

fn path_of(operation: &str) -> &'static str {
    COLLECTIONS.iter().find(|(_, one, many)| operation.ends_with(many) || operation.ends_with(one)).map(|(p, _, _)| *p).unwrap_or("")
}

pub(super) fn handle(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let operation = req.route.operation.as_str();
    let path = path_of(operation);
    let id = req.route.id.as_str();
    if operation.starts_with("Create") {
        return create(store, req, path);
    }
    if operation.starts_with("List") {
        let compartment = req.query.get("compartmentId").ok_or_else(|| super::missing("compartmentId"))?;
        let items = store
            .identity
            .objects
            .iter()
            .filter(|(_, (p, v))| *p == path && v["compartmentId"] == compartment.as_str())
            .map(|(id, (_, v))| (id.clone(), v.clone()))
            .collect();
        return listing(items, req.query, false);
    }
    if !matches!(store.identity.objects.get(id), Some((p, _)) if *p == path) {
        return Err(Reply::not_found());
    }
    if operation.starts_with("Get") {
        return Ok(Reply::json(200, store.identity.objects[id].1.clone()));
    }
    // Delete: a compartment that still holds compartments, groups or policies is refused, as OCI refuses a
    // compartment with resources in it.
    if path == "compartments" && store.identity.objects.values().any(|(_, v)| v["compartmentId"] == id) {
        return Err(Reply::error(409, "Conflict", format!("Compartment {id} is not empty")));
    }
    store.identity.objects.remove(id);
    Ok(Reply::empty(if path == "compartments" { 202 } else { 204 }))
}

fn create(store: &mut Store, req: &Req, path: &'static str) -> Result<Reply, Reply> {
    let body = json_body(req.body)?;
    let compartment = require(&body, "/compartmentId")?;
    let name = require(&body, "/name")?;
    if body.get("description").and_then(Value::as_str).is_none() {
        return Err(super::missing("description"));
    }
    let tenancy = tenancy_of(store, &compartment);
    // Compartment names are unique among their siblings; dynamic group and policy names across the tenancy.
    let clash = store.identity.objects.values().any(|(p, v)| {
        *p == path
            && v["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(&name))
            && if path == "compartments" {
                v["compartmentId"] == compartment.as_str()
            } else {
                tenancy_of(store, v["compartmentId"].as_str().unwrap_or_default()) == tenancy
            }
    });
    if clash {
        return Err(Reply::error(409, "Conflict", format!("An object named {name} already exists")));
    }
    let mut value = json!({
        "compartmentId": compartment, "name": name, "description": body["description"], "lifecycleState": "ACTIVE",
        "timeCreated": now_rfc3339(),
        "freeformTags": body.get("freeformTags").filter(|t| t.is_object()).cloned().unwrap_or(json!({})),
        "definedTags": body.get("definedTags").filter(|t| t.is_object()).cloned().unwrap_or(json!({})),
    });
    let kind = match path {
        "compartments" => {
            value["isAccessible"] = json!(true);
            "compartment"
        }
        "dynamicGroups" => {
            if !compartment.starts_with("ocid1.tenancy.") {
                return Err(super::invalid("A dynamic group's compartmentId must be the tenancy's OCID"));
            }
            value["matchingRule"] = json!(require(&body, "/matchingRule")?);
            "dynamicgroup"
        }
        _ => {
            let statements = body.get("statements").and_then(Value::as_array).filter(|s| !s.is_empty());
            let Some(statements) = statements else { return Err(super::missing("statements")) };
            value["statements"] = json!(statements);
            "policy"
        }
    };
    let id = ocid(store, kind);
    value["id"] = json!(id);
    store.identity.objects.insert(id, (path, value.clone()));
    let etag = format!("\"{}\"", crate::metadata::digest(&value.to_string()));
    Ok(Reply::json(200, value).header("etag", etag))
}

/// Compartments, dynamic groups and policies held, by collection, for the inventory.
pub(super) fn inventory(store: &Store) -> BTreeMap<&'static str, Vec<String>> {
    let mut out: BTreeMap<&'static str, Vec<String>> = COLLECTIONS.iter().map(|(p, _, _)| (*p, Vec::new())).collect();
    for (id, (path, _)) in &store.identity.objects {
        out.entry(path).or_default().push(id.clone());
    }
    out
}

/// Every Identity object as its model shows it, by OCID, for the snapshot.
pub(super) fn snapshot(store: &Store) -> serde_json::Map<String, Value> {
    store.identity.objects.iter().map(|(id, (_, v))| (id.clone(), v.clone())).collect()
}

/// `/opc/v2/identity/<file>` for an instance: its leaf certificate (`cert.pem`), the leaf's private key
/// (`key.pem`) or the intermediate certificate (`intermediate.pem`). None for another file or an instance
/// that is not live.
pub(super) fn metadata_file(store: &mut Store, instance: &str, file: &str) -> Option<String> {
    let live = store.resources.get(instance).filter(|s| s.kind == "instance" && !finished(s))?;
    let compartment = live.value["compartmentId"].as_str().unwrap_or_default().to_owned();
    if file == "intermediate.pem" {
        return ca().ok().map(|ca| ca.pem.clone());
    }
    if !matches!(file, "cert.pem" | "key.pem") {
        return None;
    }
    if !store.identity.leaves.contains_key(instance) {
        let tenancy = tenancy_of(store, &compartment);
        let leaf = make_leaf(instance, &tenancy).map_err(|e| eprintln!("oci emulator: no leaf certificate for {instance}: {e}")).ok()?;
        store.identity.leaves.insert(instance.to_owned(), leaf);
    }
    let leaf = &store.identity.leaves[instance];
    Some(if file == "cert.pem" { leaf.cert_pem.clone() } else { leaf.key_pem.clone() })
}

fn make_leaf(instance: &str, tenancy: &str) -> Result<Leaf, String> {
    let ca = ca()?;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).map_err(|e| e.to_string())?;
    let mut params = rcgen::CertificateParams::default();
    let mut subject = rcgen::DistinguishedName::new();
    subject.push(rcgen::DnType::CommonName, instance);
    subject.push(rcgen::DnType::OrganizationalUnitName, format!("opc-tenant:{tenancy}"));
    subject.push(rcgen::DnType::OrganizationName, "opc-certtype:instance");
    params.distinguished_name = subject;
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature, rcgen::KeyUsagePurpose::KeyAgreement];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &ca.issuer).map_err(|e| e.to_string())?;
    let der = cert.der().to_vec();
    let sha1 = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, &der);
    let fingerprint = sha1.as_ref().iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":");
    Ok(Leaf {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_b64: STANDARD.encode(&der),
        fingerprint,
        public_key: rcgen::PublicKeyData::subject_public_key_info(&key),
        tenancy: tenancy.to_owned(),
    })
}

/// `POST /v1/x509`: the auth service's federation endpoint. The request is signed with an instance's leaf key
/// (keyId `<tenancy>/fed-x509/<fingerprint>`, the headers the SDK's AuthTokenRequestSigner signs) and carries the
/// leaf, the intermediate and a session public key; the answer is `{"token": <JWT>}`. Anything else is OCI's
/// 401 NotAuthenticated.
pub(super) fn federate(store: &mut Store, method: &str, uri: &axum::http::Uri, headers: &axum::http::HeaderMap, body: &[u8]) -> Reply {
    match exchange(store, method, uri, headers, body) {
        Ok(token) => Reply::json(200, json!({"token": token})),
        Err(why) => {
            eprintln!("oci emulator: federation refused: {why}");
            super::unauthenticated()
        }
    }
}

fn exchange(
    store: &mut Store,
    method: &str,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> Result<String, String> {
    if method != "POST" {
        return Err(format!("{method} is not POST"));
    }
    let sig = super::Signature::parse(headers)?;
    let (tenancy, fingerprint) = sig.key_id.split_once("/fed-x509/").ok_or("the keyId is not <tenancy>/fed-x509/<fingerprint>")?;
    let request: Value = serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let certificate = request["certificate"].as_str().ok_or("no certificate")?;
    let (instance, leaf) =
        store.identity.leaves.iter().find(|(_, l)| l.cert_b64 == certificate).ok_or("a certificate the emulator did not issue")?;
    if leaf.fingerprint != fingerprint || leaf.tenancy != tenancy {
        return Err(format!("keyId {} does not name the certificate's tenancy and fingerprint", sig.key_id));
    }
    let needed = ["date", "(request-target)", "content-length", "content-type", "x-content-sha256"];
    sig.check(&leaf.public_key, &needed, method, uri, headers, body)?;
    if let Some(intermediates) = request.get("intermediateCertificates") {
        let ca_b64: String = ca()?.pem.lines().filter(|l| !l.starts_with("-----")).collect();
        if intermediates.as_array().is_none_or(|a| a.iter().any(|c| c.as_str() != Some(ca_b64.as_str()))) {
            return Err("intermediateCertificates holds a certificate the emulator did not issue".into());
        }
    }
    let public_key = STANDARD.decode(request["publicKey"].as_str().ok_or("no publicKey")?).map_err(|_| "publicKey is not base64")?;
    let instance = instance.clone();
    let live = store.resources.get(&instance).filter(|s| s.kind == "instance" && !finished(s) && state_of(s) != "TERMINATING");
    let compartment = live.ok_or("the instance is gone")?.value["compartmentId"].as_str().unwrap_or_default().to_owned();
    let now = SystemTime::now();
    let iat = now.duration_since(SystemTime::UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs();
    let claims = json!({
        "sub": instance, "opc-instance": instance, "opc-compartment": compartment, "opc-tenant": tenancy,
        "ptype": "instance", "opc-certtype": "instance", "iss": "authService.oracle.com", "aud": "oci",
        "iat": iat, "exp": iat + TOKEN_LIFETIME.as_secs(), "jti": crate::metadata::digest(&format!("{instance}{iat}{}", store.next)),
        "jwk": {"kty": "RSA", "kid": "session", "alg": "RS256", "use": "sig", "x5c": [STANDARD.encode(&public_key)]},
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "JWT", "kid": "asw"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = rcgen::SigningKey::sign(ca()?.issuer.key(), signing_input.as_bytes()).map_err(|e| e.to_string())?;
    let token = format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature));
    store.next += 1;
    store.identity.sessions.insert(token.clone(), Session { instance, public_key, expires: now + TOKEN_LIFETIME });
    Ok(token)
}

/// The instance a security token was handed to and the session public key its requests must be signed with.
pub(super) fn session<'a>(store: &'a Store, token: &str) -> Result<(&'a str, &'a [u8]), String> {
    let session = store.identity.sessions.get(token).ok_or("a security token the emulator did not hand out")?;
    if session.expires < SystemTime::now() {
        return Err("the security token has expired".into());
    }
    Ok((&session.instance, &session.public_key))
}

/// One clause of a dynamic group's matching rule.
#[derive(Debug, PartialEq)]
enum Clause {
    InstanceId(String),
    CompartmentId(String),
}

/// A matching rule: ANY (true when one clause holds; a single clause is ANY of one) or ALL of its clauses.
#[derive(Debug, PartialEq)]
struct Rule {
    all: bool,
    clauses: Vec<Clause>,
}

/// A matching rule in the grammar understood here, else None (a group whose rule is not understood matches no
/// instance):
///
/// ```text
/// rule   := clause | ANY {clause, clause, ...} | ALL {clause, clause, ...}
/// clause := instance.id = '<ocid>' | instance.compartment.id = '<ocid>'
/// ```
///
/// Keywords and attribute names are matched without regard to case; values are quoted with `'` or `"`. Tags,
/// resource types and nested ANY/ALL are not understood.
fn parse_rule(text: &str) -> Option<Rule> {
    let text = text.trim();
    let head = text.get(..3).map(str::to_ascii_lowercase);
    let (all, body) = match head.as_deref() {
        Some(word @ ("any" | "all")) => {
            let inner = text[3..].trim().strip_prefix('{')?.strip_suffix('}')?;
            (word == "all", inner)
        }
        _ => (false, text),
    };
    let clauses = body.split(',').map(parse_clause).collect::<Option<Vec<_>>>()?;
    Some(Rule { all, clauses })
}

fn parse_clause(text: &str) -> Option<Clause> {
    let (attribute, value) = text.split_once('=')?;
    let value = unquote(value)?;
    match attribute.trim().to_ascii_lowercase().as_str() {
        "instance.id" => Some(Clause::InstanceId(value)),
        "instance.compartment.id" => Some(Clause::CompartmentId(value)),
        _ => None,
    }
}

/// `'x'` or `"x"` (surrounding spaces allowed) -> `x`, when x holds no quote, space or brace.
fn unquote(text: &str) -> Option<String> {
    let t = text.trim();
    let inner =
        t.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')).or_else(|| t.strip_prefix('"').and_then(|r| r.strip_suffix('"')))?;
    (!inner.is_empty() && !inner.contains(['\'', '"', ' ', '{', '}', ','])).then(|| inner.to_owned())
}

/// Where a statement applies.
#[derive(Debug, PartialEq)]
enum Scope {
    Tenancy,
    CompartmentId(String),
    CompartmentName(String),
}

/// A policy statement that lets a dynamic group read secret bundles.
#[derive(Debug, PartialEq)]
struct Grant {
    group: String,
    scope: Scope,
    /// `where target.secret.id = '<ocid>'`: only that secret.
    secret: Option<String>,
}

/// A statement in the grammar understood here, else None (it grants nothing):
///
/// ```text
/// Allow dynamic-group <name> to <verb> <resource-type> in <location> [where target.secret.id = '<ocid>']
/// verb          := read | use | manage
/// resource-type := secret-bundles | secret-family
/// location      := tenancy | compartment <name> | compartment id <ocid>
/// ```
///
/// Keywords are matched without regard to case. A compartment name is a direct child of the compartment the
/// policy is attached to (no `a:b` paths); `in tenancy` only counts in a policy attached to the tenancy. Other
/// subjects (groups, `any-user`), verbs, resource types and conditions are not understood.
fn parse_statement(text: &str) -> Option<Grant> {
    let lower = text.to_ascii_lowercase();
    let (head, condition) = match lower.find(" where ") {
        Some(i) => (&text[..i], Some(&text[i + 7..])),
        None => (text, None),
    };
    let words: Vec<&str> = head.split_whitespace().collect();
    let low: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let low: Vec<&str> = low.iter().map(String::as_str).collect();
    let ["allow", "dynamic-group", _, "to", "read" | "use" | "manage", "secret-bundles" | "secret-family", "in", location @ ..] = &low[..]
    else {
        return None;
    };
    let scope = match location {
        ["tenancy"] => Scope::Tenancy,
        ["compartment", "id", _] => Scope::CompartmentId(words[9].to_owned()),
        ["compartment", name] if !name.contains(':') => Scope::CompartmentName(words[8].to_owned()),
        _ => return None,
    };
    let secret = match condition {
        None => None,
        Some(c) => {
            let (attribute, value) = c.split_once('=')?;
            if !attribute.trim().eq_ignore_ascii_case("target.secret.id") {
                return None;
            }
            Some(unquote(value)?)
        }
    };
    Some(Grant { group: words[2].to_owned(), scope, secret })
}

/// Whether an instance may read the bundle of `secret` (a secret's model: `id`, `compartmentId`): some ACTIVE
/// policy holds a statement granting it to an ACTIVE dynamic group whose matching rule the instance meets.
pub(super) fn may_read_secret_bundle(store: &Store, instance: &str, secret: &Value) -> bool {
    let Some(stored) = store.resources.get(instance).filter(|s| s.kind == "instance" && !finished(s)) else { return false };
    let instance_compartment = stored.value["compartmentId"].as_str().unwrap_or_default();
    let tenancy = tenancy_of(store, instance_compartment);
    let secret_id = secret["id"].as_str().unwrap_or_default();
    let secret_compartment = secret["compartmentId"].as_str().unwrap_or_default();
    if tenancy_of(store, secret_compartment) != tenancy {
        return false;
    }
    let groups: Vec<&str> = store
        .identity
        .objects
        .values()
        .filter(|(p, v)| *p == "dynamicGroups" && v["lifecycleState"] == "ACTIVE" && v["compartmentId"] == tenancy.as_str())
        .filter(|(_, v)| {
            parse_rule(v["matchingRule"].as_str().unwrap_or_default()).is_some_and(|rule| {
                let holds = |c: &Clause| match c {
                    Clause::InstanceId(id) => id == instance,
                    Clause::CompartmentId(id) => id == instance_compartment,
                };
                if rule.all { rule.clauses.iter().all(holds) } else { rule.clauses.iter().any(holds) }
            })
        })
        .filter_map(|(_, v)| v["name"].as_str())
        .collect();
    store.identity.objects.values().filter(|(p, v)| *p == "policies" && v["lifecycleState"] == "ACTIVE").any(|(_, policy)| {
        let attached = policy["compartmentId"].as_str().unwrap_or_default();
        if tenancy_of(store, attached) != tenancy {
            return false;
        }
        policy["statements"].as_array().into_iter().flatten().filter_map(Value::as_str).filter_map(parse_statement).any(|grant| {
            let scope = match &grant.scope {
                Scope::Tenancy if attached == tenancy => Some(tenancy.clone()),
                Scope::Tenancy => None,
                Scope::CompartmentId(id) if within(store, id, attached) => Some(id.clone()),
                Scope::CompartmentId(_) => None,
                Scope::CompartmentName(name) => store
                    .identity
                    .objects
                    .iter()
                    .find(|(_, (p, c))| {
                        *p == "compartments"
                            && c["compartmentId"] == attached
                            && c["lifecycleState"] == "ACTIVE"
                            && c["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name))
                    })
                    .map(|(id, _)| id.clone()),
            };
            groups.iter().any(|g| g.eq_ignore_ascii_case(&grant.group))
                && scope.is_some_and(|scope| within(store, secret_compartment, &scope))
                && grant.secret.as_deref().is_none_or(|s| s == secret_id)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_rules_in_the_grammar_are_understood_and_others_are_not() {
        assert_eq!(
            parse_rule("instance.id = 'ocid1.instance.oc1..a'"),
            Some(Rule { all: false, clauses: vec![Clause::InstanceId("ocid1.instance.oc1..a".into())] })
        );
        assert_eq!(
            parse_rule("All {instance.compartment.id = \"ocid1.compartment.oc1..c\", instance.id='ocid1.instance.oc1..a'}"),
            Some(Rule {
                all: true,
                clauses: vec![Clause::CompartmentId("ocid1.compartment.oc1..c".into()), Clause::InstanceId("ocid1.instance.oc1..a".into())]
            })
        );
        assert_eq!(parse_rule("ANY {instance.id = 'a'}").map(|r| r.all), Some(false));
        for not_understood in [
            "tag.ns.key.value = 'x'",
            "resource.type = 'instance'",
            "ANY {instance.id = 'a', ALL {instance.id = 'b'}}",
            "instance.id != 'a'",
            "instance.id = a",
            "ANY instance.id = 'a'",
            "",
        ] {
            assert_eq!(parse_rule(not_understood), None, "{not_understood}");
        }
    }

    #[test]
    fn statements_in_the_grammar_are_understood_and_others_are_not() {
        assert_eq!(
            parse_statement("Allow dynamic-group munge-readers to read secret-bundles in compartment hpc"),
            Some(Grant { group: "munge-readers".into(), scope: Scope::CompartmentName("hpc".into()), secret: None })
        );
        assert_eq!(
            parse_statement(
                "allow dynamic-group g to read secret-family in compartment id ocid1.compartment.oc1..c where target.secret.id = 'ocid1.vaultsecret.oc1..s'"
            ),
            Some(Grant {
                group: "g".into(),
                scope: Scope::CompartmentId("ocid1.compartment.oc1..c".into()),
                secret: Some("ocid1.vaultsecret.oc1..s".into())
            })
        );
        assert_eq!(parse_statement("Allow dynamic-group g to manage secret-bundles in tenancy").map(|g| g.scope), Some(Scope::Tenancy));
        for not_understood in [
            "Allow group admins to read secret-bundles in tenancy",
            "Allow any-user to read secret-bundles in tenancy",
            "Allow dynamic-group g to inspect secret-bundles in tenancy",
            "Allow dynamic-group g to read secrets in tenancy",
            "Allow dynamic-group g to read secret-bundles in compartment a:b",
            "Allow dynamic-group g to read secret-bundles in tenancy where target.secret.name = 'munge'",
            "Allow dynamic-group g to read secret-bundles in tenancy where request.principal.id = 'x'",
            "Deny dynamic-group g to read secret-bundles in tenancy",
            "Endorse dynamic-group g to read secret-bundles in tenancy",
        ] {
            assert_eq!(parse_statement(not_understood), None, "{not_understood}");
        }
    }
}
