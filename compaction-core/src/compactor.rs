//! The engine: state -> plan -> (summarize / spill) -> render -> report.

use crate::compacted::{Entry, FORMAT};
use crate::effects::log::EffectLog;
use crate::plan::{
    floor_slots, upgrade, Collector, Movable, Payloads, PlanContext, Slot, SlotBody, ValuePlan,
};
use crate::render::{DefaultRenderer, Renderer, WindowView};
use crate::store::{get_verified, AsPointer, DynStore};
use crate::summarize::DynSummarizer;
use crate::{
    Compactable, Compacted, CompactionError, CompactionReport, ContentHash, EffectStatus,
    FieldCost, FieldOutcome, FieldReport, MemoryStore, Pointer, Schema, Shape, Store, Summarizer,
    SummarizerError, SummaryRequest, TokenCounter, Tokenizer,
};
use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Compacts [`Compactable`] states to a hard token budget, and rehydrates them.
///
/// ```
/// use compaction::{Compactable, Compactor, EffectLog, Effect, MemoryStore, Tokenizer, Extractive};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
/// struct Agent {
///     #[protected(pin)]
///     constraints: Vec<String>,
///     #[protected]
///     plan_step: u32,
///     #[redundant(summarize)]
///     transcript: String,
///     #[effect(idempotent = false)]
///     effects: EffectLog,
/// }
///
/// let compactor = Compactor::builder()
///     .budget(300)
///     .token_counter(Tokenizer::O200kBase)
///     .summarizer(Extractive)
///     .store(MemoryStore::default())
///     .build()?;
///
/// let mut agent = Agent {
///     constraints: vec!["never touch /etc/prod".into()],
///     plan_step: 6,
///     transcript: "tool said: ok. ".repeat(500),
///     ..Agent::default()
/// };
/// agent.effects.record(Effect::new("apply_migration", "db://users", "mig-7")).unwrap();
/// agent.effects.begin("mig-7").unwrap(); // timed out: outcome unknown
///
/// let compacted = compactor.compact_blocking(&agent)?;
/// assert!(compacted.tokens() <= 300);
/// let window = compacted.render();
/// assert!(window.contains("never touch /etc/prod"));
/// assert!(window.contains(r#""status":"unknown""#));
/// # Ok::<(), compaction::CompactionError>(())
/// ```
pub struct Compactor {
    pub(crate) budget: usize,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) summarizer: Option<Arc<dyn DynSummarizer>>,
    pub(crate) store: Arc<dyn DynStore>,
    pub(crate) renderer: Arc<dyn Renderer>,
    pub(crate) refuse_on_unknown: bool,
    pub(crate) evict_on_summarizer_error: bool,
    pub(crate) max_summary_tokens: usize,
    pub(crate) compactions: AtomicU64,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("budget", &self.budget)
            .field("counter", &self.counter.name())
            .field("summarizer", &self.summarizer.is_some())
            .field("refuse_on_unknown_effects", &self.refuse_on_unknown)
            .finish_non_exhaustive()
    }
}

/// Configures a [`Compactor`].
#[must_use]
pub struct CompactorBuilder {
    budget: Option<usize>,
    counter: Arc<dyn TokenCounter>,
    summarizer: Option<Arc<dyn DynSummarizer>>,
    store: Arc<dyn DynStore>,
    renderer: Arc<dyn Renderer>,
    refuse_on_unknown: bool,
    evict_on_summarizer_error: bool,
    max_summary_tokens: usize,
}

impl Default for CompactorBuilder {
    fn default() -> Self {
        CompactorBuilder {
            budget: None,
            counter: Arc::new(Tokenizer::O200kBase),
            summarizer: None,
            store: Arc::new(MemoryStore::default()),
            renderer: Arc::new(DefaultRenderer),
            refuse_on_unknown: false,
            evict_on_summarizer_error: false,
            max_summary_tokens: 512,
        }
    }
}

impl CompactorBuilder {
    /// The hard budget, in tokens of the rendered window. Required.
    pub fn budget(mut self, tokens: usize) -> Self {
        self.budget = Some(tokens);
        self
    }

    /// The token counter (default: exact `o200k_base`).
    pub fn token_counter(mut self, counter: impl TokenCounter + 'static) -> Self {
        self.counter = Arc::new(counter);
        self
    }

    /// The summarizer for `summarize`-enabled fields. Without one, nothing is summarized.
    pub fn summarizer(mut self, summarizer: impl Summarizer + 'static) -> Self {
        self.summarizer = Some(Arc::new(summarizer));
        self
    }

    /// Where spilled state and summary sources go (default: a fresh [`MemoryStore`]).
    pub fn store(mut self, store: impl Store + 'static) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// A custom window format. The budget is enforced on its output.
    pub fn renderer(mut self, renderer: impl Renderer + 'static) -> Self {
        self.renderer = Arc::new(renderer);
        self
    }

    /// Refuse to compact (`UnknownEffect`) while any effect's outcome is unknown.
    pub fn refuse_on_unknown_effects(mut self, refuse: bool) -> Self {
        self.refuse_on_unknown = refuse;
        self
    }

    /// When the summarizer fails, returns nothing, or returns more than its target: evict the
    /// field (pointer or tombstone) instead of failing the compaction. Off by default, so a
    /// misbehaving summarizer is a `CompactionError::Summarizer` you see. Only fields declared
    /// `summarize` ever reach a summarizer, and their eviction is always safe.
    pub fn evict_on_summarizer_error(mut self, evict: bool) -> Self {
        self.evict_on_summarizer_error = evict;
        self
    }

    /// The largest summary target handed to the summarizer (default 512 tokens).
    pub fn max_summary_tokens(mut self, tokens: usize) -> Self {
        self.max_summary_tokens = tokens;
        self
    }

    /// Builds the compactor.
    pub fn build(self) -> Result<Compactor, CompactionError> {
        let budget = self
            .budget
            .ok_or_else(|| CompactionError::Config("no budget: call .budget(tokens)".into()))?;
        if budget == 0 {
            return Err(CompactionError::Config(
                "the budget must be above zero".into(),
            ));
        }
        Ok(Compactor {
            budget,
            counter: self.counter,
            summarizer: self.summarizer,
            store: self.store,
            renderer: self.renderer,
            refuse_on_unknown: self.refuse_on_unknown,
            evict_on_summarizer_error: self.evict_on_summarizer_error,
            max_summary_tokens: self.max_summary_tokens,
            compactions: AtomicU64::new(0),
        })
    }
}

/// A plan with nothing borrowed from the state: what crosses the `await`s.
struct Prepared {
    schema: &'static Schema,
    slots: Vec<Slot>,
    shapes: Vec<(String, Shape)>,
    number: u64,
}

impl Compactor {
    /// Starts configuring a compactor.
    pub fn builder() -> CompactorBuilder {
        CompactorBuilder::default()
    }

    /// The budget in tokens.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The token counter.
    pub fn counter(&self) -> &dyn TokenCounter {
        &*self.counter
    }

    /// Compacts `state` to the budget. The state is only borrowed: on any error it is exactly
    /// as it was, and nothing in the window or the store stands in for it.
    pub async fn compact<S: Compactable + Sync>(
        &self,
        state: &S,
    ) -> Result<Compacted<S>, CompactionError> {
        self.compact_with_views(state, None).await
    }

    /// [`compact`](Self::compact) with the records of some `#[effect]` fields (by concrete
    /// path) replaced: the hook of [`compact_with_ledger`](Self::compact_with_ledger).
    pub(crate) async fn compact_with_views<S: Compactable + Sync>(
        &self,
        state: &S,
        effect_views: Option<&HashMap<String, EffectLog>>,
    ) -> Result<Compacted<S>, CompactionError> {
        let number = self.compactions.fetch_add(1, Ordering::Relaxed) + 1;
        let prepared = self.prepare(state, number, effect_views)?;
        self.finish(prepared).await
    }

    /// [`compact`](Self::compact) for synchronous callers.
    pub fn compact_blocking<S: Compactable + Sync>(
        &self,
        state: &S,
    ) -> Result<Compacted<S>, CompactionError> {
        crate::block_on(self.compact(state))
    }

    /// Reads back the bytes behind a `store://sha256:` pointer, verified against its hash: the
    /// tool an agent calls to look at spilled state.
    pub async fn resolve(&self, pointer: impl AsPointer) -> Result<Vec<u8>, CompactionError> {
        let pointer = pointer.to_pointer()?;
        get_verified(&*self.store, &pointer.hash())
            .await
            .map_err(|e| match e {
                crate::StoreError::Integrity { .. } => CompactionError::Integrity {
                    field: pointer.to_string(),
                },
                other => CompactionError::Store(other),
            })
    }

    /// [`resolve`](Self::resolve) for synchronous callers.
    pub fn resolve_blocking(&self, pointer: impl AsPointer) -> Result<Vec<u8>, CompactionError> {
        crate::block_on(self.resolve(pointer))
    }

    fn prepare<S: Compactable>(
        &self,
        state: &S,
        number: u64,
        effect_views: Option<&HashMap<String, EffectLog>>,
    ) -> Result<Prepared, CompactionError> {
        let schema = S::schema();
        let mut collector = Collector::new(schema).with_effect_views(effect_views);
        state.visit(&mut collector);
        collector.check_complete();
        if let Some(error) = collector.error.take() {
            return Err(error);
        }
        if self.refuse_on_unknown {
            refuse_unknown(&collector)?;
        }
        let ctx = PlanContext {
            counter: &*self.counter,
            can_summarize: self.summarizer.is_some(),
            max_summary_tokens: self.max_summary_tokens,
        };
        let mut slots = floor_slots(&collector.fields);
        upgrade(&mut slots, &collector.fields, &ctx, 0, false);
        let (_, floor_window) = self.render(schema, number, &slots);
        let floor_tokens = self.counter.count(&floor_window);
        if floor_tokens > self.budget {
            return Err(over_budget(
                &slots,
                floor_tokens,
                self.budget,
                &*self.counter,
            ));
        }
        upgrade(
            &mut slots,
            &collector.fields,
            &ctx,
            self.budget - floor_tokens,
            true,
        );
        Ok(Prepared {
            schema,
            slots,
            shapes: std::mem::take(&mut collector.shapes),
            number,
        })
    }

    async fn finish<S: Compactable>(
        &self,
        mut prepared: Prepared,
    ) -> Result<Compacted<S>, CompactionError> {
        let (entries, window, tokens) = loop {
            self.summarize_planned(prepared.schema, &mut prepared.slots)
                .await?;
            let (entries, window) = self.render(prepared.schema, prepared.number, &prepared.slots);
            let tokens = self.counter.count(&window);
            if tokens <= self.budget {
                break (entries, window, tokens);
            }
            if !demote_one(&mut prepared.slots) {
                return Err(over_budget(
                    &prepared.slots,
                    tokens,
                    self.budget,
                    &*self.counter,
                ));
            }
        };
        self.spill(&prepared.slots).await?;
        let report = self.report(&prepared, tokens);
        let mut compacted = Compacted {
            format: FORMAT,
            state_type: prepared.schema.type_name().to_owned(),
            budget: self.budget,
            entries,
            shapes: prepared.shapes,
            window,
            tokens,
            report,
            seal: ContentHash::of(b""),
            _state: PhantomData,
        };
        compacted.seal = compacted.compute_seal();
        Ok(compacted)
    }

    fn render(&self, schema: &Schema, number: u64, slots: &[Slot]) -> (Vec<Entry>, String) {
        let entries: Vec<Entry> = slots.iter().map(Slot::entry).collect();
        let view = WindowView {
            compaction: number,
            state_type: schema.type_name(),
            entries: &entries,
        };
        let window = self.renderer.render(&view);
        (entries, window)
    }

    /// Calls the summarizer for every planned summary not made yet. Every request is checked
    /// against the schema first: only fields declared `summarize` may pass.
    async fn summarize_planned(
        &self,
        schema: &'static Schema,
        slots: &mut [Slot],
    ) -> Result<(), CompactionError> {
        for slot in slots.iter_mut() {
            let SlotBody::Value {
                plan:
                    ValuePlan::Summarize {
                        source,
                        target,
                        done: None,
                    },
                ..
            } = &slot.body
            else {
                continue;
            };
            let allowed = schema
                .field_for_instance(&slot.path)
                .is_some_and(|f| f.class.may_summarize());
            if !allowed {
                return Err(CompactionError::ProtectedToSummarizer {
                    field: slot.path.clone(),
                });
            }
            let Some(summarizer) = &self.summarizer else {
                continue;
            };
            let summary = match self
                .checked_summary(&**summarizer, &slot.path, source, *target)
                .await
            {
                Ok(summary) => summary,
                // Only a summarizable field gets here, and its eviction leaves a pointer or a
                // tombstone: falling back loses nothing the window was guaranteed to hold.
                Err(_) if self.evict_on_summarizer_error => {
                    if let SlotBody::Value { plan, .. } = &mut slot.body {
                        *plan = ValuePlan::Evict;
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            // The source is never rendered, so it is never counted whole (for a large source
            // that would cost more than the rest of the compaction): counted only until it is
            // known to exceed the target, it gives the report a lower bound.
            let from_tokens = self
                .counter
                .count_till_limit(source, *target)
                .unwrap_or(*target + 1)
                .max(slot.whole_tokens_at_least);
            let pointer = Pointer::for_hash(ContentHash::of(source.as_bytes()));
            if let SlotBody::Value {
                plan: ValuePlan::Summarize { done, .. },
                ..
            } = &mut slot.body
            {
                *done = Some((summary, pointer, from_tokens));
            }
        }
        Ok(())
    }

    /// One summarizer call, held to its contract: not empty, not over its target.
    async fn checked_summary(
        &self,
        summarizer: &dyn DynSummarizer,
        field: &str,
        source: &str,
        target: usize,
    ) -> Result<String, SummarizerError> {
        let request = SummaryRequest {
            field,
            text: source,
            target_tokens: target,
        };
        let summary = summarizer.summarize_dyn(request).await?;
        if summary.trim().is_empty() {
            return Err(SummarizerError::Empty {
                field: field.to_owned(),
            });
        }
        let tokens = self.counter.count(&summary);
        if tokens > target {
            return Err(SummarizerError::OverLong {
                field: field.to_owned(),
                tokens,
                target,
            });
        }
        Ok(summary)
    }

    /// Writes everything the final plan moved out of the window. Runs only once the window
    /// fits, so a refused compaction leaves nothing new behind but content-addressed blobs.
    async fn spill(&self, slots: &[Slot]) -> Result<(), CompactionError> {
        for slot in slots {
            let blob: Option<(&[u8], ContentHash)> = match &slot.body {
                SlotBody::Protected {
                    json,
                    fingerprint,
                    spill: true,
                    ..
                } => Some((json.as_bytes(), *fingerprint)),
                SlotBody::Value {
                    plan:
                        ValuePlan::Summarize {
                            source,
                            done: Some((_, pointer, _)),
                            ..
                        },
                    ..
                } => Some((source.as_bytes(), pointer.hash())),
                SlotBody::Effects {
                    movable: Movable::Spilled { bytes, summary },
                    ..
                } => Some((bytes.as_slice(), summary.pointer.hash())),
                _ => None,
            };
            if let Some((bytes, hash)) = blob {
                self.store
                    .put_dyn(&hash, bytes)
                    .await
                    .map_err(CompactionError::Store)?;
            }
        }
        Ok(())
    }

    fn report(&self, prepared: &Prepared, tokens_after: usize) -> CompactionReport {
        let mut fields = Vec::new();
        let mut fingerprints = BTreeMap::new();
        let mut tokens_before = tokens_after;
        for slot in &prepared.slots {
            let outcome = match &slot.body {
                SlotBody::Protected {
                    fingerprint, spill, ..
                } => {
                    fingerprints.insert(slot.path.clone(), *fingerprint);
                    if *spill {
                        FieldOutcome::Spilled {
                            pointer: Pointer::for_hash(*fingerprint),
                        }
                    } else {
                        FieldOutcome::Kept
                    }
                }
                SlotBody::Value {
                    redundant,
                    pointer,
                    plan,
                } => match plan {
                    ValuePlan::Keep { .. } => FieldOutcome::Kept,
                    ValuePlan::Summarize {
                        done: Some((text, source, from_tokens)),
                        ..
                    } => FieldOutcome::Summarized {
                        from_tokens: *from_tokens,
                        to_tokens: self.counter.count(text),
                        source: source.clone(),
                    },
                    _ => match (redundant, pointer) {
                        (false, Some(p)) => FieldOutcome::Evicted { pointer: p.clone() },
                        _ => FieldOutcome::Tombstoned,
                    },
                },
                SlotBody::Effects {
                    movable, payloads, ..
                } => {
                    let payload_outcome = match payloads {
                        Payloads::None => None,
                        Payloads::Kept(_) => Some(FieldOutcome::Kept),
                        Payloads::Evicted(_) => Some(FieldOutcome::Tombstoned),
                    };
                    let records = match movable {
                        Movable::Spilled { summary, .. } => FieldOutcome::Spilled {
                            pointer: summary.pointer.clone(),
                        },
                        _ => FieldOutcome::Kept,
                    };
                    fields.push(FieldReport {
                        field: slot.path.clone(),
                        outcome: records,
                    });
                    if let Some(outcome) = payload_outcome {
                        fields.push(FieldReport {
                            field: format!("{}.payloads", slot.path),
                            outcome,
                        });
                    }
                    continue;
                }
            };
            if outcome != FieldOutcome::Kept {
                let now = slot.line_tokens(&*self.counter);
                tokens_before += slot.whole_tokens_at_least.saturating_sub(now);
            }
            fields.push(FieldReport {
                field: slot.path.clone(),
                outcome,
            });
        }
        let exact = fields.iter().all(|f| f.outcome == FieldOutcome::Kept);
        CompactionReport {
            compaction: prepared.number,
            budget: self.budget,
            tokens_after,
            tokens_before,
            tokens_before_exact: exact,
            counter: self.counter.name().to_owned(),
            fields,
            fingerprints,
        }
    }
}

fn refuse_unknown(collector: &Collector<'_>) -> Result<(), CompactionError> {
    for field in &collector.fields {
        if let crate::plan::Collected::Effects { log, .. } = &field.value {
            if let Some(e) = log.with_status(EffectStatus::Unknown).next() {
                return Err(CompactionError::UnknownEffect {
                    field: field.path.clone(),
                    key: e.idempotency_key.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Demotes the lowest-priority field still above its floor. `false` when none is left.
fn demote_one(slots: &mut [Slot]) -> bool {
    let mut order: Vec<usize> = (0..slots.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((slots[i].stage(), i)));
    order.into_iter().any(|i| slots[i].demote())
}

fn over_budget(
    slots: &[Slot],
    required_tokens: usize,
    budget: usize,
    counter: &dyn TokenCounter,
) -> CompactionError {
    let mut fields = Vec::new();
    let mut evicted = Vec::new();
    for slot in slots {
        let verbatim = match &slot.body {
            SlotBody::Protected { spill, .. } => !spill,
            SlotBody::Value { plan, .. } => matches!(plan, ValuePlan::Keep { .. }),
            SlotBody::Effects {
                pinned, movable, ..
            } => !pinned.is_empty() || matches!(movable, Movable::Kept(_)),
        };
        if verbatim {
            fields.push(FieldCost {
                field: slot.path.clone(),
                tokens: slot.line_tokens(counter),
            });
        } else {
            evicted.push(slot.path.clone());
        }
    }
    CompactionError::ProtectedOverBudget {
        fields,
        required_tokens,
        budget,
        evicted,
    }
}
