//! Writing one open-zone message of a compaction point in its decided form: kept (escaped when
//! it begins like a marker), fixed as the last request had it, tombstoned, or paged (a head and
//! a tail excerpt sized to the tokens left). The blocks are written in `build.rs`.

use crate::conversation::handle::Handle;
use crate::conversation::marker;
use crate::conversation::transcript::Message;
use crate::planner::memory::Slot;
use crate::planner::page::{fit_page, shell};
use crate::planner::steps::{base_message, Built, Point, State, OVER};
use crate::store::{ContentHash, Pointer};

impl Point<'_> {
    /// Tokens of input message `index` as it is sent when kept (escaped when it begins like a
    /// marker).
    pub(super) fn count_kept(&self, index: usize) -> usize {
        let message = &self.ctx.messages[index];
        let content = marker::escape(&message.content);
        self.ctx
            .format
            .message_tokens(message, &content, self.ctx.counter)
    }

    /// Writes tool result `index` paged to `allowance` tokens (an anchor inside a base block
    /// paged again, or a zone message).
    pub(super) fn write_page(&mut self, built: &mut Built, index: usize, allowance: usize) {
        let handle = stored_handle(self, built, index);
        let message = &self.ctx.messages[index];
        let (out, tokens) = fit_page(
            self.ctx.counter,
            self.ctx.format,
            message,
            handle,
            allowance,
        );
        built.push(out, Slot::Paged { index, handle }, tokens);
    }

    /// Writes zone message `index` in its decided state.
    pub(super) fn write_item(&mut self, built: &mut Built, index: usize) {
        write_item(self, built, index)
    }
}

/// Writes zone message `index` in its decided state.
fn write_item(point: &mut Point<'_>, built: &mut Built, index: usize) {
    let message = &point.ctx.messages[index];
    let (counter, format) = (point.ctx.counter, point.ctx.format);
    let count = |m: &Message| format.message_tokens(m, &m.content, counter);
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
        State::Page(allowance) => point.write_page(built, index, allowance),
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
