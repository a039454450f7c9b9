//! `resolve`: the verified bytes behind a `store://` pointer, or behind a short handle (`p4`)
//! as an agent's newest request shows it, whole or one part at a time (`paging.rs`).

use crate::backend::{AnyCheckpoint, Store};
use crate::backends;
use crate::fail::{Exit, Failure, Outcome};
use crate::inspect::latest;
use crate::output::{json_safe, print_json, printable_lines};
use crate::paging::{cut, Part, Window};
use crate::target::{Access, Database};
use compaction::transcript::Handle;
use compaction::{Pointer, StoreError};
use serde_json::{json, Map, Value};
use std::io::{IsTerminal, Write};

/// What `compaction resolve` was asked.
pub struct Request<'a> {
    /// A `store://sha256:` pointer or a handle (`p4`).
    pub text: &'a str,
    /// The agent whose newest checkpoint maps the handle (`--agent`).
    pub agent: Option<&'a str>,
    /// One part of the text instead of the whole (`--offset`, `--max-bytes`).
    pub part: Option<Part>,
}

/// What the text names.
enum Named {
    Pointer(Pointer),
    Handle(Handle),
}

/// A pointer as today (its parse error unchanged), else a handle, else a usage error.
fn named(text: &str) -> Result<Named, Failure> {
    if text.trim_start().starts_with("store://") {
        return Pointer::parse(text).map(Named::Pointer).map_err(|e| {
            Failure::new(Exit::Usage, e.to_string())
                .hint("copy the pointer from the window or from `compaction show --budget`")
        });
    }
    match (text.parse::<Handle>(), Pointer::parse(text)) {
        (Ok(handle), _) => Ok(Named::Handle(handle)),
        (Err(_), Ok(pointer)) => Ok(Named::Pointer(pointer)),
        (Err(_), Err(e)) => Err(Failure::new(Exit::Usage, e.to_string()).hint(
            "copy a store:// pointer from the window or from `compaction show --budget`, or a \
             handle (p4) from `compaction show DATABASE AGENT` with --agent AGENT",
        )),
    }
}

/// What was resolved: the full address, and, for an agent, its handle and the input messages
/// it holds when it is a user run's or a fold's stored span.
struct Resolved {
    pointer: Pointer,
    handle: Option<Handle>,
    agent: Option<String>,
    span: Option<(usize, usize)>,
}

/// The full address `named` stands for, looked up in `agent`'s newest checkpoint when given.
fn locate(
    db: &Database,
    store: &Store,
    named: Named,
    agent: Option<&str>,
) -> Result<Resolved, Failure> {
    let Some(agent) = agent else {
        return match named {
            Named::Pointer(pointer) => Ok(Resolved {
                pointer,
                handle: None,
                agent: None,
                span: None,
            }),
            Named::Handle(handle) => Err(Failure::new(
                Exit::Usage,
                format!("{handle} is a handle: it names a blob only for the agent whose request showed it"),
            )
            .hint(format!(
                "pass the agent: `compaction resolve DATABASE {handle} --agent AGENT` (the agents are in `compaction agents DATABASE`)"
            ))),
        };
    };
    let compacted = latest(db, store, agent)?;
    let table = compacted.handles();
    let (pointer, handle) = match named {
        Named::Pointer(pointer) => {
            let handle = table.and_then(|t| t.handle(&pointer));
            (pointer, handle)
        }
        Named::Handle(handle) => {
            let Some(table) = table else {
                return Err(Failure::new(
                    Exit::NotFound,
                    format!("agent `{agent}` has no transcript, so its requests show no handle such as {handle}"),
                )
                .hint("resolve a store:// pointer from `compaction show --budget DATABASE AGENT` instead"));
            };
            match table.pointer(handle) {
                Some(pointer) => (pointer.clone(), Some(handle)),
                None => {
                    return Err(Failure::new(
                        Exit::NotFound,
                        format!(
                            "the newest request of agent `{agent}` shows no handle {handle} (it shows {})",
                            shown(table.iter().map(|(h, _)| h))
                        ),
                    )
                    .hint("handles are each agent's own; `compaction show DATABASE AGENT` prints the ones its request shows"))
                }
            }
        }
    };
    Ok(Resolved {
        span: span_of(&compacted, &pointer),
        pointer,
        handle,
        agent: Some(agent.to_owned()),
    })
}

/// `p1, p4` (the first few), or `none`.
fn shown(handles: impl Iterator<Item = Handle>) -> String {
    let all: Vec<String> = handles.map(|h| h.to_string()).collect();
    match all.len() {
        0 => "none".into(),
        n if n > 12 => format!("{}, … ({n} in all)", all[..12].join(", ")),
        _ => all.join(", "),
    }
}

/// The input messages `first..=last` a stored span holds, when `pointer` is one.
fn span_of(compacted: &AnyCheckpoint, pointer: &Pointer) -> Option<(usize, usize)> {
    compacted
        .spans()
        .into_iter()
        .find(|(p, _)| p == pointer)
        .map(|(_, (first, end))| (first, end.saturating_sub(1)))
}

/// The verified bytes behind `pointer`.
fn read(db: &Database, store: &Store, pointer: &Pointer) -> Result<Vec<u8>, Failure> {
    match store.get(&pointer.hash()) {
        Ok(bytes) => Ok(bytes),
        Err(StoreError::NotFound { .. }) => Err(Failure::new(
            Exit::NotFound,
            format!("no blob for {pointer} in `{}`", db.name()),
        )
        .hint("it was never stored here, or removed by gc; `compaction verify` lists pointers that do not resolve")),
        Err(StoreError::Integrity { .. }) => Err(Failure::new(
            Exit::Problems,
            format!(
                "the blob for {pointer} in `{}` fails verification: its bytes do not hash to its address",
                db.name()
            ),
        )
        .hint("the stored value was altered or corrupted; restore the file from a backup")),
        Err(other) => Err(backends::failure(&other)),
    }
}

/// `compaction resolve DB POINTER|HANDLE [--agent A] [--offset N] [--max-bytes M]`.
pub fn resolve(db: &Database, request: &Request<'_>, as_json: bool) -> Outcome {
    let named = named(request.text)?;
    let store = db.store(Access::Read)?;
    let resolved = locate(db, &store, named, request.agent)?;
    let bytes = read(db, &store, &resolved.pointer)?;
    match request.part {
        Some(part) => print_part(&resolved, &bytes, part, as_json)?,
        None => print_whole(&resolved, &bytes, as_json)?,
    }
    Ok(Exit::Ok)
}

/// The fields every `--json` answer starts with.
fn head(resolved: &Resolved, size: usize) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("pointer".into(), resolved.pointer.to_string().into());
    object.insert("size".into(), size.into());
    object.insert("verified".into(), true.into());
    if let Some(agent) = &resolved.agent {
        object.insert("agent_id".into(), agent.clone().into());
        object.insert("handle".into(), resolved.handle.map(String::from).into());
    }
    if let Some((first, last)) = resolved.span {
        object.insert("span".into(), json!({ "first": first, "last": last }));
    }
    object
}

/// A note on stderr for a stored span (what it holds), so stdout stays the bytes alone.
fn span_note(resolved: &Resolved) {
    if let (Some((first, last)), Some(handle)) = (resolved.span, resolved.handle) {
        warn!(
            "note: {handle} is the stored span of input messages #{first}..#{last} (a user run or a fold); the model reads one with resolve_pointer(\"{handle}\", index=N)"
        );
    }
}

/// The whole content: pretty JSON when it is JSON, text on a terminal escaped, raw bytes into
/// a pipe (unchanged from before handles).
fn print_whole(resolved: &Resolved, bytes: &[u8], as_json: bool) -> Result<(), Failure> {
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    if as_json {
        let mut object = head(resolved, bytes.len());
        let (key, value) = match (&parsed, std::str::from_utf8(bytes)) {
            (Some(value), _) => ("json", value.clone()),
            (None, Ok(text)) => ("text", Value::from(text)),
            (None, Err(_)) => ("hex", Value::from(hex(bytes))),
        };
        object.insert(key.into(), value);
        print_json(&Value::Object(object));
        return Ok(());
    }
    span_note(resolved);
    match parsed {
        Some(value) => write_out(
            format!(
                "{}\n",
                json_safe(&serde_json::to_string_pretty(&value).unwrap_or_default())
            )
            .as_bytes(),
        ),
        None => write_text(bytes),
    }
}

/// One part of the text, cut as the pointer tool cuts it; where the next starts on stderr
/// (text) or in `next_offset` (JSON).
fn print_part(resolved: &Resolved, bytes: &[u8], part: Part, as_json: bool) -> Result<(), Failure> {
    let what = resolved
        .handle
        .map_or_else(|| resolved.pointer.to_string(), |h| h.to_string());
    let text = std::str::from_utf8(bytes).map_err(|_| {
        Failure::new(
            Exit::Usage,
            format!(
                "{what} holds {} bytes of binary data, not text: it has no parts",
                bytes.len()
            ),
        )
        .hint("resolve it whole, without --offset and --max-bytes")
    })?;
    let window = cut(text, part).map_err(|_| {
        Failure::new(
            Exit::Usage,
            format!(
                "offset {} is past the end of {what} ({} bytes)",
                part.offset,
                text.len()
            ),
        )
        .hint("the parts start at 0; each part says where the next one starts")
    })?;
    let Window { start, end, total } = window;
    if as_json {
        let mut object = head(resolved, total);
        object.insert("start".into(), start.into());
        object.insert("end".into(), end.into());
        object.insert("next_offset".into(), window.next_offset().into());
        object.insert("text".into(), text[start..end].into());
        print_json(&Value::Object(object));
        return Ok(());
    }
    span_note(resolved);
    write_text(&bytes[start..end])?;
    match window.next_offset() {
        Some(next) => {
            warn!("bytes {start}..{end} of {total} of {what}; the next part: --offset {next}")
        }
        None => warn!("bytes {start}..{end} of {total} of {what}: the end"),
    }
    Ok(())
}

/// Text on a terminal with every control and bidi character escaped; into a pipe or a file,
/// the bytes as they are (so parts written one after another join back exactly).
fn write_text(bytes: &[u8]) -> Result<(), Failure> {
    if std::io::stdout().is_terminal() {
        let shown = printable_lines(&String::from_utf8_lossy(bytes));
        write_out(format!("{shown}\n").as_bytes())
    } else {
        write_out(bytes)
    }
}

fn write_out(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::new(Exit::Problems, format!("writing to stdout: {e}")))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
