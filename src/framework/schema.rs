//! Schemas as the provider declares them: blocks, attributes and nested blocks. The protocol layer turns
//! these into the wire form; the docs generator turns them into Markdown; the codec uses [`Block::value_type`].

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
}
