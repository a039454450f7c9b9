//! Bringing an effect slot's spilled records and payloads back into the window while planning
//! (`Plan::all_verbatim` and the upgrade pass), and what a log's line with its records kept
//! depends on, so a line counted over a limit once is not rendered and counted again while
//! its log is unchanged, by the same compactor (`effect_forms::KeptRecordsOver`).

use crate::plan::collected::Collected;
use crate::plan::effect_forms::{KeptRecordsOver, RecordsLine};
use crate::plan::json_size::{json_within, MAX_BYTES_PER_TOKEN};
use crate::plan::slot::{Movable, Payloads, Slot, SlotBody};
use crate::window::{IndexedRecord, KeptPayload};

/// What trying to bring a slot's spilled records back did.
pub(super) enum Keep {
    /// Brought back: the line is to be counted.
    Kept,
    /// Left spilled: their bytes alone rule it out (or there are none).
    RuledOut,
    /// Left spilled: this log's line with its records kept was counted over the limit before.
    KnownOver,
}

/// Brings spilled records back unless their bytes alone rule it out, or (given the slot's
/// collected log and the compactor's memo) the same line was counted over this limit before.
pub(super) fn keep_records(
    slot: &mut Slot,
    memo: Option<(&Collected<'_>, &KeptRecordsOver)>,
    limit: usize,
) -> Keep {
    let known_over = match memo {
        Some((Collected::Effects { log, .. }, memo)) => {
            records_line(slot).and_then(|line| memo.get(log, &line))
        }
        _ => None,
    };
    let SlotBody::Effects { movable, .. } = &mut slot.body else {
        return Keep::RuledOut;
    };
    let Movable::Spilled { bytes, .. } = movable else {
        return Keep::RuledOut;
    };
    if bytes.len() > limit.saturating_mul(MAX_BYTES_PER_TOKEN) {
        return Keep::RuledOut;
    }
    if known_over.is_some_and(|over| limit <= over) {
        return Keep::KnownOver;
    }
    match serde_json::from_slice::<Vec<IndexedRecord>>(bytes) {
        Ok(kept) => {
            *movable = Movable::Kept(kept);
            Keep::Kept
        }
        Err(_) => Keep::RuledOut,
    }
}

/// What an effect slot's line with every record kept depends on besides its log (`None`:
/// not an effect slot, or its payloads are kept, which it does not remember).
pub(super) fn records_line(slot: &Slot) -> Option<RecordsLine> {
    let SlotBody::Effects {
        idempotent,
        payloads,
        ..
    } = &slot.body
    else {
        return None;
    };
    let payloads = match payloads {
        Payloads::None => None,
        Payloads::Spilled { pointer, .. } => Some(pointer.clone()),
        Payloads::Kept(_) => return None,
    };
    Some(RecordsLine {
        path: slot.path.clone(),
        idempotent: *idempotent,
        payloads,
    })
}

/// Brings payloads back unless their bytes alone rule it out.
pub(super) fn keep_payloads(slot: &mut Slot, collected: &Collected<'_>, limit: usize) -> bool {
    let (SlotBody::Effects { payloads, .. }, Collected::Effects { log, .. }) =
        (&mut slot.body, collected)
    else {
        return false;
    };
    let cap = limit.saturating_mul(MAX_BYTES_PER_TOKEN);
    let mut bytes = 0usize;
    let mut kept = Vec::new();
    for (index, effect) in log.effects().iter().enumerate() {
        if let Some(value) = &effect.payload {
            let Some(json) = json_within(value, cap.saturating_sub(bytes)) else {
                return false;
            };
            bytes += json.len();
            kept.push(KeptPayload {
                index,
                key: effect.idempotency_key.clone(),
                value: value.clone(),
            });
        }
    }
    *payloads = Payloads::Kept(kept);
    true
}

#[cfg(test)]
mod tests {
    use crate::compactor::Compactor;
    use crate::effects::record::{Effect, EffectLog, EffectStatus};
    use crate::state::compactable::{Compactable, Parts, Visitor};
    use crate::state::path::RebuildError;
    use crate::state::schema::{FieldClass, Schema};
    use crate::store::{take_work, MemoryStore};
    use crate::tokens::Tokenizer;
    use std::sync::OnceLock;

    /// An agent with a long history of settled deploys.
    struct Fleet {
        task: String,
        deploys: EffectLog,
    }

    impl Compactable for Fleet {
        fn schema() -> &'static Schema {
            static SCHEMA: OnceLock<Schema> = OnceLock::new();
            SCHEMA.get_or_init(|| {
                Schema::builder("Fleet")
                    .field("task", FieldClass::Protected { pin: true }, "String")
                    .field(
                        "deploys",
                        FieldClass::Effect { idempotent: true },
                        "EffectLog",
                    )
                    .build()
            })
        }
        fn visit<'a, V: Visitor<'a>>(&'a self, visitor: &mut V) {
            visitor.protected("task", true, &self.task);
            visitor.effect("deploys", true, &self.deploys);
        }
        fn rebuild(parts: &mut Parts) -> Result<Self, RebuildError> {
            Ok(Fleet {
                task: parts.protected("task")?,
                deploys: parts.redundant("deploys")?,
            })
        }
    }

    fn fleet(deploys: usize) -> Fleet {
        let effects = (0..deploys).map(|i| {
            Effect::new(
                "deploy",
                format!("svc://fleet/host-{i}"),
                format!("deploy-{i}"),
            )
            .with_status(EffectStatus::Committed)
        });
        Fleet {
            task: "roll the fleet forward one host at a time".into(),
            deploys: EffectLog::from_effects(effects.collect()).expect("distinct keys"),
        }
    }

    fn compactor(budget: usize, counter: Tokenizer) -> Compactor {
        Compactor::builder()
            .budget(budget)
            .token_counter(counter)
            .store(MemoryStore::new())
            .build()
            .expect("valid configuration")
    }

    fn window(compactor: &Compactor, state: &Fleet) -> String {
        let compacted = compactor.compact_blocking(state).expect("compacts");
        format!("{:?}", compacted.messages())
    }

    /// A log too long for the window is tried once per change, not at every compaction: the
    /// compactor's later compactions neither render nor hash its records again, and send the
    /// same window as a compactor that never saw it.
    #[test]
    fn records_counted_over_a_limit_are_not_tried_again_while_the_log_is_unchanged() {
        let mut state = fleet(300);
        let warm = compactor(3_000, Tokenizer::O200kBase);
        let first = window(&warm, &state);
        assert!(
            !first.contains("deploy-150"),
            "the records do not fit: {first}"
        );
        take_work();
        assert_eq!(window(&warm, &state), first);
        let (warm_hashed, _) = take_work();
        // Without what it counted (the log's starting forms are remembered on this thread all
        // the same): it tries the records again, and plans the same.
        warm.forget_records_over();
        assert_eq!(window(&warm, &state), first);
        let (tried_hashed, _) = take_work();
        assert_eq!(
            window(&compactor(3_000, Tokenizer::O200kBase), &state),
            first
        );
        let records = serde_json::to_vec(&state.deploys)
            .expect("serializes")
            .len();
        assert!(
            warm_hashed + records / 2 < tried_hashed,
            "{warm_hashed} bytes hashed, {tried_hashed} when the records are tried again \
             ({records} B of records)"
        );
        let elsewhere = std::thread::scope(|s| s.spawn(|| window(&warm, &state)).join());
        assert_eq!(elsewhere.expect("no panic"), first);
        // Another counter is never told what this one counted: it plans as it would alone.
        let heuristic = window(&compactor(3_000, Tokenizer::Heuristic), &state);
        let after_o200k = compactor(3_000, Tokenizer::Heuristic);
        window(&warm, &state);
        assert_eq!(window(&after_o200k, &state), heuristic);
        // A budget they fit: kept, whatever was counted at the smaller one.
        let roomy = compactor(40_000, Tokenizer::O200kBase);
        assert!(window(&roomy, &state).contains("deploy-150"));
        assert!(!window(&warm, &state).contains("deploy-150"));
        // Changed: the new record is planned, and kept where the room allows.
        state
            .deploys
            .record(Effect::new("deploy", "svc://fleet/host-new", "deploy-new"))
            .expect("new key");
        assert_ne!(window(&warm, &state), first);
        assert!(window(&roomy, &state).contains("deploy-new"));
    }
}
