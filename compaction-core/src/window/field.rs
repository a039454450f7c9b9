//! One field of the window: what became of it (an [`Entry`] and its [`Form`], the model a
//! checkpoint keeps and rehydration reads back), how a renderer sees it ([`FieldView`], built
//! from the entry escaped by [`Entry::for_window`]), and its lines in the default format.

use crate::effects::record::Effect;
use crate::store::{Fingerprint, Pointer};
use crate::window::escape::{escape_inline, escape_key, escape_pointer};
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
    /// This field as a grown list's new items: when it and `before` (the same field as the
    /// model was shown it) are the same kind of verbatim JSON list and `before`'s items are
    /// exactly its first ones (at least one, so the field was seen as a list), the entry whose
    /// value is the items after them, with how many `before` had. Each item keeps its bytes as
    /// the whole list wrote them. See [`FormView::Appended`].
    pub(crate) fn grown_since(&self, before: &Entry) -> Option<(Entry, usize)> {
        use serde_json::value::RawValue;
        let (old, new) = match (&before.form, &self.form) {
            (
                Form::Protected {
                    json: a, pin: p, ..
                },
                Form::Protected {
                    json: b, pin: q, ..
                },
            ) if p == q => (a, b),
            (Form::Value { json: a }, Form::Value { json: b }) => (a, b),
            _ => return None,
        };
        let old: Vec<&RawValue> = serde_json::from_str(old).ok()?;
        let new: Vec<&RawValue> = serde_json::from_str(new).ok()?;
        let same = |(a, b): (&&RawValue, &&RawValue)| a.get() == b.get();
        if old.is_empty() || new.len() <= old.len() || !old.iter().zip(&new).all(same) {
            return None;
        }
        let items: Vec<&str> = new[old.len()..].iter().map(|item| item.get()).collect();
        let json = format!("[{}]", items.join(","));
        let form = match &self.form {
            Form::Protected {
                pin, fingerprint, ..
            } => Form::Protected {
                pin: *pin,
                json,
                fingerprint: *fingerprint,
            },
            _ => Form::Value { json },
        };
        let entry = Entry {
            form,
            ..self.clone()
        };
        Some((entry, old.len()))
    }

    /// This field as an effect ledger's new and changed records: when it and `before` (the
    /// same field as the model was shown it) are the same ledger with every record in the
    /// window (none spilled, no payload evicted), `before`'s records are still at their
    /// positions with the same keys and payloads, and at least one of them is unchanged, the
    /// entry holding only the records (and payloads) that are new or differ, with how many
    /// records stand as shown. See [`FormView::EffectsChanged`].
    pub(crate) fn records_changed_since(&self, before: &Entry) -> Option<(Entry, usize)> {
        fn all_in_window(form: &Form) -> Option<(bool, &[IndexedRecord], &[KeptPayload])> {
            match form {
                Form::Effects {
                    idempotent,
                    total,
                    records,
                    spilled: None,
                    payloads,
                    payloads_evicted: 0,
                    payloads_spilled: None,
                } if records.len() == *total
                    && records.iter().enumerate().all(|(i, r)| r.index == i) =>
                {
                    Some((*idempotent, records, payloads))
                }
                _ => None,
            }
        }
        let (was_idempotent, old, old_payloads) = all_in_window(&before.form)?;
        let (idempotent, new, payloads) = all_in_window(&self.form)?;
        let same_keys = old
            .iter()
            .zip(new)
            .all(|(a, b)| a.record.idempotency_key == b.record.idempotency_key);
        // The payloads shown earlier must still lead the ledger's, as they were (a ledger only
        // appends records, and keeps a record's first payload): anything else, such as a
        // payload filled in for an older record, is sent whole. Compared in place, not by a
        // search per payload: a ledger all in the window can hold many.
        let payloads_kept = payloads.get(..old_payloads.len()) == Some(old_payloads);
        if was_idempotent != idempotent || new.len() < old.len() || !same_keys || !payloads_kept {
            return None;
        }
        let changed: Vec<IndexedRecord> = new
            .iter()
            .enumerate()
            .filter(|(i, record)| old.get(*i) != Some(record))
            .map(|(_, record)| record.clone())
            .collect();
        let unchanged = new.len() - changed.len();
        if unchanged == 0 || changed.is_empty() {
            return None;
        }
        let payloads = payloads[old_payloads.len()..].to_vec();
        let form = Form::Effects {
            idempotent,
            total: new.len(),
            records: changed,
            spilled: None,
            payloads,
            payloads_evicted: 0,
            payloads_spilled: None,
        };
        let entry = Entry {
            form,
            ..self.clone()
        };
        Some((entry, unchanged))
    }

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
    /// In a state update, a list shown earlier in the request that only grew at its end: its
    /// new items. The list is the one shown earlier followed by these.
    Appended {
        /// The new items, as a compact JSON array (each item as the whole list writes it).
        json: &'a str,
        /// How many items were shown earlier.
        shown: usize,
        /// A pinned protected field.
        pinned: bool,
    },
    /// In a state update, an effect ledger shown earlier in the request with every record in
    /// the window: only its records that are new or changed since (and their new payloads).
    /// The ledger is the one shown earlier with these records replacing or joining theirs, by
    /// idempotency key; `unchanged` records stand as shown.
    EffectsChanged {
        /// The new and changed records ([`EffectsView::total`] counts the whole ledger).
        effects: EffectsView<'a>,
        /// How many records stand as shown earlier.
        unchanged: usize,
    },
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

    /// The field of `entry` sent as a part of what the model was shown earlier: a list whose
    /// first `shown` items were shown (`entry` holds the items after them, see
    /// [`FormView::Appended`]), or an effect ledger whose `shown` other records stand as shown
    /// (`entry` holds its new and changed records, see [`FormView::EffectsChanged`]).
    pub(crate) fn appended(entry: &'a Entry, shown: usize) -> Self {
        let mut view = FieldView::of(entry);
        view.form = match view.form {
            FormView::Verbatim { json, pinned } => FormView::Appended {
                json,
                shown,
                pinned,
            },
            FormView::Effects(effects) => FormView::EffectsChanged {
                effects,
                unchanged: shown,
            },
            other => other,
        };
        view
    }

    /// Whether the field left the window (anything but verbatim).
    pub fn left_window(&self) -> Option<&'static str> {
        match self.form {
            FormView::Verbatim { .. }
            | FormView::Appended { .. }
            | FormView::EffectsChanged { .. } => None,
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

    /// The field's lines in the default window format (see [`DefaultRenderer`](crate::window::DefaultRenderer)), ending
    /// with a newline. With the default renderer this is exactly the text the field
    /// contributes to the window, so counting its tokens tells what the field costs; with a
    /// custom renderer it is an estimate.
    pub fn default_lines(&self) -> String {
        let mut out = String::new();
        render_field(&mut out, self);
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
        FormView::Appended {
            json,
            shown,
            pinned,
        } => {
            let pin = if pinned { " [pinned]" } else { "" };
            writeln!(
                out,
                "{path}{pin} += {json} (after the {shown} items shown earlier)"
            )
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
        FormView::EffectsChanged { effects, unchanged } => {
            render_ledger(out, path, &effects, Some(unchanged));
            Ok(())
        }
        FormView::Effects(effects) => {
            render_ledger(out, path, &effects, None);
            Ok(())
        }
    };
}

/// An effect ledger's lines: its header (with `unchanged`, the records that stand as shown
/// earlier, when only new and changed records follow), records, spilled records, payloads.
fn render_ledger(
    out: &mut String,
    path: &str,
    effects: &EffectsView<'_>,
    unchanged: Option<usize>,
) {
    let (idempotent, total) = (effects.idempotent, effects.total);
    let _ = match unchanged {
        // Only in an update: the window's line for the ledger gave `idempotent=`, which never
        // changes, so the update does not repeat it.
        Some(unchanged) => writeln!(
            out,
            "{path} ({total} records; the {unchanged} shown earlier stand, these are new or changed):"
        ),
        None => writeln!(out, "{path} (idempotent={idempotent}, {total} records):"),
    };
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
}
