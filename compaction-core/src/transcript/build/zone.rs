//! Writing one open-zone message of a compaction point in its decided form: kept (escaped when
//! it begins like a marker), fixed as the last request had it, tombstoned, or paged (a head and
//! a tail excerpt sized to the tokens left). The blocks are written in `build.rs`.

use crate::store::{ContentHash, Pointer};
use crate::transcript::conversation::Message;
use crate::transcript::count::message_tokens_with;
use crate::transcript::marker::{self, Page};
use crate::transcript::memory::{Handle, Slot};
use crate::transcript::steps::{base_message, Built, Point, State, OVER};

impl Point<'_> {
    /// Tokens of input message `index` as it is sent when kept (escaped when it begins like a
    /// marker).
    pub(super) fn count_kept(&self, index: usize) -> usize {
        let message = &self.ctx.messages[index];
        let content = marker::escape(&message.content);
        message_tokens_with(message, &content, &mut |t| self.ctx.counter.count(t))
    }

    /// Writes zone message `index` in its decided state.
    pub(super) fn write_item(&mut self, built: &mut Built, index: usize) {
        write_item(self, built, index)
    }
}

/// A message without its content (what a tombstone or page keeps). Only tool messages are
/// tombstoned or paged, and they carry no opaque parts (`validate`): a shell never does.
fn shell(message: &Message) -> Message {
    Message {
        content: String::new(),
        tool_calls: Vec::new(),
        opaque: Vec::new(),
        ..message.clone()
    }
}

/// Writes zone message `index` in its decided state.
fn write_item(point: &mut Point<'_>, built: &mut Built, index: usize) {
    let message = &point.ctx.messages[index];
    let counter = point.ctx.counter;
    let count = |m: &Message| message_tokens_with(m, &m.content, &mut |t| counter.count(t));
    match point.item(index).state {
        State::Kept => {
            let tokens = match point.kept_cost(index) {
                OVER => point.count_kept(index),
                tokens => tokens,
            };
            built.push(marker::kept(message), Slot::Kept { index }, tokens);
        }
        State::Fixed => {
            let (position, tokens, slot) = point.item(index).base.clone().expect("fixed from base");
            let message = base_message(point.base, position, point.ctx.messages);
            built.push(message, slot, tokens);
        }
        State::Tombstone => {
            let handle = stored_handle(point, built, index);
            let mut out = shell(message);
            out.content = marker::tombstone_text(handle, message.content.len());
            let tokens = count(&out);
            built.push(out, Slot::Tombstoned { index, handle }, tokens);
        }
        State::Page(allowance) => {
            let handle = stored_handle(point, built, index);
            let (out, tokens) = fit_page(point, message, handle, allowance);
            built.push(out, Slot::Paged { index, handle }, tokens);
        }
    }
}

/// The handle of message `index`'s content, stored with this plan's blobs when it is new.
fn stored_handle(point: &Point<'_>, built: &mut Built, index: usize) -> Handle {
    let content = &point.ctx.messages[index].content;
    let pointer = Pointer::for_hash(ContentHash::of(content.as_bytes()));
    if point.base.record.handles.handle(&pointer).is_none()
        && built.handles.handle(&pointer).is_none()
    {
        built
            .blobs
            .push((pointer.hash(), content.as_bytes().to_vec()));
    }
    built.handles.assign(&pointer)
}

/// The page of `message` that fits `allowance` tokens (or its smallest page): the head gets
/// two thirds of the excerpt bytes, the tail one third.
fn fit_page(
    point: &Point<'_>,
    message: &Message,
    handle: Handle,
    allowance: usize,
) -> (Message, usize) {
    let counter = point.ctx.counter;
    let content = &message.content;
    let total = content.len();
    let write = |bytes: usize| -> Message {
        let head_end = floor_boundary(content, (bytes * 2 / 3).min(total));
        let tail_start =
            ceil_boundary(content, total.saturating_sub(bytes - bytes * 2 / 3)).max(head_end);
        let mut out = shell(message);
        out.content = marker::page_text(&Page {
            handle,
            total,
            head: &content[..head_end],
            tail: &content[tail_start..],
        });
        out
    };
    let tokens_of = |m: &Message| message_tokens_with(m, &m.content, &mut |t| counter.count(t));
    let empty = write(0);
    let empty_tokens = tokens_of(&empty);
    if allowance <= empty_tokens {
        return (empty, empty_tokens);
    }
    let mut bytes = ((allowance - empty_tokens) * 4).min(total);
    for _ in 0..16 {
        let out = write(bytes);
        let tokens = tokens_of(&out);
        if tokens <= allowance {
            return (out, tokens);
        }
        // Shrink in proportion to the overshoot, at least by one byte.
        let over = tokens - allowance;
        let room = tokens - empty_tokens;
        let shrink = (bytes * over).div_ceil(room.max(1)).max(1);
        bytes = bytes.saturating_sub(shrink + bytes / 32);
        if bytes == 0 {
            break;
        }
    }
    (empty, empty_tokens)
}

fn floor_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_boundary(text: &str, mut index: usize) -> usize {
    while index < text.len() && !text.is_char_boundary(index) {
        index += 1;
    }
    index
}
