//! Checkpoints in PostgreSQL: the latest `Compacted<S>` of each agent of a namespace, so an
//! agent killed on one machine resumes from it on another. [`PgStore`] is a
//! [`CheckpointStore`] (its namespace is the handle's); the typed methods here are the same
//! operations on `Compacted<S>`, `async` like every method that talks to the server.

use super::error::Cause;
use super::hidden::hidden;
use super::store::PgStore;
use crate::checkpoint::check_agent_id;
use crate::checkpoint::{
    CheckpointError, CheckpointInfo, CheckpointRow, CheckpointStore, Compacted,
};
use crate::error::CompactionError;
use crate::future::BoxFuture;
use crate::store::{ContentHash, StoreError};
use std::future::Future;

/// How a save ended inside its transaction: done, or refused because a blob is missing.
enum Saved {
    Done,
    MissingBlob(ContentHash),
}

impl PgStore {
    /// Saves `compacted` as the latest checkpoint of `agent_id` in this namespace (replacing
    /// the previous one) in one transaction.
    ///
    /// Refuses, saving nothing, when the checkpoint's seal is broken (`Integrity`), when it is
    /// bound to another agent or namespace, or keyed and bound to no agent
    /// (`ForeignCheckpoint`, see `CompactorBuilder::agent_id`), or when it
    /// points at a blob this namespace does not hold (`Store(NotFound)`; a blob another
    /// namespace holds does not count): such a checkpoint could not be rehydrated after a
    /// restart, so compact with this store (`Compactor::builder().store(store.clone())`)
    /// before checkpointing into it.
    pub async fn save_checkpoint<S>(
        &self,
        agent_id: &str,
        compacted: &Compacted<S>,
    ) -> Result<(), CompactionError> {
        let row = CheckpointRow::encode(compacted, agent_id, self.namespace())?;
        Ok(self.save_row_task(agent_id, &row).await?)
    }

    /// Loads the latest checkpoint of `agent_id` in this namespace; `Ok(None)` when there is
    /// none (also when another namespace has one under the same agent id).
    ///
    /// Bytes that no longer parse as a checkpoint give `Integrity { field: "<checkpoint>" }`;
    /// a checkpoint bound to another agent or namespace (a row copied over this one) gives
    /// `ForeignCheckpoint`.
    /// Bytes that still parse but differ from what was saved (their SHA-256, stored next to
    /// them, does not match) come back with a broken seal: `verify_seal()` is `false` and
    /// `rehydrate` returns `Integrity { field: "<checkpoint>" }`.
    pub async fn load_checkpoint<S>(
        &self,
        agent_id: &str,
    ) -> Result<Option<Compacted<S>>, CompactionError> {
        match self.load_row_task(agent_id).await? {
            Some(row) => Ok(Some(row.decode(agent_id, self.namespace())?)),
            None => Ok(None),
        }
    }

    /// The saved checkpoints of this namespace, by agent id.
    pub async fn list_checkpoints(&self) -> Result<Vec<CheckpointInfo>, StoreError> {
        self.list_task().await
    }

    /// Deletes the checkpoint of `agent_id` in this namespace; returns whether there was one.
    /// The blobs it pointed at stay (other checkpoints may share them).
    /// No checkpoint is ever saved under an id with a NUL character, so there is none to
    /// delete.
    pub async fn delete_checkpoint(&self, agent_id: &str) -> Result<bool, StoreError> {
        if check_agent_id(agent_id).is_err() {
            return Ok(false);
        }
        self.delete_task(agent_id).await
    }

    fn save_row_task(
        &self,
        agent_id: &str,
        row: &CheckpointRow,
    ) -> impl Future<Output = Result<(), CheckpointError>> + Send + 'static {
        let refused = check_agent_id(agent_id).err();
        let hashes: Vec<String> = row.blobs().iter().map(ContentHash::to_hex).collect();
        let json = row.json_text().map(str::to_owned);
        let sha256 = row.sha256().map(str::to_owned);
        let agent = agent_id.to_string();
        let state_type = row.state_type().to_owned();
        let context = format!("saving the checkpoint of agent `{agent_id}`");
        let saved = self.run(context, move |db| async move {
            let mut client = db.client().await?;
            // READ COMMITTED whatever the server's default: a blob a garbage collection
            // removed while this waited for its lock is then simply not found.
            let tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
                .start()
                .await?;
            // `FOR KEY SHARE` holds the blobs until the checkpoint that needs them commits:
            // a garbage collection's `FOR UPDATE` on them waits for this transaction.
            let present = tx
                .query(
                    "SELECT hash FROM compaction.blobs
                     WHERE namespace = $1 AND hash = ANY($2) FOR KEY SHARE",
                    hidden![db.namespace(), hashes],
                )
                .await?;
            let present: Vec<String> = present
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<_, _>>()?;
            if let Some(missing) = hashes.iter().find(|h| !present.contains(h)) {
                let hash = ContentHash::from_hex(missing).expect("hex written by to_hex");
                return Ok(Saved::MissingBlob(hash)); // dropping `tx` rolls back
            }
            tx.execute(
                "INSERT INTO compaction.checkpoints
                     (namespace, agent_id, state_type, json, sha256, saved_at_ms)
                 VALUES ($1, $2, $3, $4, $5, compaction.now_ms())
                 ON CONFLICT (namespace, agent_id) DO UPDATE SET
                     state_type = excluded.state_type, json = excluded.json,
                     sha256 = excluded.sha256, saved_at_ms = excluded.saved_at_ms",
                hidden![db.namespace(), agent, state_type, json, sha256],
            )
            .await?;
            tx.commit().await?;
            Ok(Saved::Done)
        });
        async move {
            if let Some(refused) = refused {
                return Err(refused);
            }
            match saved.await? {
                Saved::Done => Ok(()),
                Saved::MissingBlob(hash) => Err(StoreError::NotFound { hash }.into()),
            }
        }
    }

    fn load_row_task(
        &self,
        agent_id: &str,
    ) -> impl Future<Output = Result<Option<CheckpointRow>, CheckpointError>> + Send + 'static {
        let refused = check_agent_id(agent_id).err();
        let agent = agent_id.to_string();
        let context = format!("loading the checkpoint of agent `{agent_id}`");
        let row = self.run(context, move |db| async move {
            let client = db.client().await?;
            let row = client
                .query_opt(
                    "SELECT json, sha256 FROM compaction.checkpoints
                     WHERE namespace = $1 AND agent_id = $2",
                    hidden![db.namespace(), agent],
                )
                .await?;
            Ok(match row {
                Some(row) => Some((row.try_get::<_, String>(0)?, row.try_get::<_, String>(1)?)),
                None => None,
            })
        });
        async move {
            if let Some(refused) = refused {
                return Err(refused);
            }
            Ok(row
                .await?
                .map(|(json, sha256)| CheckpointRow::stored(json.into_bytes(), Some(sha256))))
        }
    }

    fn list_task(
        &self,
    ) -> impl Future<Output = Result<Vec<CheckpointInfo>, StoreError>> + Send + 'static {
        self.run("listing checkpoints".into(), |db| async move {
            let client = db.client().await?;
            let rows = client
                .query(
                    "SELECT agent_id, state_type, saved_at_ms, octet_length(json)
                     FROM compaction.checkpoints WHERE namespace = $1 ORDER BY agent_id",
                    hidden![db.namespace()],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(CheckpointInfo::from_row(
                        row.try_get(0)?,
                        row.try_get(1)?,
                        row.try_get(2)?,
                        row.try_get::<_, i32>(3)?.into(),
                    ))
                })
                .collect::<Result<_, Cause>>()
        })
    }

    fn delete_task(
        &self,
        agent_id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send + 'static {
        let agent = agent_id.to_string();
        let context = format!("deleting the checkpoint of agent `{agent_id}`");
        self.run(context, move |db| async move {
            let client = db.client().await?;
            let n = client
                .execute(
                    "DELETE FROM compaction.checkpoints WHERE namespace = $1 AND agent_id = $2",
                    hidden![db.namespace(), agent],
                )
                .await?;
            Ok(n > 0)
        })
    }
}

impl CheckpointStore for PgStore {
    fn namespace(&self) -> &str {
        PgStore::namespace(self)
    }

    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(self.save_row_task(agent_id, row))
    }

    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        Box::pin(self.load_row_task(agent_id))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>> {
        let listed = self.list_task();
        Box::pin(async move { Ok(listed.await?) })
    }

    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        let refused = check_agent_id(agent_id).err();
        let deleted = self.delete_task(agent_id);
        Box::pin(async move {
            if let Some(refused) = refused {
                return Err(refused);
            }
            Ok(deleted.await?)
        })
    }
}
