//! The forms a plan starts an effect log's slot from (its pinned records, its movable records
//! spilled as one block, its payloads spilled), remembered per thread while the log is
//! unchanged. A session's log holds every effect it ever ran and is planned at every request:
//! serializing and hashing it again each time was the largest cost that grew with a session's
//! length (BENCHMARKS.md, "Time per request"). A log is recognized by its records' allocation,
//! through a weak handle that a change to the log invalidates (`EffectLog::is_log`), never by
//! its length or its keys, so a changed log is always planned from its records. The longest
//! limit a slot's line with every record kept was counted over is remembered the same way, by
//! the compactor whose counter counted it ([`KeptRecordsOver`]).

use crate::effects::record::{Effect, EffectLog};
use crate::plan::slot::{spill_payloads, spill_records, Movable, Payloads};
use crate::store::Pointer;
use crate::window::IndexedRecord;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError, Weak};

/// Logs remembered per thread: a state has few effect fields, and a thread plans few states.
const REMEMBERED: usize = 4;

/// Smaller logs are planned from their records every time: remembering them saves nothing.
const WORTH_REMEMBERING: usize = 64;

/// An effect log's starting forms.
#[derive(Debug, Clone)]
pub(crate) struct EffectForms {
    /// Live records of a non-idempotent ledger: obligations, they never move.
    pub(crate) pinned: Vec<IndexedRecord>,
    /// The other records, spilled as one block.
    pub(crate) movable: Movable,
    /// Every payload, spilled as one block.
    pub(crate) payloads: Payloads,
}

type Remembered = VecDeque<(Weak<Vec<Effect>>, bool, EffectForms)>;

thread_local! {
    static FORMS: RefCell<Remembered> = const { RefCell::new(VecDeque::new()) };
}

/// The starting forms of `log` in a field whose ledger is `idempotent` (or not).
pub(crate) fn of(log: &EffectLog, idempotent: bool) -> EffectForms {
    if log.len() < WORTH_REMEMBERING {
        return compute(log.effects(), idempotent);
    }
    let found = FORMS.with(|forms| {
        forms
            .borrow()
            .iter()
            .find(|(handle, same, _)| *same == idempotent && log.is_log(handle))
            .map(|(_, _, forms)| forms.clone())
    });
    if let Some(forms) = found {
        return forms;
    }
    let computed = compute(log.effects(), idempotent);
    FORMS.with(|forms| {
        let mut forms = forms.borrow_mut();
        // A handle whose log changed or went can never match again: drop it first.
        forms.retain(|(handle, _, _)| handle.strong_count() > 0);
        forms.push_front((log.downgrade(), idempotent, computed.clone()));
        forms.truncate(REMEMBERED);
    });
    computed
}

/// What a slot's line with every record of its log kept depends on besides the log: so two
/// requests that plan the same log in the same field render the same line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordsLine {
    pub(crate) path: String,
    pub(crate) idempotent: bool,
    /// The payloads' block while the records are tried (spilled, or none; a slot whose
    /// payloads are kept is not remembered).
    pub(crate) payloads: Option<Pointer>,
}

/// Lines found longer than a limit: the log, its line, and the largest limit it was over.
type Over = VecDeque<(Weak<Vec<Effect>>, RecordsLine, usize)>;

/// The largest limits that slots' lines with every record kept were counted over, while their
/// logs are unchanged. Owned by the compactor whose counter counted them: another counter may
/// count the same line shorter, so these limits hold for one counter only.
#[derive(Debug, Default)]
pub(crate) struct KeptRecordsOver(Mutex<Over>);

impl KeptRecordsOver {
    /// The largest limit that `line` with every record of `log` kept was counted over while the
    /// log was unchanged. Trying to keep the records at any limit up to it fails again:
    /// planning a long log at every request parsed, rendered and counted its records only to
    /// spill them again (BENCHMARKS.md, "Time per request").
    pub(crate) fn get(&self, log: &EffectLog, line: &RecordsLine) -> Option<usize> {
        if log.len() < WORTH_REMEMBERING {
            return None;
        }
        let over = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        over.iter()
            .find(|(handle, seen, _)| seen == line && log.is_log(handle))
            .map(|(_, _, limit)| *limit)
    }

    /// Forgets every limit (tests: to see what the memo saves).
    #[cfg(test)]
    pub(crate) fn forget(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Remembers that `line` with every record of `log` kept is longer than `limit` tokens.
    pub(crate) fn note(&self, log: &EffectLog, line: RecordsLine, limit: usize) {
        if log.len() < WORTH_REMEMBERING {
            return;
        }
        let mut over = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let known = over
            .iter()
            .find(|(handle, seen, _)| *seen == line && log.is_log(handle))
            .map_or(0, |(_, _, known)| *known);
        // The same field's line of a log that changed, or of one that went, never matches again.
        over.retain(|(handle, seen, _)| handle.strong_count() > 0 && *seen != line);
        over.push_front((log.downgrade(), line, known.max(limit)));
        over.truncate(REMEMBERED);
    }
}

fn compute(effects: &[Effect], idempotent: bool) -> EffectForms {
    let pins = |e: &Effect| !idempotent && e.status.is_live();
    let pinned = effects
        .iter()
        .enumerate()
        .filter(|(_, e)| pins(e))
        .map(|(index, e)| IndexedRecord {
            index,
            record: e.record(),
        })
        .collect();
    EffectForms {
        pinned,
        movable: spill_records(effects.iter().enumerate().filter(|(_, e)| !pins(e))),
        payloads: spill_payloads(effects),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::record::EffectStatus;

    fn long_log() -> EffectLog {
        let mut log = EffectLog::new();
        for i in 0..100 {
            log.record(Effect::new("deploy", "svc", format!("k{i}")))
                .unwrap();
        }
        log
    }

    /// What the forms say, to compare a remembered one with one planned afresh.
    fn shape(forms: &EffectForms) -> (Vec<usize>, String, String) {
        let movable = match &forms.movable {
            Movable::Spilled { bytes, summary } => {
                format!("{}:{:?}", String::from_utf8_lossy(bytes), summary)
            }
            other => format!("{other:?}"),
        };
        let pinned = forms.pinned.iter().map(|r| r.index).collect();
        (pinned, movable, format!("{:?}", forms.payloads))
    }

    #[test]
    fn a_log_changed_in_place_or_in_a_clone_is_planned_from_its_records() {
        let mut log = long_log();
        let first = of(&log, false);
        assert_eq!(first.pinned.len(), 100, "not_started records are pinned");
        // Unchanged, and a clone (the same records): the remembered forms, equal to fresh ones.
        assert_eq!(
            shape(&of(&log, false)),
            shape(&compute(log.effects(), false))
        );
        let clone = log.clone();
        assert_eq!(shape(&of(&clone, false)), shape(&first));
        // Changed while a clone shares the records (copied on write).
        log.begin("k3").unwrap();
        log.commit("k3").unwrap();
        let changed = of(&log, false);
        assert_eq!(changed.pinned.len(), 99);
        assert_eq!(shape(&changed), shape(&compute(log.effects(), false)));
        assert_eq!(
            shape(&of(&clone, false)),
            shape(&first),
            "the clone did not change"
        );
        // Changed with no clone left (moved on write, not copied): still planned afresh.
        drop(clone);
        log.begin("k4").unwrap();
        log.commit("k4").unwrap();
        let again = of(&log, false);
        assert_eq!(again.pinned.len(), 98);
        assert_eq!(log.status("k4"), Some(EffectStatus::Committed));
        assert_eq!(shape(&again), shape(&compute(log.effects(), false)));
        // The same log in an idempotent field: its own forms.
        assert!(of(&log, true).pinned.is_empty());
    }

    #[test]
    fn a_log_rebuilt_with_the_same_length_is_not_mistaken_for_the_old_one() {
        let log = long_log();
        let before = of(&log, false);
        let mut records: Vec<Effect> = log.effects().to_vec();
        records[7].status = EffectStatus::Committed;
        drop(log);
        let rebuilt = EffectLog::from_effects(records).unwrap();
        let after = of(&rebuilt, false);
        assert_eq!(before.pinned.len(), 100);
        assert_eq!(after.pinned.len(), 99);
    }
}
