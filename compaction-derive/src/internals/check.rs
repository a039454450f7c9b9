//! Rules between fields: a derivable field's pointer may only be built from protected fields,
//! because the pointer must survive the compaction that evicts the value.

use crate::internals::ast::{Class, Container};
use crate::internals::ctxt::{did_you_mean, Ctxt};
use crate::internals::template::{self, Piece};

/// Checks every pointer template; returns the parsed templates by field index (`None` for
/// fields that have none or whose template is wrong).
pub fn check(cx: &Ctxt, cont: &Container<'_>) -> Vec<Option<Vec<Piece>>> {
    cont.fields
        .iter()
        .map(|field| {
            let Class::Derivable { pointer, .. } = &field.class else {
                return None;
            };
            let pieces = match template::parse(&pointer.value()) {
                Ok(pieces) => pieces,
                Err(e) => {
                    let at = if pointer.value().trim().is_empty() {
                        String::new()
                    } else {
                        format!(" (at byte {})", e.offset)
                    };
                    cx.error_spanned_by(
                        pointer,
                        format!("invalid pointer template: {}{at}", e.message),
                    );
                    return None;
                }
            };
            let mut valid = true;
            for piece in &pieces {
                let Piece::Field(name) = piece else { continue };
                match cont.fields.iter().find(|f| &f.name == name) {
                    None => {
                        let protected = cont
                            .fields
                            .iter()
                            .filter(|f| matches!(f.class, Class::Protected { .. }))
                            .map(|f| f.name.as_str());
                        let hint = match did_you_mean(name, protected) {
                            Some(m) => format!("did you mean `{{{m}}}`? "),
                            None => String::new(),
                        };
                        cx.error_spanned_by(
                            pointer,
                            format!(
                                "pointer placeholder `{{{name}}}` names no field of `{}`; {hint}\
                                 placeholders must name #[protected] fields of the same struct",
                                cont.ident
                            ),
                        );
                        valid = false;
                    }
                    Some(target) if target.name == field.name => {
                        cx.error_spanned_by(
                            pointer,
                            format!(
                                "pointer placeholder `{{{name}}}` names the derivable field \
                                 itself, whose value is what gets evicted; build the pointer \
                                 from #[protected] fields (e.g. keep its URL or path in a \
                                 #[protected] field and write `{{that_field}}`)"
                            ),
                        );
                        valid = false;
                    }
                    Some(target) if !matches!(target.class, Class::Protected { .. }) => {
                        cx.error_spanned_by(
                            pointer,
                            format!(
                                "pointer placeholder `{{{name}}}` names a field that is not \
                                 #[protected]; the pointer must survive compaction, so build it \
                                 only from #[protected] fields (classify `{name}` #[protected])"
                            ),
                        );
                        valid = false;
                    }
                    Some(_) => {}
                }
            }
            valid.then_some(pieces)
        })
        .collect()
}
