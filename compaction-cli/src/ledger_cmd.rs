//! `effects`, `history` and `reconcile`: the effect ledger, read and settled by an operator.

use crate::backend::{Ledger, Refused};
use crate::cli::{SettleArg, StatusArg};
use crate::fail::{Exit, Failure, Outcome};
use crate::output::{millis, print_json, printable, table, utc};
use crate::refusals::Refusals;
use crate::target::{Access, Database};
use compaction::{Effect, EffectError, EffectStatus};
use serde_json::json;
use std::time::{Duration, SystemTime};

fn status_of(arg: StatusArg) -> EffectStatus {
    match arg {
        StatusArg::NotStarted => EffectStatus::NotStarted,
        StatusArg::Committed => EffectStatus::Committed,
        StatusArg::Unknown => EffectStatus::Unknown,
    }
}

fn effect_json(scope: &str, effect: &Effect) -> serde_json::Value {
    json!({
        "scope": scope,
        "key": effect.idempotency_key,
        "status": effect.status.as_str(),
        "action": effect.action,
        "target": effect.target,
        "depends_on": effect.depends_on,
        "payload": effect.payload,
    })
}

/// How a scope reads in a table: the default scope `""` has no name.
pub fn scope_label(scope: &str) -> String {
    if scope.is_empty() {
        "(default)".into()
    } else {
        scope.to_string()
    }
}

/// Every effect as `(scope, effect)`: of one scope, or of every scope (scopes by name, records
/// in record order within each).
fn scoped_effects(
    ledger: &Ledger,
    scope: Option<&str>,
    status: Option<EffectStatus>,
) -> Result<Vec<(String, Effect)>, Failure> {
    let all: Vec<(String, Effect)> = match scope {
        Some(scope) => ledger
            .effects(scope)?
            .into_iter()
            .map(|e| (scope.to_string(), e))
            .collect(),
        None => ledger
            .load_all()?
            .into_iter()
            .flat_map(|(scope, log)| {
                log.iter()
                    .map(|e| (scope.clone(), e.clone()))
                    .collect::<Vec<_>>()
            })
            .collect(),
    };
    Ok(all
        .into_iter()
        .filter(|(_, e)| status.is_none_or(|s| e.status == s))
        .collect())
}

/// `compaction effects DB [--status S] [--scope S]`.
pub fn effects(
    db: &Database,
    status: Option<StatusArg>,
    scope: Option<&str>,
    as_json: bool,
) -> Outcome {
    let ledger = db.ledger(Access::Read)?;
    let effects = scoped_effects(&ledger, scope, status.map(status_of))?;
    if as_json {
        let effects: Vec<_> = effects.iter().map(|(s, e)| effect_json(s, e)).collect();
        print_json(&json!({ "effects": effects }));
        return Ok(Exit::Ok);
    }
    if effects.is_empty() {
        match status {
            Some(status) => say!("no {} effects", status_of(status)),
            None => say!("no effects"),
        }
        return Ok(Exit::Ok);
    }
    let rows: Vec<Vec<String>> = effects
        .iter()
        .map(|(scope, e)| {
            vec![
                printable(&scope_label(scope)),
                printable(&e.idempotency_key),
                e.status.to_string(),
                printable(&e.action),
                printable(&e.target),
                printable(&e.depends_on.join(",")),
            ]
        })
        .collect();
    emit!(
        "{}",
        table(
            &["SCOPE", "KEY", "STATUS", "ACTION", "TARGET", "DEPENDS ON"],
            &rows
        )
    );
    if effects
        .iter()
        .any(|(_, e)| e.status == EffectStatus::Unknown)
    {
        say!(
            "\nunknown: nobody knows whether it happened. Check the outside world, then \
             `compaction reconcile DATABASE KEY --to committed|not-started --note \"...\"`"
        );
    }
    Ok(Exit::Ok)
}

/// The scope holding `key`: the one given, or the only one that has it.
fn scope_of(
    db: &Database,
    ledger: &Ledger,
    key: &str,
    scope: Option<&str>,
) -> Result<String, Failure> {
    let not_found = || {
        Failure::new(
            Exit::NotFound,
            format!("no effect `{key}` in `{}`", db.name()),
        )
        .hint("list the keys with `compaction effects DATABASE`")
    };
    if let Some(scope) = scope {
        return match ledger.get(scope, key) {
            Ok(Some(_)) => Ok(scope.to_string()),
            Ok(None) => Err(not_found()),
            Err(e) => Err(e),
        };
    }
    let scopes: Vec<String> = scoped_effects(ledger, None, None)?
        .into_iter()
        .filter(|(_, e)| e.idempotency_key == key)
        .map(|(scope, _)| scope)
        .collect();
    match scopes.as_slice() {
        [] => Err(not_found()),
        [one] => Ok(one.clone()),
        several => Err(Failure::new(
            Exit::Usage,
            format!(
                "effect `{key}` is in several scopes: {}",
                several
                    .iter()
                    .map(|s| scope_label(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .hint("say which with --scope SCOPE")),
    }
}

/// `compaction history DB KEY [--scope S]`.
pub fn history(db: &Database, key: &str, scope: Option<&str>, as_json: bool) -> Outcome {
    let ledger = db.ledger(Access::Read)?;
    let scope = scope_of(db, &ledger, key, scope)?;
    let effect = ledger.get(&scope, key)?.ok_or_else(|| {
        Failure::new(
            Exit::NotFound,
            format!("effect `{key}` was removed meanwhile"),
        )
    })?;
    let events = ledger.history(&scope, key)?;
    let refusals = Refusals::find(db, &scope, key);
    if as_json {
        print_json(&json!({
            "effect": effect_json(&scope, &effect),
            "refused_claims": refusals.to_json(),
            "events": events.iter().map(|a| {
                let t = &a.transition;
                json!({
                    "op": t.op,
                    "from": t.from.map(EffectStatus::as_str),
                    "to": t.to.as_str(),
                    "at": utc(t.at),
                    "at_ms": millis(t.at),
                    "pid": t.pid,
                    "actor": a.actor,
                    "note": a.note,
                })
            }).collect::<Vec<_>>(),
        }));
        return Ok(Exit::Ok);
    }
    let scope_text = if scope.is_empty() {
        "default scope".to_string()
    } else {
        format!("scope {scope}")
    };
    say!(
        "effect {} ({}): {}, {} {}",
        printable(key),
        printable(&scope_text),
        effect.status,
        printable(&effect.action),
        printable(&effect.target)
    );
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|a| {
            let t = &a.transition;
            let mut why = match (&a.actor, &a.note) {
                (Some(actor), Some(note)) => {
                    format!("by {}: {} ", printable(actor), printable(note))
                }
                (Some(actor), None) => format!("by {} ", printable(actor)),
                (None, Some(note)) => format!("{} ", printable(note)),
                (None, None) => String::new(),
            };
            why.push_str(&format!("(pid {})", t.pid));
            vec![
                utc(t.at),
                printable(&t.op),
                t.from.map_or("-".into(), |s| s.to_string()),
                t.to.to_string(),
                why,
            ]
        })
        .collect();
    emit!(
        "{}",
        table(&["AT", "OP", "FROM", "TO", "WHO AND WHY"], &rows)
    );
    emit!("{}", refusals.to_text());
    Ok(Exit::Ok)
}

/// What `reconcile` was asked to do.
pub struct Settlement<'a> {
    /// The idempotency key.
    pub key: &'a str,
    /// Its scope, when given.
    pub scope: Option<&'a str>,
    /// The status the outside world shows.
    pub to: SettleArg,
    /// What the operator checked.
    pub note: &'a str,
    /// Who.
    pub by: Option<&'a str>,
    /// Overwrite a status that is not unknown, or settle a claim more recent than
    /// `min_claim_age`.
    pub force: bool,
    /// A claim younger than this may still be running: settling it needs `force`.
    pub min_claim_age: Duration,
}

/// `compaction reconcile DB KEY --to S --note N [--by WHO] [--scope S] [--force]
/// [--min-claim-age D]`.
pub fn reconcile(db: &Database, request: &Settlement<'_>) -> Outcome {
    let key = request.key;
    let by = request.by.filter(|b| !b.trim().is_empty()).ok_or_else(|| {
        Failure::new(Exit::Usage, "who is settling this effect? $USER is not set")
            .hint("say who you are with --by NAME")
    })?;
    if request.note.trim().is_empty() {
        return Err(Failure::new(Exit::Usage, "the note is empty")
            .hint("say what you checked, e.g. --note \"charge ch_123 is in the PSP dashboard\""));
    }
    let to = match request.to {
        SettleArg::Committed => EffectStatus::Committed,
        SettleArg::NotStarted => EffectStatus::NotStarted,
    };
    let ledger = db.ledger(Access::Write)?;
    let scope = scope_of(db, &ledger, key, request.scope)?;
    let current = ledger.get(&scope, key)?;
    if current.as_ref().map(|e| e.status) == Some(EffectStatus::Unknown) {
        check_claim(&ledger, &scope, key, request)?;
    }
    let mut settlement = compaction::Settlement::of_unknown(to, by, request.note);
    if request.force {
        settlement = settlement.forced();
    }
    match ledger.settle(&scope, key, &settlement) {
        Ok(()) => {}
        Err(Refused::Guard(EffectError::NotInFlight { status, .. })) => {
            return Err(refusal(key, status))
        }
        Err(Refused::Guard(e @ EffectError::NotFound { .. })) => {
            return Err(Failure::new(Exit::NotFound, e.to_string()))
        }
        Err(Refused::Guard(e)) => return Err(Failure::new(Exit::Problems, e.to_string())),
        Err(Refused::Failed(failure)) => return Err(failure),
    }
    let before = current.map_or("-".to_string(), |e| e.status.to_string());
    say!(
        "effect {}: {before} -> {to} (by {}: {})",
        printable(key),
        printable(by),
        printable(request.note)
    );
    Ok(Exit::Ok)
}

/// An in-flight key: always a warning naming the claim (when, which process); a claim more
/// recent than `--min-claim-age` is refused without `--force`, since the agent that made it
/// may still be running the effect. The claim is the last event that moved the key to
/// `unknown`, read from its history.
fn check_claim(
    ledger: &Ledger,
    scope: &str,
    key: &str,
    request: &Settlement<'_>,
) -> Result<(), Failure> {
    let history = ledger.history(scope, key)?;
    let claim = history
        .iter()
        .rev()
        .map(|a| &a.transition)
        .find(|t| t.to == EffectStatus::Unknown);
    let Some(claim) = claim else {
        return Ok(()); // no event explains the status: `verify` reports it; settling repairs it
    };
    let age = SystemTime::now()
        .duration_since(claim.at)
        .unwrap_or(Duration::ZERO);
    let shown_key = printable(key);
    warn!(
        "warning: effect {shown_key} is in flight: claimed ({}) at {} by pid {}, {} ago; if that \
         process still runs the effect, its outcome may still change",
        claim.op,
        utc(claim.at),
        claim.pid,
        seconds(age)
    );
    if age < request.min_claim_age && !request.force {
        return Err(Failure::new(
            Exit::Problems,
            format!(
                "refusing to reconcile effect `{shown_key}`: it was claimed {} ago, less than \
                 --min-claim-age ({}): the agent may still be running it",
                seconds(age),
                seconds(request.min_claim_age)
            ),
        )
        .hint(format!(
            "make sure process {} (on the machine that claimed it) is gone, then wait or \
             repeat with --force",
            claim.pid
        )));
    }
    Ok(())
}

/// `42s`, `13m 5s`, `2h 3m`.
fn seconds(duration: Duration) -> String {
    let s = duration.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 if s.is_multiple_of(60) => format!("{}m", s / 60),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, s % 3600 / 60),
    }
}

fn refusal(key: &str, current: EffectStatus) -> Failure {
    let why = match current {
        EffectStatus::Committed => "it is committed: the ledger already knows it happened",
        _ => "it is not_started: it has not run, so there is no outcome to settle",
    };
    Failure::new(
        Exit::Problems,
        format!(
            "refusing to reconcile effect `{}`: {why}; reconcile settles only an unknown \
             outcome",
            printable(key)
        ),
    )
    .hint(
        "if you are sure the ledger is wrong, repeat with --force (the note is kept in its \
         history)",
    )
}
