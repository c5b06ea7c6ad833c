//! Registry-style Markdown for the provider, its data sources and resources, rendered from the schemas
//! themselves so the pages cannot drift (`tests/docs.rs` compares them with `docs/`). The pages follow the
//! layout and front matter the registry's doc tooling expects (`tfplugindocs validate`: `page_title`,
//! `subcategory` and `description`, no `subcategory` on the index), and the import examples are the files
//! that tooling reads (`import.sh`, `import-by-string-id.tf`, `import-by-identity.tf`).

use std::fmt::Write;

use super::function::Signature;
use super::resource::IdentitySchema;
use super::schema::{Attribute, Block, Nesting, Schema};
use super::value::Type;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Provider,
    DataSource,
    Resource,
}

/// A resource's import examples, as the files under `examples/resources/<name>/` hold them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Import<'a> {
    /// `import.sh`: the `terraform import` command for each form of the id, its comments saying what the id is.
    pub command: &'a str,
    /// `import-by-string-id.tf`: an `import` block with `id`.
    pub by_id: Option<&'a str>,
    /// `import-by-identity.tf`: an `import` block with `identity`, and the identity's schema.
    pub by_identity: Option<(&'a str, &'a IdentitySchema)>,
}

/// The front matter the registry reads: `page_title`, `subcategory` (never on the index page) and a plain
/// text `description` as a YAML block scalar.
fn front_matter(out: &mut String, title: &str, subcategory: bool, description: &str) {
    let _ = writeln!(out, "---\npage_title: \"{title}\"");
    if subcategory {
        let _ = writeln!(out, "subcategory: \"\"");
    }
    let _ = writeln!(out, "description: |-");
    for line in plain(description).lines() {
        let _ = writeln!(out, "{}", format!("  {line}").trim_end());
    }
    let _ = writeln!(out, "---\n");
}

/// Markdown as plain text, for the front matter: code spans lose their backticks, links keep their text.
fn plain(markdown: &str) -> String {
    let mut out = String::new();
    let mut rest = markdown.trim();
    while let Some(c) = rest.chars().next() {
        // A link `[text](url)` keeps its text.
        if let Some((text, after)) = rest.strip_prefix('[').and_then(|r| r.split_once("]("))
            && let Some(end) = after.find(')')
            && !text.contains(']')
        {
            out.push_str(text);
            rest = &after[end + 1..];
            continue;
        }
        if c != '`' {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// One page. `example` is HCL shown under "Example Usage"; `import`, a resource's import examples.
pub fn render(kind: Kind, name: &str, schema: &Schema, example: &str, import: Option<Import>) -> String {
    let label = match kind {
        Kind::Provider => "Provider",
        Kind::DataSource => "Data Source",
        Kind::Resource => "Resource",
    };
    let mut out = String::new();
    match kind {
        Kind::Provider => front_matter(&mut out, &format!("{name} Provider"), false, &schema.block.description),
        _ => front_matter(&mut out, &format!("{name} {label} - terraform-provider-hpc"), true, &schema.block.description),
    }
    let _ = writeln!(out, "<!-- Generated from the schema by `HPC_UPDATE_DOCS=1 cargo test --test docs`; do not edit. -->\n");
    let _ = writeln!(out, "# {name} ({label})\n\n{}\n", schema.block.description);
    let _ = writeln!(out, "## Example Usage\n\n```terraform\n{}\n```\n", example.trim_end());
    let _ = writeln!(out, "## Schema\n");
    let mut nested = Vec::new();
    block_section(&mut out, &schema.block, "", &mut nested);
    while !nested.is_empty() {
        let pending = std::mem::take(&mut nested);
        for (path, content) in pending {
            let _ = writeln!(out, "<a id=\"nestedblock--{}\"></a>\n### Nested Schema for `{path}`\n", path.replace('.', "--"));
            match content {
                Nested::Block(block) => block_section(&mut out, &block, &path, &mut nested),
                Nested::Object(attrs, read_only) => {
                    let _ = writeln!(out, "{}\n", if read_only { "Read-Only:" } else { "Attributes (set by referencing the resource):" });
                    for (name, ty) in attrs {
                        let _ = writeln!(out, "- `{name}` ({})", type_name(&ty));
                    }
                    out.push('\n');
                }
            }
        }
    }
    if schema.block.write_only().next().is_some() {
        let _ = writeln!(
            out,
            "## Write-only arguments\n\nWrite-only arguments are used while applying and never stored in state or plan files. They \
             need OpenTofu 1.11 or Terraform 1.11 or later; older CLIs are refused with an error at the argument. Each comes \
             with a version argument: change it to apply a new value.\n"
        );
    }
    if let Some(import) = import {
        import_section(&mut out, import);
    }
    out.trim_end().to_owned() + "\n"
}

fn import_section(out: &mut String, import: Import) {
    let _ = writeln!(out, "## Import\n");
    if let Some((block, identity)) = import.by_identity {
        let _ = writeln!(
            out,
            "With OpenTofu 1.12 or Terraform 1.12 or later, an `import` block can name the resource's identity (the parts \
             of its id) instead of the id:\n\n```terraform\n{}\n```\n",
            block.trim_end()
        );
        let _ = writeln!(out, "### Identity Schema\n");
        for (title, required) in [("Required", true), ("Optional", false)] {
            let attrs: Vec<_> = identity.attributes.iter().filter(|a| a.required_for_import == required).collect();
            if attrs.is_empty() {
                continue;
            }
            let _ = writeln!(out, "#### {title}\n");
            for a in attrs {
                let _ = writeln!(out, "- `{}` ({}) {}", a.name, type_name(&a.ty), a.description);
            }
            out.push('\n');
        }
    }
    if let Some(block) = import.by_id {
        let _ = writeln!(
            out,
            "With OpenTofu 1.5 or Terraform 1.5 or later, an `import` block can name the id:\n\n```terraform\n{}\n```\n",
            block.trim_end()
        );
    }
    let _ = writeln!(
        out,
        "The `import` command (`tofu import` or `terraform import`) takes the same id:\n\n```shell\n{}\n```\n",
        import.command.trim_end()
    );
}

/// A function's page, in the registry's layout: signature, example, arguments and return type.
pub fn render_function(name: &str, sig: &Signature, example: &str) -> String {
    let mut out = String::new();
    front_matter(&mut out, &format!("{name} function - terraform-provider-hpc"), true, sig.summary);
    let _ = writeln!(out, "<!-- Generated from the function's signature by `HPC_UPDATE_DOCS=1 cargo test --test docs`; do not edit. -->\n");
    let _ = writeln!(out, "# function: {name}\n\n{}\n\n{}\n", sig.summary, sig.description);
    let _ = writeln!(
        out,
        "Provider-defined functions need OpenTofu 1.7 or Terraform 1.8 or later, and the provider in `required_providers`. They \
         run without credentials or network, wherever an expression may be used.\n"
    );
    let _ = writeln!(out, "## Example Usage\n\n```terraform\n{}\n```\n", example.trim_end());
    let params: Vec<String> = sig.parameters.iter().map(|p| format!("{} {}", p.name, hcl_type(&p.ty))).collect();
    let _ = writeln!(out, "## Signature\n\n```text\n{name}({}) {}\n```\n", params.join(", "), hcl_type(&sig.returns));
    let _ = writeln!(out, "## Arguments\n");
    for (i, p) in sig.parameters.iter().enumerate() {
        let _ = writeln!(out, "{}. `{}` ({}) {}", i + 1, p.name, type_name(&p.ty), p.description);
    }
    let _ = writeln!(out, "\n## Return Type\n\n`{}`", hcl_type(&sig.returns));
    if let Some(attrs) = object_attributes(&sig.returns) {
        let _ = writeln!(out, "\nAttributes:\n");
        for (name, ty) in attrs {
            let _ = writeln!(out, "- `{name}` ({})", type_name(&ty));
        }
    }
    out.trim_end().to_owned() + "\n"
}

/// A type as HCL writes a type constraint: `string`, `map(string)`, `object({...})`.
fn hcl_type(ty: &Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::Number => "number".into(),
        Type::String => "string".into(),
        Type::Dynamic => "any".into(),
        Type::Object(attrs) => {
            let fields: Vec<String> = attrs.iter().map(|(k, t)| format!("{k} = {}", hcl_type(t))).collect();
            format!("object({{ {} }})", fields.join(", "))
        }
        Type::Tuple(items) => format!("tuple([{}])", items.iter().map(hcl_type).collect::<Vec<_>>().join(", ")),
        Type::List(e) => format!("list({})", hcl_type(e)),
        Type::Set(e) => format!("set({})", hcl_type(e)),
        Type::Map(e) => format!("map({})", hcl_type(e)),
    }
}

enum Nested {
    Block(Block),
    /// An object-typed attribute's fields, and whether the user sets them or only reads them.
    Object(Vec<(String, Type)>, bool),
}

fn block_section(out: &mut String, block: &Block, prefix: &str, nested: &mut Vec<(String, Nested)>) {
    type Pick = fn(&Attribute) -> bool;
    let groups: [(&str, Pick); 3] =
        [("Required", |a| a.required), ("Optional", |a| a.optional), ("Read-Only", |a| a.computed && !a.optional)];
    for (title, pick) in groups {
        let attrs: Vec<&Attribute> = block.attributes.iter().filter(|a| pick(a)).collect();
        // A block the configuration must have (min items) is listed with the required attributes.
        let blocks: Vec<_> = match title {
            "Required" => block.blocks.iter().filter(|b| b.min_items > 0).collect(),
            "Optional" => block.blocks.iter().filter(|b| b.min_items == 0).collect(),
            _ => Vec::new(),
        };
        if attrs.is_empty() && blocks.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {title}\n");
        for a in attrs {
            let sensitive = if a.sensitive { ", Sensitive" } else { "" };
            let write_only = if a.write_only { ", [Write-only](#write-only-arguments)" } else { "" };
            let description = match a.replace_note() {
                Some(note) => format!("{} {note}", a.description),
                None => a.description.clone(),
            };
            let _ = writeln!(out, "- `{}` ({}{sensitive}{write_only}) {description}", a.name, type_name(&a.ty));
            if let Some(attrs) = object_attributes(&a.ty) {
                let path = join(prefix, &a.name);
                let _ = writeln!(out, "  See [below for nested schema](#nestedblock--{}).", path.replace('.', "--"));
                nested.push((path, Nested::Object(attrs, a.computed && !a.optional)));
            }
        }
        for b in blocks {
            let limit = match (b.nesting, b.min_items, b.max_items) {
                (Nesting::Single, _, _) | (_, 0, 1) => "Block, at most one".to_owned(),
                (_, 0, 0) => "Block List".to_owned(),
                (_, 0, n) => format!("Block List, at most {n}"),
                (_, 1, 0) => "Block List, at least one".to_owned(),
                (_, m, 0) => format!("Block List, at least {m}"),
                (_, m, n) => format!("Block List, {m} to {n}"),
            };
            let path = join(prefix, &b.type_name);
            let _ = writeln!(
                out,
                "- `{}` ({limit}) {} See [below for nested schema](#nestedblock--{}).",
                b.type_name,
                b.block.description,
                path.replace('.', "--")
            );
            nested.push((path, Nested::Block(b.block.clone())));
        }
        out.push('\n');
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_owned() } else { format!("{prefix}.{name}") }
}

/// The attributes of an object type, directly or as the element of a collection.
fn object_attributes(ty: &Type) -> Option<Vec<(String, Type)>> {
    match ty {
        Type::Object(attrs) => Some(attrs.iter().map(|(k, t)| (k.clone(), t.clone())).collect()),
        Type::List(e) | Type::Set(e) | Type::Map(e) => object_attributes(e),
        _ => None,
    }
}

/// Human names in the registry's style: `List of String`, `Map of Number`, `List of Object`.
pub fn type_name(ty: &Type) -> String {
    match ty {
        Type::Bool => "Boolean".into(),
        Type::Number => "Number".into(),
        Type::String => "String".into(),
        Type::Dynamic => "Dynamic".into(),
        Type::Object(_) => "Object".into(),
        Type::Tuple(_) => "Tuple".into(),
        Type::List(e) => format!("List of {}", type_name(e)),
        Type::Set(e) => format!("Set of {}", type_name(e)),
        Type::Map(e) => format!("Map of {}", type_name(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{Attribute, NestedBlock};

    #[test]
    fn every_attribute_and_nested_field_is_documented() {
        let schema = Schema::new(
            0,
            Block::new("A thing.")
                .attribute(Attribute::required("cloud", Type::String, "Which cloud."))
                .attribute(Attribute::optional("token", Type::String, "Secret.").sensitive())
                .attribute(Attribute::optional("zone", Type::String, "Where.").requires_replace())
                .attribute(Attribute::optional("size", Type::Number, "How big.").requires_replace_if("when it shrinks", |_| true))
                .attribute(Attribute::computed("id", Type::String, "Its id.").assigned_at_apply())
                .attribute(Attribute::computed("nodes", Type::list(Type::object([("ip", Type::String)])), "Nodes."))
                .block(NestedBlock::single(
                    "aws",
                    Block::new("AWS settings.").attribute(Attribute::optional("region", Type::String, "Region.")),
                ))
                .block(NestedBlock { min_items: 1, ..NestedBlock::list("rule", Block::new("A rule."), 0) }),
        );
        let page = render(Kind::DataSource, "hpc_thing", &schema, "data \"hpc_thing\" \"x\" {}", None);
        for needle in [
            "---\npage_title: \"hpc_thing Data Source - terraform-provider-hpc\"\nsubcategory: \"\"\ndescription: |-\n  A thing.\n---\n",
            "# hpc_thing (Data Source)",
            "### Required\n\n- `cloud` (String) Which cloud.",
            "- `token` (String, Sensitive) Secret.",
            "- `zone` (String) Where. Changing this forces a new resource.\n",
            "- `size` (Number) How big. Changing this forces a new resource when it shrinks.\n",
            "- `id` (String) Its id.\n",
            "- `aws` (Block, at most one) AWS settings.",
            "### Nested Schema for `aws`",
            "- `region` (String) Region.",
            "- `nodes` (List of Object) Nodes.",
            "### Nested Schema for `nodes`",
            "- `ip` (String)",
        ] {
            assert!(page.contains(needle), "{needle:?} missing from\n{page}");
        }
        // A block the configuration must have is listed with the required arguments.
        let required = &page[page.find("### Required").unwrap()..page.find("### Optional").unwrap()];
        assert!(required.contains("- `rule` (Block List, at least one) A rule."), "{page}");
        assert!(!page.contains("## Import"), "{page}");
    }

    #[test]
    fn front_matter_is_plain_text_and_the_index_has_no_subcategory() {
        let schema = Schema::new(0, Block::new("Builds `GPU` clusters; see [the guide](https://example.com/g).\nSecond line."));
        let page = render(Kind::Provider, "hpc", &schema, "provider \"hpc\" {}", None);
        assert!(
            page.starts_with(
                "---\npage_title: \"hpc Provider\"\ndescription: |-\n  Builds GPU clusters; see the guide.\n  Second line.\n---\n"
            ),
            "{page}"
        );
        // The page itself keeps the Markdown.
        assert!(page.contains("Builds `GPU` clusters; see [the guide](https://example.com/g)."), "{page}");
    }

    #[test]
    fn import_section_shows_identity_id_block_and_command() {
        use crate::framework::{IdentityAttribute, IdentitySchema};
        let identity = IdentitySchema {
            version: 0,
            attributes: vec![
                IdentityAttribute { name: "name", ty: Type::String, required_for_import: true, description: "Its name." },
                IdentityAttribute { name: "zone", ty: Type::String, required_for_import: false, description: "Its zone." },
            ],
        };
        let import = Import {
            command: "terraform import hpc_thing.x aws/us-east-1/x\n",
            by_id: Some("import {\n  to = hpc_thing.x\n  id = \"aws/us-east-1/x\"\n}\n"),
            by_identity: Some(("import {\n  to       = hpc_thing.x\n  identity = { name = \"x\" }\n}\n", &identity)),
        };
        let page = render(Kind::Resource, "hpc_thing", &Schema::new(0, Block::new("A thing.")), "", Some(import));
        let section = &page[page.find("## Import").expect("an import section")..];
        let order: Vec<usize> = [
            "identity = { name = \"x\" }",
            "#### Required\n\n- `name` (String) Its name.",
            "#### Optional\n\n- `zone` (String) Its zone.",
            "```terraform\nimport {\n  to = hpc_thing.x\n  id = \"aws/us-east-1/x\"\n}\n```",
            "```shell\nterraform import hpc_thing.x aws/us-east-1/x\n```",
        ]
        .iter()
        .map(|needle| section.find(needle).unwrap_or_else(|| panic!("{needle:?} missing from\n{section}")))
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "identity, then the id block, then the command:\n{section}");
    }
}
