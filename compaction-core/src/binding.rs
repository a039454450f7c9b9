//! Whose a checkpoint is: the agent id and namespace a compactor binds into every checkpoint it
//! seals, with a sequence number that only goes forward (the rules that use them are in
//! `checkpoint/owner.rs`). The binding is part of what both seals cover, so under a keyed seal
//! nobody without the key can move a checkpoint to another agent or namespace, or renumber it.
//! A leaf of its own, below `error` (whose `ForeignCheckpoint` carries one) and `checkpoint`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The agent a checkpoint belongs to, the namespace it was made for, and its place in that
/// agent's line of checkpoints. A compactor built with
/// [`agent_id`](crate::CompactorBuilder::agent_id) writes it into every checkpoint it makes,
/// under both seals; see [`Compacted::binding`](crate::Compacted::binding).
///
/// ```
/// use compaction::{Compactable, Compactor, SealKey};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default)]
/// struct State {
///     #[protected]
///     step: u32,
/// }
///
/// let compactor = Compactor::builder()
///     .budget(200)
///     .seal_key(SealKey::new("2026-11", [7u8; 32])?)
///     .agent_id("billing-agent-7")
///     .namespace("acme")
///     .build()?;
/// let first = compactor.compact_blocking(&State::default())?;
/// let second = compactor.compact_blocking(&State { step: 1 })?;
/// let binding = second.binding().expect("bound");
/// assert_eq!((binding.agent_id(), binding.namespace()), ("billing-agent-7", "acme"));
/// assert!(binding.sequence() > first.binding().unwrap().sequence());
/// # Ok::<(), compaction::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckpointBinding {
    agent_id: String,
    namespace: String,
    sequence: u64,
}

impl CheckpointBinding {
    pub(crate) fn new(agent_id: &str, namespace: &str, sequence: u64) -> Self {
        CheckpointBinding {
            agent_id: agent_id.to_owned(),
            namespace: namespace.to_owned(),
            sequence,
        }
    }

    /// The agent id the checkpoint belongs to.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The namespace it was made for (`""` where the backend has none: SQLite, memory).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Its sequence number: the number of the compaction that made it, which goes forward
    /// from one checkpoint of the agent to the next, also across restarts (a compactor
    /// continues after the newest checkpoint it verified and, in
    /// [`compact_with_ledger`](crate::Compactor::compact_with_ledger), after the newest the
    /// ledger recorded).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

impl fmt::Display for CheckpointBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, sequence {}",
            place(&self.agent_id, &self.namespace),
            self.sequence
        )
    }
}

/// "agent `a`" or "agent `a` in namespace `n`".
fn place(agent_id: &str, namespace: &str) -> String {
    if namespace.is_empty() {
        format!("agent `{agent_id}`")
    } else {
        format!("agent `{agent_id}` in namespace `{namespace}`")
    }
}

/// The `ForeignCheckpoint` message: what the checkpoint was expected to be, and what it says.
pub(crate) fn foreign_message(
    agent_id: &Option<String>,
    namespace: &str,
    found: &Option<Box<CheckpointBinding>>,
) -> String {
    let expected = match agent_id {
        Some(agent) => format!("{}'s", place(agent, namespace)),
        None => "a compactor's without an agent id (build it with .agent_id(..))".to_owned(),
    };
    match found {
        Some(binding) => format!("the checkpoint is bound to {binding}; it is not {expected}"),
        None => format!(
            "the checkpoint has a keyed seal but is bound to no agent (made before bindings, \
             or by a compactor without .agent_id(..)); it is not {expected}"
        ),
    }
}
