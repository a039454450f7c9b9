//! The input as the derive sees it: a struct with named, classified fields.

use crate::attr::{self, Class, Classified, CLASS_HELP};
use crate::ctxt::Ctxt;
use syn::ext::IdentExt;

pub struct Container<'a> {
    pub ident: &'a syn::Ident,
    pub generics: &'a syn::Generics,
    pub fields: Vec<Field<'a>>,
    pub crate_path: syn::Path,
}

pub struct Field<'a> {
    /// The field as written (`r#type`).
    pub member: &'a syn::Ident,
    /// The name without `r#` (`type`): its path in schemas, windows and reports.
    pub name: String,
    pub ty: &'a syn::Type,
    pub class: Class,
    pub cfgs: Vec<syn::Attribute>,
}

/// The crate path the generated code refers to.
pub fn crate_path(cx: &Ctxt, input: &syn::DeriveInput) -> syn::Path {
    attr::crate_path(cx, &input.attrs).unwrap_or_else(|| syn::parse_quote!(::compaction))
}

impl<'a> Container<'a> {
    /// Reads the input; `None` when it is not a struct with named fields.
    pub fn from_ast(cx: &Ctxt, input: &'a syn::DeriveInput, derive: &str) -> Option<Self> {
        let crate_path = crate_path(cx, input);
        let named = match &input.data {
            syn::Data::Struct(syn::DataStruct {
                fields: syn::Fields::Named(named),
                ..
            }) => named,
            _ => {
                cx.error_spanned_by(
                    &input.ident,
                    format!(
                        "#[derive({derive})] supports structs with named fields only; wrap this \
                         type in a struct field classified #[protected] (or #[nested] for state)"
                    ),
                );
                return None;
            }
        };
        let mut fields = Vec::new();
        for field in &named.named {
            let member = field.ident.as_ref()?;
            let name = member.unraw().to_string();
            match attr::classify(cx, field, &name) {
                Some(Classified { class, .. }) => fields.push(Field {
                    member,
                    name,
                    ty: &field.ty,
                    class,
                    cfgs: attr::cfg_attrs(field),
                }),
                None if has_class_attr(field) => {}
                None => cx.error_spanned_by(
                    member,
                    format!("field `{name}` has no compaction class; add one of {CLASS_HELP}"),
                ),
            }
        }
        Some(Container {
            ident: &input.ident,
            generics: &input.generics,
            fields,
            crate_path,
        })
    }
}

fn has_class_attr(field: &syn::Field) -> bool {
    field
        .attrs
        .iter()
        .any(|a| attr::CLASS_NAMES.iter().any(|n| a.path().is_ident(n)))
}
