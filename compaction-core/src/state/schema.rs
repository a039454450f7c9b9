//! The classification schema: what the derive knows about every field, available at run time.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// How one field of a [`Compactable`](crate::Compactable) state may be treated by compaction.
///
/// Written by `#[derive(Compactable)]` from the field's attribute; the engine never guesses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldClass {
    /// `#[protected]`: kept verbatim. With `pin`, it never leaves the window; without, it may be
    /// spilled to the store behind a content-addressed pointer. Never summarized.
    Protected {
        /// `#[protected(pin)]`: must stay in the window verbatim.
        pin: bool,
    },
    /// `#[derivable(pointer = "...")]`: can be re-acquired from the environment through the pointer.
    Derivable {
        /// The pointer template, e.g. `file://{config_path}`; placeholders name protected fields.
        pointer_template: &'static str,
        /// `summarize`: may be replaced by a summary that carries its back-pointer.
        summarize: bool,
    },
    /// `#[redundant]`: evicted first, restored as `Default` on rehydration.
    Redundant {
        /// `#[redundant(summarize)]`: may be replaced by a summary instead of a tombstone.
        summarize: bool,
    },
    /// `#[effect(idempotent = ...)]`: an effect ledger whose records are never summarized.
    Effect {
        /// Whether re-running the effect is harmless; only then may live records leave the window.
        idempotent: bool,
    },
    /// `#[transcript]`: the conversation with the model, compacted message by message under the
    /// rules of [`transcript`](crate::transcript) and sent through
    /// [`Compacted::messages`](crate::Compacted::messages).
    Transcript {
        /// The last `keep_recent` user turns and what followed them are the last to be
        /// compacted (verbatim while older turns give the room; under pressure only the newest
        /// user message and what follows it stay).
        keep_recent: usize,
        /// `pin_user`: refuse instead of spilling old user messages.
        pin_user: bool,
    },
}

impl FieldClass {
    /// Whether a value of this class may ever be handed to a summarizer.
    pub fn may_summarize(&self) -> bool {
        matches!(
            self,
            FieldClass::Derivable {
                summarize: true,
                ..
            } | FieldClass::Redundant { summarize: true }
        )
    }

    /// A short lowercase name (`protected`, `derivable`, `redundant`, `effect`, `transcript`).
    pub fn name(&self) -> &'static str {
        match self {
            FieldClass::Protected { .. } => "protected",
            FieldClass::Derivable { .. } => "derivable",
            FieldClass::Redundant { .. } => "redundant",
            FieldClass::Effect { .. } => "effect",
            FieldClass::Transcript { .. } => "transcript",
        }
    }
}

/// One classified leaf field of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSchema {
    /// Dotted path from the root state: `plan_step`, `subtask.blocked_on`, `subtasks[].title`.
    pub path: String,
    /// How compaction may treat the field.
    pub class: FieldClass,
    /// The field's Rust type as written in the struct.
    pub rust_type: &'static str,
    /// True when the field sits under an `Option` or `Vec` of nested state, so a given state
    /// may hold it zero or many times.
    pub conditional: bool,
    /// For an `#[effect]` field: the scope the author named with `#[effect(scope = "...")]`,
    /// its records' scope in a durable ledger. `None`: the field's concrete path is its scope.
    pub effect_scope: Option<&'static str>,
}

impl FieldSchema {
    /// The ledger scope of this `#[effect]` field at `concrete_path` (e.g. `charges`,
    /// `subtasks[2].effects`): the named scope, or the path itself.
    pub fn ledger_scope(&self, concrete_path: &str) -> String {
        self.effect_scope
            .map_or_else(|| concrete_path.to_string(), str::to_string)
    }
}

/// The classification of every field of a [`Compactable`](crate::Compactable) type, flattened
/// through `#[nested]` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    type_name: &'static str,
    fields: Vec<FieldSchema>,
}

impl Schema {
    /// Starts a schema for the type named `type_name`.
    pub fn builder(type_name: &'static str) -> SchemaBuilder {
        SchemaBuilder {
            schema: Schema {
                type_name,
                fields: Vec::new(),
            },
        }
    }

    /// The Rust name of the root type.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// Every classified leaf field, in declaration order (nested fields in place).
    pub fn fields(&self) -> &[FieldSchema] {
        &self.fields
    }

    /// The field at a schema path such as `subtask.blocked_on` or `subtasks[].title`.
    pub fn field(&self, path: &str) -> Option<&FieldSchema> {
        self.fields.iter().find(|f| f.path == path)
    }

    /// The field behind a concrete path of one state (`subtasks[3].title` -> `subtasks[].title`).
    pub fn field_for_instance(&self, concrete_path: &str) -> Option<&FieldSchema> {
        self.field(&schema_path(concrete_path))
    }
}

/// Turns a concrete path (`a[2].b[10].c`) into its schema path (`a[].b[].c`).
pub fn schema_path(concrete: &str) -> String {
    let mut out = String::with_capacity(concrete.len());
    let mut in_index = false;
    for ch in concrete.chars() {
        match ch {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            _ => out.push(ch),
        }
    }
    out
}

/// Builds a [`Schema`]; used by the generated code and by hand-written impls.
#[derive(Debug)]
pub struct SchemaBuilder {
    schema: Schema,
}

impl SchemaBuilder {
    /// Adds a leaf field.
    pub fn field(mut self, name: &str, class: FieldClass, rust_type: &'static str) -> Self {
        self.schema.fields.push(FieldSchema {
            path: name.to_owned(),
            class,
            rust_type,
            conditional: false,
            effect_scope: None,
        });
        self
    }

    /// Names the ledger scope of the field added last (an `#[effect]` field); without it the
    /// field's path is its scope. Written by `#[effect(scope = "...")]`.
    pub fn effect_scope(mut self, scope: &'static str) -> Self {
        if let Some(field) = self.schema.fields.last_mut() {
            field.effect_scope = Some(scope);
        }
        self
    }

    /// Adds the fields of a nested schema under `name` (`name.inner`, or `name[].inner` when the
    /// nested value is repeated).
    pub fn nested(
        mut self,
        name: &str,
        nested: &Schema,
        repeated: bool,
        conditional: bool,
    ) -> Self {
        let prefix = if repeated {
            format!("{name}[]")
        } else {
            name.to_owned()
        };
        for f in &nested.fields {
            self.schema.fields.push(FieldSchema {
                path: format!("{prefix}.{}", f.path),
                class: f.class,
                rust_type: f.rust_type,
                conditional: f.conditional || conditional || repeated,
                effect_scope: f.effect_scope,
            });
        }
        self
    }

    /// Finishes the schema.
    pub fn build(self) -> Schema {
        self.schema
    }
}

/// Returns the schema of `T`, building it once per type.
///
/// A `static` inside a generic function is shared by every instantiation, so generic state
/// types keep their schemas in a map keyed by `TypeId` instead. Schemas are leaked once per type:
/// they live as long as the program, like a `static` would.
pub fn schema_for<T: 'static>(build: fn() -> Schema) -> &'static Schema {
    static REGISTRY: OnceLock<RwLock<HashMap<TypeId, &'static Schema>>> = OnceLock::new();
    let registry = REGISTRY.get_or_init(Default::default);
    let id = TypeId::of::<T>();
    if let Some(schema) = registry.read().unwrap_or_else(|e| e.into_inner()).get(&id) {
        return schema;
    }
    let built: &'static Schema = Box::leak(Box::new(build()));
    let mut map = registry.write().unwrap_or_else(|e| e.into_inner());
    map.entry(id).or_insert(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_path_strips_indices() {
        assert_eq!(schema_path("a[2].b[10].c"), "a[].b[].c");
        assert_eq!(schema_path("plain"), "plain");
    }

    #[test]
    fn nested_paths_are_prefixed() {
        let inner = Schema::builder("Inner")
            .field("x", FieldClass::Protected { pin: false }, "u32")
            .build();
        let outer = Schema::builder("Outer")
            .nested("one", &inner, false, false)
            .nested("many", &inner, true, false)
            .build();
        assert_eq!(outer.fields()[0].path, "one.x");
        assert!(!outer.fields()[0].conditional);
        assert_eq!(outer.fields()[1].path, "many[].x");
        assert!(outer.fields()[1].conditional);
        assert!(outer.field_for_instance("many[7].x").is_some());
    }
}
