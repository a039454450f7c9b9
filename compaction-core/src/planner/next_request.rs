//! [`TranscriptPlanner`]: plans each request of an agent from its memory of the last one
//! (issue 20.6, 22.3), in this order:
//!
//! 1. **Find the memory.** The planner keeps the memories of the last requests it planned (the
//!    last [`REMEMBERED`] transcripts). A transcript whose chain link at a memory's length is the
//!    memory's link is that transcript, grown by appends: the request is planned from the
//!    memory, with work proportional to the new messages and the request sent. Anything else
//!    (a new agent, an edited history, another counter) is planned from nothing, which is
//!    still correct, only not incremental.
//! 2. **Check the new messages** (pairing rules from the last unit on, effect keys).
//! 3. **Append** when the request with the new messages (kept) and the state update (if any)
//!    stays within the high-water mark: the previous request is an exact prefix of this one.
//! 4. Else a **compaction point** (`next_request/point.rs`, `steps.rs`, `build.rs`; the
//!    opening kept when its soft steps allow: rule 15): soft steps towards the low-water
//!    mark, hard steps under the limit, written exactly; refused only when the smallest form
//!    (pinned messages, anchors, the blocks' markers without summaries, the newest user
//!    message, every tool result paged to its note) does not fit, which does not depend on the
//!    budget, so a larger budget never refuses what a smaller one accepted (issue 20.4).
//! 5. **Finish** with the summaries the plan asked for, then **commit** once the request is
//!    final, so the next plan starts from it. A checkpoint carries the same memory;
//!    [`resume`](TranscriptPlanner::resume) installs it in a new process.

use crate::conversation::format::message_tokens_limited;
use crate::conversation::marker;
use crate::conversation::transcript::{Message, Role, Transcript};
use crate::planner::arrival::page_over_on_arrival;
use crate::planner::effects::EffectStatuses;
use crate::planner::error::TranscriptPlanError;
use crate::planner::memories::{RecentCount, Remembered, TranscriptPlanner};
use crate::planner::memory::{message_digest, MemoryRecord, Slot, SlotMeta, TranscriptMemory};
use crate::planner::opening::{kept_opening, opening_slots};
use crate::planner::page::fit_page;
use crate::planner::plan::{PlannedTranscript, Request, TranscriptBudget, TranscriptPlan};
use crate::planner::policy::TranscriptPolicy;
use crate::planner::steps::base_message;
use crate::store::{ContentHash, Pointer};
use std::collections::HashMap;
use std::sync::Arc;

mod point;

impl TranscriptPlanner {
    /// Plans the next request of `transcript` within `budget` (a `usize` is a hard limit
    /// without hysteresis; see [`TranscriptBudget`]). `effects` says which effects of the
    /// calls are settled; `summary_tokens` is the size of each new fold's summary, `None` when
    /// no summarizer is configured. Complete it with [`finish`](Self::finish), then
    /// [`commit`](Self::commit) it once it is sent.
    pub fn plan(
        &self,
        transcript: &Transcript,
        policy: &TranscriptPolicy,
        budget: impl Into<TranscriptBudget>,
        effects: &EffectStatuses,
        summary_tokens: Option<usize>,
    ) -> Result<TranscriptPlan, TranscriptPlanError> {
        self.plan_request(
            transcript,
            &Request {
                policy: *policy,
                budget: budget.into(),
                effects,
                summary_tokens,
                update: None,
                compact: false,
                page_over: None,
                verbatim_first: false,
                keep_first: 0,
            },
        )
    }

    /// Plans and finishes in one call, without summaries.
    pub fn plan_without_summaries(
        &self,
        transcript: &Transcript,
        policy: &TranscriptPolicy,
        budget: impl Into<TranscriptBudget>,
        effects: &EffectStatuses,
    ) -> Result<PlannedTranscript, TranscriptPlanError> {
        let plan = self.plan(transcript, policy, budget, effects, None)?;
        self.finish(plan, Vec::new())
    }

    /// Makes `planned` the request the next plan of its transcript starts from. Call it once
    /// the request is final (sent, or checkpointed): a plan that is never committed leaves the
    /// planner as it was. The memory it was planned from is forgotten (the transcript grew
    /// from it): planning that shorter transcript again starts from nothing.
    pub fn commit(&self, planned: &PlannedTranscript) {
        self.commit_digests(planned);
    }

    /// [`commit`](Self::commit), returning the digest of every message of `planned` (what a
    /// checkpoint's seals cover), computed only for the messages the last request did not send.
    pub(crate) fn commit_digests(&self, planned: &PlannedTranscript) -> Vec<ContentHash> {
        let digests = self.digests(planned);
        self.remember(Arc::new(Remembered::of(&planned.memory, digests.clone())));
        self.forget(planned.grew_from);
        digests
    }

    /// The digest of every message of `planned` ([`message_digest`]), each message sent in the
    /// request it grew from taking that request's digest: only what is new is serialized and
    /// hashed.
    fn digests(&self, planned: &PlannedTranscript) -> Vec<ContentHash> {
        let memory = &planned.memory;
        let base = self
            .memory_with_key(planned.grew_from)
            .filter(|b| b.digest(b.record.slots.len().saturating_sub(1)).is_some());
        let Some(base) = base else {
            return memory.messages.iter().map(message_digest).collect();
        };
        let at: HashMap<&SlotMeta, usize> = base
            .record
            .slots
            .iter()
            .enumerate()
            .map(|(position, meta)| (meta, position))
            .collect();
        memory
            .record
            .slots
            .iter()
            .zip(&memory.messages)
            .map(|(meta, message)| {
                at.get(meta)
                    .filter(|&&position| base.same_at(position, meta, message))
                    .and_then(|&position| base.digest(position))
                    .unwrap_or_else(|| message_digest(message))
            })
            .collect()
    }

    /// Plans with everything [`Request`] carries.
    pub(crate) fn plan_request(
        &self,
        transcript: &Transcript,
        request: &Request<'_>,
    ) -> Result<TranscriptPlan, TranscriptPlanError> {
        let base = self.checked_base(transcript, request)?;
        if !request.compact {
            if let Some(planned) = self.append(transcript, &base, request) {
                return Ok(TranscriptPlan {
                    planned,
                    pending: Vec::new(),
                });
            }
        }
        // A state update at a compaction point (the window at the front kept, the fields that
        // changed since it rendered) goes last; not when a unit is in flight (it would have to
        // go between the call and its results): the caller then shows the fields again later.
        let update = request
            .update
            .filter(|_| in_flight_unit(transcript.messages()).is_none())
            .map(|text| self.update_message(text));
        let Some((message, tokens)) = update else {
            return self.compaction_point(transcript, &base, request);
        };
        let shrink = |mark: usize| mark.saturating_sub(tokens);
        let budget = request.budget;
        let Some(limit) = budget.limit.checked_sub(tokens) else {
            return Err(TranscriptPlanError::OverBudget {
                required_tokens: tokens,
                budget: budget.limit,
            });
        };
        let room = Request {
            budget: TranscriptBudget {
                limit,
                high_water: shrink(budget.high_water),
                low_water: shrink(budget.low_water),
            },
            ..*request
        };
        let mut plan = self
            .compaction_point(transcript, &base, &room)
            .map_err(|e| match e {
                TranscriptPlanError::OverBudget {
                    required_tokens, ..
                } => TranscriptPlanError::OverBudget {
                    required_tokens: required_tokens + tokens,
                    budget: budget.limit,
                },
                other => other,
            })?;
        plan.planned.memory.push(message, Slot::Update, tokens);
        plan.planned.update_sent = true;
        Ok(plan)
    }

    /// The state update message for the rendered `text`, with its tokens.
    fn update_message(&self, text: &str) -> (Message, usize) {
        let message = Message::system(marker::update_text(text));
        let tokens = self
            .format
            .message_tokens(&message, &message.content, &*self.counter);
        (message, tokens)
    }

    /// The previous request plus the new messages and the state update, when that stays within
    /// the high-water mark; `None` when a compaction point is needed.
    pub(crate) fn plan_append(
        &self,
        transcript: &Transcript,
        request: &Request<'_>,
    ) -> Result<Option<TranscriptPlan>, TranscriptPlanError> {
        let base = self.checked_base(transcript, request)?;
        Ok(self
            .append(transcript, &base, request)
            .map(|planned| TranscriptPlan {
                planned,
                pending: Vec::new(),
            }))
    }

    /// The memory `transcript` grew from, once its new messages are checked: the pairing rules
    /// from the last unit on, and every new call's effect key.
    fn checked_base(
        &self,
        transcript: &Transcript,
        request: &Request<'_>,
    ) -> Result<Arc<Remembered>, TranscriptPlanError> {
        let base = self.memory_for(transcript);
        let planned_len = base.record.len;
        if planned_len == 0 {
            transcript.validate()?;
        } else {
            transcript.validate_from(planned_len)?;
        }
        let messages = transcript.messages();
        for (index, message) in messages.iter().enumerate().skip(planned_len) {
            for call in &message.tool_calls {
                if let Err(ambiguous) = request.effects.is_settled(call) {
                    return Err(TranscriptPlanError::AmbiguousEffect {
                        index,
                        call_id: call.id.clone(),
                        key: ambiguous.key,
                        scopes: ambiguous.scopes,
                    });
                }
            }
        }
        Ok(base)
    }

    /// The previous request, the new messages kept and the state update: `None` when that
    /// passes the high-water mark.
    fn append(
        &self,
        transcript: &Transcript,
        base: &Remembered,
        request: &Request<'_>,
    ) -> Option<PlannedTranscript> {
        let (counter, format) = (&*self.counter, &*self.format);
        let messages = transcript.messages();
        let planned_len = base.record.len;
        let high = request.budget.high_water.min(request.budget.limit);
        let mut total = base.tokens();
        let update = request.update.map(|text| self.update_message(text));
        // Where the update goes: last, but never between a call and its results (before the
        // unit still in flight, when that unit is new; deferred when it was already sent).
        let in_flight = in_flight_unit(messages);
        let update = match (update, in_flight) {
            (Some(_), Some(unit)) if unit < planned_len => None,
            (update, _) => update,
        };
        if let Some((_, tokens)) = &update {
            total += tokens;
        }
        let mut handles = base.record.handles.clone();
        let mut blobs = Vec::new();
        let mut new: Vec<(Message, usize, Slot)> = Vec::with_capacity(messages.len() - planned_len);
        // Each new message is counted up to the hard limit, not only to what the high-water
        // mark leaves: when the append does not fit, the compaction point that follows needs
        // these counts (the new messages are the newest), and takes them from here.
        let limit = request.budget.limit;
        let page_over = page_over_on_arrival(messages, request, limit, counter, format);
        let mut counts = Vec::new();
        for (offset, message) in messages[planned_len..].iter().enumerate().rev() {
            let index = planned_len + offset;
            let content = marker::escape(&message.content);
            let left = high.checked_sub(total)?;
            let counted = message_tokens_limited(format, message, &content, counter, limit);
            counts.push(RecentCount {
                index,
                link: transcript
                    .link(index + 1)
                    .expect("a message of the transcript"),
                tokens: counted.ok_or(limit),
            });
            // A tool result over the cap is paged on arrival.
            let cap = page_over
                .filter(|cap| message.role == Role::Tool && counted.is_none_or(|t| t > *cap));
            let (sent, tokens, slot) = match (counted, cap) {
                (_, Some(cap)) => {
                    let pointer = Pointer::for_hash(ContentHash::of(message.content.as_bytes()));
                    if handles.handle(&pointer).is_none() {
                        blobs.push((pointer.hash(), message.content.as_bytes().to_vec()));
                    }
                    let handle = handles.assign(&pointer);
                    let (page, tokens) = fit_page(counter, format, message, handle, cap.min(left));
                    (page, tokens, Slot::Paged { index, handle })
                }
                (Some(tokens), None) => {
                    let mut kept = message.clone();
                    if let std::borrow::Cow::Owned(escaped) = content {
                        kept.content = escaped;
                    }
                    (kept, tokens, Slot::Kept { index })
                }
                (None, None) => {
                    self.keep_recent_counts(counts);
                    return None;
                }
            };
            if total + tokens > high {
                self.keep_recent_counts(counts);
                return None;
            }
            total += tokens;
            new.push((sent, tokens, slot));
        }
        new.reverse();
        if total > high {
            return None;
        }
        let mut memory = TranscriptMemory {
            record: MemoryRecord {
                len: messages.len(),
                link: transcript.link(messages.len()).expect("its own length"),
                reused: base.record.slots.len(),
                compacted: false,
                handles,
                ..base.record.clone()
            },
            messages: (0..base.record.slots.len())
                .map(|position| base_message(base, position, messages))
                .collect(),
        };
        let update_at = in_flight.filter(|unit| *unit >= planned_len);
        for (offset, (message, tokens, slot)) in new.into_iter().enumerate() {
            let index = planned_len + offset;
            if Some(index) == update_at {
                if let Some((message, tokens)) = update.clone() {
                    memory.push(message, Slot::Update, tokens);
                }
            }
            memory.push(message, slot, tokens);
        }
        if update_at.is_none() {
            if let Some((message, tokens)) = update {
                memory.push(message, Slot::Update, tokens);
            }
        }
        // The opening grows while its messages arrive (later ones only follow it).
        let opening = kept_opening(&base.record, messages, request.keep_first);
        let record = &mut memory.record;
        record.opening = opening_slots(&record.slots, record.block_slots(), opening);
        Some(PlannedTranscript {
            memory,
            blobs,
            update_sent: request.update.is_some() && in_flight.is_none_or(|u| u >= planned_len),
            grew_from: base.key(),
        })
    }

    /// Completes a plan with one summary per request, in order. A summary that would push its
    /// fold past what the plan reserved falls back to the fold without summary (still within
    /// the limit); an empty or over-long summary is an error.
    pub fn finish(
        &self,
        plan: TranscriptPlan,
        summaries: Vec<String>,
    ) -> Result<PlannedTranscript, TranscriptPlanError> {
        if summaries.len() != plan.pending.len() {
            return Err(TranscriptPlanError::SummaryCount {
                expected: plan.pending.len(),
                got: summaries.len(),
            });
        }
        for (pending, summary) in plan.pending.iter().zip(&summaries) {
            let request = &pending.request;
            if summary.trim().is_empty() {
                return Err(TranscriptPlanError::SummaryEmpty {
                    first: request.first,
                    last: request.last,
                });
            }
            if self
                .counter
                .count_till_limit(summary, request.target_tokens)
                .is_none()
            {
                return Err(TranscriptPlanError::SummaryOverLong {
                    first: request.first,
                    last: request.last,
                    tokens: self.counter.count(summary),
                    target: request.target_tokens,
                });
            }
        }
        Ok(self.finish_or_skip(plan, summaries.into_iter().map(Some).collect()))
    }

    /// Completes a plan with one summary or `None` per request, in order: a fold whose summary
    /// is `None`, empty, over its target or over what the plan reserved goes out in its form
    /// without summary (which the plan counted within the limit). What
    /// `evict_on_summarizer_error` does with a failing summarizer: the fold's messages are
    /// behind its handle either way.
    pub(crate) fn finish_or_skip(
        &self,
        plan: TranscriptPlan,
        summaries: Vec<Option<String>>,
    ) -> PlannedTranscript {
        let mut planned = plan.planned;
        for (pending, summary) in plan.pending.into_iter().zip(summaries) {
            let usable = summary.filter(|summary| {
                !summary.trim().is_empty()
                    && self
                        .counter
                        .count_till_limit(summary, pending.request.target_tokens)
                        .is_some()
            });
            let memory = &mut planned.memory;
            let Some(summary) = usable else {
                memory.record.slots[pending.position].tokens = pending.plain;
                continue;
            };
            let content = marker::with_summary(&pending.base, &summary);
            let message = &mut memory.messages[pending.position];
            let tokens = self
                .format
                .message_tokens(message, &content, &*self.counter);
            let slot = &mut memory.record.slots[pending.position];
            if tokens <= pending.reserved {
                message.content = content;
                slot.tokens = tokens;
                memory.record.blocks[pending.block].summary = Some(summary);
            } else {
                slot.tokens = pending.plain;
            }
        }
        planned
    }
}

/// The assistant message whose calls still wait for results at the end of `messages`.
fn in_flight_unit(messages: &[Message]) -> Option<usize> {
    let last = messages
        .iter()
        .rposition(|m| matches!(m.role, Role::User | Role::Assistant))?;
    let unit = &messages[last];
    if unit.tool_calls.is_empty() {
        return None;
    }
    let answered = messages[last + 1..]
        .iter()
        .filter(|m| m.role == Role::Tool)
        .count();
    (answered < unit.tool_calls.len()).then_some(last)
}

impl TranscriptMemory {
    fn push(&mut self, message: Message, slot: Slot, tokens: usize) {
        self.messages.push(message);
        self.record.slots.push(SlotMeta { slot, tokens });
    }
}
