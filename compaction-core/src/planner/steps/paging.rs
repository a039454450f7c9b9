//! The paging steps of a compaction point (rule 5): new results over the compactor's share
//! paged on arrival, the recent turns' read results paged towards the low-water mark, and the
//! hard step that pages every result still sent larger than its note, anchors included
//! (those inside the new block, and those inside the base blocks when they are consolidated),
//! oldest first, until the request fits.

use crate::conversation::transcript::Role;
use crate::planner::memory::Slot;
use crate::planner::steps::{Point, State, OVER};

impl Point<'_> {
    /// Pages the new tool results (not in the previous request) that pass the compactor's
    /// `page_results_over` cap, as an append would have: a result arriving at a compaction
    /// point is sent the same way as one arriving between two.
    pub(super) fn page_new_over_cap(&mut self) {
        let Some(cap) = self.ctx.page_over else {
            return;
        };
        // Only the new messages of the recent turns: older ones are tombstoned or folded by
        // the soft steps without being counted (issue 20.5), and counting every result of a
        // long history here would undo that.
        let from = self.zone.soft_end.max(self.base.record.len);
        for index in from.max(self.zone.start)..self.zone.end {
            let item = self.item(index);
            if self.ctx.messages[index].role != Role::Tool
                || item.base.is_some()
                || item.state != State::Kept
            {
                continue;
            }
            let cost = self.kept_cost(index);
            // OVER passes this point's limit, which may be under the cap (the smallest form
            // counts against 0): only a cost known to pass the cap pages to it. A result left
            // kept here is still paged by the hard steps when the limit needs it.
            if cost > cap && (cost != OVER || self.limit >= cap) {
                self.items[index - self.zone.start].state = State::Page(cap);
            }
        }
    }

    /// The last soft step, when the old turns alone cannot bring the request down to
    /// `target`: pages the recent turns' tool results the model has already read (sent in the
    /// previous request, verbatim or as a page: a page paged on arrival is read like any
    /// result, and goes smaller, down to its note), oldest first. Without it a recent turn with
    /// a few large results leaves a compaction point just under the high-water mark, so the
    /// next append passes it again: a compaction point on almost every request, each
    /// re-sending the recent turns behind a new marker (no prompt-cache hit; measured on the
    /// family's coding sessions with `keep_recent` 2 and 3 at 8k and 16k, where results are
    /// paged on arrival). A result the model has not read yet, and an anchor, stay as they are
    /// here (the hard steps may still page them).
    pub(super) fn page_read(&mut self, target: usize) {
        let from = self.zone.soft_end.max(self.fold_end);
        self.page_where(target, from, |point, index| {
            !point.zone.is_anchor(index)
                && matches!(
                    point.item(index).base,
                    Some((_, _, Slot::Kept { .. } | Slot::Paged { .. }))
                )
        });
    }

    /// Pages kept tool results still sent (anchors inside the new block included), oldest
    /// first: each goes down to its smallest page, and the newest one paged gets back what the
    /// limit leaves.
    pub(super) fn page(&mut self) {
        self.page_old_anchors();
        let (limit, start) = (self.limit, self.zone.start);
        self.page_where(limit, start, |point, index| {
            index >= point.fold_end || point.zone.is_anchor(index)
        });
    }

    /// Whether tool result `index` was paged at an earlier compaction point and is sent as
    /// that page now: it may be paged smaller, down to its note (forms only move forward, and
    /// a smaller page of the same content is still a page).
    fn paged_before(&self, index: usize) -> bool {
        let item = self.item(index);
        item.state == State::Fixed && matches!(item.base, Some((_, _, Slot::Paged { .. })))
    }

    /// Whether tool result `index` is new and was paged to the `page_results_over` cap in
    /// this point: a page like any other, which the hard steps may page smaller, down to its
    /// note (rule 10: the smallest form has every result of the newest turn at its note).
    fn paged_to_cap(&self, index: usize) -> bool {
        matches!(self.item(index).state, State::Page(_))
    }

    /// Pages the tool results from `from` on that `eligible` admits (kept, or paged before and
    /// sent larger than their note), oldest first, until the request fits `limit`: each goes
    /// down to its smallest page, and the newest one paged gets back what `limit` leaves (up
    /// to its kept form, or the page it had).
    fn page_where(&mut self, limit: usize, from: usize, eligible: impl Fn(&Self, usize) -> bool) {
        let mut paged = Vec::new();
        for index in from..self.zone.end {
            if self.fits(limit) {
                break;
            }
            if !eligible(self, index)
                || self.ctx.messages[index].role != Role::Tool
                || !(self.item(index).state == State::Kept
                    || self.paged_before(index)
                    || self.paged_to_cap(index))
            {
                continue;
            }
            let smallest = self.empty_page_cost(index);
            let now = self.cost(index);
            if now != OVER && now <= smallest {
                continue;
            }
            let was = self.item(index).state;
            self.set_anywhere(index, State::Page(smallest));
            paged.push((index, was));
        }
        // Room left (the last page took more than it had to): the newest page gets it.
        if let Some(&(newest, was)) = paged.last() {
            if self.fits(limit) {
                let left = self.tally.left(limit);
                let State::Page(smallest) = self.item(newest).state else {
                    return;
                };
                let grown = smallest + left;
                let back = match (&self.item(newest).base, was) {
                    // Paged before: back to that page when the room allows, never to kept.
                    (Some((_, tokens, Slot::Paged { .. })), _) if *tokens <= grown => State::Fixed,
                    (Some((_, _, Slot::Paged { .. })), _) => State::Page(grown),
                    // Paged to the cap in this point: never back over the cap.
                    (_, State::Page(cap)) => State::Page(grown.min(cap)),
                    _ => match self.kept_cost(newest) {
                        kept if kept != OVER && kept <= grown => State::Kept,
                        _ => State::Page(grown),
                    },
                };
                self.set_anywhere(newest, back);
            }
        }
    }

    /// Pages the tool results of the anchors inside the base blocks (sent in place, kept or
    /// paged as they were when their block was made), oldest first, each down to its note,
    /// while the request passes the limit; the newest one paged gets back what the limit
    /// leaves, up to the form it had (forms only move forward). Only a consolidation rewrites
    /// the base blocks, so only then: without it they are the previous request's, verbatim.
    fn page_old_anchors(&mut self) {
        if !self.merge_all || self.fits(self.limit) {
            return;
        }
        let mut paged = Vec::new();
        for (index, position) in self.old_anchors() {
            if self.fits(self.limit) {
                break;
            }
            if self.ctx.messages[index].role != Role::Tool {
                continue;
            }
            let smallest = self.empty_page_cost(index);
            if self.base.record.slots[position].tokens <= smallest {
                continue;
            }
            self.old_pages.insert(index, smallest);
            self.refresh_blocks();
            paged.push((index, position));
        }
        if let Some(&(newest, position)) = paged.last() {
            if self.fits(self.limit) {
                let grown = self.old_pages[&newest] + self.tally.left(self.limit);
                if self.base.record.slots[position].tokens <= grown {
                    self.old_pages.remove(&newest);
                } else {
                    self.old_pages.insert(newest, grown);
                }
                self.refresh_blocks();
            }
        }
    }
}
