//! Parses one field's classification attribute and the container's `#[compaction(...)]`.

use crate::ctxt::Ctxt;

/// The five class attributes, as the author writes them.
pub const CLASS_NAMES: [&str; 5] = ["protected", "derivable", "redundant", "effect", "nested"];

/// The list every "what to write instead" message offers.
pub const CLASS_HELP: &str = "#[protected], #[protected(pin)], #[derivable(pointer = \"...\")], \
     #[redundant], #[effect(idempotent = true|false)] or #[nested]";

/// A field's class as parsed, before cross-field checks.
#[derive(Clone)]
pub enum Class {
    Protected { pin: bool },
    Derivable { pointer: syn::LitStr, summarize: bool },
    Redundant { summarize: bool },
    Effect { idempotent: bool },
    Nested,
}

impl Class {
    pub fn allows_summary(&self) -> bool {
        matches!(
            self,
            Class::Derivable { summarize: true, .. } | Class::Redundant { summarize: true }
        )
    }
}

/// The class of a field and the attribute it came from (for spans).
pub struct Classified {
    pub class: Class,
    pub attr: syn::Attribute,
}

/// Reads the class attributes of one field. `None` when it has none, or when they are wrong
/// (the errors are in `cx`).
pub fn classify(cx: &Ctxt, field: &syn::Field, field_name: &str) -> Option<Classified> {
    let mut found: Option<Classified> = None;
    let mut broken = false;
    for attr in &field.attrs {
        let Some(name) = class_name(attr) else {
            continue;
        };
        if let Some(first) = &found {
            let first_name = class_name(&first.attr).unwrap_or_default();
            if first_name == name {
                cx.error_spanned_by(
                    attr,
                    format!("duplicate #[{name}] attribute on field `{field_name}`; remove this one"),
                );
            } else {
                cx.error_spanned_by(
                    attr,
                    format!(
                        "field `{field_name}` is already classified #[{first_name}]; a field takes \
                         exactly one class, so remove #[{name}] or #[{first_name}]"
                    ),
                );
            }
            broken = true;
            continue;
        }
        match parse_class(cx, attr, name) {
            Some(class) => {
                found = Some(Classified {
                    class,
                    attr: attr.clone(),
                })
            }
            None => broken = true,
        }
    }
    if broken {
        return None;
    }
    found
}

fn class_name(attr: &syn::Attribute) -> Option<&'static str> {
    CLASS_NAMES
        .into_iter()
        .find(|name| attr.path().is_ident(name))
}

fn parse_class(cx: &Ctxt, attr: &syn::Attribute, name: &'static str) -> Option<Class> {
    if let syn::Meta::NameValue(nv) = &attr.meta {
        cx.error_spanned_by(
            nv,
            format!("#[{name} = ...] is not a valid form; write #[{name}] or #[{name}(...)]"),
        );
        return None;
    }
    let has_list = matches!(attr.meta, syn::Meta::List(_));
    let mut pin = false;
    let mut summarize = false;
    let mut pointer: Option<syn::LitStr> = None;
    let mut idempotent: Option<bool> = None;
    let mut ok = true;
    if has_list {
        let valid: &[&str] = match name {
            "protected" => &["pin"],
            "derivable" => &["pointer", "summarize"],
            "redundant" => &["summarize"],
            "effect" => &["idempotent"],
            _ => &[],
        };
        let result = attr.parse_nested_meta(|meta| {
            let option = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            let seen = match option.as_str() {
                "pin" if name == "protected" => std::mem::replace(&mut pin, true),
                "summarize" if name == "derivable" || name == "redundant" => {
                    std::mem::replace(&mut summarize, true)
                }
                "pointer" if name == "derivable" => {
                    let lit: syn::LitStr = meta.value()?.parse().map_err(|_| {
                        meta.error("`pointer` takes a string, e.g. pointer = \"file://{path}\"")
                    })?;
                    pointer.replace(lit).is_some()
                }
                "idempotent" if name == "effect" => {
                    let lit: syn::Lit = meta.value()?.parse()?;
                    let syn::Lit::Bool(b) = lit else {
                        return Err(syn::Error::new(
                            lit.span(),
                            "`idempotent` takes `true` or `false`",
                        ));
                    };
                    idempotent.replace(b.value).is_some()
                }
                _ if valid.is_empty() => {
                    return Err(meta.error(format!("#[{name}] takes no options; write #[{name}]")));
                }
                _ => {
                    let list = valid
                        .iter()
                        .map(|v| format!("`{v}`"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(meta.error(format!(
                        "unknown option `{}` for #[{name}]; valid options: {list}",
                        meta.path
                            .get_ident()
                            .map(|i| i.to_string())
                            .unwrap_or_else(|| "?".into())
                    )));
                }
            };
            if seen {
                return Err(meta.error(format!("option `{option}` given twice in #[{name}]")));
            }
            Ok(())
        });
        if let Err(e) = result {
            cx.syn_error(e);
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    match name {
        "protected" => Some(Class::Protected { pin }),
        "redundant" => Some(Class::Redundant { summarize }),
        "nested" => Some(Class::Nested),
        "derivable" => match pointer {
            Some(pointer) => Some(Class::Derivable { pointer, summarize }),
            None => {
                cx.error_spanned_by(
                    attr,
                    "#[derivable] needs `pointer = \"...\"`, saying where the value can be \
                     re-acquired, e.g. #[derivable(pointer = \"file://{config_path}\")]",
                );
                None
            }
        },
        "effect" => match idempotent {
            Some(idempotent) => Some(Class::Effect { idempotent }),
            None => {
                cx.error_spanned_by(
                    attr,
                    "#[effect] needs `idempotent = true` or `idempotent = false`: decide whether \
                     running the effect twice is harmless",
                );
                None
            }
        },
        _ => None,
    }
}

/// Reads `#[compaction(crate = "path")]` from the container.
pub fn crate_path(cx: &Ctxt, attrs: &[syn::Attribute]) -> Option<syn::Path> {
    let mut path = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("compaction")) {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let lit: syn::LitStr = meta.value()?.parse()?;
                let parsed: syn::Path = lit.parse().map_err(|_| {
                    syn::Error::new(lit.span(), "`crate` takes a path, e.g. crate = \"my_compaction\"")
                })?;
                path = Some(parsed);
                Ok(())
            } else {
                Err(meta.error("unknown option for #[compaction]; valid options: `crate`"))
            }
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    path
}

/// The `#[cfg(...)]` attributes of a field, copied onto everything generated for it.
pub fn cfg_attrs(field: &syn::Field) -> Vec<syn::Attribute> {
    field
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .cloned()
        .collect()
}

