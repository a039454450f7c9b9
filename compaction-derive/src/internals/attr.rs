//! Reads the input's attributes into the ast: each field's class attribute, the container's
//! `#[compaction(...)]`, and the shape (a struct with named fields) they may sit on.

use crate::internals::ast::{Class, Container, Field};
use crate::internals::ctxt::{did_you_mean, Ctxt};
use syn::ext::IdentExt;

/// The five class attributes, as the author writes them.
pub const CLASS_NAMES: [&str; 6] = [
    "protected",
    "derivable",
    "redundant",
    "effect",
    "transcript",
    "nested",
];

/// The list every "what to write instead" message offers.
const CLASS_HELP: &str = "#[protected], #[protected(pin)], #[derivable(pointer = \"...\")], \
     #[redundant], #[effect(idempotent = true|false)] or #[nested]";

/// Whether the type is written `Transcript` (any path to it): the hint for a field left
/// unclassified. Only a hint: the classes' type checks decide what the type is.
fn names_transcript(ty: &syn::Type) -> bool {
    matches!(ty, syn::Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "Transcript" && s.arguments.is_empty()))
}

/// Reads the input into a [`Container`]; `None` when it is not a struct with named fields.
/// Every field's mistakes are in `cx`; a field whose attribute is wrong is left out.
pub fn container<'a>(
    cx: &Ctxt,
    input: &'a syn::DeriveInput,
    derive: &str,
) -> Option<Container<'a>> {
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
        match classify(cx, field, &name) {
            Some(Classified { class, .. }) => fields.push(Field {
                member,
                name,
                ty: &field.ty,
                class,
                cfgs: cfg_attrs(field),
            }),
            None if has_class_attr(field) => {}
            None if names_transcript(&field.ty) => cx.error_spanned_by(
                member,
                format!(
                    "field `{name}` has no compaction class; a conversation (`Transcript`) \
                     takes #[transcript] (or #[transcript(keep_recent = 3)])"
                ),
            ),
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

fn has_class_attr(field: &syn::Field) -> bool {
    field
        .attrs
        .iter()
        .any(|a| CLASS_NAMES.iter().any(|n| a.path().is_ident(n)))
}

/// The class of a field and the attribute it came from (for spans).
struct Classified {
    class: Class,
    attr: syn::Attribute,
}

/// Reads the class attributes of one field. `None` when it has none, or when they are wrong
/// (the errors are in `cx`).
fn classify(cx: &Ctxt, field: &syn::Field, field_name: &str) -> Option<Classified> {
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
                    format!(
                        "duplicate #[{name}] attribute on field `{field_name}`; remove this one"
                    ),
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
            format!(
                "#[{name} = ...] is not a valid form; write {}",
                valid_forms(name)
            ),
        );
        return None;
    }
    let has_list = matches!(attr.meta, syn::Meta::List(_));
    let mut pin = false;
    let mut summarize = false;
    let mut pointer: Option<syn::LitStr> = None;
    let mut idempotent: Option<bool> = None;
    let mut scope: Option<syn::LitStr> = None;
    let mut keep_recent: Option<usize> = None;
    let mut pin_user = false;
    let mut ok = true;
    if has_list {
        let valid: &[&str] = match name {
            "protected" => &["pin"],
            "derivable" => &["pointer", "summarize"],
            "redundant" => &["summarize"],
            "effect" => &["idempotent", "scope"],
            "transcript" => &["keep_recent", "pin_user"],
            _ => &[],
        };
        let result = attr.parse_nested_meta(|meta| {
            let option = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            let is_flag = matches!(
                (name, option.as_str()),
                ("protected", "pin")
                    | ("derivable" | "redundant", "summarize")
                    | ("transcript", "pin_user")
            );
            if is_flag && !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                return Err(meta.error(format!(
                    "`{option}` is a flag and takes no value; write #[{name}({option})], or leave \
                     it out"
                )));
            }
            if name == "effect" && option == "idempotent" && !meta.input.peek(syn::Token![=]) {
                return Err(meta.error(
                    "`idempotent` needs a value: write #[effect(idempotent = true)] if running \
                     the effect twice is harmless, #[effect(idempotent = false)] otherwise",
                ));
            }
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
                "pin_user" if name == "transcript" => std::mem::replace(&mut pin_user, true),
                "keep_recent" if name == "transcript" => {
                    let value = meta.value()?;
                    let lit: Option<syn::LitInt> = value.parse().ok();
                    let parsed = lit.as_ref().and_then(|l| l.base10_parse::<usize>().ok());
                    let Some(n) = parsed else {
                        return Err(syn::Error::new(
                            lit.map_or_else(|| value.span(), |l| l.span()),
                            "`keep_recent` takes a whole number of user turns, e.g. \
                             #[transcript(keep_recent = 3)]",
                        ));
                    };
                    keep_recent.replace(n).is_some()
                }
                "idempotent" if name == "effect" => {
                    let value = meta.value()?;
                    let lit: Option<syn::Lit> = value.parse().ok();
                    let Some(syn::Lit::Bool(b)) = lit else {
                        return Err(syn::Error::new(
                            lit.map_or_else(|| value.span(), |l| l.span()),
                            "`idempotent` takes `true` or `false` (no quotes): write \
                             idempotent = true if running the effect twice is harmless, \
                             idempotent = false otherwise",
                        ));
                    };
                    idempotent.replace(b.value).is_some()
                }
                "scope" if name == "effect" => {
                    let lit: syn::LitStr = meta.value()?.parse().map_err(|_| {
                        meta.error("`scope` takes a string, e.g. scope = \"charges\"")
                    })?;
                    scope.replace(lit).is_some()
                }
                _ if valid.is_empty() => {
                    return Err(meta.error(format!(
                        "#[{name}] takes no options; write #[{name}] (its type's own fields \
                         carry their classes)"
                    )));
                }
                _ => {
                    let shown = if option.is_empty() {
                        quote::ToTokens::to_token_stream(&meta.path).to_string()
                    } else {
                        option.clone()
                    };
                    let hint = did_you_mean(&shown, valid.iter().copied())
                        .map(|m| format!("did you mean `{m}`? "))
                        .unwrap_or_default();
                    let list = valid
                        .iter()
                        .map(|v| format!("`{v}`"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(meta.error(format!(
                        "unknown option `{shown}` for #[{name}]; {hint}valid options: {list} \
                         (write {})",
                        valid_forms(name)
                    )));
                }
            };
            if seen {
                return Err(meta.error(format!(
                    "option `{option}` given twice in #[{name}]; keep one"
                )));
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
        "transcript" => Some(Class::Transcript {
            keep_recent: keep_recent.unwrap_or(1),
            pin_user,
        }),
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
            Some(idempotent) => Some(Class::Effect { idempotent, scope }),
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

/// What to write for each class attribute, for the "write instead" half of a message.
fn valid_forms(name: &str) -> &'static str {
    match name {
        "protected" => "#[protected] or #[protected(pin)]",
        "derivable" => {
            "#[derivable(pointer = \"...\")] or #[derivable(pointer = \"...\", summarize)]"
        }
        "redundant" => "#[redundant] or #[redundant(summarize)]",
        "effect" => "#[effect(idempotent = true)] or #[effect(idempotent = false)]",
        "transcript" => {
            "#[transcript], #[transcript(keep_recent = 3)], #[transcript(pin_user)] or both"
        }
        _ => "#[nested]",
    }
}

/// The crate path the generated code refers to: `#[compaction(crate = "path")]` on the
/// container, `::compaction` without it.
pub fn crate_path(cx: &Ctxt, input: &syn::DeriveInput) -> syn::Path {
    let mut path = None;
    for attr in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("compaction"))
    {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let lit: syn::LitStr = meta.value()?.parse()?;
                let parsed: syn::Path = lit.parse().map_err(|_| {
                    syn::Error::new(
                        lit.span(),
                        "`crate` takes a path, e.g. crate = \"my_compaction\"",
                    )
                })?;
                path = Some(parsed);
                Ok(())
            } else {
                let shown = quote::ToTokens::to_token_stream(&meta.path).to_string();
                let hint = did_you_mean(&shown, ["crate"])
                    .map(|m| format!("did you mean `{m}`? "))
                    .unwrap_or_default();
                Err(meta.error(format!(
                    "unknown option `{shown}` for #[compaction]; {hint}the only valid option is \
                     `crate`, e.g. #[compaction(crate = \"my_compaction\")]"
                )))
            }
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    path.unwrap_or_else(|| syn::parse_quote!(::compaction))
}

/// The `#[cfg(...)]` attributes of a field, copied onto everything generated for it.
fn cfg_attrs(field: &syn::Field) -> Vec<syn::Attribute> {
    field
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .cloned()
        .collect()
}
