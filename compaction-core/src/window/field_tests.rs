//! Which state updates send an effect ledger as its new and changed records
//! (`Entry::records_changed_since`): only a ledger shown with every record in the window, its
//! earlier records at their places and its payloads as shown; anything else goes whole.

use crate::effects::record::{Effect, EffectStatus};
use crate::store::Pointer;
use crate::window::field::{Entry, Form, IndexedRecord, KeptPayload, Section, SpilledRecords};

fn record(index: usize, key: &str, status: EffectStatus) -> IndexedRecord {
    IndexedRecord {
        index,
        record: Effect::new("write_file", "repo://a", key).with_status(status),
    }
}

fn ledger(records: Vec<IndexedRecord>, payloads: Vec<KeptPayload>) -> Entry {
    Entry {
        path: "writes".into(),
        section: Section::Effects,
        form: Form::Effects {
            idempotent: false,
            total: records.len(),
            records,
            spilled: None,
            payloads,
            payloads_evicted: 0,
            payloads_spilled: None,
        },
    }
}

fn payload(index: usize, key: &str, value: u32) -> KeptPayload {
    KeptPayload {
        index,
        key: key.into(),
        value: value.into(),
    }
}

fn changed_keys(now: &Entry, before: &Entry) -> Option<(Vec<String>, usize, usize)> {
    let (entry, unchanged) = now.records_changed_since(before)?;
    let Form::Effects {
        records, payloads, ..
    } = &entry.form
    else {
        panic!("an effects entry");
    };
    let keys = records.iter().map(|r| r.record.idempotency_key.clone());
    Some((keys.collect(), unchanged, payloads.len()))
}

#[test]
fn only_new_and_changed_records_of_a_ledger_in_the_window() {
    use EffectStatus::{Committed, NotStarted};
    let before = ledger(
        vec![record(0, "a", Committed), record(1, "b", NotStarted)],
        vec![payload(0, "a", 1)],
    );
    let now = ledger(
        vec![
            record(0, "a", Committed),
            record(1, "b", Committed),
            record(2, "c", NotStarted),
        ],
        vec![payload(0, "a", 1), payload(2, "c", 3)],
    );
    assert_eq!(
        changed_keys(&now, &before),
        Some((vec!["b".into(), "c".into()], 1, 1))
    );
}

#[test]
fn anything_else_is_sent_whole() {
    use EffectStatus::{Committed, NotStarted};
    let before = ledger(
        vec![record(0, "a", Committed), record(1, "b", NotStarted)],
        vec![payload(0, "a", 1)],
    );
    let grown = |extra: Vec<IndexedRecord>| {
        let mut records = vec![record(0, "a", Committed), record(1, "b", NotStarted)];
        records.extend(extra);
        records
    };
    // Nothing stands as shown: whole.
    let all_changed = ledger(
        vec![record(0, "a", NotStarted), record(1, "b", Committed)],
        vec![payload(0, "a", 1)],
    );
    assert_eq!(changed_keys(&all_changed, &before), None);
    // A key at another position, and a shorter ledger.
    let moved = ledger(
        vec![record(0, "b", NotStarted), record(1, "a", Committed)],
        vec![payload(1, "a", 1)],
    );
    assert_eq!(changed_keys(&moved, &before), None);
    let shorter = ledger(vec![record(0, "a", Committed)], vec![payload(0, "a", 1)]);
    assert_eq!(changed_keys(&shorter, &before), None);
    // New payloads after the ones shown are sent (a new record's, or one filled in for the
    // last record shown); one filled in before a payload shown earlier sends the ledger whole.
    let filled = ledger(
        grown(vec![record(2, "c", NotStarted)]),
        vec![payload(0, "a", 1), payload(1, "b", 5)],
    );
    let with_c = ledger(
        grown(vec![record(2, "c", NotStarted)]),
        vec![payload(0, "a", 1), payload(2, "c", 3)],
    );
    assert!(
        changed_keys(&with_c, &before).is_some(),
        "a new record's payload"
    );
    let mut later = with_c.clone();
    if let Form::Effects {
        records,
        total,
        payloads,
        ..
    } = &mut later.form
    {
        records.push(record(3, "d", NotStarted));
        *total += 1;
        payloads.insert(1, payload(1, "b", 5));
    }
    assert_eq!(changed_keys(&later, &with_c), None);
    assert_eq!(
        changed_keys(&filled, &before).map(|(k, _, _)| k),
        Some(vec!["c".into()])
    );
    // A payload shown earlier, rewritten.
    let rewritten = ledger(
        grown(vec![record(2, "c", NotStarted)]),
        vec![payload(0, "a", 2)],
    );
    assert_eq!(changed_keys(&rewritten, &before), None);
    // Records spilled, or payloads evicted, now or before.
    let mut spilled = ledger(
        grown(vec![record(2, "c", NotStarted)]),
        vec![payload(0, "a", 1)],
    );
    if let Form::Effects {
        spilled: s, total, ..
    } = &mut spilled.form
    {
        *total += 5;
        *s = Some(SpilledRecords {
            pointer: Pointer::for_hash(crate::store::ContentHash::of(b"x")),
            count: 5,
            committed: 5,
            not_started: 0,
            unknown: 0,
        });
    }
    assert_eq!(changed_keys(&spilled, &before), None);
    assert_eq!(changed_keys(&before, &spilled), None);
    let mut evicted = ledger(grown(vec![record(2, "c", NotStarted)]), vec![]);
    if let Form::Effects {
        payloads_evicted, ..
    } = &mut evicted.form
    {
        *payloads_evicted = 1;
    }
    assert_eq!(changed_keys(&evicted, &before), None);
    // Another kind of ledger, or not a ledger.
    let mut idempotent = ledger(
        grown(vec![record(2, "c", NotStarted)]),
        vec![payload(0, "a", 1)],
    );
    if let Form::Effects { idempotent: i, .. } = &mut idempotent.form {
        *i = true;
    }
    assert_eq!(changed_keys(&idempotent, &before), None);
    let value = Entry {
        path: "writes".into(),
        section: Section::Effects,
        form: Form::Value { json: "[]".into() },
    };
    assert_eq!(changed_keys(&value, &before), None);
    assert_eq!(changed_keys(&before, &value), None);
}
