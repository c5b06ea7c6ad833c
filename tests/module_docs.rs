//! Module READMEs carry Inputs and Outputs tables generated from the modules' `variable` and `output`
//! blocks, between `<!-- BEGIN_TF_DOCS -->` and `<!-- END_TF_DOCS -->`; this test renders them and asserts
//! each README holds exactly that. `HPC_UPDATE_DOCS=1 cargo test --test module_docs` rewrites the blocks.
//! (terraform-docs, the usual generator, is refused by the Go module proxy here: "This module version is not
//! available", 403; so the tables are ours, in its layout.)
//!
//! The modules keep the standard module structure (`versions.tf`, `variables.tf`, `outputs.tf`, `main.tf`,
//! `examples/<name>/`), and the versions line up: each example pins exactly the version in Cargo.toml, and
//! each module's constraint admits it. TFLint checks the structure too (`tests/lint.rs`); these tests need no
//! tool.
//!
//! The HCL reader is deliberately small: it finds top-level blocks by counting brackets, skipping
//! strings (with their `${...}` interpolations), heredocs and comments, and reads a block's top-level
//! `name = expression` attributes as source text. That is all the tables need.

#[path = "common/configurations.rs"]
mod configurations;

use std::path::{Path, PathBuf};

const BEGIN: &str = "<!-- BEGIN_TF_DOCS -->";
const END: &str = "<!-- END_TF_DOCS -->";
const UPDATE: &str = "HPC_UPDATE_DOCS=1 cargo test --test module_docs";

/// A top-level block: its type, labels, and the source text between its braces.
#[derive(Debug)]
struct Block {
    kind: String,
    labels: Vec<String>,
    body: String,
}

/// One `name = expression` attribute of a block body, with the expression as written.
#[derive(Debug, PartialEq)]
struct Attribute {
    name: String,
    expr: String,
}

#[derive(Debug, PartialEq)]
struct Variable {
    name: String,
    description: String,
    ty: Option<String>,
    default: Option<String>,
}

#[derive(Debug, PartialEq)]
struct Output {
    name: String,
    description: String,
}

/// Index of the end of the line holding `i` (the `\n`, which stays unconsumed), or the end of the text.
fn line_end(s: &[u8], i: usize) -> usize {
    s[i..].iter().position(|&c| c == b'\n').map_or(s.len(), |p| i + p)
}

/// Past the end of the quoted string opening at `i`, skipping escapes and `${...}` / `%{...}` templates.
fn skip_string(s: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            b'$' | b'%' if s.get(i + 1) == Some(&s[i]) => i += 2, // `$${` and `%%{` are literal
            b'$' | b'%' if s.get(i + 1) == Some(&b'{') => i = skip_group(s, i + 1),
            _ => i += 1,
        }
    }
    s.len()
}

/// Past the end of the heredoc opening at `i` (`<<EOT` or `<<-EOT`), or `None` if `<<` starts none.
fn skip_heredoc(s: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 2;
    if s.get(j) == Some(&b'-') {
        j += 1;
    }
    let start = j;
    while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
        j += 1;
    }
    let marker = &s[start..j];
    if marker.is_empty() || s.get(j) != Some(&b'\n') {
        return None;
    }
    let mut line = j + 1;
    while line < s.len() {
        let end = line_end(s, line);
        if s[line..end].trim_ascii() == marker {
            return Some(end);
        }
        line = end + 1;
    }
    Some(s.len())
}

/// Past one unit that is not a bracket: a string, heredoc or comment as a whole, otherwise one byte.
fn skip_atom(s: &[u8], i: usize) -> usize {
    match (s[i], s.get(i + 1)) {
        (b'"', _) => skip_string(s, i),
        (b'#', _) | (b'/', Some(b'/')) => line_end(s, i),
        (b'/', Some(b'*')) => s[i + 2..].windows(2).position(|w| w == b"*/").map_or(s.len(), |p| i + 2 + p + 2),
        (b'<', Some(b'<')) => skip_heredoc(s, i).unwrap_or(i + 2),
        _ => i + 1,
    }
}

/// Past the bracket that closes the one opening at `i`.
fn skip_group(s: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < s.len() {
        match s[i] {
            b'{' | b'[' | b'(' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' | b')' => {
                depth = depth.saturating_sub(1);
                i += 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => i = skip_atom(s, i),
        }
    }
    s.len()
}

/// Past whitespace (newlines too) and comments.
fn skip_space(s: &[u8], mut i: usize) -> usize {
    while i < s.len() {
        match (s[i], s.get(i + 1)) {
            (c, _) if c.is_ascii_whitespace() => i += 1,
            (b'#', _) | (b'/', Some(b'/' | b'*')) => i = skip_atom(s, i),
            _ => break,
        }
    }
    i
}

fn identifier(s: &[u8], i: usize) -> usize {
    i + s[i..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'-').count()
}

fn text(s: &[u8], from: usize, to: usize) -> String {
    String::from_utf8_lossy(&s[from..to]).into_owned()
}

/// The top-level blocks of a configuration file.
fn blocks(src: &str) -> Vec<Block> {
    let s = src.as_bytes();
    let mut out = Vec::new();
    let mut i = skip_space(s, 0);
    while i < s.len() {
        let end = identifier(s, i);
        if end == i {
            i = skip_space(s, skip_atom(s, i));
            continue;
        }
        let kind = text(s, i, end);
        let mut labels = Vec::new();
        i = skip_space(s, end);
        while i < s.len() && s[i] == b'"' {
            let close = skip_string(s, i);
            labels.push(text(s, i + 1, close.saturating_sub(1)));
            i = skip_space(s, close);
        }
        if s.get(i) == Some(&b'{') {
            let close = skip_group(s, i);
            out.push(Block { kind, labels, body: text(s, i + 1, close.saturating_sub(1)) });
            i = close;
        } else {
            // Not a block (a stray top-level attribute): skip the rest of the line.
            while i < s.len() && s[i] != b'\n' {
                i = if matches!(s[i], b'{' | b'[' | b'(') { skip_group(s, i) } else { skip_atom(s, i) };
            }
        }
        i = skip_space(s, i);
    }
    out
}

/// The attributes directly in a block body; nested blocks (`validation { ... }`) are skipped.
fn attributes(body: &str) -> Vec<Attribute> {
    let s = body.as_bytes();
    let mut out = Vec::new();
    let mut i = skip_space(s, 0);
    while i < s.len() {
        let end = identifier(s, i);
        if end == i {
            i = skip_space(s, skip_atom(s, i));
            continue;
        }
        let name = text(s, i, end);
        i = end;
        while i < s.len() && (s[i] == b' ' || s[i] == b'\t') {
            i += 1;
        }
        if s.get(i) == Some(&b'=') && s.get(i + 1) != Some(&b'=') {
            let start = i + 1;
            i = start;
            while i < s.len() && s[i] != b'\n' && s[i] != b'#' && !(s[i] == b'/' && s.get(i + 1) == Some(&b'/')) {
                i = if matches!(s[i], b'{' | b'[' | b'(') { skip_group(s, i) } else { skip_atom(s, i) };
            }
            out.push(Attribute { name, expr: text(s, start, i).trim().to_owned() });
            i = line_end(s, i);
        } else {
            // A nested block: skip its labels and body.
            while i < s.len() && s[i] != b'{' && s[i] != b'\n' {
                i = skip_atom(s, i);
            }
            if s.get(i) == Some(&b'{') {
                i = skip_group(s, i);
            }
        }
        i = skip_space(s, i);
    }
    out
}

/// The text of a string expression: a quoted literal unescaped, a heredoc's lines joined by spaces;
/// anything else as written.
fn string_value(expr: &str) -> String {
    if let Some(inner) = expr.strip_prefix('"').and_then(|e| e.strip_suffix('"')) {
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            }
        }
        out
    } else if expr.starts_with("<<") {
        let mut lines: Vec<&str> = expr.lines().skip(1).map(str::trim).collect();
        lines.pop(); // the closing marker
        lines.join(" ").trim().to_owned()
    } else {
        expr.to_owned()
    }
}

fn one_line(expr: &str) -> String {
    expr.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An expression with its comments left out (strings kept whole), on one line.
fn expression(expr: &str) -> String {
    let s = expr.as_bytes();
    let mut kept = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let next = skip_atom(s, i);
        let comment = matches!((s[i], s.get(i + 1)), (b'#', _) | (b'/', Some(b'/' | b'*')));
        if comment {
            kept.push(b' ');
        } else {
            kept.extend_from_slice(&s[i..next]);
        }
        i = next;
    }
    one_line(&String::from_utf8_lossy(&kept))
}

/// The variables and outputs of the module in `dir`, in file order (files sorted by name).
fn read_module(dir: &Path) -> (Vec<Variable>, Vec<Output>) {
    let (mut variables, mut outputs) = (Vec::new(), Vec::new());
    for file in tf_files(dir) {
        let src = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for block in blocks(&src) {
            let Some(name) = block.labels.first().cloned() else { continue };
            let attrs = attributes(&block.body);
            let get = |key: &str| attrs.iter().find(|a| a.name == key).map(|a| a.expr.as_str());
            let description = get("description").map(string_value).unwrap_or_default();
            match block.kind.as_str() {
                "variable" => {
                    variables.push(Variable { name, description, ty: get("type").map(expression), default: get("default").map(expression) })
                }
                "output" => outputs.push(Output { name, description }),
                _ => {}
            }
        }
    }
    (variables, outputs)
}

/// A Markdown table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

fn code(text: &str) -> String {
    format!("`{}`", cell(text))
}

/// The README block for a module, markers included.
fn render(variables: &[Variable], outputs: &[Output]) -> String {
    let mut out =
        format!("{BEGIN}\n<!-- Generated from the module's variable and output blocks by `{UPDATE}`; do not edit. -->\n## Inputs\n\n");
    if variables.is_empty() {
        out.push_str("No inputs.\n");
    } else {
        out.push_str("| Name | Description | Type | Default | Required |\n|------|-------------|------|---------|:--------:|\n");
        for v in variables {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                v.name,
                cell(&v.description),
                v.ty.as_deref().map_or_else(|| "`any`".to_owned(), code),
                v.default.as_deref().map_or_else(|| "n/a".to_owned(), code),
                if v.default.is_none() { "yes" } else { "no" },
            ));
        }
    }
    out.push_str("\n## Outputs\n\n");
    if outputs.is_empty() {
        out.push_str("No outputs.\n");
    } else {
        out.push_str("| Name | Description |\n|------|-------------|\n");
        for o in outputs {
            out.push_str(&format!("| {} | {} |\n", o.name, cell(&o.description)));
        }
    }
    out.push_str(END);
    out
}

/// The README with its generated block replaced by `block` (appended when it has none).
fn with_block(readme: &str, block: &str) -> String {
    match (readme.find(BEGIN), readme.find(END)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &readme[..b], &readme[e + END.len()..]),
        _ => format!("{}\n\n{block}\n", readme.trim_end()),
    }
}

fn module_dirs() -> Vec<PathBuf> {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("modules");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&modules)
        .unwrap_or_else(|e| panic!("{}: {e}", modules.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn module_readmes_hold_their_generated_tables() {
    let update = std::env::var_os("HPC_UPDATE_DOCS").is_some();
    let dirs = module_dirs();
    assert!(!dirs.is_empty(), "no modules found");
    let mut stale = Vec::new();
    for dir in dirs {
        let (variables, outputs) = read_module(&dir);
        assert!(!outputs.is_empty(), "{}: no outputs found", dir.display());
        for (kind, name, description) in variables
            .iter()
            .map(|v| ("variable", &v.name, &v.description))
            .chain(outputs.iter().map(|o| ("output", &o.name, &o.description)))
        {
            assert!(!description.is_empty(), "{}: {kind} {name:?} has no description", dir.display());
        }
        let block = render(&variables, &outputs);
        let path = dir.join("README.md");
        let readme = std::fs::read_to_string(&path).unwrap_or_default();
        let current = match (readme.find(BEGIN), readme.find(END)) {
            (Some(b), Some(e)) if b < e => Some(&readme[b..e + END.len()]),
            _ => None,
        };
        if current == Some(block.as_str()) {
            continue;
        }
        if update {
            std::fs::write(&path, with_block(&readme, &block)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else {
            stale.push(path.display().to_string());
        }
    }
    assert!(stale.is_empty(), "module READMEs out of date: {stale:?}; run {UPDATE}");
}

#[test]
fn reader_handles_strings_templates_heredocs_and_nested_blocks() {
    let src = r#"
# A comment with a { brace
variable "region" {
  description = "Region: \"us-east-1\" or similar {not a block}."
  type        = object({
    a = string # inline comment }
    b = list(number)
  })
  default = { a = "x${join("}", ["y"])}", b = [1, 2] }

  validation {
    condition     = length(var.region.a) > 0
    error_message = "Needs a."
  }
}

/* a block comment: variable "hidden" { } */
variable "required" {
  type = string
  description = <<-EOT
    Spans
    two lines.
  EOT
}

resource "x" "y" {
  z = "}"
}

output "greeting" {
  description = "Says hi."
  value       = "hi ${var.required}" // trailing
}
"#;
    let blocks = blocks(src);
    let kinds: Vec<(&str, Vec<&str>)> = blocks.iter().map(|b| (b.kind.as_str(), b.labels.iter().map(String::as_str).collect())).collect();
    assert_eq!(
        kinds,
        [("variable", vec!["region"]), ("variable", vec!["required"]), ("resource", vec!["x", "y"]), ("output", vec!["greeting"])]
    );

    let region = attributes(&blocks[0].body);
    let names: Vec<&str> = region.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["description", "type", "default"]);
    assert_eq!(string_value(&region[0].expr), r#"Region: "us-east-1" or similar {not a block}."#);
    assert_eq!(expression(&region[1].expr), "object({ a = string b = list(number) })");
    assert_eq!(expression(&region[2].expr), r#"{ a = "x${join("}", ["y"])}", b = [1, 2] }"#);

    let required = attributes(&blocks[1].body);
    assert_eq!(string_value(&required[1].expr), "Spans two lines.");

    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("main.tf"), src).expect("write main.tf");
    let (variables, outputs) = read_module(dir.path());
    assert_eq!(
        variables[1],
        Variable { name: "required".into(), description: "Spans two lines.".into(), ty: Some("string".into()), default: None }
    );
    assert_eq!(outputs, [Output { name: "greeting".into(), description: "Says hi.".into() }]);
    let table = render(&variables, &outputs);
    assert!(table.contains("| required | Spans two lines. | `string` | n/a | yes |"), "{table}");
    assert!(
        table.contains("| region | Region: \"us-east-1\" or similar {not a block}. | `object({ a = string b = list(number) })` |"),
        "{table}"
    );
}

/// The body of the first block called `name` directly inside `body` (`required_providers` in `terraform`).
fn nested_block(body: &str, name: &str) -> Option<String> {
    let s = body.as_bytes();
    let mut i = skip_space(s, 0);
    while i < s.len() {
        let end = identifier(s, i);
        if end == i {
            i = skip_space(s, if matches!(s[i], b'{' | b'[' | b'(') { skip_group(s, i) } else { skip_atom(s, i) });
            continue;
        }
        let found = &body[i..end] == name;
        i = skip_space(s, end);
        if s.get(i) == Some(&b'{') {
            let close = skip_group(s, i);
            if found {
                return Some(text(s, i + 1, close - 1));
            }
            i = close;
        }
        i = skip_space(s, i);
    }
    None
}

/// The attributes of an object expression `{ a = 1, b = "x" }`, on one line or several.
fn object_attributes(expr: &str) -> Vec<Attribute> {
    let inner = expr.trim().strip_prefix('{').and_then(|e| e.strip_suffix('}')).unwrap_or("");
    let s = inner.as_bytes();
    let mut lines = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let next = if matches!(s[i], b'{' | b'[' | b'(') { skip_group(s, i) } else { skip_atom(s, i) };
        if s[i] == b',' {
            lines.push(b'\n');
        } else {
            lines.extend_from_slice(&s[i..next]);
        }
        i = next;
    }
    attributes(&String::from_utf8_lossy(&lines))
}

/// The `version` constraint the configuration in `dir` gives `hpc` in `required_providers`: `None` when it
/// declares no `hpc` there, `Some(None)` when it declares one without a version.
fn hpc_constraint(dir: &Path) -> Option<Option<String>> {
    for file in tf_files(dir) {
        let src = std::fs::read_to_string(&file).unwrap();
        for block in blocks(&src).into_iter().filter(|b| b.kind == "terraform") {
            let Some(providers) = nested_block(&block.body, "required_providers") else { continue };
            let Some(hpc) = attributes(&providers).into_iter().find(|a| a.name == "hpc") else { continue };
            let fields = object_attributes(&hpc.expr);
            let source = fields.iter().find(|a| a.name == "source").map(|a| string_value(&a.expr));
            assert_eq!(source.as_deref(), Some("hpc-platform/hpc"), "{}: hpc's source", file.display());
            return Some(fields.iter().find(|a| a.name == "version").map(|a| string_value(&a.expr)));
        }
    }
    None
}

fn tf_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "tf"))
        .collect();
    files.sort();
    files
}

type Version = (u64, u64, u64);

fn parse_version(v: &str) -> Option<(Version, usize)> {
    let parts: Vec<&str> = v.trim().trim_start_matches('v').split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    let mut n = [0u64; 3];
    for (i, p) in parts.iter().enumerate() {
        n[i] = p.parse().ok()?;
    }
    Some(((n[0], n[1], n[2]), parts.len()))
}

/// Whether `version` meets a constraint as Terraform and OpenTofu read one: comma-separated conditions with
/// `=`, `!=`, `>`, `>=`, `<`, `<=` and `~>` (only the rightmost part may grow). `Err` for a malformed one.
fn admits(constraint: &str, version: &str) -> Result<bool, String> {
    let (v, _) = parse_version(version).ok_or_else(|| format!("not a version: {version:?}"))?;
    let mut all = true;
    for cond in constraint.split(',') {
        let cond = cond.trim();
        let split = cond.find(|c: char| c.is_ascii_digit() || c == 'v').ok_or_else(|| format!("malformed: {cond:?}"))?;
        let (op, rest) = cond.split_at(split);
        let (c, parts) = parse_version(rest).ok_or_else(|| format!("malformed: {cond:?}"))?;
        let ok = match op.trim() {
            "" | "=" => v == c,
            "!=" => v != c,
            ">" => v > c,
            ">=" => v >= c,
            "<" => v < c,
            "<=" => v <= c,
            "~>" => {
                let upper = match parts {
                    1 | 2 => (c.0 + 1, 0, 0),
                    _ => (c.0, c.1 + 1, 0),
                };
                v >= c && v < upper
            }
            other => return Err(format!("unknown operator {other:?} in {cond:?}")),
        };
        all &= ok;
    }
    Ok(all)
}

fn cargo_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Every root configuration users copy: `examples/**` and `modules/<m>/examples/<e>`, but for the registry
/// pages' snippets (`examples/resources`, `data-sources`, `functions`), which by the registry's convention
/// carry no `terraform` block.
fn example_configurations() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = configurations::under(&root.join("examples"));
    for module in module_dirs() {
        if module.join("examples").is_dir() {
            out.extend(configurations::under(&module.join("examples")));
        }
    }
    let snippets = ["resources", "data-sources", "functions"].map(|d| root.join("examples").join(d));
    out.retain(|d| !snippets.iter().any(|s| d.starts_with(s)));
    out.sort();
    out
}

/// Whether a configuration calls on the provider: its resources, data sources or functions, its provider
/// block, or a module (every module here uses it).
fn uses_the_provider(dir: &Path) -> bool {
    tf_files(dir).iter().any(|file| {
        let src = std::fs::read_to_string(file).unwrap();
        src.contains("provider::hpc::")
            || blocks(&src).iter().any(|b| match b.kind.as_str() {
                "resource" | "data" => b.labels.first().is_some_and(|l| l.starts_with("hpc_")),
                "provider" => b.labels.first().is_some_and(|l| l == "hpc"),
                "module" => true,
                _ => false,
            })
    })
}

#[test]
fn every_example_pins_the_version_in_cargo_toml() {
    let version = cargo_version();
    let configs = example_configurations();
    assert!(configs.len() > 20, "examples found: {configs:?}");
    let mut wrong = Vec::new();
    for dir in configs {
        let name = dir.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().display().to_string();
        match hpc_constraint(&dir) {
            Some(Some(pin)) if pin == version => {}
            Some(Some(pin)) => wrong.push(format!("{name}: version = {pin:?}, Cargo.toml says {version:?}")),
            Some(None) => wrong.push(format!("{name}: hpc in required_providers without a version")),
            None if uses_the_provider(&dir) => wrong.push(format!("{name}: uses the provider but has no required_providers entry for hpc")),
            None => {}
        }
    }
    assert!(wrong.is_empty(), "each example pins `version = \"{version}\"` exactly:\n{}", wrong.join("\n"));
}

#[test]
fn every_module_has_the_standard_structure_and_admits_this_version() {
    let version = cargo_version();
    for dir in module_dirs() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for file in ["main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"] {
            assert!(dir.join(file).is_file(), "modules/{name}: no {file}");
        }
        assert!(!dir.join("example").exists(), "modules/{name}: example/ is examples/<name>/ in the standard structure");
        // Each block where the structure puts it.
        for file in tf_files(&dir) {
            let file_name = file.file_name().unwrap().to_string_lossy().into_owned();
            for block in blocks(&std::fs::read_to_string(&file).unwrap()) {
                let home = match block.kind.as_str() {
                    "variable" => "variables.tf",
                    "output" => "outputs.tf",
                    "terraform" => "versions.tf",
                    _ => continue,
                };
                assert_eq!(file_name, home, "modules/{name}: {} {:?} belongs in {home}", block.kind, block.labels);
            }
        }
        let (variables, _) = read_module(&dir);
        for v in &variables {
            assert!(v.ty.is_some(), "modules/{name}: variable {:?} has no type", v.name);
        }
        let constraint = hpc_constraint(&dir)
            .unwrap_or_else(|| panic!("modules/{name}: no required_providers entry for hpc"))
            .unwrap_or_else(|| panic!("modules/{name}: hpc has no version constraint"));
        assert!(
            admits(&constraint, version).unwrap_or_else(|e| panic!("modules/{name}: {e}")),
            "modules/{name}: {constraint:?} does not admit {version}, the version in Cargo.toml"
        );
        let versions = std::fs::read_to_string(dir.join("versions.tf")).unwrap();
        let terraform = blocks(&versions).into_iter().find(|b| b.kind == "terraform").unwrap();
        assert!(attributes(&terraform.body).iter().any(|a| a.name == "required_version"), "modules/{name}: no required_version");
    }
}

#[test]
fn version_constraints_are_read_as_the_clis_read_them() {
    for (constraint, version, expected) in [
        (">= 0.1.0, < 1.0.0", "0.1.0", true),
        (">= 0.1.0, < 1.0.0", "0.9.12", true),
        (">= 0.1.0, < 1.0.0", "1.0.0", false),
        (">= 0.2.0", "0.1.0", false),
        ("0.1.0", "0.1.0", true),
        ("= 0.1.0", "0.1.1", false),
        ("!= 0.1.0", "0.1.0", false),
        ("~> 0.1.0", "0.1.9", true),
        ("~> 0.1.0", "0.2.0", false),
        ("~> 0.1", "0.9.0", true),
        ("~> 0.1", "1.0.0", false),
        ("> 0.1.0, <= 0.1.3", "0.1.3", true),
    ] {
        assert_eq!(admits(constraint, version), Ok(expected), "{constraint:?} vs {version}");
    }
    assert!(admits(">= banana", "0.1.0").is_err());
    assert!(admits("=> 0.1.0", "0.1.0").is_err());

    let src = "terraform {\n  required_version = \">= 1.0\"\n  required_providers {\n    local = { source = \"hashicorp/local\" }\n    hpc = { source = \"hpc-platform/hpc\", version = \">= 0.1.0, < 1.0.0\" }\n  }\n}\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("versions.tf"), src).unwrap();
    assert_eq!(hpc_constraint(dir.path()), Some(Some(">= 0.1.0, < 1.0.0".to_owned())));
    std::fs::write(dir.path().join("versions.tf"), src.replace(", version = \">= 0.1.0, < 1.0.0\"", "")).unwrap();
    assert_eq!(hpc_constraint(dir.path()), Some(None));
    std::fs::write(dir.path().join("versions.tf"), "terraform {\n  required_version = \">= 1.0\"\n}\n").unwrap();
    assert_eq!(hpc_constraint(dir.path()), None);
}
