//! `agents` and `show`: what each agent's latest checkpoint holds and where its tokens go.

use crate::backend::{AnyCheckpoint, Store};
use crate::backends;
use crate::conversation;
use crate::drift::Drift;
use crate::fail::{Exit, Failure, Outcome};
use crate::output::{bar, millis, percent, print_json, printable, printable_lines, table, utc};
use crate::target::{Access, Database};
use compaction::CheckpointInfo;
use compaction::{
    CompactionError, FieldOutcome, FieldView, FormView, Section, TokenCounter, Tokenizer,
};
use serde_json::{json, Value};

/// How a checkpoint row reads.
enum Loaded {
    /// It parses; `intact` says whether its seal and checksum hold.
    Readable {
        compacted: Box<AnyCheckpoint>,
        intact: bool,
    },
    /// Its bytes no longer parse as a checkpoint.
    Unreadable,
    /// It was deleted since it was listed.
    Gone,
}

fn load(store: &Store, agent_id: &str) -> Result<Loaded, Failure> {
    match store.load_checkpoint(agent_id) {
        Ok(Some(compacted)) => Ok(Loaded::Readable {
            intact: compacted.verify_seal(),
            compacted: Box::new(compacted),
        }),
        Ok(None) => Ok(Loaded::Gone),
        Err(CompactionError::Integrity { .. }) => Ok(Loaded::Unreadable),
        Err(CompactionError::Store(e)) => Err(backends::failure(&e)),
        Err(other) => Err(Failure::new(Exit::Problems, other.to_string())),
    }
}

/// Kept, spilled, summarized and evicted (incl. tombstoned) fields of a report.
fn counts(compacted: &AnyCheckpoint) -> [usize; 4] {
    let mut counts = [0; 4];
    for field in &compacted.report().fields {
        let slot = match field.outcome {
            FieldOutcome::Kept => 0,
            FieldOutcome::Spilled { .. } => 1,
            FieldOutcome::Summarized { .. } => 2,
            _ => 3,
        };
        counts[slot] += 1;
    }
    counts
}

/// `compaction agents DB`.
pub fn agents(db: &Database, as_json: bool) -> Outcome {
    let store = db.store(Access::Read)?;
    let infos = store.list_checkpoints()?;
    let mut rows = Vec::new();
    let mut objects = Vec::new();
    for info in &infos {
        let loaded = load(&store, &info.agent_id)?;
        let (object, row) = agent_line(info, &loaded);
        if matches!(loaded, Loaded::Gone) {
            continue;
        }
        objects.push(object);
        rows.push(row);
    }
    if as_json {
        print_json(&json!({ "agents": objects }));
    } else if rows.is_empty() {
        say!("no checkpoints in {}", printable(&db.name()));
    } else {
        emit!(
            "{}",
            table(
                &[
                    "AGENT",
                    "STATE TYPE",
                    "SAVED AT",
                    "TOKENS/BUDGET",
                    "REQUEST",
                    "KEPT",
                    "SPILLED",
                    "SUMMARIZED",
                    "EVICTED",
                    "FOLDED",
                    "TOMBSTONED",
                    "MSGS SPILLED",
                    "CHECK",
                ],
                &rows
            )
        );
    }
    Ok(Exit::Ok)
}

fn agent_line(info: &CheckpointInfo, loaded: &Loaded) -> (Value, Vec<String>) {
    let mut object = json!({
        "agent_id": info.agent_id,
        "state_type": info.state_type,
        "saved_at": utc(info.saved_at),
        "saved_at_ms": millis(info.saved_at),
        "size_bytes": info.size,
    });
    let mut row = vec![
        printable(&info.agent_id),
        printable(&info.state_type),
        utc(info.saved_at),
    ];
    match loaded {
        Loaded::Readable { compacted, intact } => {
            let [kept, spilled, summarized, evicted] = counts(compacted);
            let extra = json!({
                "compaction": compacted.report().compaction,
                "tokens": compacted.tokens(),
                "request_tokens": compacted.request_tokens(),
                "budget": compacted.budget(),
                "kept": kept, "spilled": spilled, "summarized": summarized, "evicted": evicted,
                "intact": intact,
            });
            merge(&mut object, extra);
            let messages = MessageCounts::of(compacted);
            merge(&mut object, messages.to_json());
            row.push(format!("{}/{}", compacted.tokens(), compacted.budget()));
            // The whole request the model was sent (a transcript's messages), beside the
            // window block's tokens: they differ by the conversation.
            row.push(
                compacted
                    .request_tokens()
                    .map_or_else(|| "-".to_string(), |t| t.to_string()),
            );
            row.extend([kept, spilled, summarized, evicted].map(|n| n.to_string()));
            row.extend(messages.cells());
            row.push(if *intact { "ok" } else { "ALTERED" }.into());
        }
        Loaded::Unreadable | Loaded::Gone => {
            merge(&mut object, json!({ "intact": false }));
            row.extend(
                ["-", "-", "-", "-", "-", "-", "-", "-", "-", "UNREADABLE"].map(String::from),
            );
        }
    }
    (object, row)
}

/// What happened to a transcript's messages in a checkpoint; `None` without a `#[transcript]`.
struct MessageCounts(Option<compaction::TranscriptReport>);

impl MessageCounts {
    fn of(compacted: &AnyCheckpoint) -> MessageCounts {
        MessageCounts(compacted.report().transcript.clone())
    }

    /// Folded, tombstoned, and spilled (user messages behind a stub, tool results sent in
    /// excerpts: their content is in the store).
    fn counts(&self) -> Option<[usize; 3]> {
        self.0
            .as_ref()
            .map(|t| [t.folded, t.tombstoned, t.stubbed + t.paged.len()])
    }

    fn cells(&self) -> [String; 3] {
        match self.counts() {
            Some(counts) => counts.map(|n| n.to_string()),
            None => ["-", "-", "-"].map(String::from),
        }
    }

    /// `null` counts for a state without a transcript.
    fn to_json(&self) -> Value {
        let [folded, tombstoned, spilled] = match self.counts() {
            Some(counts) => counts.map(Value::from),
            None => [Value::Null, Value::Null, Value::Null],
        };
        json!({
            "messages_in": self.0.as_ref().map(|t| t.messages_in),
            "folded_messages": folded,
            "tombstoned_messages": tombstoned,
            "spilled_messages": spilled,
        })
    }
}

fn merge(object: &mut Value, extra: Value) {
    if let (Value::Object(into), Value::Object(from)) = (object, extra) {
        into.extend(from);
    }
}

/// The newest checkpoint of `agent`, intact: not found (exit 4), altered or unreadable (exit
/// 1, never shown) otherwise. `show` and `resolve --agent` read an agent through it.
pub fn latest(db: &Database, store: &Store, agent: &str) -> Result<Box<AnyCheckpoint>, Failure> {
    let altered = |what: &str| {
        Failure::new(
            Exit::Problems,
            format!(
                "the checkpoint of agent `{agent}` in `{}` {what}",
                db.name()
            ),
        )
        .hint("run `compaction verify DATABASE` to list the damage; do not trust this window")
    };
    match load(store, agent)? {
        Loaded::Readable {
            compacted,
            intact: true,
        } => Ok(compacted),
        Loaded::Readable { intact: false, .. } => {
            Err(altered("was altered in storage (its seal does not match)"))
        }
        Loaded::Unreadable => Err(altered("cannot be read (its bytes do not parse)")),
        Loaded::Gone => Err(Failure::new(
            Exit::NotFound,
            format!("no checkpoint of agent `{agent}` in `{}`", db.name()),
        )
        .hint("list the agents with `compaction agents DATABASE`")),
    }
}

/// `compaction show DB AGENT [--budget]`: the window, or with a transcript the messages the
/// model received (`conversation.rs`).
pub fn show(db: &Database, agent: &str, budget: bool, as_json: bool) -> Outcome {
    let store = db.store(Access::Read)?;
    let compacted = latest(db, &store, agent)?;
    let breakdown = budget.then(|| Breakdown::of(&compacted));
    // With a transcript, the window is only the first of the messages the model received.
    let messages = conversation::messages(&compacted);
    let drift = Drift::of(db, &compacted);
    if as_json {
        let mut object = json!({
            "agent_id": agent,
            "compaction": compacted.report().compaction,
            "tokens": compacted.tokens(),
            "request_tokens": compacted.request_tokens(),
            "budget": compacted.budget(),
            "window": compacted.render(),
            "ledger_drift": drift.to_json(),
        });
        if let Some(messages) = &messages {
            merge(
                &mut object,
                json!({ "messages": conversation::to_json(messages),
                        "cache": conversation::cache_json(&compacted) }),
            );
        }
        if let Some(breakdown) = &breakdown {
            merge(&mut object, json!({ "breakdown": breakdown.to_json() }));
        }
        print_json(&object);
    } else if let Some(breakdown) = &breakdown {
        emit!("{}", breakdown.to_text(agent, &compacted));
    } else if let Some(messages) = &messages {
        emit!("{}", conversation::to_text(agent, &compacted, messages));
    } else {
        say!("{}", printable_lines(compacted.render()));
    }
    if !as_json {
        emit!("{}", drift.to_text());
    }
    Ok(Exit::Ok)
}

/// One field's share of the window.
struct FieldShare {
    field: String,
    class: &'static str,
    form: &'static str,
    tokens: usize,
}

/// Something that left the window, and how to get it back.
struct Departure {
    field: String,
    how: &'static str,
    pointer: Option<String>,
    detail: String,
}

/// Where a window's tokens go.
struct Breakdown {
    counter: String,
    counter_note: Option<String>,
    total: usize,
    /// The whole request's tokens, when the state has a transcript.
    request: Option<usize>,
    budget: usize,
    fields: Vec<FieldShare>,
    classes: Vec<(&'static str, usize)>,
    frame: usize,
    left: Vec<Departure>,
}

fn class_name(section: Section) -> &'static str {
    match section {
        Section::Protected => "protected",
        Section::Effects => "effects",
        Section::Derivable => "derivable",
        Section::Redundant => "redundant",
    }
}

fn form_name(form: &FormView<'_>) -> &'static str {
    match form {
        FormView::Verbatim { .. } => "verbatim",
        FormView::Spilled { .. } => "spilled",
        FormView::Summary { .. } => "summary",
        FormView::Evicted { .. } => "evicted",
        FormView::Tombstone => "tombstone",
        FormView::Effects(_) => "records",
        _ => "other",
    }
}

fn departure(field: &FieldView<'_>) -> Option<Departure> {
    let path = field.path.to_string();
    let (how, pointer, detail) = match field.form {
        FormView::Spilled { pointer } => (
            "spilled",
            Some(pointer.to_string()),
            "verbatim in the store".to_string(),
        ),
        FormView::Summary { source, origin, .. } => (
            "summarized",
            Some(source.to_string()),
            match origin {
                Some(origin) => format!("source in the store; re-acquire from {origin}"),
                None => "source in the store".to_string(),
            },
        ),
        FormView::Evicted { pointer } => (
            "evicted",
            Some(pointer.to_string()),
            "re-acquire from its pointer".to_string(),
        ),
        FormView::Tombstone => ("tombstoned", None, "not recoverable".to_string()),
        FormView::Effects(effects) => {
            if let Some((pointer, count, committed, not_started, unknown)) = effects.spilled() {
                (
                    "records spilled",
                    Some(pointer.to_string()),
                    format!(
                        "{count} records: {committed} committed, {not_started} not_started, \
                         {unknown} unknown"
                    ),
                )
            } else if let Some(pointer) = effects.payloads_spilled() {
                (
                    "payloads spilled",
                    Some(pointer.to_string()),
                    format!("payloads of {} records", effects.payloads_evicted),
                )
            } else if effects.payloads_evicted > 0 {
                (
                    "payloads evicted",
                    None,
                    format!(
                        "payloads of {} records, not recoverable",
                        effects.payloads_evicted
                    ),
                )
            } else {
                return None;
            }
        }
        _ => return None,
    };
    Some(Departure {
        field: path,
        how,
        pointer,
        detail,
    })
}

impl Breakdown {
    fn of(compacted: &AnyCheckpoint) -> Breakdown {
        let name = compacted.report().counter.clone();
        let (counter, counter_note) = match name.as_str() {
            "o200k_base" => (Tokenizer::O200kBase, None),
            "cl100k_base" => (Tokenizer::Cl100kBase, None),
            "heuristic" => (Tokenizer::Heuristic, None),
            other => (
                Tokenizer::Heuristic,
                Some(format!(
                    "per-field counts are estimates: the checkpoint was counted with `{other}`, \
                     which this tool does not have (using the 4-bytes-per-token heuristic)"
                )),
            ),
        };
        let mut fields: Vec<FieldShare> = compacted
            .fields()
            .map(|field| FieldShare {
                field: field.path.to_string(),
                class: class_name(field.section),
                form: form_name(&field.form),
                tokens: counter.count(&field.default_lines()),
            })
            .collect();
        // Largest first; ties in window order (a stable sort keeps it).
        fields.sort_by_key(|f| std::cmp::Reverse(f.tokens));
        let mut classes: Vec<(&'static str, usize)> = Vec::new();
        for share in &fields {
            match classes.iter_mut().find(|(class, _)| *class == share.class) {
                Some((_, tokens)) => *tokens += share.tokens,
                None => classes.push((share.class, share.tokens)),
            }
        }
        classes.sort_by_key(|c| std::cmp::Reverse(c.1));
        let in_fields: usize = fields.iter().map(|f| f.tokens).sum();
        Breakdown {
            counter: counter.name().to_string(),
            counter_note,
            total: compacted.tokens(),
            request: compacted.request_tokens(),
            budget: compacted.budget(),
            frame: compacted.tokens().saturating_sub(in_fields),
            fields,
            classes,
            left: compacted.fields().filter_map(|f| departure(&f)).collect(),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "counter": self.counter,
            "note": self.counter_note,
            "tokens": self.total,
            "request_tokens": self.request,
            "budget": self.budget,
            "frame_tokens": self.frame,
            "classes": self.classes.iter().map(|(class, tokens)| json!({
                "class": class, "tokens": tokens,
            })).collect::<Vec<_>>(),
            "fields": self.fields.iter().map(|f| json!({
                "field": f.field, "class": f.class, "form": f.form, "tokens": f.tokens,
            })).collect::<Vec<_>>(),
            "left_window": self.left.iter().map(|d| json!({
                "field": d.field, "how": d.how, "pointer": d.pointer, "detail": d.detail,
            })).collect::<Vec<_>>(),
        })
    }

    fn to_text(&self, agent: &str, compacted: &AnyCheckpoint) -> String {
        const WIDTH: usize = 30;
        let mut out = format!(
            "{}: compaction #{}, {} of {} tokens ({}), counted with {}\n",
            printable(agent),
            compacted.report().compaction,
            self.total,
            self.budget,
            percent(self.total, self.budget),
            self.counter
        );
        if let Some(request) = self.request {
            // The window block is the request's first message; the rest is the conversation.
            out.push_str(&format!(
                "the last request: {request} of {} tokens ({}), this window block included\n",
                self.budget,
                percent(request, self.budget)
            ));
        }
        if let Some(note) = &self.counter_note {
            out.push_str(&format!("note: {}\n", printable(note)));
        }
        let max = self.classes.first().map_or(0, |c| c.1).max(self.frame);
        let mut rows: Vec<Vec<String>> = self
            .classes
            .iter()
            .map(|(class, tokens)| {
                vec![
                    format!("  {class}"),
                    bar(*tokens, max, WIDTH),
                    tokens.to_string(),
                    percent(*tokens, self.total),
                ]
            })
            .collect();
        rows.push(vec![
            "  frame".into(),
            bar(self.frame, max, WIDTH),
            self.frame.to_string(),
            percent(self.frame, self.total),
        ]);
        out.push_str("\ntokens by class (frame: header, notice, section titles)\n");
        out.push_str(&table(&["  CLASS", "", "TOKENS", "SHARE"], &rows));
        let max = self.fields.first().map_or(0, |f| f.tokens);
        let rows: Vec<Vec<String>> = self
            .fields
            .iter()
            .map(|f| {
                vec![
                    format!("  {}", printable(&f.field)),
                    f.class.to_string(),
                    f.form.to_string(),
                    bar(f.tokens, max, WIDTH),
                    f.tokens.to_string(),
                    percent(f.tokens, self.total),
                ]
            })
            .collect();
        out.push_str("\ntokens by field, largest first\n");
        out.push_str(&table(
            &["  FIELD", "CLASS", "FORM", "", "TOKENS", "SHARE"],
            &rows,
        ));
        out.push_str("\nleft the window\n");
        if self.left.is_empty() {
            out.push_str("  nothing: every field is in the window verbatim\n");
        } else {
            let rows: Vec<Vec<String>> = self
                .left
                .iter()
                .map(|d| {
                    // Pointers carry values interpolated from the state: one line each.
                    vec![
                        format!("  {}", printable(&d.field)),
                        d.how.to_string(),
                        d.pointer.as_deref().map_or("-".into(), printable),
                        printable(&d.detail),
                    ]
                })
                .collect();
            out.push_str(&table(&["  FIELD", "HOW", "POINTER", "DETAIL"], &rows));
        }
        out
    }
}
