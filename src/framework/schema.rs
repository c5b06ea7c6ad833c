//! Schemas as the provider declares them: blocks, attributes and nested blocks. The protocol layer turns
//! these into the wire form; the docs generator turns them into Markdown; the codec uses [`Block::value_type`].
//! Attributes also carry their plan modifiers (what a change does, who assigns the value), which the
//! resources' planner reads; [`Block::plan_modifier_errors`] refuses the ones that cannot apply.

use super::value::{Type, Value};

#[derive(Clone, Debug, Default)]
pub struct Schema {
    pub version: i64,
    pub block: Block,
}

impl Schema {
    pub fn new(version: i64, block: Block) -> Self {
        Self { version, block }
    }

    pub fn value_type(&self) -> Type {
        self.block.value_type()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Block {
    pub description: String,
    pub attributes: Vec<Attribute>,
    pub blocks: Vec<NestedBlock>,
}

impl Block {
    pub fn new(description: impl Into<String>) -> Self {
        Self { description: description.into(), ..Self::default() }
    }

    pub fn attribute(mut self, attr: Attribute) -> Self {
        self.attributes.push(attr);
        self
    }

    pub fn block(mut self, block: NestedBlock) -> Self {
        self.blocks.push(block);
        self
    }

    /// The object type of a value of this block, as it travels on the wire.
    pub fn value_type(&self) -> Type {
        let attrs = self.attributes.iter().map(|a| (a.name.clone(), a.ty.clone()));
        let blocks = self.blocks.iter().map(|b| {
            let inner = b.block.value_type();
            let ty = match b.nesting {
                Nesting::Single | Nesting::Group => inner,
                Nesting::List => Type::list(inner),
                Nesting::Set => Type::set(inner),
                Nesting::Map => Type::map(inner),
            };
            (b.type_name.clone(), ty)
        });
        Type::object(attrs.chain(blocks))
    }

    pub fn find_attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }

    /// The names among `names` that are not attributes of this block: code that still names attributes
    /// (a list of them) checks itself with this, so a misspelt one fails a test instead of being ignored.
    pub fn unknown_attributes<'n>(&self, names: &[&'n str]) -> Vec<&'n str> {
        names.iter().copied().filter(|n| self.find_attribute(n).is_none()).collect()
    }

    /// Every plan modifier declared where it cannot apply, one sentence each (empty when all are sound):
    /// requires-replace on an attribute the configuration never sets (computed only) or that no plan or
    /// state holds (write-only); assigned-at-apply on one the provider may not set (not computed); and any
    /// modifier in a nested block, which the planner does not read (it plans top-level attributes).
    pub fn plan_modifier_errors(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for a in &self.attributes {
            let replaces = !matches!(a.replace, Replace::Never);
            if replaces && a.computed && !a.optional {
                errors.push(format!(
                    "`{}` requires replacement but is computed only: no configuration changes it, so say what does instead",
                    a.name
                ));
            }
            if replaces && a.write_only {
                errors.push(format!("`{}` requires replacement but is write-only: no plan or state holds it to compare", a.name));
            }
            if a.assigned_at_apply && !a.computed {
                errors.push(format!(
                    "`{}` is assigned at apply but not computed: only the configuration may set it (declare it computed or optional and computed)",
                    a.name
                ));
            }
        }
        for b in &self.blocks {
            b.block.nested_modifier_errors(&b.type_name, &mut errors);
        }
        errors
    }

    fn nested_modifier_errors(&self, prefix: &str, errors: &mut Vec<String>) {
        for a in self.attributes.iter().filter(|a| a.has_plan_modifiers()) {
            errors.push(format!(
                "`{prefix}.{}` declares a plan modifier in a nested block: the planner reads them on top-level attributes only",
                a.name
            ));
        }
        for b in &self.blocks {
            b.block.nested_modifier_errors(&format!("{prefix}.{}", b.type_name), errors);
        }
    }

    /// Whether any attribute here or in a nested block declares a plan modifier (a data source or the
    /// provider, which are never planned, declares none).
    pub fn has_plan_modifiers(&self) -> bool {
        self.attributes.iter().any(Attribute::has_plan_modifiers) || self.blocks.iter().any(|b| b.block.has_plan_modifiers())
    }

    /// The write-only attributes of this block (never nested ones: none are declared).
    pub fn write_only(&self) -> impl Iterator<Item = &Attribute> {
        self.attributes.iter().filter(|a| a.write_only)
    }

    /// `v` with every write-only attribute null: what a plan, a state or an import may hold.
    pub fn without_write_only(&self, v: Value) -> Value {
        match v {
            Value::Map(mut m) => {
                for a in self.write_only() {
                    if let Some(slot) = m.get_mut(&a.name) {
                        *slot = Value::Null;
                    }
                }
                Value::Map(m)
            }
            other => other,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Attribute {
    pub name: String,
    pub ty: Type,
    pub description: String,
    pub required: bool,
    pub optional: bool,
    pub computed: bool,
    pub sensitive: bool,
    /// Taken from the configuration at plan and apply time and never kept: null in every plan and state
    /// (CLIs from OpenTofu 1.11 and Terraform 1.11 on).
    pub write_only: bool,
    /// Plan modifier: what a change on update does to the object (see [`Replace`]).
    pub replace: Replace,
    /// Plan modifier: the cloud assigns the value when the object is created. A computed attribute the
    /// configuration leaves null is planned unknown on create and keeps its prior value on update.
    pub assigned_at_apply: bool,
}

/// Plan modifier: whether changing an attribute replaces the object or updates it in place.
#[derive(Clone, Copy, Debug, Default)]
pub enum Replace {
    /// Updated in place.
    #[default]
    Never,
    /// A change to a known value replaces the object ("Changing this forces a new resource.").
    Always,
    /// A change replaces the object when `test` says so; `when` completes the docs' sentence "Changing
    /// this forces a new resource ...". `test` sees every change, unknown planned values included.
    If { when: &'static str, test: fn(&Change<'_>) -> bool },
}

/// One attribute's change in an update plan, as a conditional requires-replace modifier sees it.
pub struct Change<'a> {
    /// The resource's whole configuration.
    pub resource: &'a Value,
    /// The attribute in the prior state.
    pub prior: &'a Value,
    /// The attribute in the configuration.
    pub config: &'a Value,
    /// The attribute as planned.
    pub planned: &'a Value,
}

impl Attribute {
    fn new(name: &str, ty: Type, description: &str) -> Self {
        Self {
            name: name.to_owned(),
            ty,
            description: description.to_owned(),
            required: false,
            optional: false,
            computed: false,
            sensitive: false,
            write_only: false,
            replace: Replace::Never,
            assigned_at_apply: false,
        }
    }

    pub fn required(name: &str, ty: Type, description: &str) -> Self {
        Self { required: true, ..Self::new(name, ty, description) }
    }

    pub fn optional(name: &str, ty: Type, description: &str) -> Self {
        Self { optional: true, ..Self::new(name, ty, description) }
    }

    /// Set by the provider only.
    pub fn computed(name: &str, ty: Type, description: &str) -> Self {
        Self { computed: true, ..Self::new(name, ty, description) }
    }

    /// Set by the user, or by the provider when the user leaves it out.
    pub fn optional_computed(name: &str, ty: Type, description: &str) -> Self {
        Self { optional: true, computed: true, ..Self::new(name, ty, description) }
    }

    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }

    /// Write-only: never stored in a plan or state (see [`Attribute::write_only`]).
    pub fn write_only(mut self) -> Self {
        self.write_only = true;
        self
    }

    /// Plan modifier: changing it (to a known value) replaces the object.
    pub fn requires_replace(mut self) -> Self {
        self.replace = Replace::Always;
        self
    }

    /// Plan modifier: changing it replaces the object when `test` says so (see [`Replace::If`]); `when`
    /// says where for the docs, e.g. "except on AWS, where the tier changes in place".
    pub fn requires_replace_if(mut self, when: &'static str, test: fn(&Change<'_>) -> bool) -> Self {
        self.replace = Replace::If { when, test };
        self
    }

    /// Plan modifier: the cloud assigns it at create (see [`Attribute::assigned_at_apply`]).
    pub fn assigned_at_apply(mut self) -> Self {
        self.assigned_at_apply = true;
        self
    }

    pub fn has_plan_modifiers(&self) -> bool {
        self.assigned_at_apply || !matches!(self.replace, Replace::Never)
    }

    /// Whether this change in an update plan replaces the object; an unchanged value never does.
    pub fn forces_replacement(&self, change: &Change<'_>) -> bool {
        if change.prior == change.planned {
            return false;
        }
        match self.replace {
            Replace::Never => false,
            Replace::Always => !change.planned.is_unknown(),
            Replace::If { test, .. } => test(change),
        }
    }

    /// The docs' sentence for its requires-replace modifier, if it has one.
    pub fn replace_note(&self) -> Option<String> {
        match self.replace {
            Replace::Never => None,
            Replace::Always => Some("Changing this forces a new resource.".to_owned()),
            Replace::If { when, .. } => Some(format!("Changing this forces a new resource {when}.")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nesting {
    Single,
    List,
    Set,
    Map,
    Group,
}

#[derive(Clone, Debug)]
pub struct NestedBlock {
    pub type_name: String,
    pub block: Block,
    pub nesting: Nesting,
    pub min_items: i64,
    pub max_items: i64,
}

impl NestedBlock {
    /// A block written at most once (`aws { ... }`); absent means null. The CLIs insist that min and max
    /// items match in this mode, so both stay 0 (the nesting itself says "at most one").
    pub fn single(type_name: &str, block: Block) -> Self {
        Self { type_name: type_name.to_owned(), block, nesting: Nesting::Single, min_items: 0, max_items: 0 }
    }

    /// A repeatable block; absent means an empty list.
    pub fn list(type_name: &str, block: Block, max_items: i64) -> Self {
        Self { type_name: type_name.to_owned(), block, nesting: Nesting::List, min_items: 0, max_items }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_blocks_shape_the_value_type() {
        let block = Block::new("p")
            .attribute(Attribute::optional("default_tags", Type::map(Type::String), "tags"))
            .block(NestedBlock::single("aws", Block::new("aws").attribute(Attribute::optional("region", Type::String, "r"))))
            .block(NestedBlock::list("rule", Block::new("r").attribute(Attribute::required("port", Type::Number, "p")), 0));
        let Type::Object(attrs) = block.value_type() else { panic!("not an object") };
        assert_eq!(attrs["aws"], Type::object([("region", Type::String)]));
        assert_eq!(attrs["rule"], Type::list(Type::object([("port", Type::Number)])));
        assert_eq!(attrs["default_tags"], Type::map(Type::String));
    }

    fn change<'a>(prior: &'a Value, planned: &'a Value) -> Change<'a> {
        Change { resource: &Value::Null, prior, config: planned, planned }
    }

    #[test]
    fn requires_replace_fires_on_a_known_change_only() {
        let zone = Attribute::required("zone", Type::String, "z").requires_replace();
        let (a, b) = (Value::from("a"), Value::from("b"));
        assert!(zone.forces_replacement(&change(&a, &b)));
        assert!(!zone.forces_replacement(&change(&a, &a)), "an unchanged value never replaces");
        assert!(!zone.forces_replacement(&change(&a, &Value::Unknown)), "an unknown one is not a known change");
        assert!(zone.forces_replacement(&change(&a, &Value::Null)), "removing it is a change");
        let tags = Attribute::optional("tags", Type::String, "t");
        assert!(!tags.forces_replacement(&change(&a, &b)), "without the modifier a change updates in place");
        assert_eq!(zone.replace_note().as_deref(), Some("Changing this forces a new resource."));
        assert_eq!(tags.replace_note(), None);
    }

    #[test]
    fn a_conditional_requires_replace_asks_its_test_about_every_change() {
        fn shrinks(c: &Change<'_>) -> bool {
            match (c.prior.as_number(), c.planned.as_number()) {
                (Some(before), Some(after)) => after.as_f64() < before.as_f64(),
                _ => c.resource.get("cautious").as_bool() == Some(true),
            }
        }
        let size = Attribute::required("size", Type::Number, "s").requires_replace_if("when it shrinks", shrinks);
        let (small, big) = (Value::int(1), Value::int(2));
        assert!(size.forces_replacement(&change(&big, &small)));
        assert!(!size.forces_replacement(&change(&small, &big)));
        assert!(!size.forces_replacement(&change(&big, &big)), "the test is not asked about an unchanged value");
        let cautious = Value::object([("cautious", Value::Bool(true))]);
        let unknown = Change { resource: &cautious, prior: &big, config: &Value::Unknown, planned: &Value::Unknown };
        assert!(size.forces_replacement(&unknown), "the test sees unknown planned values too");
        assert_eq!(size.replace_note().as_deref(), Some("Changing this forces a new resource when it shrinks."));
    }

    #[test]
    fn sound_plan_modifiers_pass() {
        let block = Block::new("r")
            .attribute(Attribute::required("name", Type::String, "n").requires_replace())
            .attribute(Attribute::optional_computed("vpc_id", Type::String, "v").requires_replace().assigned_at_apply())
            .attribute(Attribute::computed("id", Type::String, "i").assigned_at_apply())
            .attribute(Attribute::optional("size", Type::Number, "s").requires_replace_if("always", |_| true))
            .block(NestedBlock::single("timeouts", Block::new("t").attribute(Attribute::optional("create", Type::String, "c"))));
        assert_eq!(block.plan_modifier_errors(), Vec::<String>::new());
        assert!(block.has_plan_modifiers());
        assert!(!Block::new("d").attribute(Attribute::required("name", Type::String, "n")).has_plan_modifiers());
    }

    #[test]
    fn plan_modifiers_where_they_cannot_apply_are_refused() {
        let block = Block::new("r")
            .attribute(Attribute::computed("gpu_model", Type::String, "g").requires_replace())
            .attribute(Attribute::optional("secret", Type::String, "s").write_only().requires_replace_if("always", |_| true))
            .attribute(Attribute::required("name", Type::String, "n").assigned_at_apply())
            .attribute(Attribute::optional("zone", Type::String, "z").assigned_at_apply())
            .block(NestedBlock::single(
                "timeouts",
                Block::new("t").block(NestedBlock::list(
                    "retry",
                    Block::new("r").attribute(Attribute::optional("after", Type::String, "a").requires_replace()),
                    0,
                )),
            ))
            .block(NestedBlock::single(
                "strategy",
                Block::new("s").attribute(Attribute::computed("batch", Type::String, "b").assigned_at_apply()),
            ));
        let errors = block.plan_modifier_errors();
        let expected = [
            "`gpu_model` requires replacement but is computed only",
            "`secret` requires replacement but is write-only",
            "`name` is assigned at apply but not computed",
            "`zone` is assigned at apply but not computed",
            "`timeouts.retry.after` declares a plan modifier in a nested block",
            "`strategy.batch` declares a plan modifier in a nested block",
        ];
        assert_eq!(errors.len(), expected.len(), "{errors:#?}");
        for (error, start) in errors.iter().zip(expected) {
            assert!(error.starts_with(start), "{error:?} does not start with {start:?}");
        }
    }

    #[test]
    fn a_misspelt_attribute_name_is_reported() {
        let block = Block::new("r").attribute(Attribute::required("name", Type::String, "n")).attribute(Attribute::computed(
            "node_revisions",
            Type::map(Type::String),
            "r",
        ));
        assert_eq!(block.unknown_attributes(&["name", "node_revisions"]), Vec::<&str>::new());
        assert_eq!(block.unknown_attributes(&["name", "node_revison", "nmae"]), ["node_revison", "nmae"]);
    }
}
