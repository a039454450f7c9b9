//! Fencing: one agent, one writer. Opening a [`Session`](crate::session::Session) takes the
//! agent's next *epoch* (a fencing token) in its backends, atomically with reading the newest
//! checkpoint; every later write of that session (checkpoint save, sequence advance, effect
//! claim and settlement, spill) is conditional on the epoch still being the agent's newest, in
//! the same transaction as the write. A session whose epoch was overtaken (a restarted worker
//! opened the agent while the old one still runs) is *fenced*: each write it attempts is refused
//! with [`Superseded`] before anything is written.
//!
//! The rule is one state machine over a [`FenceRecord`] (`take` when a session opens, `raise`
//! when a second backend learns its epoch, `check` before each write), which every backend
//! applies to its own table inside its own transaction (memory: under its lock; SQLite and
//! PostgreSQL: the `agent_fences` table), so all of them answer alike;
//! `tests/conformance/fence.rs` proves it per backend.
//!
//! Why a token and not a lock: a lock held by a dead worker blocks the agent until it times
//! out, and a live worker that paused (GC, a stalled VM) past its lease still believes it holds
//! it. A token needs no timeout to be safe: whoever opened last wins, and the one that opened
//! before learns it at its next write, having written nothing (Kleppmann's fencing tokens;
//! the lease of [`OpenMode::RefuseIfLive`] is advice on top, never what safety rests on).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A session's fencing token: the agent it writes for and the epoch it took when it opened.
/// A backend handle made with it (`fenced`) makes every write conditional on `epoch` still
/// being the agent's newest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    agent_id: String,
    epoch: u64,
}

impl Fence {
    /// The token of `agent_id` at `epoch` (as taken by a backend's `take_epoch`).
    pub fn new(agent_id: impl Into<String>, epoch: u64) -> Fence {
        Fence {
            agent_id: agent_id.into(),
            epoch,
        }
    }

    /// The agent.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The epoch: 1 for the agent's first session, one more at every open.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The refusal of a write under this token when the agent's newest epoch is `newer`.
    pub fn superseded_by(&self, newer: u64) -> Superseded {
        Superseded {
            agent_id: self.agent_id.clone(),
            epoch: self.epoch,
            newer,
        }
    }
}

/// How a session opens when another session of the same agent may still be running
/// ([`SessionBuilder::open_mode`](crate::session::SessionBuilder::open_mode)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OpenMode {
    /// Take the agent over (the default): the session opened before is fenced from now on.
    /// A restarted worker must win, or a worker that died holding the agent would block it.
    #[default]
    TakeOver,
    /// Refuse to open ([`SessionError::Live`](crate::session::SessionError::Live)) while
    /// another session of the agent wrote within `lease` (every write renews it, and
    /// [`Session::heartbeat`](crate::session::Session::heartbeat) does without writing
    /// anything else; renewals are written at most every [`RENEW_EVERY_MS`], the lease's
    /// resolution). For a scheduler that must not start a second worker while the first is
    /// alive; safety never rests on it (the fence refuses a stale writer either way).
    RefuseIfLive {
        /// How recent a write keeps the agent's session live.
        lease: Duration,
    },
}

impl OpenMode {
    /// The lease to honour when opening (`None`: take over).
    pub fn lease(&self) -> Option<Duration> {
        match self {
            OpenMode::TakeOver => None,
            OpenMode::RefuseIfLive { lease } => Some(*lease),
        }
    }
}

/// A write refused because a newer session of the agent opened: this session holds `epoch`,
/// the agent's newest is `newer`. Nothing of the refused write was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "agent `{}`: this session holds epoch {epoch}, but a session opened later holds epoch \
     {newer}; nothing was written: drop this session and open the agent again to go on from its \
     newest checkpoint",
    agent_id.escape_debug()
)]
pub struct Superseded {
    /// The agent.
    pub agent_id: String,
    /// The epoch the refused writer holds.
    pub epoch: u64,
    /// The agent's newest epoch.
    pub newer: u64,
}

/// An open refused by [`OpenMode::RefuseIfLive`]: another session of the agent wrote
/// `renewed_ago` ago, within the lease.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "agent `{}` is live: its session of epoch {epoch} wrote {}ms ago, within the lease of \
     {}ms; nothing was taken: open again after the lease, or with OpenMode::TakeOver to fence \
     that session",
    agent_id.escape_debug(),
    renewed_ago.as_millis(),
    lease.as_millis()
)]
pub struct AgentLive {
    /// The agent.
    pub agent_id: String,
    /// The live session's epoch.
    pub epoch: u64,
    /// How long ago it last wrote.
    pub renewed_ago: Duration,
    /// The lease asked for.
    pub lease: Duration,
}

/// What a backend holds for one agent: its newest epoch and when a session of it last wrote
/// (milliseconds since the Unix epoch, the backend's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceRecord {
    /// The newest epoch taken.
    pub epoch: u64,
    /// When it was last renewed (taken, or written under).
    pub renewed_at_ms: i64,
}

impl FenceRecord {
    /// Opening: the record after taking the agent's next epoch (above both what is held and
    /// `at_least - 1`, so a second backend that saw a newer epoch keeps it), renewed now;
    /// refused while `lease` is given and the held record was renewed within it.
    pub(crate) fn take(
        held: Option<FenceRecord>,
        agent_id: &str,
        at_least: u64,
        lease: Option<Duration>,
        now_ms: i64,
    ) -> Result<FenceRecord, AgentLive> {
        if let (Some(held), Some(lease)) = (held, lease) {
            let ago =
                Duration::from_millis(now_ms.saturating_sub(held.renewed_at_ms).max(0) as u64);
            if held.epoch > 0 && ago < lease {
                return Err(AgentLive {
                    agent_id: agent_id.to_owned(),
                    epoch: held.epoch,
                    renewed_ago: ago,
                    lease,
                });
            }
        }
        let next = held.map_or(0, |h| h.epoch).saturating_add(1).max(at_least);
        Ok(FenceRecord {
            epoch: next,
            renewed_at_ms: now_ms,
        })
    }

    /// A second backend learning the epoch the first one gave: the record raised to `fence`'s
    /// epoch and renewed; refused when it already holds a newer one (the session was
    /// overtaken while it opened).
    pub(crate) fn raise(
        held: Option<FenceRecord>,
        fence: &Fence,
        now_ms: i64,
    ) -> Result<FenceRecord, Superseded> {
        match held {
            Some(held) if held.epoch > fence.epoch => Err(fence.superseded_by(held.epoch)),
            _ => Ok(FenceRecord {
                epoch: fence.epoch,
                renewed_at_ms: now_ms,
            }),
        }
    }

    /// A write under `fence`: allowed when `fence` still holds the newest epoch, refused
    /// otherwise. No record at all (a backend that never saw the agent open, or whose record an
    /// operator removed) refuses too: the writer cannot prove it is the newest. An allowed
    /// write returns the renewed record when the renewal is worth writing: at most once every
    /// [`RENEW_EVERY_MS`], so a session's repeated writes (a request re-spills the same blobs)
    /// do not each turn into a write of the fence row.
    pub(crate) fn check(
        held: Option<FenceRecord>,
        fence: &Fence,
        now_ms: i64,
    ) -> Result<Option<FenceRecord>, Superseded> {
        match held {
            Some(held) if held.epoch == fence.epoch => {
                let stale = now_ms.saturating_sub(held.renewed_at_ms) >= RENEW_EVERY_MS;
                Ok(stale.then_some(FenceRecord {
                    epoch: held.epoch,
                    renewed_at_ms: now_ms,
                }))
            }
            Some(held) => Err(fence.superseded_by(held.epoch)),
            None => Err(fence.superseded_by(0)),
        }
    }
}

/// How stale a fence record's renewal may get before a write renews it: the lease's
/// resolution (a lease shorter than this is not a meaningful [`OpenMode::RefuseIfLive`]).
pub const RENEW_EVERY_MS: i64 = 1_000;

/// Now, in milliseconds since the Unix epoch (the clock the memory backends renew with).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_goes_past_both_the_held_epoch_and_the_floor() {
        let held = Some(FenceRecord {
            epoch: 3,
            renewed_at_ms: 0,
        });
        assert_eq!(FenceRecord::take(held, "a", 0, None, 10).unwrap().epoch, 4);
        assert_eq!(FenceRecord::take(held, "a", 9, None, 10).unwrap().epoch, 9);
        assert_eq!(FenceRecord::take(None, "a", 0, None, 10).unwrap().epoch, 1);
    }

    #[test]
    fn a_lease_refuses_only_while_it_runs() {
        let held = Some(FenceRecord {
            epoch: 2,
            renewed_at_ms: 1_000,
        });
        let lease = Some(Duration::from_millis(500));
        assert!(FenceRecord::take(held, "a", 0, lease, 1_499).is_err());
        assert_eq!(
            FenceRecord::take(held, "a", 0, lease, 1_500).unwrap().epoch,
            3
        );
        // A clock that went back never makes a lease negative.
        assert!(FenceRecord::take(held, "a", 0, lease, 0).is_err());
    }

    #[test]
    fn check_refuses_every_epoch_but_the_newest() {
        let fence = Fence::new("a", 2);
        let held = |epoch| {
            Some(FenceRecord {
                epoch,
                renewed_at_ms: 5,
            })
        };
        // Allowed; renewed only once the record is a renewal period old.
        assert_eq!(FenceRecord::check(held(2), &fence, 9).unwrap(), None);
        let later = 5 + RENEW_EVERY_MS;
        let renewed = FenceRecord::check(held(2), &fence, later).unwrap();
        assert_eq!(renewed.map(|r| r.renewed_at_ms), Some(later));
        assert_eq!(FenceRecord::check(held(3), &fence, 9).unwrap_err().newer, 3);
        // An older epoch held (a store restored from a backup) refuses too: never written over.
        assert!(FenceRecord::check(held(1), &fence, 9).is_err());
        assert!(FenceRecord::check(None, &fence, 9).is_err());
        assert_eq!(FenceRecord::raise(held(3), &fence, 9).unwrap_err().newer, 3);
        assert_eq!(FenceRecord::raise(held(1), &fence, 9).unwrap().epoch, 2);
    }
}
