//! The window: what became of each field (the entries a checkpoint keeps), the views a
//! renderer reads, and the documented default text format (or the author's own renderer).
//!
//! # The default format
//!
//! ```text
//! <<< COMPACTED STATE of MigrationState >>>
//! left the window: tool_output (evicted), config_contents (pointer), ci_log (summary), migrations (records spilled)
//! Re-verify before acting: facts that left the window are not in it. Re-acquire a pointer or resolve a store:// pointer before relying on them; summaries are not authoritative. Effect statuses are exact: never re-run a committed effect, reconcile an unknown one first.
//! ## protected (verbatim)
//! constraints [pinned] = ["never touch /etc/prod"]
//! plan_step = 6
//! notes = [SPILLED verbatim -> store://sha256:…]
//! ## effects (exact status)
//! migrations (idempotent=false, 5000 records):
//!   {"action":"apply_migration","target":"db://users","idempotency_key":"mig-5000","status":"unknown","depends_on":["mig-4999"]}
//!   [SPILLED 4999 records: 4999 committed, 0 not_started, 0 unknown -> store://sha256:…]
//!   [SPILLED payloads of 12 records -> store://sha256:…]
//! ## derivable
//! [EVICTED config_contents recover=reacquire pointer=file:///srv/app/config.toml]
//! ci_log = [SUMMARY not authoritative; source=store://sha256:… origin=https://ci.example/runs/6] "…summary…"
//! ## redundant
//! [EVICTED tool_output recover=no]
//! <<< END COMPACTED STATE >>>
//! ```
//!
//! Values are compact JSON (strings quoted and escaped), so what the model reads is exactly what
//! rehydration restores. Sections appear only when they have fields; the "left the window" line
//! only when something left. The header carries no counter and no timestamp: a window whose
//! fields did not change is the same text from one request to the next, so a provider's prompt
//! cache serves it (a persisted sequence number for operators belongs in the report, not here).
//!
//! # The compact form
//!
//! When the full form does not fit what the budget leaves the window (and only then, so a
//! larger budget never gets a longer window that no longer fits), the fixed text shrinks: no
//! "left the window" line (every field's own line says where it went), the short
//! [`COMPACT_NOTICE`] instead of [`REVERIFY_NOTICE`], and no notice at all when every value is
//! verbatim and there is no effect ledger (nothing to re-verify). The markers, section titles
//! and field lines are those of the full form, so everything said above about escaping holds
//! for both. [`WindowView::compact`] says which form the engine asks for.
//!
//! ```text
//! <<< COMPACTED STATE of Counter >>>
//! ## protected (verbatim)
//! step = 3
//! <<< END COMPACTED STATE >>>
//! ```
//!
//! # State updates
//!
//! With a `#[transcript]`, the window above is the *stable* part of the request: it stays at the
//! front, byte for byte, from one compaction point to the next. When a field changes between
//! them, the engine renders only the changed fields again ([`WindowView::is_update`]) and
//! appends them after the newest message as a state update, so the requests before stay an
//! exact prefix of the next (see `Compacted::messages`):
//!
//! ```text
//! ⟦compaction:update⟧ changed fields:
//! plan_step = 7
//! ```
//!
//! An update is the changed fields' lines alone, in the window's order: no header, section
//! titles or end marker. The window above already named the state and gave each field its
//! section, and an update stays in every request until the next compaction point, so each
//! line of framing would be paid again at every one of them.
//!
//! In an append, where every earlier update is still in the request, a list that only grew
//! since it was shown is rendered as its new items ([`FormView::Appended`]):
//! `decisions += ["ask before deploying"] (after the 2 items shown earlier)`; an effect
//! ledger whose records are all in the window, as its new and changed records
//! ([`FormView::EffectsChanged`]):
//!
//! ```text
//! writes (27 records; the 26 shown earlier stand, these are new or changed):
//!   {"action":"refund","target":"shop","idempotency_key":"refund:81DEFD#28","status":"committed"}
//! ```

use crate::window::field::{render_field, Entry, FieldView, FormView, Section};
use std::borrow::Cow;
use std::fmt::Write;

/// Renders the window. The engine counts the renderer's output and enforces the budget on it,
/// evicting more when a custom format is longer than planned.
///
/// ```
/// use compaction::{Compactable, Compactor, DefaultRenderer, Renderer, Tokenizer, WindowView};
/// use serde::{Deserialize, Serialize};
///
/// /// The default format, under a line of your own.
/// struct WithPreamble;
/// impl Renderer for WithPreamble {
///     fn render(&self, view: &WindowView<'_>) -> String {
///         let window = DefaultRenderer.render(view);
///         format!("Your saved state follows; trust it over your memory.\n{window}")
///     }
/// }
///
/// #[derive(Compactable, Serialize, Deserialize, Default)]
/// struct State {
///     #[protected]
///     plan_step: u32,
/// }
///
/// let compactor = Compactor::builder()
///     .budget(500)
///     .token_counter(Tokenizer::O200kBase)
///     .renderer(WithPreamble)
///     .build()?;
/// let compacted = compactor.compact_blocking(&State { plan_step: 3 })?;
/// assert!(compacted.render().starts_with("Your saved state follows"));
/// assert!(compacted.render().contains("plan_step = 3"));
/// assert!(compacted.tokens() <= 500); // counted on the renderer's output
/// # Ok::<(), compaction::CompactionError>(())
/// ```
pub trait Renderer: Send + Sync {
    /// Renders `view` as the text the model reads.
    fn render(&self, view: &WindowView<'_>) -> String;

    /// Whether this renderer shows [`FormView::Appended`] (a list that only grew, sent in an
    /// append's state update as its new items). `false` unless a renderer says so: one that
    /// does not know the form gets every changed list whole, so no update is lost to a match
    /// arm it lacks. [`DefaultRenderer`] shows it.
    fn renders_appended(&self) -> bool {
        false
    }

    /// Whether this renderer shows [`FormView::EffectsChanged`] (an effect ledger shown earlier
    /// in the request, every record in the window, sent in an append's state update as its new
    /// and changed records). `false` unless a renderer says so, apart from
    /// [`renders_appended`](Self::renders_appended): one that does not know the form gets every
    /// changed ledger whole. [`DefaultRenderer`] shows it.
    fn renders_changed_records(&self) -> bool {
        false
    }
}

/// Everything a renderer may show.
#[derive(Debug)]
pub struct WindowView<'a> {
    pub(crate) compaction: u64,
    pub(crate) state_type: &'a str,
    /// Entries as renderers see them ([`Entry::for_window`]).
    pub(crate) entries: &'a [Cow<'a, Entry>],
    /// The compactor's budget.
    pub(crate) budget: usize,
    /// Render the compact form: the full one does not fit.
    pub(crate) compact: bool,
    /// Only the fields that changed since the window shown earlier in the request.
    pub(crate) update: bool,
    /// In an update, for each entry: `Some(n)` when it holds only the items after the first
    /// `n` of a list shown earlier (see [`FormView::Appended`]), or only the new and changed
    /// records of a ledger whose `n` other records stand as shown
    /// ([`FormView::EffectsChanged`]); empty otherwise.
    pub(crate) appended: &'a [Option<usize>],
}

impl<'a> WindowView<'a> {
    /// The compaction's number within this compactor. The default renderer does not show it:
    /// a number that changes on every request would make every request's first message new
    /// to a provider's prompt cache. (Sessions carry a persisted sequence number for that.)
    pub fn compaction(&self) -> u64 {
        self.compaction
    }

    /// Whether the engine asks for the compact form: the full form did not fit what the budget
    /// leaves the window. A custom renderer may ignore it; the budget is enforced on its output
    /// either way.
    pub fn compact(&self) -> bool {
        self.compact
    }

    /// Whether this view is a state update: [`fields`](Self::fields) are only the fields whose
    /// value changed since the window shown earlier in the same request, and what is rendered
    /// is appended after the newest message, replacing those values.
    pub fn is_update(&self) -> bool {
        self.update
    }

    /// The state's type name.
    pub fn state_type(&self) -> &'a str {
        self.state_type
    }

    /// The compactor's budget in tokens.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Every field, in traversal order.
    pub fn fields(&self) -> impl Iterator<Item = FieldView<'a>> + 'a {
        let appended = self.appended;
        self.entries.iter().enumerate().map(move |(i, entry)| {
            match appended.get(i).copied().flatten() {
                Some(shown) => FieldView::appended(entry, shown),
                None => FieldView::of(entry),
            }
        })
    }
}

/// The documented default format (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRenderer;

/// The instruction every compacted window in the full form carries.
pub const REVERIFY_NOTICE: &str = "Re-verify before acting: facts that left the window are not in it. Re-acquire a pointer or resolve a store:// pointer before relying on them; summaries are not authoritative. Effect statuses are exact: never re-run a committed effect, reconcile an unknown one first.";

/// Kept for compatibility: the form no longer depends on the budget's size (a budget below
/// this could get the compact form while a slightly larger one did not fit the full form). The
/// engine asks for the compact form exactly when the full one does not fit
/// ([`WindowView::compact`]).
pub const COMPACT_FORM_BELOW: usize = 256;

/// The compact form's instruction, when something left the window or the state has effects.
pub const COMPACT_NOTICE: &str = "Re-verify before acting: only verbatim values are facts; resolve a pointer before relying on it. Never re-run a committed effect; reconcile an unknown one first.";

impl Renderer for DefaultRenderer {
    fn renders_appended(&self) -> bool {
        true
    }

    fn renders_changed_records(&self) -> bool {
        true
    }

    fn render(&self, view: &WindowView<'_>) -> String {
        let mut out = String::new();
        if view.update {
            // The field lines alone. The update's marker line
            // (`conversation::marker::update_text`) says what they are; the window above
            // already named the state, gave each field its section and opened and closed the
            // block. An update stays in every request until the next compaction point, so any
            // framing here is paid again at each of them. Every line still names its field (a
            // record's line is indented under the ledger line that does) and every value is
            // compact JSON, so no value can pass for a line.
            render_fields(&mut out, view, false);
            // No newline after the last line, like the window's end marker.
            if out.ends_with('\n') {
                out.pop();
            }
            return out;
        }
        let _ = writeln!(out, "<<< COMPACTED STATE of {} >>>", view.state_type);
        let left: Vec<String> = view
            .fields()
            .filter_map(|f| f.left_window().map(|how| format!("{} ({how})", f.path)))
            .collect();
        if view.compact {
            let effects = view.fields().any(|f| f.section == Section::Effects);
            if !left.is_empty() || effects {
                out.push_str(COMPACT_NOTICE);
                out.push('\n');
            }
        } else {
            if !left.is_empty() {
                let _ = writeln!(out, "left the window: {}", left.join(", "));
            }
            out.push_str(REVERIFY_NOTICE);
            out.push('\n');
        }
        render_fields(&mut out, view, true);
        out.push_str("<<< END COMPACTED STATE >>>");
        out
    }
}

/// The fields of the default format by section (pinned ones first), each section under its
/// title when `titled` (the window; an update's fields go without).
fn render_fields(out: &mut String, view: &WindowView<'_>, titled: bool) {
    {
        let sections = [
            (Section::Protected, "## protected (verbatim)"),
            (Section::Effects, "## effects (exact status)"),
            (Section::Derivable, "## derivable"),
            (Section::Redundant, "## redundant"),
        ];
        for (section, title) in sections {
            let mut fields: Vec<FieldView<'_>> =
                view.fields().filter(|f| f.section == section).collect();
            if fields.is_empty() {
                continue;
            }
            // Pinned protected fields first: they are the ones the author said must never move.
            fields.sort_by_key(|f| !matches!(f.form, FormView::Verbatim { pinned: true, .. }));
            if titled {
                out.push_str(title);
                out.push('\n');
            }
            for field in fields {
                render_field(out, &field);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DefaultRenderer, Renderer, WindowView};
    use crate::checkpoint::Compacted;

    #[test]
    fn default_lines_of_every_field_appear_in_the_default_window() {
        let json = r#"{"format":1,"state_type":"T","budget":100,"entries":[
            {"path":"a","section":"protected","form":{"form":"protected","pin":true,"json":"1","fingerprint":"6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"}},
            {"path":"b","section":"redundant","form":{"form":"tombstone"}}],
            "shapes":[],"window":"","tokens":0,
            "report":{"compaction":1,"budget":100,"tokens_after":0,"tokens_before":0,
                "tokens_before_exact":true,"counter":"heuristic","fields":[],"fingerprints":{}},
            "seal":"0000000000000000000000000000000000000000000000000000000000000000"}"#;
        let compacted: Compacted<()> = serde_json::from_str(json).expect("parses");
        let entries: Vec<_> = compacted.entries.iter().map(|e| e.for_window()).collect();
        let window = DefaultRenderer.render(&WindowView {
            compaction: 1,
            state_type: "T",
            entries: &entries,
            budget: 100,
            compact: true,
            update: false,
            appended: &[],
        });
        let lines: Vec<String> = compacted.fields().map(|f| f.default_lines()).collect();
        assert_eq!(lines, ["a [pinned] = 1\n", "[EVICTED b recover=no]\n"]);
        for line in &lines {
            assert!(window.contains(line.as_str()), "{line:?} not in {window}");
        }
    }
}
