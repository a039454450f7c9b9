//! Writing a compaction point's decisions: the blocks (chunks, manifest, markers, anchors and
//! hoisted user messages in place), tombstones and pages, each counted exactly.
//!
//! A block's output, for each maximal run of non-anchor messages (a sub-range) in input order:
//! the users marker (role user) for its user messages that leave, the user messages kept
//! verbatim above their fold (`pin_user`), then the fold (role assistant) for its assistant and
//! tool messages; anchors stay in place between sub-ranges, in their current form. Every marker
//! of a block names the block's one handle.

use crate::conversation::handle::Handle;
use crate::conversation::marker::{self, FoldHeader, FOLD_LISTED_CALLS};
use crate::conversation::transcript::{Message, Role, ToolCall};
use crate::planner::build::source::Source;
use crate::planner::fold_rule::{summary_line, Proofs};
use crate::planner::layout::anchors;
use crate::planner::memory::{Block, ChunkRef, Manifest, Slot};
use crate::planner::plan::{FoldSummaryRequest, PendingSummary};
use crate::planner::span::chunk;
use crate::planner::steps::{base_message, Built, OldSlots, Point, OVER};
use crate::store::Pointer;
use std::collections::HashMap;

mod source;
mod zone;

/// One part of a block's output.
#[derive(Debug)]
enum Piece {
    Users {
        first: usize,
        last: usize,
        count: usize,
        bytes: usize,
    },
    Hoisted(usize),
    Anchor(usize),
    Fold {
        first: usize,
        last: usize,
        folded: usize,
        users: usize,
        kept: usize,
        calls: usize,
        /// (message, call) of the newest calls, oldest first.
        listed: Vec<(usize, usize)>,
    },
}

fn old_slots(point: &mut Point<'_>) -> OldSlots {
    if let Some(found) = &point.old_slots {
        return found.clone();
    }
    let messages = point.ctx.messages;
    let base = point.base;
    let kept: HashMap<usize, usize> = base.record.slots[..base.block_slots()]
        .iter()
        .enumerate()
        .filter_map(|(position, meta)| meta.slot.index().map(|index| (index, position)))
        .collect();
    let mut candidates: Vec<(usize, usize)> = kept
        .iter()
        .map(|(index, position)| (*index, *position))
        .filter(|(index, _)| messages[*index].role != Role::User)
        .collect();
    candidates.sort_unstable();
    let mut found = HashMap::new();
    let mut i = 0;
    while i < candidates.len() {
        let (index, position) = candidates[i];
        let mut j = i + 1;
        if !messages[index].tool_calls.is_empty() {
            while j < candidates.len()
                && candidates[j].0 == candidates[j - 1].0 + 1
                && !matches!(messages[candidates[j].0].role, Role::User | Role::Assistant)
            {
                j += 1;
            }
            let unit = index..candidates[j - 1].0 + 1;
            // An ambiguous key stays an anchor: nothing shows it settled.
            let flags = anchors(messages, unit.clone(), point.ctx.effects)
                .unwrap_or_else(|_| vec![true; unit.len()]);
            for (k, &(unit_index, unit_position)) in candidates[i..j].iter().enumerate() {
                if flags[k] || messages[unit_index].role.is_pinned() {
                    found.insert(unit_index, unit_position);
                }
            }
        } else if messages[index].role.is_pinned() {
            found.insert(index, position);
        }
        i = j;
    }
    // The opening the point keeps stays in place, its user message included.
    for (&index, &position) in &kept {
        if index < point.ctx.opening {
            found.insert(index, position);
        }
    }
    let slots = OldSlots {
        anchors: found,
        kept,
    };
    point.old_slots = Some(slots.clone());
    slots
}

/// Whether input message `index` stays in place inside a block.
fn is_anchor(point: &Point<'_>, old: &OldSlots, index: usize) -> bool {
    if index >= point.zone.start {
        point.zone.is_anchor(index)
    } else {
        old.anchors.contains_key(&index)
    }
}

/// The output of a block over input messages `first..end`.
fn outline(point: &Point<'_>, old: &OldSlots, first: usize, end: usize) -> Vec<Piece> {
    let messages = point.ctx.messages;
    let pin_user = point.ctx.policy.pin_user;
    let mut pieces = Vec::new();
    let mut i = first;
    while i < end {
        if is_anchor(point, old, i) {
            pieces.push(Piece::Anchor(i));
            i += 1;
            continue;
        }
        let a = i;
        while i < end && !is_anchor(point, old, i) {
            i += 1;
        }
        let users: Vec<usize> = (a..i).filter(|&j| messages[j].role == Role::User).collect();
        let folded = (i - a) - users.len();
        let calls: usize = (a..i).map(|j| messages[j].tool_calls.len()).sum();
        let mut listed = Vec::new();
        'scan: for j in (a..i).rev() {
            for c in (0..messages[j].tool_calls.len()).rev() {
                if listed.len() == FOLD_LISTED_CALLS {
                    break 'scan;
                }
                listed.push((j, c));
            }
        }
        listed.reverse();
        let hoisted: &[usize] = if pin_user { &users } else { &[] };
        let spilled = users.len() - hoisted.len();
        if spilled > 0 {
            let bytes = users.iter().map(|&j| messages[j].content.len()).sum();
            pieces.push(Piece::Users {
                first: a,
                last: i - 1,
                count: spilled,
                bytes,
            });
        }
        pieces.extend(hoisted.iter().map(|&j| Piece::Hoisted(j)));
        if folded > 0 || !hoisted.is_empty() {
            pieces.push(Piece::Fold {
                first: a,
                last: i - 1,
                folded,
                users: spilled,
                kept: hoisted.len(),
                calls,
                listed,
            });
        }
    }
    pieces
}

fn users_message(handle: Handle, first: usize, last: usize, count: usize, bytes: usize) -> Message {
    Message::user(marker::users_text(handle, first, last, count, bytes))
}

fn fold_base(point: &Point<'_>, handle: Handle, piece: &Piece) -> String {
    let Piece::Fold {
        first,
        last,
        folded,
        users,
        kept,
        calls,
        listed,
    } = piece
    else {
        unreachable!("fold_base of a fold");
    };
    let messages = point.ctx.messages;
    let listed: Vec<&ToolCall> = listed
        .iter()
        .map(|&(m, c)| &messages[m].tool_calls[c])
        .collect();
    marker::fold_base(&FoldHeader {
        handle,
        first: *first,
        last: *last,
        folded_messages: *folded,
        users: *users,
        kept_users: *kept,
        calls: *calls,
        listed: &listed,
    })
}

/// Whether the block over `first..end` gets a summary: the point wants one and what it would
/// replace is larger than the summary.
fn wants_summary(point: &Point<'_>, old: &OldSlots, first: usize, end: usize) -> bool {
    let Some(target) = point.ctx.summary_tokens.filter(|t| *t > 0) else {
        return false;
    };
    if !point.summary {
        return false;
    }
    let new_start = first.max(point.zone.start);
    let mut bytes: usize = (new_start..end)
        .filter(|&i| point.ctx.messages[i].role != Role::User && !is_anchor(point, old, i))
        .map(|i| point.ctx.messages[i].content.len() + 64)
        .sum();
    if first < point.zone.start {
        bytes += point
            .base
            .record
            .blocks
            .iter()
            .filter_map(|b| b.summary.as_ref())
            .map(String::len)
            .sum::<usize>();
    }
    bytes > target * 4
}

impl Point<'_> {
    /// The anchors inside the base blocks, sent in place: (input index, position of their
    /// slot in the base request), oldest first.
    pub(crate) fn old_anchors(&mut self) -> Vec<(usize, usize)> {
        let mut anchors: Vec<(usize, usize)> = old_slots(self).anchors.into_iter().collect();
        anchors.sort_unstable();
        anchors
    }

    /// Tokens of the block over `first..end` (markers with the provisional handle, hoisted
    /// users, anchors in their current form, the summary at its full target).
    pub(crate) fn estimate_block(&mut self, first: usize, end: usize) -> usize {
        estimate_block(self, first, end)
    }
}

fn estimate_block(point: &mut Point<'_>, first: usize, end: usize) -> usize {
    let old = if first < point.zone.start {
        old_slots(point)
    } else {
        OldSlots::default()
    };
    let pieces = outline(point, &old, first, end);
    let summary = wants_summary(point, &old, first, end);
    let last_fold = pieces.iter().rposition(|p| matches!(p, Piece::Fold { .. }));
    let handle = point.provisional;
    let (counter, format) = (point.ctx.counter, point.ctx.format);
    let count = |m: &Message| format.message_tokens(m, &m.content, counter);
    let mut total = 0usize;
    for (k, piece) in pieces.iter().enumerate() {
        let cost = match piece {
            Piece::Users {
                first,
                last,
                count: n,
                bytes,
            } => count(&users_message(handle, *first, *last, *n, *bytes)),
            Piece::Hoisted(index) | Piece::Anchor(index) => {
                if *index >= point.zone.start {
                    point.cost(*index)
                } else if let Some(&allowance) = point.old_pages.get(index) {
                    allowance
                } else {
                    let position = old.kept.get(index).copied();
                    match position {
                        Some(position) => point.base.record.slots[position].tokens,
                        None => point.count_kept(*index),
                    }
                }
            }
            Piece::Fold { .. } => {
                let base = fold_base(point, handle, piece);
                let target = point.ctx.summary_tokens.unwrap_or(0);
                if summary && Some(k) == last_fold {
                    count(&Message::assistant(marker::with_summary(&base, ""))) + target
                } else {
                    count(&Message::assistant(marker::without_summary(&base)))
                }
            }
        };
        total = total.saturating_add(cost);
    }
    total.min(OVER)
}

impl Point<'_> {
    /// Writes the decisions of this point.
    pub(crate) fn build(&mut self) -> Built {
        build(self)
    }
}

fn build(point: &mut Point<'_>) -> Built {
    let base = point.base;
    let mut built = Built {
        messages: Vec::new(),
        slots: Vec::new(),
        blocks: Vec::new(),
        handles: base.record.handles.clone(),
        blobs: Vec::new(),
        pending: Vec::new(),
    };
    let (start, fold_end) = (point.zone.start, point.fold_end);
    if point.merge_all {
        let mut chunks: Vec<ChunkRef> = base
            .record
            .blocks
            .iter()
            .flat_map(|b| b.chunks.chunks.iter().cloned())
            .collect();
        let (new, blobs) = chunk(start, &point.ctx.messages[start..fold_end]);
        chunks.extend(new);
        built.blobs.extend(blobs);
        if fold_end > 0 {
            write_block(point, &mut built, 0, fold_end, chunks);
        }
    } else {
        let open = base.block_slots();
        let input = point.ctx.messages;
        built
            .messages
            .extend((0..open).map(|position| base_message(base, position, input)));
        built.slots.extend_from_slice(&base.record.slots[..open]);
        built.blocks.extend(base.record.blocks.iter().cloned());
        if fold_end > start {
            let (chunks, blobs) = chunk(start, &point.ctx.messages[start..fold_end]);
            built.blobs.extend(blobs);
            write_block(point, &mut built, start, fold_end, chunks);
        }
    }
    for index in fold_end..point.zone.end {
        point.write_item(&mut built, index);
    }
    // Every marker's handle, and every block's (a block of anchors only has no marker).
    let referenced: std::collections::HashSet<Handle> = built
        .slots
        .iter()
        .filter_map(|s| s.slot.handle())
        .chain(built.blocks.iter().map(|b| b.handle))
        .collect();
    built.handles.retain(|h| referenced.contains(&h));
    built
}

/// Writes one block over `first..end` stored as `chunks`.
fn write_block(
    point: &mut Point<'_>,
    built: &mut Built,
    first: usize,
    end: usize,
    chunks: Vec<ChunkRef>,
) {
    let old = if first < point.zone.start {
        old_slots(point)
    } else {
        OldSlots::default()
    };
    let manifest = Manifest::of(chunks);
    let (hash, bytes) = manifest.stored();
    built.blobs.push((hash, bytes));
    let handle = built.handles.assign(&Pointer::for_hash(hash));
    let pieces = outline(point, &old, first, end);
    let summary = wants_summary(point, &old, first, end);
    let last_fold = pieces.iter().rposition(|p| matches!(p, Piece::Fold { .. }));
    let (counter, format) = (point.ctx.counter, point.ctx.format);
    let count = |m: &Message| format.message_tokens(m, &m.content, counter);
    let slots_before = built.slots.len();
    let (mut spilled, mut folded) = (0, 0);
    for (k, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Users {
                first,
                last,
                count: n,
                bytes,
            } => {
                spilled += n;
                let message = users_message(handle, *first, *last, *n, *bytes);
                let tokens = count(&message);
                let slot = Slot::Users {
                    first: *first,
                    last: *last,
                    handle,
                };
                built.push(message, slot, tokens);
            }
            Piece::Hoisted(index) | Piece::Anchor(index) => {
                if *index >= point.zone.start {
                    point.write_item(built, *index);
                } else if let Some(&allowance) = point.old_pages.get(index) {
                    point.write_page(built, *index, allowance);
                } else {
                    let position = old.kept.get(index).copied();
                    match position {
                        Some(position) => {
                            let meta = point.base.record.slots[position].clone();
                            let message = base_message(point.base, position, point.ctx.messages);
                            built.push(message, meta.slot, meta.tokens);
                        }
                        None => {
                            let message = marker::kept(&point.ctx.messages[*index]);
                            let tokens = count(&message);
                            built.push(message, Slot::Kept { index: *index }, tokens);
                        }
                    }
                }
            }
            Piece::Fold {
                first: a,
                last: b,
                folded: n,
                ..
            } => {
                folded += n;
                let base_text = fold_base(point, handle, piece);
                let slot = Slot::Folded {
                    first: *a,
                    last: *b,
                    handle,
                };
                let plain = Message::assistant(marker::without_summary(&base_text));
                let plain_tokens = count(&plain);
                match point.ctx.summary_tokens {
                    Some(target) if summary && Some(k) == last_fold => {
                        let reserved =
                            count(&Message::assistant(marker::with_summary(&base_text, "")))
                                + target;
                        built.pending.push(PendingSummary {
                            request: FoldSummaryRequest {
                                first,
                                last: end - 1,
                                text: summary_source(point, &old, first, end, handle),
                                target_tokens: target,
                            },
                            position: built.messages.len(),
                            block: built.blocks.len(),
                            base: base_text,
                            reserved,
                            plain: plain_tokens,
                        });
                        built.push(plain, slot, reserved);
                    }
                    _ => built.push(plain, slot, plain_tokens),
                }
            }
        }
    }
    built.blocks.push(Block {
        first,
        end,
        handle,
        manifest: hash,
        chunks: manifest,
        summary: None,
        slots: built.slots.len() - slots_before,
        spilled_users: spilled,
        folded,
    });
}

/// What a summarizer reads for a block: its folded assistant and tool messages as JSON lines,
/// each as the fold rule allows it ([`summary_line`]: no effect keys, scopes or opaque parts; a
/// tombstone for an effect's result or a read-back not proven disposable), the newest within
/// [`SUMMARY_SOURCE_BYTES`](source::SUMMARY_SOURCE_BYTES), an oversized one cut, each cut named
/// with `handle` ([`Source`]); a consolidated block reads the summaries of the blocks it joins
/// first.
fn summary_source(
    point: &Point<'_>,
    old: &OldSlots,
    first: usize,
    end: usize,
    handle: Handle,
) -> String {
    let mut text = String::new();
    if first < point.zone.start {
        for block in &point.base.record.blocks {
            if let Some(summary) = &block.summary {
                text.push_str(&format!(
                    "Summary of messages #{}..#{}: {summary}\n",
                    block.first,
                    block.end - 1
                ));
            }
        }
    }
    let mut source = Source::new(handle, text.len());
    let new_start = first.max(point.zone.start);
    let mut proofs = Proofs::default();
    for index in (new_start..end).rev() {
        if is_anchor(point, old, index) {
            continue;
        }
        // The one rule (`fold_rule.rs`): what of this message a summarizer may read.
        let Some(line) = summary_line(point.ctx.messages, index, &mut proofs) else {
            continue;
        };
        if !source.push(index, line) {
            break;
        }
    }
    source.finish(&mut text);
    text
}
