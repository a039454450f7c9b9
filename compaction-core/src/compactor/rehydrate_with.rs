//! [`Compactor::rehydrate_with`]: rehydration with options, reporting what did not come back as
//! it was.

use crate::compacted::Compacted;
use crate::compactor::builder::Compactor;
use crate::compactor::trace;
use crate::error::CompactionError;
use crate::future::block_on;
use crate::rehydrate::{rehydrate, Reacquire, RehydrateOptions, Rehydrated};
use crate::state::compactable::Compactable;
use tracing::Instrument;

impl Compactor {
    /// [`rehydrate`](Self::rehydrate) with `options`; the result names every field that came
    /// back as `Default` because it could not be re-acquired (see [`RehydrateOptions`]).
    pub async fn rehydrate_with<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
        options: RehydrateOptions,
    ) -> Result<Rehydrated<S>, CompactionError> {
        let span = trace::rehydrate_span(S::schema().type_name());
        let rehydrated = rehydrate(
            &*self.store,
            compacted,
            &self.seal_keys,
            reacquirer,
            options,
        )
        .instrument(span.clone())
        .await;
        match &rehydrated {
            // The checkpoint verified: the next compaction of this transcript continues it.
            Ok(_) => self.install_memory(compacted),
            Err(error) => trace::refused(&span, error),
        }
        rehydrated
    }

    /// Installs the planner memory a checkpoint carries, after checking its seals (as
    /// [`verify_checkpoint`](Self::verify_checkpoint)): the next compaction of its transcript
    /// (the same messages, grown by appends, in any process) plans exactly as the compactor
    /// that wrote the checkpoint would have, with the same blocks, handles and forms, so
    /// requests keep their prefix and handles their meaning across a restart.
    /// [`rehydrate`](Self::rehydrate) does it too; call this when the agent keeps its own state
    /// and only needs the compactor to continue. A checkpoint without a transcript installs
    /// nothing.
    ///
    /// ```
    /// use compaction::{Compactable, Compactor, Compacted, Message, Tokenizer, Transcript};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Compactable, Serialize, Deserialize, Clone)]
    /// struct Agent {
    ///     #[transcript]
    ///     chat: Transcript,
    /// }
    ///
    /// let build = || Compactor::builder().budget(1_500).token_counter(Tokenizer::O200kBase).build();
    /// let mut agent = Agent { chat: Transcript::new() };
    /// for turn in 0..100 {
    ///     agent.chat.push(Message::user(format!("step {turn}")));
    ///     agent.chat.push(Message::assistant("done ".repeat(20)));
    /// }
    /// let before = build()?;
    /// let saved = serde_json::to_string(&before.compact_blocking(&agent)?).unwrap();
    ///
    /// // Another process: load the checkpoint and the agent's state, resume, go on.
    /// let after = build()?;
    /// let checkpoint: Compacted<Agent> = serde_json::from_str(&saved).unwrap();
    /// after.resume(&checkpoint)?;
    /// agent.chat.push(Message::user("next"));
    /// let warm = before.compact_blocking(&agent)?;
    /// let cold = after.compact_blocking(&agent)?;
    /// assert_eq!(warm.messages(), cold.messages());
    /// # Ok::<(), compaction::CompactionError>(())
    /// ```
    pub fn resume<S>(&self, compacted: &Compacted<S>) -> Result<(), CompactionError> {
        self.verify_checkpoint(compacted)?;
        self.install_memory(compacted);
        Ok(())
    }

    fn install_memory<S>(&self, compacted: &Compacted<S>) {
        if let Some(transcript) = &compacted.transcript {
            self.transcript_planner.resume(transcript.planner_memory());
        }
    }

    /// [`rehydrate_with`](Self::rehydrate_with) for synchronous callers.
    pub fn rehydrate_with_blocking<S: Compactable>(
        &self,
        compacted: &Compacted<S>,
        reacquirer: &impl Reacquire,
        options: RehydrateOptions,
    ) -> Result<Rehydrated<S>, CompactionError> {
        block_on(self.rehydrate_with(compacted, reacquirer, options))
    }
}
