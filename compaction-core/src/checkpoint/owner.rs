//! Whom a compactor binds its checkpoints to, and the rule its binding serves: a compactor
//! accepts only checkpoints bound as it binds ([`Owner::check`]). (Backends file a checkpoint
//! only under the agent and namespace it is bound to: `codec.rs`.)

use crate::binding::CheckpointBinding;
use crate::checkpoint::seal::SealKeys;
use crate::error::CompactionError;

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
            found: found.cloned().map(Box::new),
        };
        match (self.agent_id.as_deref(), found) {
            (Some(agent), Some(binding)) => {
                if binding.agent_id() == agent && binding.namespace() == self.namespace {
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
