//! A compaction point of [`TranscriptPlanner`] (step 4 of `next_request.rs`'s order): with
//! the opening kept when the soft steps allow it, else as the rules give it; decided, written
//! and counted exactly, tightened when an estimate was short; in the end the smallest form or
//! a refusal.

use crate::conversation::message::Message;
use crate::conversation::transcript::Transcript;
use crate::planner::arrival::page_over_on_arrival;
use crate::planner::error::TranscriptPlanError;
use crate::planner::layout::zone;
use crate::planner::memories::{RecentCount, Remembered, TranscriptPlanner};
use crate::planner::memory::{MemoryRecord, TranscriptMemory};
use crate::planner::opening::{kept_opening, opening_slots};
use crate::planner::plan::{PlannedTranscript, Request, TranscriptPlan};
use crate::planner::steps::{Built, Ctx, Point};

impl TranscriptPlanner {
    /// A compaction point. It keeps the opening (`keep_first`) in place when the soft steps
    /// alone bring the request under its limit with it; else it is the point the rules give
    /// without an opening. So the opening never costs the recent turns a hard step, and never
    /// causes a refusal: only the point without it refuses.
    pub(super) fn compaction_point(
        &self,
        transcript: &Transcript,
        base: &Remembered,
        request: &Request<'_>,
    ) -> Result<TranscriptPlan, TranscriptPlanError> {
        let opening = kept_opening(&base.record, transcript.messages(), request.keep_first);
        if opening > 0 {
            if let Some(plan) = self.decided_point(transcript, base, request, opening)? {
                return Ok(plan);
            }
        }
        match self.decided_point(transcript, base, request, 0)? {
            Some(plan) => Ok(plan),
            None => self.smallest_form(transcript, base, request),
        }
    }

    /// What a compaction point reads, keeping the opening that ends at input `opening` (`0`:
    /// none), with `recent` the counts an append already made and `page_over` the cap of new
    /// results.
    fn point_ctx<'a>(
        &'a self,
        messages: &'a [Message],
        recent: &'a [RecentCount],
        request: &Request<'a>,
        page_over: Option<usize>,
        opening: usize,
    ) -> Ctx<'a> {
        Ctx {
            messages,
            recent,
            counter: &*self.counter,
            format: &*self.format,
            policy: request.policy,
            effects: request.effects,
            summary_tokens: request.summary_tokens,
            page_over,
            opening,
        }
    }

    /// The cap new tool results of `messages` are paged to in this request.
    fn page_over(&self, messages: &[Message], request: &Request<'_>) -> Option<usize> {
        let (counter, format) = (&*self.counter, &*self.format);
        page_over_on_arrival(messages, request, request.budget.limit, counter, format)
    }

    /// A compaction point keeping the opening that ends at input `opening` (`0`: none): decide,
    /// write, count exactly; when an estimate was short, decide again under a tighter limit.
    /// `None` when even every step leaves it over the limit by the estimates, or when it keeps
    /// an opening and needed a hard step.
    fn decided_point(
        &self,
        transcript: &Transcript,
        base: &Remembered,
        request: &Request<'_>,
        opening: usize,
    ) -> Result<Option<TranscriptPlan>, TranscriptPlanError> {
        let messages = transcript.messages();
        let budget = request.budget;
        let zone = zone(
            messages,
            base.open_input(),
            &request.policy,
            request.effects,
            opening,
        )?;
        let recent = self.recent_counts(transcript);
        let page_over = self.page_over(messages, request);
        let mut limit = budget.limit;
        let mut target = budget.low_water.min(limit);
        for _ in 0..4 {
            let ctx = self.point_ctx(messages, &recent, request, page_over, opening);
            let mut point = Point::new(ctx, base, zone.clone(), limit);
            point.decide(target);
            if !point.fits(limit) || (opening > 0 && point.went_hard) {
                return Ok(None);
            }
            let built = point.build();
            let tokens = built.tokens();
            if tokens <= budget.limit {
                return Ok(Some(self.assemble(transcript, base, built, opening)));
            }
            let excess = tokens - budget.limit;
            let Some(tighter) = limit.checked_sub(excess) else {
                return Ok(None);
            };
            limit = tighter;
            target = target.min(limit);
        }
        Ok(None)
    }

    /// The smallest form (everything compacted that may be, with the old turns folded or, when
    /// the markers would cost more than what they replace, only tombstoned), or a refusal that
    /// names its size.
    fn smallest_form(
        &self,
        transcript: &Transcript,
        base: &Remembered,
        request: &Request<'_>,
    ) -> Result<TranscriptPlan, TranscriptPlanError> {
        let messages = transcript.messages();
        let zone = zone(
            messages,
            base.open_input(),
            &request.policy,
            request.effects,
            0,
        )?;
        let recent = self.recent_counts(transcript);
        let page_over = self.page_over(messages, request);
        let smallest = [true, false]
            .into_iter()
            .map(|may_fold| {
                let ctx = self.point_ctx(messages, &recent, request, page_over, 0);
                let mut point = Point::new(ctx, base, zone.clone(), 0);
                point.may_fold = may_fold;
                point.decide(0);
                point.build()
            })
            .min_by_key(|built| built.tokens())
            .expect("two forms");
        let tokens = smallest.tokens();
        if tokens <= request.budget.limit {
            return Ok(self.assemble(transcript, base, smallest, 0));
        }
        Err(TranscriptPlanError::OverBudget {
            required_tokens: tokens,
            budget: request.budget.limit,
        })
    }

    /// The plan of a point's `built` request, which kept the opening ending at input `opening`.
    fn assemble(
        &self,
        transcript: &Transcript,
        base: &Remembered,
        built: Built,
        opening: usize,
    ) -> TranscriptPlan {
        let reused = built
            .messages
            .iter()
            .zip(&built.slots)
            .enumerate()
            .take_while(|(position, (message, meta))| base.same_at(*position, meta, message))
            .count();
        let len = transcript.len();
        let blocks: usize = built.blocks.iter().map(|b| b.slots).sum();
        let opening = opening_slots(&built.slots, blocks, opening);
        let memory = TranscriptMemory {
            record: MemoryRecord {
                len,
                link: transcript.link(len).expect("its own length"),
                slots: built.slots,
                blocks: built.blocks,
                handles: built.handles,
                reused,
                compacted: true,
                opening,
                counter: self.counts_key().to_owned(),
            },
            messages: built.messages,
        };
        TranscriptPlan {
            planned: PlannedTranscript {
                memory,
                blobs: built.blobs,
                update_sent: false,
                grew_from: base.key(),
            },
            pending: built.pending,
        }
    }
}
