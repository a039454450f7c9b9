//! [`TranscriptPolicy`]: how a `#[transcript]` field may be compacted, as its attribute says.

/// How a transcript field may be compacted (`#[transcript(keep_recent = N, pin_user)]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptPolicy {
    /// The last `keep_recent` user turns and everything after them are the last to be compacted
    /// (default 1: the current request and the work on it). Under pressure their tool results
    /// are paged, and turns older than the newest user message fold, before anything is
    /// refused.
    pub keep_recent: usize,
    /// Refuse instead of spilling old user messages: they stay verbatim, above their fold.
    pub pin_user: bool,
}

impl Default for TranscriptPolicy {
    fn default() -> Self {
        TranscriptPolicy {
            keep_recent: 1,
            pin_user: false,
        }
    }
}
