//! User data as cloud-init reads it: a script of the provider's and the user's own data composed into one
//! `multipart/mixed` document, each part named so that cloud-init runs the shell scripts in file-name order.
//! PURE: text in, text out.

use std::fmt::Write;

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
}
