//! `effects`, `history` and `reconcile`: the effect ledger, read and settled by an operator.

use crate::cli::{SettleArg, StatusArg};
use crate::fail::{Exit, Failure, Outcome};
use crate::output::{millis, print_json, table, utc};
use crate::target::{Access, Database};
use compaction::{Effect, EffectStatus};
use serde_json::json;

fn status_of(arg: StatusArg) -> EffectStatus {
    match arg {
        StatusArg::NotStarted => EffectStatus::NotStarted,
        StatusArg::Committed => EffectStatus::Committed,
        StatusArg::Unknown => EffectStatus::Unknown,
    }
}

fn effect_json(effect: &Effect) -> serde_json::Value {
    json!({
        "key": effect.idempotency_key,
        "status": effect.status.as_str(),
        "action": effect.action,
        "target": effect.target,
        "depends_on": effect.depends_on,
        "payload": effect.payload,
    })
}

/// `compaction effects DB [--status S] [--scope S]`.
pub fn effects(
    db: &Database,
    status: Option<StatusArg>,
    scope: Option<&str>,
    as_json: bool,
) -> Outcome {
    let ledger = db.ledger(Access::Read)?;
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        return Err(Failure::new(
            Exit::Usage,
            format!("`--scope {scope}`: this ledger has no effect scopes yet"),
        )
        .hint("leave out --scope: every effect is in the default scope"));
    }
    let effects = match status {
        Some(status) => ledger.list(status_of(status)),
        None => ledger.effects(),
    }
    .map_err(|e| Failure::ledger(&e))?;
    if as_json {
        print_json(&json!({ "effects": effects.iter().map(effect_json).collect::<Vec<_>>() }));
        return Ok(Exit::Ok);
    }
    if effects.is_empty() {
        match status {
            Some(status) => println!("no {} effects", status_of(status)),
            None => println!("no effects"),
        }
        return Ok(Exit::Ok);
    }
    let rows: Vec<Vec<String>> = effects
        .iter()
        .map(|e| {
            vec![
                e.idempotency_key.clone(),
                e.status.to_string(),
                e.action.clone(),
                e.target.clone(),
                e.depends_on.join(","),
            ]
        })
        .collect();
    print!(
        "{}",
        table(&["KEY", "STATUS", "ACTION", "TARGET", "DEPENDS ON"], &rows)
    );
    if effects.iter().any(|e| e.status == EffectStatus::Unknown) {
        println!(
            "\nunknown: the outcome is not known; check the outside world, then \
             `compaction reconcile DATABASE KEY --to committed|not-started --note \"...\"`"
        );
    }
    Ok(Exit::Ok)
}

fn no_such_key(db: &Database, key: &str) -> Failure {
    Failure::new(
        Exit::NotFound,
        format!("no effect `{key}` in `{}`", db.path().display()),
    )
    .hint("list the keys with `compaction effects DATABASE`")
}

/// `compaction history DB KEY`.
pub fn history(db: &Database, key: &str, as_json: bool) -> Outcome {
    let ledger = db.ledger(Access::Read)?;
    let effect = ledger
        .get(key)
        .map_err(|e| Failure::ledger(&e))?
        .ok_or_else(|| no_such_key(db, key))?;
    let events = ledger.history(key).map_err(|e| Failure::ledger(&e))?;
    if as_json {
        print_json(&json!({
            "effect": effect_json(&effect),
            "events": events.iter().map(|t| json!({
                "op": t.op,
                "from": t.from.map(EffectStatus::as_str),
                "to": t.to.as_str(),
                "at": utc(t.at),
                "at_ms": millis(t.at),
                "pid": t.pid,
            })).collect::<Vec<_>>(),
        }));
        return Ok(Exit::Ok);
    }
    println!(
        "effect {key}: {} ({} {})",
        effect.status, effect.action, effect.target
    );
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|t| {
            vec![
                utc(t.at),
                t.op.clone(),
                t.from.map_or("-".into(), |s| s.to_string()),
                t.to.to_string(),
                format!("pid {}", t.pid),
            ]
        })
        .collect();
    print!("{}", table(&["AT", "OP", "FROM", "TO", "BY"], &rows));
    Ok(Exit::Ok)
}

/// `compaction reconcile DB KEY --to S --note N [--by WHO] [--force]`.
pub fn reconcile(
    db: &Database,
    key: &str,
    to: SettleArg,
    note: &str,
    by: Option<&str>,
    force: bool,
) -> Outcome {
    let by = by.filter(|b| !b.trim().is_empty()).ok_or_else(|| {
        Failure::new(Exit::Usage, "who is settling this effect? $USER is not set")
            .hint("say who you are with --by NAME")
    })?;
    if note.trim().is_empty() {
        return Err(Failure::new(Exit::Usage, "the note is empty")
            .hint("say what you checked, e.g. --note \"charge ch_123 is in the PSP dashboard\""));
    }
    let to = match to {
        SettleArg::Committed => EffectStatus::Committed,
        SettleArg::NotStarted => EffectStatus::NotStarted,
    };
    let ledger = db.ledger(Access::Write)?;
    let current = ledger
        .status(key)
        .map_err(|e| Failure::ledger(&e))?
        .ok_or_else(|| no_such_key(db, key))?;
    if current != EffectStatus::Unknown && !force {
        return Err(refusal(key, current));
    }
    ledger.reconcile(key, to).map_err(|e| Failure::ledger(&e))?;
    println!("effect {key}: {current} -> {to} (by {by}: {note})");
    Ok(Exit::Ok)
}

fn refusal(key: &str, current: EffectStatus) -> Failure {
    let why = match current {
        EffectStatus::Committed => "it is committed: the ledger already knows it happened",
        _ => "it is not_started: it has not run, so there is no outcome to settle",
    };
    Failure::new(
        Exit::Problems,
        format!("refusing to reconcile effect `{key}`: {why}; reconcile settles only an unknown outcome"),
    )
    .hint("if you are sure the ledger is wrong, repeat with --force (the note is kept in its history)")
}
