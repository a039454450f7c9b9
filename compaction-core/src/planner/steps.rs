//! A compaction point: the decisions, in the order the rules give, that bring a request down to
//! its low-water mark (soft steps) and under its limit (hard steps), each oldest first and each
//! stopping as soon as the request fits. The texts are written in `build.rs`.
//!
//! Costs are counted newest first and only as far as a decision needs them
//! ([`TokenCounter::count_till_limit`]): a message that will be folded is hashed and stored,
//! never tokenized (issue 20.5). A running [`Tally`] keeps the request's cost, so each decision
//! costs its own delta, not a recount. Marker costs are estimated with the next handle number;
//! `build.rs` counts the result exactly and the planner tightens and retries when an estimate
//! was short.

use crate::conversation::format::{message_tokens_limited, ChatFormat};
use crate::conversation::handle::{Handle, HandleTable};
use crate::conversation::marker;
use crate::conversation::transcript::{Message, Role};
use crate::planner::effects::EffectStatuses;
use crate::planner::layout::{is_cut, Zone};
use crate::planner::memories::{RecentCount, Remembered};
use crate::planner::memory::{Block, Slot, SlotMeta};
use crate::planner::plan::PendingSummary;
use crate::planner::policy::TranscriptPolicy;
use crate::store::ContentHash;
use crate::tokens::TokenCounter;
use std::collections::HashMap;

pub(crate) use crate::planner::tally::{Tally, OVER};

mod paging;

/// The messages inside the base blocks that were sent in place (anchors, hoisted users), by
/// input index: the position of their slot in the base request.
#[derive(Debug, Clone, Default)]
pub(crate) struct OldSlots {
    /// Anchors that are still anchors (an effect settled since lets its unit fold).
    pub(crate) anchors: HashMap<usize, usize>,
    /// Every one of them.
    pub(crate) kept: HashMap<usize, usize>,
}

/// The message at `position` of the request `base` remembers, `input` being the transcript's
/// messages (a kept message is read from the transcript, escaped as it was sent).
pub(crate) fn base_message(base: &Remembered, position: usize, input: &[Message]) -> Message {
    match (base.own(position), &base.record.slots[position].slot) {
        (Some(message), _) => message.clone(),
        (None, Slot::Kept { index }) => marker::kept(&input[*index]),
        (None, _) => unreachable!("only kept messages are read from the transcript"),
    }
}

/// The most blocks a request keeps before they are consolidated into one.
pub const MAX_BLOCKS: usize = 8;

/// What a compaction point reads.
pub(crate) struct Ctx<'a> {
    pub(crate) messages: &'a [Message],
    /// Kept costs an append already counted (of these very messages).
    pub(crate) recent: &'a [RecentCount],
    pub(crate) counter: &'a dyn TokenCounter,
    pub(crate) format: &'a dyn ChatFormat,
    pub(crate) policy: TranscriptPolicy,
    pub(crate) effects: &'a EffectStatuses,
    pub(crate) summary_tokens: Option<usize>,
    /// New tool results above this many tokens are paged to at most this.
    pub(crate) page_over: Option<usize>,
    /// The opening this point keeps in place ends at this input index (`0`: none).
    pub(crate) opening: usize,
}

/// The current or decided form of one zone message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// As it is.
    Kept,
    /// Tombstoned or paged at an earlier compaction point: its output is the base's.
    Fixed,
    /// To be tombstoned now.
    Tombstone,
    /// To be paged now, the whole message in at most this many tokens.
    Page(usize),
}

/// One zone message.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    /// Its slot in the base request: (position, tokens, slot).
    pub(crate) base: Option<(usize, usize, Slot)>,
    pub(crate) state: State,
    /// Exact kept cost, once counted (against the limit).
    counted: Option<usize>,
    /// Whether its kept cost is known to pass the limit.
    over: bool,
}

/// The decisions of one compaction point.
pub(crate) struct Point<'a> {
    pub(crate) ctx: Ctx<'a>,
    pub(crate) base: &'a Remembered,
    pub(crate) zone: Zone,
    pub(crate) items: Vec<Item>,
    /// The compacted range ends here: `zone.start` when there is no new block.
    pub(crate) fold_end: usize,
    /// Every block (old and new) becomes one.
    pub(crate) merge_all: bool,
    /// The new (or merged) block's fold asks for a summary.
    pub(crate) summary: bool,
    /// The handle number estimates use.
    pub(crate) provisional: Handle,
    /// Whether the steps may fold (off for the smallest form without a new block).
    pub(crate) may_fold: bool,
    /// The hard limit every cost is counted against.
    limit: usize,
    /// The request's cost as decided: blocks estimate plus the open zone.
    tally: Tally,
    /// The blocks part of `tally`.
    blocks: usize,
    /// The base blocks' messages sent in place, computed when consolidation needs them.
    pub(crate) old_slots: Option<OldSlots>,
    /// Whether the hard steps ran: the request did not fit its limit after the soft ones.
    pub(crate) went_hard: bool,
    /// Tool results of anchors inside the base blocks paged again when the blocks are
    /// consolidated: input index to the page's token allowance.
    pub(crate) old_pages: HashMap<usize, usize>,
}

impl<'a> Point<'a> {
    /// The zone in its current forms (from the base request; new messages kept).
    pub(crate) fn new(ctx: Ctx<'a>, base: &'a Remembered, zone: Zone, limit: usize) -> Self {
        let mut items: Vec<Item> = (zone.start..zone.end)
            .map(|_| Item {
                base: None,
                state: State::Kept,
                counted: None,
                over: false,
            })
            .collect();
        let open = base.block_slots();
        for (position, meta) in base.record.slots.iter().enumerate().skip(open) {
            let Some(index) = meta.slot.index() else {
                continue;
            };
            if index < zone.start || index >= zone.end {
                continue;
            }
            let item = &mut items[index - zone.start];
            item.base = Some((position, meta.tokens, meta.slot.clone()));
            match meta.slot {
                Slot::Kept { .. } => item.counted = Some(meta.tokens),
                _ => item.state = State::Fixed,
            }
        }
        for recent in ctx.recent {
            let Some(item) = recent
                .index
                .checked_sub(zone.start)
                .and_then(|at| items.get_mut(at))
            else {
                continue;
            };
            match (item.counted, recent.tokens) {
                (None, Ok(tokens)) => item.counted = Some(tokens),
                (None, Err(passed)) if passed >= limit => item.over = true,
                _ => {}
            }
        }
        let provisional = Handle::new(base.record.handles.next_number()).expect("above zero");
        Point {
            fold_end: zone.start,
            merge_all: false,
            summary: ctx.summary_tokens.is_some(),
            ctx,
            base,
            zone,
            items,
            provisional,
            may_fold: true,
            limit,
            tally: Tally::default(),
            blocks: 0,
            old_slots: None,
            went_hard: false,
            old_pages: HashMap::new(),
        }
    }

    pub(crate) fn item(&self, index: usize) -> &Item {
        &self.items[index - self.zone.start]
    }

    /// The kept cost of message `index`, or [`OVER`] when it passes the limit.
    pub(crate) fn kept_cost(&mut self, index: usize) -> usize {
        let message = &self.ctx.messages[index];
        let (counter, format, limit) = (self.ctx.counter, self.ctx.format, self.limit);
        let item = &mut self.items[index - self.zone.start];
        if let Some(tokens) = item.counted {
            return if tokens <= limit { tokens } else { OVER };
        }
        if item.over {
            return OVER;
        }
        let content = marker::escape(&message.content);
        match message_tokens_limited(format, message, &content, counter, limit) {
            Some(tokens) => {
                item.counted = Some(tokens);
                tokens
            }
            None => {
                item.over = true;
                OVER
            }
        }
    }

    /// The cost of a tombstone for tool result `index` (estimated with the provisional handle).
    pub(crate) fn tombstone_cost(&self, index: usize) -> usize {
        let message = &self.ctx.messages[index];
        let text = marker::tombstone_text(self.provisional, message.content.len());
        self.ctx
            .format
            .message_tokens(message, &text, self.ctx.counter)
    }

    /// The cost of the smallest page of tool result `index`.
    pub(crate) fn empty_page_cost(&self, index: usize) -> usize {
        let message = &self.ctx.messages[index];
        let text = marker::empty_page_text(self.provisional, message.content.len());
        self.ctx
            .format
            .message_tokens(message, &text, self.ctx.counter)
    }

    /// The cost of message `index` in its current state.
    pub(crate) fn cost(&mut self, index: usize) -> usize {
        match self.item(index).state {
            State::Kept => self.kept_cost(index),
            State::Fixed => self.item(index).base.as_ref().map_or(0, |b| b.1),
            State::Tombstone => self.tombstone_cost(index),
            State::Page(tokens) => tokens,
        }
    }

    /// Whether tool result `index` may still be tombstoned (kept, or paged before). A kept
    /// result no longer than its tombstone's text stays as it is: replacing 32 bytes with a
    /// 110-byte marker frees nothing and hides the result. Compared in bytes, so deciding
    /// never tokenizes a result that will be folded.
    fn tombstonable(&self, index: usize) -> bool {
        let message = &self.ctx.messages[index];
        message.role == Role::Tool
            && !self.zone.is_anchor(index)
            && match self.item(index).state {
                State::Kept => {
                    let tombstone = marker::tombstone_text(self.provisional, message.content.len());
                    message.content.len() > tombstone.len()
                }
                State::Page(_) => true,
                State::Fixed => matches!(self.item(index).base, Some((_, _, Slot::Paged { .. }))),
                State::Tombstone => false,
            }
    }

    /// Moves message `index` (in the open zone) to `state`, keeping the tally.
    fn set(&mut self, index: usize, state: State) {
        let before = self.cost(index);
        self.items[index - self.zone.start].state = state;
        let after = self.cost(index);
        self.tally.sub(before);
        self.tally.add(after);
    }

    /// Recomputes the whole tally (blocks estimate and open zone).
    fn retally(&mut self) {
        self.tally = Tally::default();
        self.blocks = self.blocks_cost();
        self.tally.add(self.blocks);
        for index in (self.fold_end..self.zone.end).rev() {
            let cost = self.cost(index);
            self.tally.add(cost);
        }
    }

    /// Extends the compacted range to `cut`, keeping the block estimate as it was (call
    /// [`refresh_blocks`](Self::refresh_blocks) before trusting the tally).
    fn fold_to(&mut self, cut: usize) {
        for index in self.fold_end..cut {
            let cost = self.cost(index);
            self.tally.sub(cost);
        }
        self.fold_end = cut;
    }

    /// Re-estimates the blocks part of the tally.
    fn refresh_blocks(&mut self) {
        self.tally.sub(self.blocks);
        self.blocks = self.blocks_cost();
        self.tally.add(self.blocks);
    }

    /// Tokens of the blocks part of the request: the base's, plus the new block, or the one
    /// block consolidating them all.
    fn blocks_cost(&mut self) -> usize {
        if self.merge_all {
            return self.estimate_block(0, self.fold_end);
        }
        let old: usize = self.base.record.slots[..self.base.block_slots()]
            .iter()
            .map(|s| s.tokens)
            .sum();
        let new = if self.fold_end > self.zone.start {
            self.estimate_block(self.zone.start, self.fold_end)
        } else {
            0
        };
        old.saturating_add(new)
    }

    /// Whether the request as decided fits `limit`.
    pub(crate) fn fits(&self, limit: usize) -> bool {
        self.tally.fits(limit)
    }

    /// Blocks the request will have.
    pub(crate) fn block_count(&self) -> usize {
        if self.merge_all {
            return 1;
        }
        self.base.record.blocks.len() + usize::from(self.fold_end > self.zone.start)
    }

    /// Runs the steps towards `target` (soft) and the limit (hard). The point is a compaction
    /// point: the request did not fit its high-water mark as it was.
    pub(crate) fn decide(&mut self, target: usize) {
        let target = target.min(self.limit);
        self.page_new_over_cap();
        self.soft(target);
        self.retally();
        if !self.fits(target) {
            self.page_read(target);
        }
        if !self.fits(self.limit) {
            self.went_hard = true;
            self.hard();
        }
        if !self.merge_all && self.block_count() > MAX_BLOCKS {
            self.merge_all = true;
            self.refresh_blocks();
        }
    }

    /// The next cut after `from`, at most `end`.
    fn next_cut(&self, from: usize, end: usize) -> usize {
        let mut cut = from + 1;
        while cut < end && !is_cut(self.ctx.messages, cut) {
            cut += 1;
        }
        cut.min(end)
    }

    /// Its cost once every old tool result is tombstoned.
    fn skeleton_cost(&mut self, index: usize) -> usize {
        if self.tombstonable(index) {
            self.tombstone_cost(index)
        } else {
            self.cost(index)
        }
    }

    /// Soft steps towards `target`, oldest first: tombstone old tool results while that is
    /// enough; when even the skeleton of the old turns (every old tool result tombstoned) does
    /// not fit, fold the oldest turns first. Counts newest first and stops where the skeleton
    /// no longer fits: older messages fold uncounted.
    fn soft(&mut self, target: usize) {
        let (start, soft_end, end) = (self.fold_end, self.zone.soft_end, self.zone.end);
        if start >= soft_end {
            return;
        }
        // What the soft steps leave as it is: blocks, recent turns, anchors.
        let mut running = Tally::default();
        running.add(self.blocks_cost());
        for index in (soft_end..end).rev() {
            let cost = self.cost(index);
            running.add(cost);
        }
        for index in start..soft_end {
            if self.zone.is_anchor(index) {
                let cost = self.cost(index);
                running.add(cost);
            }
        }
        let mut stop = None;
        for index in (start..soft_end).rev() {
            if self.zone.is_anchor(index) {
                continue;
            }
            let cost = self.skeleton_cost(index);
            running.add(cost);
            if !running.fits(target) {
                stop = Some(index);
                break;
            }
        }
        let stop = stop.filter(|_| self.may_fold);
        let Some(stop) = stop else {
            // The skeleton fits: keep the newest tool results that fit, tombstone the rest.
            let mut slack = running.left(target);
            let mut tombstone_rest = false;
            for index in (start..soft_end).rev() {
                if !self.tombstonable(index) {
                    continue;
                }
                if !tombstone_rest {
                    let (now, tomb) = (self.cost(index), self.tombstone_cost(index));
                    let extra = now.saturating_sub(tomb);
                    if now < OVER && extra <= slack {
                        slack -= extra;
                        continue;
                    }
                    tombstone_rest = true;
                }
                self.items[index - self.zone.start].state = State::Tombstone;
            }
            return;
        };
        // Fold up to the first cut after `stop`, every later old tool result tombstoned; fold
        // further while the block's markers do not fit; then give the room a turn-aligned cut
        // leaves back to the newest tool results.
        let cut = if is_cut(self.ctx.messages, stop + 1) {
            stop + 1
        } else {
            self.next_cut(stop + 1, soft_end)
        };
        for index in cut..soft_end {
            if self.tombstonable(index) {
                self.items[index - self.zone.start].state = State::Tombstone;
            }
        }
        self.fold_end = cut;
        self.retally();
        while !self.fits(target) && self.fold_end < soft_end {
            let next = self.next_cut(self.fold_end, soft_end);
            self.fold_to(next);
            if self.fits(target) || self.fold_end == soft_end {
                self.refresh_blocks();
            }
        }
        self.untombstone_newest(target, soft_end);
    }

    /// Brings back, newest first, the tool results tombstoned in this point that fit `target`.
    fn untombstone_newest(&mut self, target: usize, end: usize) {
        for index in (self.fold_end..end).rev() {
            if self.item(index).state != State::Tombstone {
                continue;
            }
            let back = match self.item(index).base {
                Some((_, _, Slot::Paged { .. })) => State::Fixed,
                _ => State::Kept,
            };
            self.set(index, back);
            if !self.fits(target) {
                self.set(index, State::Tombstone);
                return;
            }
        }
    }

    /// Hard steps while the request passes the limit: drop the new summary; consolidate every
    /// block without summaries; tombstone, then fold, the recent turns before the newest user
    /// message; page the tool results still kept, oldest first, sized to what is left.
    fn hard(&mut self) {
        let limit = self.limit;
        if self.summary {
            self.summary = false;
            self.refresh_blocks();
            if self.fits(limit) {
                return;
            }
        }
        if !self.base.record.blocks.is_empty() && !self.merge_all {
            self.merge_all = true;
            self.refresh_blocks();
            if self.fits(limit) {
                return;
            }
        }
        let newest = self.zone.newest_user;
        for index in self.fold_end..newest {
            if self.fits(limit) {
                return;
            }
            if self.tombstonable(index) {
                self.set(index, State::Tombstone);
            }
        }
        while self.may_fold && !self.fits(limit) && self.fold_end < newest {
            let next = self.next_cut(self.fold_end, newest);
            self.fold_to(next);
            self.refresh_blocks();
        }
        self.page();
    }

    /// Moves message `index` to `state` whether it is in the open zone or an anchor inside
    /// the new block, keeping the tally.
    fn set_anywhere(&mut self, index: usize, state: State) {
        if index >= self.fold_end {
            self.set(index, state);
        } else {
            self.items[index - self.zone.start].state = state;
            self.refresh_blocks();
        }
    }
}

/// The written request of a compaction point.
pub(crate) struct Built {
    pub(crate) messages: Vec<Message>,
    pub(crate) slots: Vec<SlotMeta>,
    pub(crate) blocks: Vec<Block>,
    pub(crate) handles: HandleTable,
    pub(crate) blobs: Vec<(ContentHash, Vec<u8>)>,
    pub(crate) pending: Vec<PendingSummary>,
}

impl Built {
    /// Exact tokens of the request (summaries at their reserve).
    pub(crate) fn tokens(&self) -> usize {
        self.slots.iter().map(|s| s.tokens).sum()
    }

    pub(crate) fn push(&mut self, message: Message, slot: Slot, tokens: usize) {
        self.messages.push(message);
        self.slots.push(SlotMeta { slot, tokens });
    }
}
