//! The fault plan ([`Faults`]: which operation of a step fails, is torn, reads corrupt bytes
//! or crashes the process) and the fault-injecting wrappers of the durable parts: a
//! [`FaultyStore`] (blobs, entries, checkpoints and the fence, over the run's backend) and a
//! [`FaultyLedger`] (the `EffectLedger` trait over any ledger). Every operation asks the shared
//! [`Faults`] what happens to it: it passes, fails (nothing applied), is torn (see
//! [`Decision::Torn`]), reads corrupt bytes, or the process crashes there (the operation's
//! future never completes, so the simulator drops the session at that await point, with the
//! operation applied or not).

mod ledger;
mod store;

pub use ledger::{FaultyLedger, SimLedgerError};
pub use store::FaultyStore;

use crate::rng::Rng;
use crate::sabotage::Sabotage;
use compaction::StoreError;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which classes of fault a run injects (the shrinker turns them off one by one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultClasses {
    /// Crashes at await points (and inside effects).
    pub crash: bool,
    /// Store and checkpoint failures, torn writes and corrupt reads.
    pub store: bool,
    /// Ledger failures and lost acknowledgements.
    pub ledger: bool,
    /// A summarizer that fails or answers garbage.
    pub summarizer: bool,
    /// Malformed model replies (empty or repeated call ids, unknown shapes).
    pub model: bool,
    /// Takeovers: a second session of the agent opens while the first still runs, and the
    /// first (a zombie) keeps acting.
    pub takeover: bool,
}

impl FaultClasses {
    /// Every class on.
    pub const ALL: FaultClasses = FaultClasses {
        crash: true,
        store: true,
        ledger: true,
        summarizer: true,
        model: true,
        takeover: true,
    };

    /// Every class off.
    pub const NONE: FaultClasses = FaultClasses {
        crash: false,
        store: false,
        ledger: false,
        summarizer: false,
        model: false,
        takeover: false,
    };

    /// The names of the classes that are on.
    pub fn names(&self) -> Vec<&'static str> {
        let all = [
            (self.crash, "crash"),
            (self.store, "store"),
            (self.ledger, "ledger"),
            (self.summarizer, "summarizer"),
            (self.model, "model"),
            (self.takeover, "takeover"),
        ];
        all.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect()
    }
}

/// An operation of a durable part (or another await point) that a fault may hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A blob or entry write.
    StoreWrite,
    /// A blob or entry read.
    StoreRead,
    /// A checkpoint save.
    CheckpointSave,
    /// A checkpoint load.
    CheckpointLoad,
    /// A ledger transition or sequence advance.
    LedgerWrite,
    /// A ledger read.
    LedgerRead,
    /// A summarizer call.
    Summarize,
    /// A side-effecting tool's run.
    EffectRun,
    /// A model call over HTTP (feature `http`): the server answers a fault first.
    ModelCall,
}

/// What happens to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// It works.
    Pass,
    /// It fails and applies nothing.
    Fail,
    /// A torn write: a blob or entry write leaves a truncated copy behind (a blob's is
    /// repaired by the next write of the same blob); a checkpoint save or ledger write is
    /// applied but its acknowledgement is lost. Either way the caller gets an error.
    Torn,
    /// A read returns the bytes with one bit flipped (a transient read error the engine must
    /// catch by its hashes and checksums).
    Corrupt,
    /// The process dies here: the operation is applied (`true`) or not, and never returns.
    Crash(bool),
    /// A summarizer answers garbage (empty, over-long, or text imitating markers).
    Garbage,
}

/// The shared fault plan of one run.
#[derive(Clone)]
pub struct Faults(Arc<Mutex<FaultState>>);

struct FaultState {
    rng: Rng,
    classes: FaultClasses,
    /// Whether faults are injected now (the fault window, and not while checking).
    active: bool,
    /// Checking invariants: everything passes and nothing is counted.
    suspended: bool,
    /// The operation of the current step at which the process crashes.
    crash_at: Option<u32>,
    step_ops: u32,
    crashed: bool,
    events: Vec<String>,
    sabotage: Option<Sabotage>,
}

impl Faults {
    /// The plan of `seed`, injecting `classes`, with a wrapper broken on purpose (`sabotage`,
    /// for the checker's own tests).
    pub fn sabotaged(seed: u64, classes: FaultClasses, sabotage: Option<Sabotage>) -> Self {
        let faults = Faults::new(seed, classes);
        faults.lock().sabotage = sabotage;
        faults
    }

    /// The sabotage of this run, if any.
    pub fn sabotage(&self) -> Option<Sabotage> {
        self.lock().sabotage
    }

    /// Whether the checks are running (every fault off).
    pub fn is_suspended(&self) -> bool {
        self.lock().suspended
    }

    /// The plan of `seed`, injecting `classes`.
    pub fn new(seed: u64, classes: FaultClasses) -> Self {
        Faults(Arc::new(Mutex::new(FaultState {
            rng: Rng::new(seed, 0xfa17),
            classes,
            active: false,
            suspended: false,
            crash_at: None,
            step_ops: 0,
            crashed: false,
            events: Vec::new(),
            sabotage: None,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, FaultState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a step: faults on or off, and the operation to crash at (if any).
    pub fn begin_step(&self, active: bool, crash_at: Option<u32>) {
        let mut s = self.lock();
        s.active = active;
        s.crash_at = crash_at.filter(|_| active && s.classes.crash);
        s.step_ops = 0;
        s.crashed = false;
        s.events.clear();
    }

    /// Whether the process crashed in this step.
    pub fn crashed(&self) -> bool {
        self.lock().crashed
    }

    /// What the faults did in this step, for the trace.
    pub fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().events)
    }

    /// Runs `f` with every fault off (the invariant checks read through the wrappers).
    pub fn suspended<T>(&self, f: impl FnOnce() -> T) -> T {
        self.lock().suspended = true;
        let out = f();
        self.lock().suspended = false;
        out
    }

    /// A number below `n` from the plan's generator (what kind of fault, where to cut).
    pub fn draw(&self, n: u64) -> u64 {
        self.lock().rng.below(n.max(1))
    }

    /// Decides what happens to `op`.
    pub fn decide(&self, op: Op) -> Decision {
        let mut s = self.lock();
        if s.suspended {
            return Decision::Pass;
        }
        s.step_ops += 1;
        let roll = s.rng.below(1000);
        if !s.active {
            return Decision::Pass;
        }
        let c = s.classes;
        let decision = if s.crash_at == Some(s.step_ops) {
            s.crashed = true;
            Decision::Crash(roll.is_multiple_of(2))
        } else {
            match op {
                Op::StoreWrite | Op::CheckpointSave if c.store => match roll {
                    0..=29 => Decision::Fail,
                    30..=49 => Decision::Torn,
                    _ => Decision::Pass,
                },
                Op::StoreRead | Op::CheckpointLoad if c.store => match roll {
                    0..=19 => Decision::Fail,
                    20..=34 => Decision::Corrupt,
                    _ => Decision::Pass,
                },
                Op::LedgerWrite if c.ledger => match roll {
                    0..=24 => Decision::Fail,
                    25..=44 => Decision::Torn,
                    _ => Decision::Pass,
                },
                Op::LedgerRead if c.ledger => match roll {
                    0..=19 => Decision::Fail,
                    _ => Decision::Pass,
                },
                Op::ModelCall if c.model => match roll {
                    0..=299 => Decision::Fail,
                    _ => Decision::Pass,
                },
                Op::Summarize if c.summarizer => match roll {
                    0..=249 => Decision::Fail,
                    250..=449 => Decision::Garbage,
                    _ => Decision::Pass,
                },
                _ => Decision::Pass,
            }
        };
        if decision != Decision::Pass {
            let at = s.step_ops;
            s.events.push(format!("{op:?}#{at}: {decision:?}"));
        }
        decision
    }
}

/// The process died here: never completes (the simulator drops the future and the session).
pub async fn die<T>() -> T {
    std::future::pending().await
}

pub(crate) fn injected(what: &str) -> StoreError {
    StoreError::backend(format!("injected {what}"), "simulated fault")
}

pub(crate) fn flip(mut bytes: Vec<u8>) -> Vec<u8> {
    let mid = bytes.len() / 2;
    if let Some(b) = bytes.get_mut(mid) {
        *b ^= 0x20;
    }
    bytes
}
