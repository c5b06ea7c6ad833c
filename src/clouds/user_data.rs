//! User data as cloud-init reads it: a script of the provider's and the user's own data composed into one
//! `multipart/mixed` document, each part named so that cloud-init runs the shell scripts in file-name order.
//! PURE: text in, text out.

use std::fmt::Write;

/// The self-check's file name in the nodes' user data (`data "hpc_gpu_selfcheck"`): cloud-init runs the
/// shell-script parts in file name order, so it runs before the user's part and the Slurm join.
pub const SELFCHECK_FILE_NAME: &str = "00-hpc-selfcheck.sh";

/// The line that opens the self-check script (after its `#!`). The script is composed as text, never
/// encoded, so this line is in any user data that carries it: the script alone or composed with others.
pub const SELFCHECK_MARKER: &str = "# hpc-selfcheck: boot-time GPU node check from terraform-provider-hpc";

/// What user data says about the boot-time self-check, as far as its text shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selfcheck {
    /// The self-check is there; `publishes` is whether it publishes its verdict (`publish_verdict`).
    Carried { publishes: bool },
    /// The text holds no self-check, and nothing it could hide one in.
    Absent,
    /// No self-check in the text, but content the text does not show: parts cloud-init fetches at boot
    /// (`#include`) or encoded ones (base64, gzip).
    Unseen,
}

/// Whether `user_data` carries the self-check of `data "hpc_gpu_selfcheck"` (its marker line, see
/// [`SELFCHECK_MARKER`]), and whether that check publishes its verdict (the script's `PUBLISH=` setting).
pub fn selfcheck(user_data: &str) -> Selfcheck {
    if let Some(at) = user_data.find(SELFCHECK_MARKER) {
        let script = &user_data[at..];
        let publishes = script.find("\nPUBLISH=").is_none_or(|p| !script[p..].starts_with("\nPUBLISH=0"));
        return Selfcheck::Carried { publishes };
    }
    let lower = user_data.to_ascii_lowercase();
    if ["#include", "x-include", "base64", "b64", "gzip"].iter().any(|w| lower.contains(w)) { Selfcheck::Unseen } else { Selfcheck::Absent }
}

pub fn is_mime(user_data: &str) -> bool {
    user_data.get(..13).is_some_and(|h| h.eq_ignore_ascii_case("content-type:"))
}

/// A MIME document's headers and body, split at the first blank line.
pub fn split_mime(doc: &str) -> Option<(&str, &str)> {
    [("\r\n\r\n", 2), ("\n\n", 1)]
        .into_iter()
        .filter_map(|(sep, keep)| doc.find(sep).map(|at| (at, sep.len(), keep)))
        .min_by_key(|(at, ..)| *at)
        .map(|(at, len, keep)| (&doc[..at + keep], &doc[at + len..]))
}

/// The MIME type cloud-init gives user data by its first characters ("User data formats"), or `None` for
/// text it would not run.
pub fn content_type(user_data: &str) -> Option<&'static str> {
    const MARKERS: [(&str, &str); 8] = [
        ("#!", "text/x-shellscript"),
        ("#cloud-config-archive", "text/cloud-config-archive"),
        ("#cloud-config", "text/cloud-config"),
        ("#include-once", "text/x-include-once-url"),
        ("#include", "text/x-include-url"),
        ("#cloud-boothook", "text/cloud-boothook"),
        ("#part-handler", "text/part-handler"),
        ("## template: jinja", "text/jinja2"),
    ];
    MARKERS.iter().find(|(marker, _)| user_data.starts_with(marker)).map(|(_, ty)| *ty)
}

/// Headers of a text part, with a file name (shell-script parts run in file name order).
pub fn part_headers(content_type: &str, body: &str, file_name: &str) -> String {
    let (charset, encoding) = if body.is_ascii() { ("us-ascii", "7bit") } else { ("utf-8", "8bit") };
    format!(
        "Content-Type: {content_type}; charset=\"{charset}\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: {encoding}\n\
         Content-Disposition: attachment; filename=\"{file_name}\"\n\n"
    )
}

/// A script of the provider's (named `file_name`) and the user's data as one `multipart/mixed` document for
/// cloud-init, the script first; the boundary is `==<tag>==` (numbered when that occurs in either part).
pub fn combined_with(script: &str, file_name: &str, tag: &str, user_data: Option<&str>) -> String {
    let boundary = (0..)
        .map(|n| if n == 0 { format!("=={tag}==") } else { format!("=={tag}.{n}==") })
        .find(|b| !script.contains(b.as_str()) && !user_data.is_some_and(|u| u.contains(b.as_str())))
        .unwrap_or_default();
    let mut doc = format!("Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n");
    // The line break before a boundary belongs to the boundary (RFC 2046), so each body is kept exactly.
    let _ = write!(doc, "--{boundary}\n{}{script}\n", part_headers("text/x-shellscript", script, file_name));
    if let Some(user) = user_data {
        if let Some((headers, body)) = split_mime(user).filter(|_| is_mime(user)) {
            // A MIME document of its own (another multipart, say) nests as it is.
            let _ = write!(doc, "--{boundary}\n{headers}\n{body}\n");
        } else {
            let ty = content_type(user).unwrap_or("text/x-shellscript");
            let name = if ty == "text/x-shellscript" { "user-data.sh" } else { "user-data.txt" };
            let _ = write!(doc, "--{boundary}\n{}{user}\n", part_headers(ty, user, name));
        }
    }
    let _ = writeln!(doc, "--{boundary}--");
    doc
}

/// A `multipart/mixed` document without the part named `file_name`: the one part left as it was before it
/// was composed (its body alone when it was a plain script or cloud-config), None when nothing is left.
pub fn without_part(doc: &str, file_name: &str) -> Option<String> {
    let first = doc.lines().next()?;
    let boundary = first.split("boundary=\"").nth(1)?.split('"').next()?;
    let (_, rest) = doc.split_once(&format!("\n--{boundary}\n"))?;
    let (rest, _) = rest.rsplit_once(&format!("\n--{boundary}--"))?;
    let kept: Vec<&str> = rest.split(&format!("\n--{boundary}\n")).filter(|p| !p.contains(&format!("filename=\"{file_name}\""))).collect();
    match kept[..] {
        [] => None,
        [one] => {
            let (headers, body) = split_mime(one)?;
            // A plain part the composition wrapped (a user-data.sh or user-data.txt) is given back as it was.
            if headers.contains("filename=\"user-data.") { Some(body.to_owned()) } else { Some(one.to_owned()) }
        }
        _ => {
            let mut out = format!("Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n");
            for p in kept {
                let _ = write!(out, "--{boundary}\n{p}\n");
            }
            let _ = writeln!(out, "--{boundary}--");
            Some(out)
        }
    }
}

/// User data as EC2 takes it, base64-encoded: the text as it is when it fits EC2's limit (16 KB of raw user
/// data), else gzip-compressed, which cloud-init takes as well ("user data may be compressed with gzip": it
/// inflates it before reading it), so that a self-check and a Slurm join fit together.
pub fn aws_encoded(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(aws_bytes(text))
}

/// The raw bytes [`aws_encoded`] encodes: the text, or its gzip when the text is over EC2's limit.
pub fn aws_bytes(text: &str) -> Vec<u8> {
    if text.len() <= crate::catalog::limits::AWS_USER_DATA_MAX_BYTES {
        return text.as_bytes().to_vec();
    }
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = gz.write_all(text.as_bytes());
    gz.finish().unwrap_or_default()
}

/// User data read back from a cloud (base64): its text, inflated when it was gzip-compressed.
pub fn decoded(b64: &str) -> Option<String> {
    use base64::Engine;
    use std::io::Read as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64.trim()).ok()?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..]).take(1 << 24).read_to_string(&mut text).ok()?;
        return Some(text);
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_part_comes_off_and_the_users_data_is_given_back_as_it_was() {
        for user in ["#!/bin/bash\necho hi", "#cloud-config\npackages: [htop]\n"] {
            let doc = combined_with("#!/bin/bash\ntrue", "50-x.sh", "T", Some(user));
            assert_eq!(without_part(&doc, "50-x.sh").as_deref(), Some(user), "{doc}");
        }
        assert_eq!(without_part(&combined_with("#!/bin/bash\ntrue", "50-x.sh", "T", None), "50-x.sh"), None);
    }

    #[test]
    fn the_selfcheck_is_seen_alone_or_composed_and_encoded_content_is_not_taken_for_its_absence() {
        let check = |publish: u8| format!("#!/bin/bash\n{SELFCHECK_MARKER} (data \"hpc_gpu_selfcheck\").\nset -eu\nPUBLISH={publish}\n");
        let composed = combined_with(&check(1), SELFCHECK_FILE_NAME, "HPC-SELFCHECK", Some("#!/bin/bash\nPUBLISH=0\n"));
        let nested = combined_with("#!/bin/bash\njoin", "50-join.sh", "HPC-SLURM", Some(&composed));
        for doc in [check(1), composed, nested] {
            assert_eq!(selfcheck(&doc), Selfcheck::Carried { publishes: true }, "{doc}");
        }
        assert_eq!(selfcheck(&check(0)), Selfcheck::Carried { publishes: false });
        for absent in ["#!/bin/bash\necho hi", "#cloud-config\npackages: [htop]\n", "hpc-selfcheck"] {
            assert_eq!(selfcheck(absent), Selfcheck::Absent, "{absent}");
        }
        for unseen in [
            "#include\nhttps://example.com/boot",
            "#cloud-config\nwrite_files:\n- encoding: b64\n  content: IyEvYmluL2Jhc2g=\n",
            "Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Transfer-Encoding: base64\n\nIyE=\n--b--\n",
        ] {
            assert_eq!(selfcheck(unseen), Selfcheck::Unseen, "{unseen}");
        }
    }
}
