//! The request layout of a `#[transcript]` state (issue 22.3): a stable window at the front,
//! the transcript, and state updates appended when fields change.
//!
//! ```text
//! [system: the window as rendered at the last compaction point]    stable: same bytes until
//! [blocks: user runs, folds, anchors]                              the next compaction point
//! [the open zone: messages kept, tombstoned or paged]              only grows by appends
//! [system: ⟦compaction:update⟧ the fields that changed since]      appended when they change
//! [newer messages …]
//! ```
//!
//! Between compaction points the window's fields are planned with the window budget of the
//! last one, so an unchanged state renders the same text, and the previous request is an exact
//! prefix of the next. A field whose rendering changed goes into a **state update**: the
//! renderer's text for the changed fields only ([`WindowView::is_update`]), appended after the
//! newest message (before a call still waiting for its results, never between a call and its
//! results; held back when that call was already sent). It goes late because a change then
//! costs only itself, not every message after it, and it is appended rather than moved because
//! moving it would change the request before it. OpenAI's chat format takes a system message
//! there; a format that cannot (Anthropic's) carries it inside the next user turn.
//!
//! A compaction point (the request passed its high-water mark) drops the updates and keeps the
//! front window when the fields that changed since the front was rendered fit in one state
//! update that costs less than the front and the stable part after it (system prompt, blocks):
//! that update goes last, and the front, the system prompt and the old blocks stay in the
//! prompt cache. Otherwise (a field appeared or went, the update would cost more, or the front's
//! fields are not known) it renders the window again at the front with the current values. The
//! compactor remembers, per transcript, the window it showed and the fields the front was
//! rendered from; a checkpoint carries the same record, so `Compactor::resume` restores it.
//!
//! [`WindowView::is_update`]: crate::window::WindowView::is_update

use crate::checkpoint::{Compacted, FrontFields, WindowRecord};
use crate::conversation::transcript::Link;
use crate::error::CompactionError;
use crate::plan::{CollectedTranscript, Collection};
use crate::tokens::TokenCounter;
use crate::window::Entry;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The state's one `#[transcript]` field, if any.
pub(super) fn the_transcript<'c, 'a>(
    collection: &'c Collection<'a>,
) -> Result<Option<&'c CollectedTranscript<'a>>, CompactionError> {
    match collection.transcripts.as_slice() {
        [] => Ok(None),
        [field] => Ok(Some(field)),
        [_, second, ..] => Err(CompactionError::SchemaMismatch {
            field: second.path.clone(),
            reason: "a state holds at most one #[transcript] field (its messages are the \
                     request's); this is a second one"
                .into(),
        }),
    }
}

/// How many transcripts' windows a compactor remembers (as many as their planner memories).
const REMEMBERED_WINDOWS: usize = crate::planner::memories::REMEMBERED;

/// What the model was shown of the state in a transcript's last request.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct WindowMemory {
    /// The window at the front, as rendered at the last compaction point.
    pub(super) stable: String,
    pub(super) stable_tokens: usize,
    /// The window text's budget its fields were planned with.
    pub(super) budget: usize,
    /// Whether it is in the compact form.
    pub(super) compact: bool,
    /// The fields as the model knows them now: the front window with every update after it.
    pub(super) shown: Vec<Entry>,
    /// The fields the front was rendered from (`None`: not known, render it again at the next
    /// compaction point).
    pub(super) front: Option<Vec<Entry>>,
}

/// A window memory and the transcript memory it goes with (its length and chain link).
type Remembered = ((usize, Link), Arc<WindowMemory>);

/// Window memories by the transcript memory they go with, most recent first; and the token
/// counts of the last window texts rendered.
#[derive(Debug, Default)]
pub(super) struct Windows(
    Mutex<VecDeque<Remembered>>,
    Mutex<VecDeque<(String, usize)>>,
);

/// The window memories at one moment ([`Windows::snapshot`]).
#[derive(Debug)]
pub(super) struct WindowsSnapshot(VecDeque<Remembered>);

/// How many window texts' counts a compactor keeps (the full and the compact form of the last
/// two states), and the longest text it keeps a count of.
const COUNTED_WINDOWS: usize = 4;
const COUNTED_WINDOW_BYTES: usize = 16 * 1024;

impl Windows {
    /// Tokens of a rendered window text. A request that goes on from the last one renders the
    /// same window again (in both forms, to plan its floor): its counts are kept, so an
    /// unchanged window is not tokenized at every request.
    pub(super) fn count(&self, counter: &dyn TokenCounter, text: &str) -> usize {
        if text.len() > COUNTED_WINDOW_BYTES {
            return counter.count(text);
        }
        let mut counts = self.1.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, tokens)) = counts.iter().find(|(counted, _)| counted == text) {
            return *tokens;
        }
        let tokens = counter.count(text);
        counts.push_front((text.to_owned(), tokens));
        counts.truncate(COUNTED_WINDOWS);
        tokens
    }

    /// The window memory of the request whose planner memory is `key`.
    pub(super) fn get(&self, key: (usize, Link)) -> Option<Arc<WindowMemory>> {
        let windows = self.0.lock().unwrap_or_else(|e| e.into_inner());
        windows
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, w)| w.clone())
    }

    /// The window memories now, to [`restore`](Self::restore) when what was planned since is
    /// not used.
    pub(super) fn snapshot(&self) -> WindowsSnapshot {
        WindowsSnapshot(self.0.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Puts back what [`snapshot`](Self::snapshot) took.
    pub(super) fn restore(&self, snapshot: WindowsSnapshot) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = snapshot.0;
    }

    /// Remembers `window` for the request whose planner memory is `key`.
    pub(super) fn put(&self, key: (usize, Link), window: WindowMemory) {
        let mut windows = self.0.lock().unwrap_or_else(|e| e.into_inner());
        windows.retain(|(k, _)| *k != key);
        windows.push_front((key, Arc::new(window)));
        windows.truncate(REMEMBERED_WINDOWS);
    }
}

/// The fields to render again in a state update, each as the model was shown it and as it is
/// now: the current entries whose form differs from what the model was shown. `None` when the
/// fields are not the same list (a field appeared or went): then the window is rendered whole
/// at a compaction point.
pub(super) fn changed<'s, 'e>(
    shown: &'s [Entry],
    current: &'e [Entry],
) -> Option<Vec<(&'s Entry, &'e Entry)>> {
    if shown.len() != current.len() || shown.iter().zip(current).any(|(a, b)| a.path != b.path) {
        return None;
    }
    Some(shown.iter().zip(current).filter(|(a, b)| a != b).collect())
}

/// A state update's fields and, for each, `Some(n)` when it is sent as a grown list's new
/// items after the `n` shown ([`Entry::grown_since`], `lists`) or as a ledger's new and changed
/// records beside the `n` that stand ([`Entry::records_changed_since`], `records`): only in an
/// append, where every update since the front is still in the request, and only to a renderer
/// that shows that form; else every field as it is now.
pub(super) fn update_fields(
    changed: Vec<(&Entry, &Entry)>,
    lists: bool,
    records: bool,
) -> (Vec<Entry>, Vec<Option<usize>>) {
    changed
        .into_iter()
        .map(|(before, now)| {
            let grown = lists.then(|| now.grown_since(before)).flatten();
            let part =
                grown.or_else(|| records.then(|| now.records_changed_since(before)).flatten());
            match part {
                Some((entry, shown)) => (entry, Some(shown)),
                None => (now.clone(), None),
            }
        })
        .unzip()
}

/// The window memory a checkpoint's record describes.
pub(super) fn window_memory<S>(compacted: &Compacted<S>, record: &WindowRecord) -> WindowMemory {
    WindowMemory {
        stable: compacted.window.clone(),
        stable_tokens: compacted.tokens,
        budget: record.budget,
        compact: record.compact,
        shown: record
            .shown
            .clone()
            .unwrap_or_else(|| compacted.entries.clone()),
        front: match &record.front {
            FrontFields::Unknown => None,
            FrontFields::Entries => Some(compacted.entries.clone()),
            FrontFields::Fields(fields) => Some(fields.clone()),
        },
    }
}
