//! Whose a checkpoint is: the agent id and namespace a compactor binds into every checkpoint it
//! seals, with a sequence number that only goes forward, and the two rules that use them: a
//! compactor accepts only checkpoints bound as it binds (`Owner::check`), and a backend files
//! a checkpoint only under the agent and namespace it is bound to (`check_filed`).
//!
//! The binding is part of what both seals cover, so under a keyed seal nobody without the key
//! can move a checkpoint to another agent or namespace, or renumber it.

use crate::checkpoint::backend::CheckpointError;
use crate::checkpoint::seal::SealKeys;
use crate::error::CompactionError;
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
    found: &Option<CheckpointBinding>,
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

/// The agent (and namespace) a compactor binds its checkpoints to: set with
/// `CompactorBuilder::agent_id` and `namespace`; nobody by default.
#[derive(Debug, Clone, Default)]
pub(crate) struct Owner {
    agent_id: Option<String>,
    namespace: String,
}

impl Owner {
    pub(crate) fn set_agent_id(&mut self, agent_id: String) {
        self.agent_id = Some(agent_id);
    }

    pub(crate) fn set_namespace(&mut self, namespace: String) {
        self.namespace = namespace;
    }

    pub(crate) fn agent_id(&self) -> Option<&str> {
        self.agent_id.as_deref()
    }

    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The binding of the checkpoint numbered `sequence`; `None` without an agent id.
    pub(crate) fn bind(&self, sequence: u64) -> Option<CheckpointBinding> {
        let agent = self.agent_id.as_deref()?;
        Some(CheckpointBinding::new(agent, &self.namespace, sequence))
    }

    /// Whether a compactor bound to this owner, holding `keys`, accepts a checkpoint bound as
    /// `found` (its seals already verified). Bound to another agent or namespace: refused. Bound
    /// to nobody: refused by a keyed compactor that has an agent id, unless it accepts older
    /// checkpoints (`accept_unkeyed_checkpoints`, the one migration switch). Bound to somebody
    /// while the compactor has no agent id: refused when it has a key (it cannot tell whose),
    /// accepted otherwise (nothing to check against, as for unkeyed seals).
    pub(crate) fn check(
        &self,
        found: Option<&CheckpointBinding>,
        keys: &SealKeys,
    ) -> Result<(), CompactionError> {
        let refuse = || CompactionError::ForeignCheckpoint {
            agent_id: self.agent_id.clone(),
            namespace: self.namespace.clone(),
            found: found.cloned(),
        };
        match (self.agent_id.as_deref(), found) {
            (Some(agent), Some(binding)) => {
                if binding.agent_id == agent && binding.namespace == self.namespace {
                    Ok(())
                } else {
                    Err(refuse())
                }
            }
            (Some(_), None) if keys.signs() && !keys.accepts_unkeyed() => Err(refuse()),
            (None, Some(_)) if keys.signs() => Err(refuse()),
            _ => Ok(()),
        }
    }
}

/// Whether a checkpoint bound as `found` (with a keyed seal when `keyed`) may be saved or
/// loaded under `agent_id` in `namespace`: bound to exactly them, or bound to nobody without
/// a keyed seal (unkeyed checkpoints of compactors without an agent id, as before bindings).
/// A keyed checkpoint bound to nobody is refused on save (a keyed compactor must know its
/// agent to file under it) but loaded, so a migrating compactor can decide
/// (`CompactorBuilder::accept_unkeyed_checkpoints`).
pub(crate) fn check_filed(
    found: Option<&CheckpointBinding>,
    keyed: bool,
    saving: bool,
    agent_id: &str,
    namespace: &str,
) -> Result<(), CheckpointError> {
    let matches = match found {
        Some(binding) => binding.agent_id == agent_id && binding.namespace == namespace,
        None => !(keyed && saving),
    };
    if matches {
        return Ok(());
    }
    Err(CheckpointError::Foreign {
        agent_id: agent_id.to_owned(),
        namespace: namespace.to_owned(),
        found: found.cloned(),
    })
}
