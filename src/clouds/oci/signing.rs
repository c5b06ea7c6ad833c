//! OCI request signing: HTTP signatures (draft-cavage, version 1) with RSA-SHA256 over the headers OCI
//! requires: `date (request-target) host` for every request, plus `x-content-sha256 content-type
//! content-length` for POST, PUT and PATCH. Written here because the only Rust signer for OCI is AGPL.
//! The key is the user's API signing key (PKCS#8 or PKCS#1 PEM); `keyId` is
//! `<tenancy OCID>/<user OCID>/<key fingerprint>`.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("the OCI API key is not an RSA private key in PEM form (PKCS#8 or PKCS#1): {0}")]
    BadKey(String),
    #[error("signing failed")]
    Sign,
}

/// A loaded API signing key and the key id OCI knows it by.
pub struct Signer {
    key: crate::redact::Secret<RsaKeyPair>,
    key_id: String,
    rng: SystemRandom,
}

/// A request as the signer sees it. `path_and_query` is what follows the host, e.g. `/20160918/vcns?x=y`.
pub struct Request<'a> {
    pub method: &'a str,
    pub host: &'a str,
    pub path_and_query: &'a str,
    /// RFC 7231 date, as sent in the `date` header.
    pub date: &'a str,
    pub body: Option<&'a [u8]>,
    pub content_type: &'a str,
}

impl Signer {
    pub fn from_pem(pem: &str, tenancy: &str, user: &str, fingerprint: &str) -> Result<Signer, SigningError> {
        let key = decode_pem(pem).and_then(|(label, der)| match label.as_str() {
            "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&der).map_err(|e| e.to_string()),
            "RSA PRIVATE KEY" => RsaKeyPair::from_der(&der).map_err(|e| e.to_string()),
            other => Err(format!("a PEM block labelled {other:?}")),
        });
        let key = key.map_err(SigningError::BadKey)?;
        Ok(Signer { key: crate::redact::Secret::new(key), key_id: format!("{tenancy}/{user}/{fingerprint}"), rng: SystemRandom::new() })
    }

    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The headers to add to the request: `date`, `host`, `authorization`, and for requests with a body
    /// `x-content-sha256`, `content-type` and `content-length`.
    pub fn sign(&self, req: &Request<'_>) -> Result<Vec<(String, String)>, SigningError> {
        let method = req.method.to_ascii_lowercase();
        let mut headers = vec![("date".to_owned(), req.date.to_owned()), ("host".to_owned(), req.host.to_owned())];
        let mut names = vec!["date", "(request-target)", "host"];
        let with_body = matches!(method.as_str(), "post" | "put" | "patch");
        if with_body {
            let body = req.body.unwrap_or_default();
            let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body);
            headers.push(("x-content-sha256".into(), STANDARD.encode(digest.as_ref())));
            headers.push(("content-type".into(), req.content_type.to_owned()));
            headers.push(("content-length".into(), body.len().to_string()));
            names.extend(["x-content-sha256", "content-type", "content-length"]);
        }
        let signing_string = names
            .iter()
            .map(|name| match *name {
                "(request-target)" => format!("(request-target): {method} {}", req.path_and_query),
                other => format!("{other}: {}", headers.iter().find(|(k, _)| k == other).map(|(_, v)| v.as_str()).unwrap_or_default()),
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut signature = vec![0u8; self.key.expose().public_modulus_len()];
        self.key.expose().sign(&RSA_PKCS1_SHA256, &self.rng, signing_string.as_bytes(), &mut signature).map_err(|_| SigningError::Sign)?;
        let authorization = format!(
            "Signature version=\"1\",keyId=\"{}\",algorithm=\"rsa-sha256\",headers=\"{}\",signature=\"{}\"",
            self.key_id,
            names.join(" "),
            STANDARD.encode(&signature)
        );
        headers.push(("authorization".into(), authorization));
        Ok(headers)
    }
}

/// The label and DER bytes of the first PEM block.
fn decode_pem(pem: &str) -> Result<(String, Vec<u8>), String> {
    let start = pem.find("-----BEGIN ").ok_or("no PEM header")?;
    let rest = &pem[start + 11..];
    let label_end = rest.find("-----").ok_or("malformed PEM header")?;
    let label = rest[..label_end].to_owned();
    let end_marker = format!("-----END {label}-----");
    let body_start = label_end + 5;
    // The footer is looked for after the header: one inside it is not a footer.
    let body = &rest[body_start..];
    let body_end = body.find(&end_marker).ok_or("no PEM footer after its header")?;
    let b64: String = body[..body_end].chars().filter(|c| !c.is_whitespace()).collect();
    let der = STANDARD.decode(b64).map_err(|e| format!("PEM body is not base64: {e}"))?;
    Ok((label, der))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};

    fn pem(label: &str, der: &[u8]) -> String {
        let b64 = STANDARD.encode(der);
        let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
        format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
    }

    #[test]
    fn a_footer_inside_the_header_is_a_bad_key_not_a_panic() {
        for text in ["-----BEGIN -----END -----", "-----BEGIN X-----END X-----", "-----BEGIN RSA-----\n-----END RSA", "x-----BEGIN "] {
            assert!(matches!(Signer::from_pem(text, "t", "u", "f"), Err(SigningError::BadKey(_))), "{text:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 512, failure_persistence: None, ..Default::default() })]
        /// Any text made of PEM's pieces is a key or a `BadKey`, never a panic.
        #[test]
        fn pem_like_text_never_panics(parts in proptest::collection::vec(proptest::sample::select(vec![
            "-----BEGIN ", "-----END ", "-----", "PRIVATE KEY", "RSA PRIVATE KEY", "MIIB", "\n", "=", "é", " ",
        ]), 0..12)) {
            let _ = Signer::from_pem(&parts.concat(), "t", "u", "f");
        }
    }

    #[test]
    fn signs_what_a_verifier_reconstructs() {
        let key = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let pkcs8 = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&key).unwrap();
        let signer = Signer::from_pem(&pem("PRIVATE KEY", pkcs8.as_ref()), "ocid1.tenancy.oc1..t", "ocid1.user.oc1..u", "aa:bb").unwrap();
        let body = br#"{"cidrBlock":"10.0.0.0/16"}"#;
        let req = Request {
            method: "POST",
            host: "iaas.example",
            path_and_query: "/20160918/vcns",
            date: "Thu, 05 Jan 2014 21:31:40 GMT",
            body: Some(body),
            content_type: "application/json",
        };
        let headers = signer.sign(&req).unwrap();
        let get = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
        let auth = get("authorization");
        assert!(auth.contains(r#"keyId="ocid1.tenancy.oc1..t/ocid1.user.oc1..u/aa:bb""#), "{auth}");
        assert!(auth.contains(r#"headers="date (request-target) host x-content-sha256 content-type content-length""#), "{auth}");
        assert_eq!(get("content-length"), body.len().to_string());
        let expected = format!(
            "date: {}\n(request-target): post /20160918/vcns\nhost: iaas.example\nx-content-sha256: {}\ncontent-type: application/json\ncontent-length: {}",
            req.date,
            get("x-content-sha256"),
            body.len()
        );
        let sig = STANDARD.decode(auth.rsplit("signature=\"").next().unwrap().trim_end_matches('"')).unwrap();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.public_key().as_ref()).verify(expected.as_bytes(), &sig).unwrap();
        // A GET signs only date, target and host.
        let get_req = Request { method: "GET", body: None, path_and_query: "/20160918/vcns?compartmentId=c", ..req };
        let h = signer.sign(&get_req).unwrap();
        assert!(h.iter().any(|(k, v)| k == "authorization" && v.contains(r#"headers="date (request-target) host""#)));
        assert!(Signer::from_pem("not a key", "t", "u", "f").is_err());
    }
}
