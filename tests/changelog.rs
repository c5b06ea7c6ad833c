//! CHANGELOG.md follows the registry convention that users and the release tooling read: one heading per
//! version, newest first, `## X.Y.Z (Month D, YYYY)` or `## X.Y.Z (Unreleased)`, and under it only the
//! sections BREAKING CHANGES, FEATURES, ENHANCEMENTS and BUG FIXES, in that order, each a list of `* `
//! entries. The newest heading is the version Cargo.toml builds.

use std::path::PathBuf;

const SECTIONS: [&str; 4] = ["BREAKING CHANGES:", "FEATURES:", "ENHANCEMENTS:", "BUG FIXES:"];
const MONTHS: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

#[derive(Debug, PartialEq)]
struct Version {
    number: (u64, u64, u64),
    date: Option<String>,
}

/// The problems with a changelog's text, each with its line number; empty when it follows the convention.
fn problems(text: &str) -> (Vec<String>, Vec<Version>) {
    let mut out = Vec::new();
    let mut versions: Vec<Version> = Vec::new();
    let mut section: Option<usize> = None;
    let mut entries_in_section = 0;
    let mut in_comment = false;
    let close_section = |section: Option<usize>, entries: usize, n: usize, out: &mut Vec<String>| {
        if let Some(s) = section
            && entries == 0
        {
            out.push(format!("line {n}: section {} has no entries", SECTIONS[s]));
        }
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if in_comment || line.starts_with("<!--") {
            in_comment = !line.contains("-->");
            continue;
        }
        if i == 0 {
            if line != "# Changelog" {
                out.push(format!("line 1: expected `# Changelog`, found {line:?}"));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("## ") {
            close_section(section, entries_in_section, n, &mut out);
            section = None;
            match parse_heading(rest) {
                Ok(v) => {
                    if let Some(prev) = versions.last()
                        && prev.number <= v.number
                    {
                        out.push(format!("line {n}: {rest} is not older than the version above it"));
                    }
                    if v.date.is_none() && !versions.is_empty() {
                        out.push(format!("line {n}: only the newest version may be unreleased"));
                    }
                    versions.push(v);
                }
                Err(e) => out.push(format!("line {n}: {e}")),
            }
        } else if let Some(s) = SECTIONS.iter().position(|s| *s == line) {
            if versions.is_empty() {
                out.push(format!("line {n}: {line} before any version heading"));
            }
            if section.is_some_and(|prev| prev >= s) {
                out.push(format!("line {n}: {line} out of order (BREAKING CHANGES, FEATURES, ENHANCEMENTS, BUG FIXES)"));
            }
            close_section(section, entries_in_section, n, &mut out);
            section = Some(s);
            entries_in_section = 0;
        } else if line.starts_with("* ") {
            if section.is_none() {
                out.push(format!("line {n}: an entry outside the sections {}", SECTIONS.join(" ")));
            }
            entries_in_section += 1;
        } else if line.starts_with("  ") && entries_in_section > 0 {
            // continuation of an entry
        } else if !line.is_empty() {
            out.push(format!("line {n}: not a heading, a section or an entry: {line:?}"));
        }
    }
    close_section(section, entries_in_section, text.lines().count(), &mut out);
    if versions.is_empty() {
        out.push("no version heading".into());
    }
    (out, versions)
}

fn parse_heading(rest: &str) -> Result<Version, String> {
    let bad = || format!("expected `## X.Y.Z (Month D, YYYY)` or `## X.Y.Z (Unreleased)`, found `## {rest}`");
    let (number, paren) = rest.split_once(' ').ok_or_else(bad)?;
    let mut parts = number.split('.').map(|p| p.parse::<u64>());
    let (Some(Ok(a)), Some(Ok(b)), Some(Ok(c)), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let inner = paren.strip_prefix('(').and_then(|p| p.strip_suffix(')')).ok_or_else(bad)?;
    if inner == "Unreleased" {
        return Ok(Version { number: (a, b, c), date: None });
    }
    let (month_day, year) = inner.split_once(", ").ok_or_else(bad)?;
    let (month, day) = month_day.split_once(' ').ok_or_else(bad)?;
    let day_ok = day.parse::<u32>().is_ok_and(|d| (1..=31).contains(&d)) && !day.starts_with('0');
    let year_ok = year.len() == 4 && year.parse::<u32>().is_ok();
    if !MONTHS.contains(&month) || !day_ok || !year_ok {
        return Err(bad());
    }
    Ok(Version { number: (a, b, c), date: Some(inner.to_owned()) })
}

fn cargo_version() -> (u64, u64, u64) {
    let v: Vec<u64> = env!("CARGO_PKG_VERSION").split('.').map(|p| p.parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

#[test]
fn the_changelog_follows_the_registry_convention_and_heads_with_the_version_cargo_builds() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("CHANGELOG.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (problems, versions) = problems(&text);
    assert!(problems.is_empty(), "CHANGELOG.md:\n{}", problems.join("\n"));
    assert_eq!(versions[0].number, cargo_version(), "the newest CHANGELOG heading is not Cargo.toml's version");
}

#[test]
fn a_changelog_off_the_convention_is_refused_at_the_line() {
    let good = "# Changelog\n\n## 1.2.0 (Unreleased)\n\nFEATURES:\n\n* one\n  more\n\n## 1.1.0 (March 3, 2026)\n\nBREAKING CHANGES:\n\n* x\n\nBUG FIXES:\n\n* y\n";
    assert_eq!(problems(good).0, Vec::<String>::new());
    let cases = [
        ("## 1.1.0 (March 3, 2026)", "## 1.1.0 (2026-03-03)", "line 10: expected"),
        ("## 1.1.0 (March 3, 2026)", "## 1.3.0 (March 3, 2026)", "line 10: 1.3.0 (March 3, 2026) is not older"),
        ("## 1.1.0 (March 3, 2026)", "## 1.1.0 (Unreleased)", "line 10: only the newest version may be unreleased"),
        ("BUG FIXES:", "FIXES:", "line 16: not a heading"),
        ("BUG FIXES:\n\n* y\n", "BUG FIXES:\n\n", "section BUG FIXES: has no entries"),
        ("BREAKING CHANGES:\n\n* x\n\nBUG FIXES:", "BUG FIXES:\n\n* x\n\nBREAKING CHANGES:", "line 16: BREAKING CHANGES: out of order"),
        ("FEATURES:\n\n* one", "* one", "line 5: an entry outside the sections"),
    ];
    for (from, to, expected) in cases {
        let text = good.replacen(from, to, 1);
        let found = problems(&text).0;
        assert!(found.iter().any(|p| p.contains(expected)), "{to:?}: expected {expected:?} in {found:?}");
    }
}
