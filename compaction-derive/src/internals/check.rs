//! Rules between fields: a derivable field's pointer may only be built from protected fields,
//! because the pointer must survive the compaction that evicts the value; and a state has at
//! most one conversation (`#[transcript]`), since its messages are the request.

use crate::internals::ast::{Class, Container};
use crate::internals::ctxt::{did_you_mean, Ctxt};
use crate::internals::template::{self, Piece};

/// Checks every pointer template; returns the parsed templates by field index (`None` for
/// fields that have none or whose template is wrong).
pub fn check(cx: &Ctxt, cont: &Container<'_>) -> Vec<Option<Vec<Piece>>> {
    one_transcript(cx, cont);
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

/// A second `#[transcript]` field is an error at its name. Fields under `#[cfg]` are left to the
/// compiler: two transcripts behind exclusive cfgs are one at a time.
fn one_transcript(cx: &Ctxt, cont: &Container<'_>) {
    let mut transcripts = cont
        .fields
        .iter()
        .filter(|f| matches!(f.class, Class::Transcript { .. }) && f.cfgs.is_empty());
    let Some(first) = transcripts.next() else {
        return;
    };
    for second in transcripts {
        cx.error_spanned_by(
            second.member,
            format!(
                "`{}` already holds the conversation: a state has at most one #[transcript] \
                 field (its messages are the request sent to the model); keep one",
                first.name
            ),
        );
    }
}
