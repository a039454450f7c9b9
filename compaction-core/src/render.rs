//! The window: what became of each field (the entries a checkpoint keeps), the views a
//! renderer reads, and the documented default text format (or the author's own renderer).
//!
//! # The default format
//!
//! ```text
//! <<< COMPACTED STATE: compaction #2 of MigrationState >>>
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
//! only when something left.
//!
//! # The compact form
//!
//! Below a budget of [`COMPACT_FORM_BELOW`] tokens, the fixed text shrinks: no "left the window"
//! line (every field's own line says where it went), the short [`COMPACT_NOTICE`] instead of
//! [`REVERIFY_NOTICE`], and no notice at all when every value is verbatim and there is no
//! effect ledger (nothing to re-verify). The markers, section titles and field lines are
//! those of the full form, so everything said above about escaping holds for both.
//!
//! ```text
//! <<< COMPACTED STATE: compaction #1 of Counter >>>
//! ## protected (verbatim)
//! step = 3
//! <<< END COMPACTED STATE >>>
//! ```

mod escape;

pub use escape::escape_inline;

use crate::effects::record::Effect;
use crate::store::{Fingerprint, Pointer};
use escape::escape_key;
pub use escape::escape_pointer;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt::Write;

/// An effect record with its position in its log, so window and spilled records merge back in
/// their original order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IndexedRecord {
    pub index: usize,
    pub record: Effect,
}

/// Effect records that moved to the store, with the engine's own count of their statuses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SpilledRecords {
    pub pointer: Pointer,
    pub count: usize,
    pub committed: usize,
    pub not_started: usize,
    pub unknown: usize,
}

/// A payload kept in the window, tied to its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct KeptPayload {
    pub index: usize,
    pub key: String,
    pub value: serde_json::Value,
}

/// How one field is preserved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "snake_case")]
pub(crate) enum Form {
    /// A protected value, verbatim in the window.
    Protected {
        pin: bool,
        json: String,
        fingerprint: Fingerprint,
    },
    /// A protected value in the store; its pointer's hash is its fingerprint.
    ProtectedSpilled { pointer: Pointer },
    /// A derivable or redundant value, verbatim.
    Value { json: String },
    /// A summary standing in for a derivable or redundant value.
    Summary {
        text: String,
        source: Pointer,
        origin: Option<String>,
        from_tokens: usize,
        /// How rehydration restores the value from the store. Absent in checkpoints written
        /// before summarized values were restored.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<SummaryValue>,
    },
    /// A derivable value evicted behind its pointer.
    Evicted { pointer: String },
    /// A redundant value evicted for good.
    Tombstone,
    /// An effect ledger.
    Effects {
        idempotent: bool,
        total: usize,
        records: Vec<IndexedRecord>,
        spilled: Option<SpilledRecords>,
        payloads: Vec<KeptPayload>,
        /// Payloads not in the window.
        payloads_evicted: usize,
        /// Where those payloads are, verbatim (absent in older checkpoints, which dropped them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payloads_spilled: Option<Pointer>,
    },
}

/// Where a summarized value is in the store, so rehydration restores it exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SummaryValue {
    /// The source is the value's compact JSON (anything but text).
    Source,
    /// The source is the value's text: its JSON is the source as a JSON string.
    SourceText,
    /// Stored apart (a summary source of the author's own making).
    Stored(Pointer),
}

/// The class a preserved field belongs to, which decides its section in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    /// `#[protected]` fields.
    Protected,
    /// `#[effect]` ledgers.
    Effects,
    /// `#[derivable]` fields.
    Derivable,
    /// `#[redundant]` fields.
    Redundant,
}

/// One preserved field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub path: String,
    pub section: Section,
    pub form: Form,
}

impl Entry {
    /// The entry as renderers see it: its path, pointers and payload keys escaped, so no value
    /// can start a line of the window. The checkpoint keeps the raw entry (rehydration
    /// re-acquires through the raw pointer); borrowed when nothing needs escaping.
    pub(crate) fn for_window(&self) -> Cow<'_, Entry> {
        let path = escape_inline(&self.path);
        let form = match &self.form {
            Form::Evicted { pointer } => match escape_pointer(pointer) {
                Cow::Owned(pointer) => Some(Form::Evicted { pointer }),
                Cow::Borrowed(_) => None,
            },
            Form::Summary {
                text,
                source,
                origin: Some(origin),
                from_tokens,
                value,
            } => match escape_pointer(origin) {
                Cow::Owned(origin) => Some(Form::Summary {
                    text: text.clone(),
                    source: source.clone(),
                    origin: Some(origin),
                    from_tokens: *from_tokens,
                    value: value.clone(),
                }),
                Cow::Borrowed(_) => None,
            },
            Form::Effects { payloads, .. }
                if payloads
                    .iter()
                    .any(|p| matches!(escape_key(&p.key), Cow::Owned(_))) =>
            {
                let mut form = self.form.clone();
                if let Form::Effects { payloads, .. } = &mut form {
                    for payload in payloads {
                        payload.key = escape_key(&payload.key).into_owned();
                    }
                }
                Some(form)
            }
            _ => None,
        };
        if matches!(path, Cow::Borrowed(_)) && form.is_none() {
            return Cow::Borrowed(self);
        }
        Cow::Owned(Entry {
            path: path.into_owned(),
            section: self.section,
            form: form.unwrap_or_else(|| self.form.clone()),
        })
    }
}

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
}

impl<'a> WindowView<'a> {
    /// The compaction's number.
    pub fn compaction(&self) -> u64 {
        self.compaction
    }

    /// The state's type name.
    pub fn state_type(&self) -> &'a str {
        self.state_type
    }

    /// The compactor's budget in tokens (the default renderer writes its compact form below
    /// [`COMPACT_FORM_BELOW`]).
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Every field, in traversal order.
    pub fn fields(&self) -> impl Iterator<Item = FieldView<'a>> + 'a {
        self.entries.iter().map(|entry| FieldView::of(entry))
    }
}

/// One field as the renderer sees it.
#[derive(Debug, Clone, Copy)]
pub struct FieldView<'a> {
    /// Concrete path.
    pub path: &'a str,
    /// The field's section.
    pub section: Section,
    /// How it is preserved.
    pub form: FormView<'a>,
}

/// How a field is preserved, for rendering.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum FormView<'a> {
    /// Verbatim JSON (protected, derivable or redundant).
    Verbatim {
        /// Compact JSON.
        json: &'a str,
        /// A pinned protected field.
        pinned: bool,
    },
    /// Protected value moved to the store.
    Spilled {
        /// Where.
        pointer: &'a Pointer,
    },
    /// A summary standing in for the value.
    Summary {
        /// The summary.
        text: &'a str,
        /// The stored source.
        source: &'a Pointer,
        /// The field's own pointer, when derivable.
        origin: Option<&'a str>,
    },
    /// A derivable value evicted behind its pointer.
    Evicted {
        /// Where to re-acquire it.
        pointer: &'a str,
    },
    /// A redundant value evicted for good.
    Tombstone,
    /// An effect ledger.
    Effects(EffectsView<'a>),
}

/// An effect ledger, for rendering.
#[derive(Debug, Clone, Copy)]
pub struct EffectsView<'a> {
    /// Whether re-running is harmless.
    pub idempotent: bool,
    /// Number of records in the log.
    pub total: usize,
    records: &'a [IndexedRecord],
    spilled: Option<&'a SpilledRecords>,
    payloads: &'a [KeptPayload],
    /// Number of payloads not in the window.
    pub payloads_evicted: usize,
    payloads_spilled: Option<&'a Pointer>,
}

impl<'a> EffectsView<'a> {
    /// Records kept in the window, in log order.
    pub fn records(&self) -> impl Iterator<Item = &'a Effect> + 'a {
        self.records.iter().map(|r| &r.record)
    }

    /// For spilled records: (pointer, count, committed, not_started, unknown).
    pub fn spilled(&self) -> Option<(&'a Pointer, usize, usize, usize, usize)> {
        self.spilled
            .map(|s| (&s.pointer, s.count, s.committed, s.not_started, s.unknown))
    }

    /// Where the payloads not in the window are, verbatim, when they were spilled.
    pub fn payloads_spilled(&self) -> Option<&'a Pointer> {
        self.payloads_spilled
    }

    /// Payloads kept in the window, by idempotency key.
    pub fn payloads(&self) -> impl Iterator<Item = (&'a str, &'a serde_json::Value)> + 'a {
        self.payloads.iter().map(|p| (p.key.as_str(), &p.value))
    }
}

impl<'a> FieldView<'a> {
    pub(crate) fn of(entry: &'a Entry) -> Self {
        let form = match &entry.form {
            Form::Protected { pin, json, .. } => FormView::Verbatim { json, pinned: *pin },
            Form::ProtectedSpilled { pointer } => FormView::Spilled { pointer },
            Form::Value { json } => FormView::Verbatim {
                json,
                pinned: false,
            },
            Form::Summary {
                text,
                source,
                origin,
                ..
            } => FormView::Summary {
                text,
                source,
                origin: origin.as_deref(),
            },
            Form::Evicted { pointer } => FormView::Evicted { pointer },
            Form::Tombstone => FormView::Tombstone,
            Form::Effects {
                idempotent,
                total,
                records,
                spilled,
                payloads,
                payloads_evicted,
                payloads_spilled,
            } => FormView::Effects(EffectsView {
                idempotent: *idempotent,
                total: *total,
                records,
                spilled: spilled.as_ref(),
                payloads,
                payloads_evicted: *payloads_evicted,
                payloads_spilled: payloads_spilled.as_ref(),
            }),
        };
        FieldView {
            path: &entry.path,
            section: entry.section,
            form,
        }
    }

    /// Whether the field left the window (anything but verbatim).
    pub fn left_window(&self) -> Option<&'static str> {
        match self.form {
            FormView::Verbatim { .. } => None,
            FormView::Spilled { .. } => Some("spilled"),
            FormView::Summary { .. } => Some("summary"),
            FormView::Evicted { .. } => Some("pointer"),
            FormView::Tombstone => Some("evicted"),
            FormView::Effects(e) => match (e.spilled.is_some(), e.payloads_evicted > 0) {
                (true, _) => Some("records spilled"),
                (false, true) if e.payloads_spilled.is_some() => Some("payloads spilled"),
                (false, true) => Some("payloads evicted"),
                (false, false) => None,
            },
        }
    }
}

/// The documented default format (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRenderer;

/// The instruction every compacted window in the full form carries.
pub const REVERIFY_NOTICE: &str = "Re-verify before acting: facts that left the window are not in it. Re-acquire a pointer or resolve a store:// pointer before relying on them; summaries are not authoritative. Effect statuses are exact: never re-run a committed effect, reconcile an unknown one first.";

/// Budgets below this many tokens get the default renderer's compact form (see the module
/// docs): there, the full notice alone would take a fifth of the window or more.
pub const COMPACT_FORM_BELOW: usize = 256;

/// The compact form's instruction, when something left the window or the state has effects.
pub const COMPACT_NOTICE: &str = "Re-verify before acting: only verbatim values are facts; resolve a pointer before relying on it. Never re-run a committed effect; reconcile an unknown one first.";

impl Renderer for DefaultRenderer {
    fn render(&self, view: &WindowView<'_>) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<<< COMPACTED STATE: compaction #{} of {} >>>",
            view.compaction, view.state_type
        );
        let left: Vec<String> = view
            .fields()
            .filter_map(|f| f.left_window().map(|how| format!("{} ({how})", f.path)))
            .collect();
        if view.budget < COMPACT_FORM_BELOW {
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
            out.push_str(title);
            out.push('\n');
            for field in fields {
                render_field(&mut out, &field);
            }
        }
        out.push_str("<<< END COMPACTED STATE >>>");
        out
    }
}

/// Appends one field in the default format.
pub(crate) fn render_field(out: &mut String, field: &FieldView<'_>) {
    let path = field.path;
    let _ = match field.form {
        FormView::Verbatim { json, pinned } => {
            let pin = if pinned { " [pinned]" } else { "" };
            writeln!(out, "{path}{pin} = {json}")
        }
        FormView::Spilled { pointer } => writeln!(out, "{path} = [SPILLED verbatim -> {pointer}]"),
        FormView::Summary {
            text,
            source,
            origin,
        } => {
            // Quoted like every value, so a summary can never pass for another line.
            let text = serde_json::Value::from(text);
            match origin {
                Some(origin) => writeln!(
                    out,
                    "{path} = [SUMMARY not authoritative; source={source} origin={origin}] {text}"
                ),
                None => {
                    writeln!(
                        out,
                        "{path} = [SUMMARY not authoritative; source={source}] {text}"
                    )
                }
            }
        }
        FormView::Evicted { pointer } => {
            writeln!(out, "[EVICTED {path} recover=reacquire pointer={pointer}]")
        }
        FormView::Tombstone => writeln!(out, "[EVICTED {path} recover=no]"),
        FormView::Effects(effects) => {
            let _ = writeln!(
                out,
                "{path} (idempotent={}, {} records):",
                effects.idempotent, effects.total
            );
            for record in effects.records() {
                let json = serde_json::to_string(record).unwrap_or_default();
                let _ = writeln!(out, "  {json}");
            }
            if let Some((pointer, count, committed, not_started, unknown)) = effects.spilled() {
                let _ = writeln!(
                    out,
                    "  [SPILLED {count} records: {committed} committed, {not_started} not_started, {unknown} unknown -> {pointer}]"
                );
            }
            for (key, payload) in effects.payloads() {
                let _ = writeln!(out, "  payload {key} = {payload}");
            }
            match (effects.payloads_evicted, effects.payloads_spilled) {
                (0, _) => {}
                (count, Some(pointer)) => {
                    let _ = writeln!(out, "  [SPILLED payloads of {count} records -> {pointer}]");
                }
                (count, None) => {
                    let _ = writeln!(out, "  [EVICTED payloads of {count} records recover=no]");
                }
            }
            Ok(())
        }
    };
}
