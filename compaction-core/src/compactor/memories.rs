//! What a compaction leaves in its compactor's memory (the planner's memory of the request,
//! the window it showed, the next checkpoint number), taken and put back whole: a
//! [`Session`](crate::session::Session) commits a request only with its checkpoint, so a save
//! that fails leaves the compactor as it was, and the retry plans exactly as the first try.

use crate::compactor::request::WindowsSnapshot;
use crate::compactor::Compactor;
use crate::planner::memories::PlannerSnapshot;
use std::sync::atomic::Ordering;

/// A compactor's memories at one moment ([`Compactor::memories`]).
#[derive(Debug)]
pub(crate) struct Memories {
    planner: PlannerSnapshot,
    windows: WindowsSnapshot,
    compactions: u64,
}

impl Compactor {
    /// What this compactor remembers now. Cheap: the memories are shared, one `Arc` each.
    pub(crate) fn memories(&self) -> Memories {
        Memories {
            planner: self.transcript_planner.snapshot(),
            windows: self.windows.snapshot(),
            compactions: self.compactions.load(Ordering::Relaxed),
        }
    }

    /// Forgets every compaction since `memories` were taken: their requests were never sent
    /// (their checkpoint was not saved), so the next one is planned and numbered as it would
    /// have been then. Only for a compactor nobody else compacts with meanwhile (a session's).
    pub(crate) fn restore_memories(&self, memories: Memories) {
        self.transcript_planner.restore(memories.planner);
        self.windows.restore(memories.windows);
        self.compactions
            .store(memories.compactions, Ordering::Relaxed);
    }
}
