//! A page: a tool result sent as a head and a tail excerpt sized to a token allowance, with
//! its handle and byte ranges, so the model reads the rest through `resolve_pointer`. Written
//! at a compaction point and when a large result arrives between two.

use crate::conversation::format::ChatFormat;
use crate::conversation::handle::Handle;
use crate::conversation::marker::{self, Page};
use crate::conversation::transcript::Message;
use crate::tokens::TokenCounter;
use crate::utf8::{ceil_char_boundary, floor_char_boundary};

/// A message without its content (what a tombstone or page keeps). Only tool messages are
/// tombstoned or paged, and they carry no opaque parts (`validate`): a shell never does.
pub(crate) fn shell(message: &Message) -> Message {
    Message {
        content: String::new(),
        tool_calls: Vec::new(),
        opaque: Vec::new(),
        ..message.clone()
    }
}

/// The page of `message` that fits `allowance` tokens (or its smallest page): the head gets
/// two thirds of the excerpt bytes, the tail one third.
pub(crate) fn fit_page(
    counter: &dyn TokenCounter,
    format: &dyn ChatFormat,
    message: &Message,
    handle: Handle,
    allowance: usize,
) -> (Message, usize) {
    let content = &message.content;
    let total = content.len();
    let write = |bytes: usize| -> Message {
        let head_end = floor_char_boundary(content, (bytes * 2 / 3).min(total));
        let tail_start =
            ceil_char_boundary(content, total.saturating_sub(bytes - bytes * 2 / 3)).max(head_end);
        let mut out = shell(message);
        out.content = marker::page_text(&Page {
            handle,
            total,
            head: &content[..head_end],
            tail: &content[tail_start..],
        });
        out
    };
    let tokens_of = |m: &Message| format.message_tokens(m, &m.content, counter);
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
