//! Whether an effect's status is where its history led: every ledger appends one event per
//! status change in the same transaction as the change, so a status that no event led to was
//! written by someone else (an edited row: a committed charge set back to `not_started`, its
//! events deleted, would otherwise be claimed and run again). `compaction verify` reports
//! every such effect; the durable ledgers refuse to act on one, except to `reconcile` it: an
//! operator's settlement records the status it found, so it may start from anything, and the
//! history goes on from there.

use crate::effects::record::EffectStatus;
use crate::effects::transition::Transition;

/// What is wrong between an effect's `status` and its `history` (oldest first), or `None`
/// when the history starts with the key's creation, each event starts where the one before
/// it ended (a `reconcile` may start anywhere: it settles what the row said), and the last
/// one ends at `status`.
///
/// ```
/// use compaction::history_problem;
/// use compaction::{Effect, EffectLedger, EffectStatus, MemoryLedger};
///
/// let ledger = MemoryLedger::new();
/// compaction::block_on(async {
///     ledger.record("", &Effect::new("charge", "psp://c", "k")).await?;
///     ledger.begin("", "k").await?;
///     ledger.commit("", "k").await?;
///     let history = ledger.history("", "k").await?;
///     assert_eq!(history_problem(EffectStatus::Committed, &history), None);
///     // The row rewritten to `not_started`, or its history deleted: both are found.
///     assert!(history_problem(EffectStatus::NotStarted, &history).is_some());
///     assert!(history_problem(EffectStatus::NotStarted, &[]).is_some());
///     Ok::<(), compaction::EffectError>(())
/// })?;
/// # Ok::<(), compaction::EffectError>(())
/// ```
pub fn history_problem(status: EffectStatus, history: &[Transition]) -> Option<String> {
    let Some(first) = history.first() else {
        return Some(format!(
            "its status is {status} but it has no history: no recorded operation led to it \
             (its events were deleted, or the row was written outside the ledger)"
        ));
    };
    if let Some(from) = first.from.filter(|_| first.op != "reconcile") {
        return Some(format!(
            "its history does not begin with its creation (the first event, {}, starts from \
             {from}): events were deleted",
            first.op
        ));
    }
    for pair in history.windows(2) {
        if pair[1].from != Some(pair[0].to) && pair[1].op != "reconcile" {
            return Some(format!(
                "its history has a gap: one event ends at {}, the next ({}) starts from {}: \
                 events were deleted or changed",
                pair[0].to,
                pair[1].op,
                pair[1]
                    .from
                    .map_or("nothing".to_string(), |s| s.to_string())
            ));
        }
    }
    let last = history.last().map(|t| t.to).unwrap_or(first.to);
    (last != status).then(|| {
        format!(
            "its status is {status}, but its history ends at {last}: the status was changed \
             outside the ledger"
        )
    })
}

/// The guard's form of [`history_problem`], for a ledger about to act on a key (anything but
/// `reconcile`, which is how an operator repairs one): its stored `status` must be where the
/// last event (`last`, read in the same transaction) ended.
pub(crate) fn check_latest(status: EffectStatus, last: Option<EffectStatus>) -> Result<(), String> {
    match last {
        Some(last) if last == status => Ok(()),
        Some(last) => Err(format!(
            "its status is {status}, but its history ends at {last}: the row was changed outside \
             the ledger, so nothing was done (check the outside world, then settle it with \
             reconcile)"
        )),
        None => Err(format!(
            "its status is {status} but it has no history: the row was written or its events \
             deleted outside the ledger, so nothing was done (check the outside world, then \
             settle it with reconcile)"
        )),
    }
}
