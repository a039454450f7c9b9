//! The input as the derive sees it: a struct with named, classified fields. Plain data;
//! `attr` builds it from the syntax tree, `check` and the writers read it.

/// A struct that derives `Compactable`.
pub struct Container<'a> {
    pub ident: &'a syn::Ident,
    pub generics: &'a syn::Generics,
    pub fields: Vec<Field<'a>>,
    /// The path the generated code names the `compaction` crate by.
    pub crate_path: syn::Path,
}

/// One named, classified field.
pub struct Field<'a> {
    /// The field as written (`r#type`).
    pub member: &'a syn::Ident,
    /// The name without `r#` (`type`): its path in schemas, windows and reports.
    pub name: String,
    pub ty: &'a syn::Type,
    pub class: Class,
    /// The field's `#[cfg(...)]` attributes, copied onto everything generated for it.
    pub cfgs: Vec<syn::Attribute>,
}

/// A field's class as parsed, before cross-field checks.
#[derive(Clone)]
pub enum Class {
    Protected {
        pin: bool,
    },
    Derivable {
        pointer: syn::LitStr,
        summarize: bool,
    },
    Redundant {
        summarize: bool,
    },
    Effect {
        idempotent: bool,
        /// `scope = "..."`: the field's scope in a durable ledger (default: its path).
        scope: Option<syn::LitStr>,
    },
    Transcript {
        keep_recent: usize,
        pin_user: bool,
    },
    Nested,
}

impl Class {
    /// Whether the field's value may be handed to a summarizer.
    pub fn allows_summary(&self) -> bool {
        matches!(
            self,
            Class::Derivable {
                summarize: true,
                ..
            } | Class::Redundant { summarize: true }
        )
    }

    /// Whether the class keeps state that compaction may never drop (so a type with such a
    /// field carries state).
    pub fn holds_state(&self) -> bool {
        matches!(
            self,
            Class::Protected { .. }
                | Class::Effect { .. }
                | Class::Transcript { .. }
                | Class::Nested
        )
    }
}
