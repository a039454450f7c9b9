//! Checkpoints in PostgreSQL: the latest `Compacted<S>` of each agent of a namespace, so an
//! agent killed on one machine resumes from it on another. [`PgStore`] is a
//! [`CheckpointStore`] (its namespace is the handle's); the typed methods here are the same
//! operations on `Compacted<S>`, `async` like every method that talks to the server.

use super::error::Cause;
use super::fence;
use super::hidden::hidden;
use super::store::{begin, PgStore};
use crate::checkpoint::{check_agent_id, check_parent};
use crate::checkpoint::{
    CheckpointError, CheckpointInfo, CheckpointPart, CheckpointRow, CheckpointStore, Compacted,
    TakenEpoch,
};
use crate::error::CompactionError;
use crate::fence::Fence;
use crate::future::BoxFuture;
use crate::store::{ContentHash, StoreError};
use deadpool_postgres::GenericClient;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// What a transaction of a checkpoint operation ends with: its value, or the refusal (nothing
/// written) it rolled back with.
type Refusable<T> = Result<T, CheckpointError>;

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
        let row = CheckpointRow::encode(compacted, agent_id, self.namespace(), true)?;
        Ok(self.save_row_task(agent_id, &row, None).await?)
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
            Some(row) => {
                let store: &dyn CheckpointStore = self;
                let row = store.read_parts(row).await?;
                Ok(Some(row.decode(agent_id, self.namespace())?))
            }
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
    /// delete. Through a fenced handle, refused with `StoreError::Superseded` once a newer
    /// session of the agent opened.
    pub async fn delete_checkpoint(&self, agent_id: &str) -> Result<bool, StoreError> {
        if check_agent_id(agent_id).is_err() {
            return Ok(false);
        }
        match self.delete_task(agent_id).await? {
            Ok(deleted) => Ok(deleted),
            Err(CheckpointError::Superseded(refusal)) => Err(StoreError::Superseded(refusal)),
            Err(CheckpointError::Store(e)) => Err(e),
            // A delete refuses nothing else.
            Err(other) => Err(StoreError::Backend {
                message: other.to_string(),
                source: Some(Box::new(other)),
            }),
        }
    }

    /// Saves `row`, over `parent` when given (`Some(None)`: over no checkpoint), under this
    /// handle's fence, in one transaction.
    fn save_row_task(
        &self,
        agent_id: &str,
        row: &CheckpointRow,
        parent: Option<Option<&str>>,
    ) -> impl Future<Output = Result<(), CheckpointError>> + Send + 'static {
        let refused = check_agent_id(agent_id).err();
        let mut hashes: Vec<String> = row.blobs().iter().map(ContentHash::to_hex).collect();
        // Over its parent (checked in the transaction below), the parts the parent holds stay
        // named by it until this row replaces it: neither sent nor locked.
        let over_parent = matches!(parent, Some(Some(_)));
        let parts: Vec<(String, Vec<u8>)> = row
            .new_parts(over_parent)
            .map(|part| (part.hash().to_hex(), part.bytes().to_vec()))
            .collect();
        hashes.extend(parts.iter().map(|(hash, _)| hash.clone()));
        let json = row.json_text().map(str::to_owned);
        let sha256 = row.sha256().map(str::to_owned);
        let agent = agent_id.to_string();
        let state_type = row.state_type().to_owned();
        let parent = parent.map(|p| p.map(str::to_owned));
        let fence = self.fence.clone();
        let context = format!("saving the checkpoint of agent `{agent_id}`");
        let saved = self.run(context, move |db| async move {
            let ns = db.namespace();
            let mut client = db.client().await?;
            // READ COMMITTED whatever the server's default: a blob a garbage collection
            // removed while this waited for its lock is then simply not found.
            let tx = begin(&mut client).await?;
            // The fence row first (every fenced write locks it before anything else, so
            // writers never deadlock on each other): a newer session's open waits for this
            // save, or this save sees its epoch. A refusal returns early: dropping `tx` rolls
            // back, nothing was written.
            if let Err(refusal) = fence::check(&tx, ns, fence.as_deref()).await? {
                return Ok(Err(CheckpointError::Superseded(refusal)));
            }
            if let Some(parent) = &parent {
                // The row stays locked to the commit: a second saver over the same parent
                // waits here, then finds this save's checksum.
                let found = stored_sha256(&tx, ns, &agent, true).await?;
                if let Err(conflict) = check_parent(&agent, parent.as_deref(), found) {
                    return Ok(Err(conflict));
                }
            }
            // `FOR KEY SHARE` holds the blobs until the checkpoint that needs them commits:
            // a garbage collection's `FOR UPDATE` on them waits for this transaction.
            let present = tx
                .query(
                    "SELECT hash FROM compaction.blobs
                     WHERE namespace = $1 AND hash = ANY($2) FOR KEY SHARE",
                    hidden![ns, hashes],
                )
                .await?;
            let present: std::collections::HashSet<String> = present
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<_, _>>()?;
            // The parts not held yet, written here (only their bytes cross the wire); held ones
            // are locked above like the blobs.
            let (new_hashes, new_bytes): (Vec<&String>, Vec<&Vec<u8>>) = parts
                .iter()
                .filter(|(hash, _)| !present.contains(hash))
                .map(|(hash, bytes)| (hash, bytes))
                .unzip();
            if !new_hashes.is_empty() {
                tx.execute(
                    "INSERT INTO compaction.blobs (namespace, hash, bytes, size, created_at_ms)
                     SELECT $1, part.hash, part.bytes, octet_length(part.bytes),
                            compaction.now_ms()
                     FROM unnest($2::text[], $3::bytea[]) AS part(hash, bytes)
                     ON CONFLICT (namespace, hash) DO NOTHING",
                    hidden![ns, new_hashes, new_bytes],
                )
                .await?;
            }
            let is_part = |hash: &String| parts.iter().any(|(part, _)| part == hash);
            if let Some(missing) = hashes.iter().find(|h| !present.contains(*h) && !is_part(h)) {
                let hash = ContentHash::from_hex(missing).expect("hex written by to_hex");
                return Ok(Err(StoreError::NotFound { hash }.into()));
            }
            let written = match &parent {
                None | Some(Some(_)) => {
                    tx.execute(
                        "INSERT INTO compaction.checkpoints
                             (namespace, agent_id, state_type, json, sha256, saved_at_ms)
                         VALUES ($1, $2, $3, $4, $5, compaction.now_ms())
                         ON CONFLICT (namespace, agent_id) DO UPDATE SET
                             state_type = excluded.state_type, json = excluded.json,
                             sha256 = excluded.sha256, saved_at_ms = excluded.saved_at_ms",
                        hidden![ns, agent, state_type, json, sha256],
                    )
                    .await?
                }
                // Over no checkpoint: `FOR UPDATE` above had no row to lock, so a concurrent
                // first save is caught here instead (this insert waits for it, then does
                // nothing).
                Some(None) => {
                    tx.execute(
                        "INSERT INTO compaction.checkpoints
                             (namespace, agent_id, state_type, json, sha256, saved_at_ms)
                         VALUES ($1, $2, $3, $4, $5, compaction.now_ms())
                         ON CONFLICT (namespace, agent_id) DO NOTHING",
                        hidden![ns, agent, state_type, json, sha256],
                    )
                    .await?
                }
            };
            if written == 0 {
                let found = stored_sha256(&tx, ns, &agent, false).await?;
                return Ok(Err(CheckpointError::conflict(&agent, None, found)));
            }
            tx.commit().await?;
            Ok(Ok(()))
        });
        async move {
            if let Some(refused) = refused {
                return Err(refused);
            }
            saved.await?
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

    /// The parts stored under `hashes` in this namespace (those it holds).
    fn load_parts_task(
        &self,
        hashes: Vec<ContentHash>,
    ) -> impl Future<Output = Result<Vec<CheckpointPart>, CheckpointError>> + Send + 'static {
        let hexes: Vec<String> = hashes.iter().map(ContentHash::to_hex).collect();
        let parts = self.run("loading checkpoint parts".into(), move |db| async move {
            if hexes.is_empty() {
                return Ok(Vec::new());
            }
            let client = db.client().await?;
            let parts = read_parts(&client, db.namespace(), &hexes).await?;
            Ok(parts)
        });
        async move { Ok(parts.await?) }
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
    ) -> impl Future<Output = Result<Refusable<bool>, StoreError>> + Send + 'static {
        let agent = agent_id.to_string();
        let fence = self.fence.clone();
        let context = format!("deleting the checkpoint of agent `{agent_id}`");
        self.run(context, move |db| async move {
            let mut client = db.client().await?;
            let tx = begin(&mut client).await?;
            if let Err(refusal) = fence::check(&tx, db.namespace(), fence.as_deref()).await? {
                return Ok(Err(CheckpointError::Superseded(refusal)));
            }
            let n = tx
                .execute(
                    "DELETE FROM compaction.checkpoints WHERE namespace = $1 AND agent_id = $2",
                    hidden![db.namespace(), agent],
                )
                .await?;
            tx.commit().await?;
            Ok(Ok(n > 0))
        })
    }

    /// `CheckpointStore::take_epoch`: the epoch taken and the row read in one transaction.
    fn take_epoch_task(
        &self,
        agent_id: &str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> impl Future<Output = Result<TakenEpoch, CheckpointError>> + Send + 'static {
        let refused = check_agent_id(agent_id).err();
        let agent = agent_id.to_string();
        let context = format!("opening a session of agent `{agent_id}`");
        let taken = self.run(context, move |db| async move {
            let mut client = db.client().await?;
            let tx = begin(&mut client).await?;
            let taken = match fence::take(&tx, db.namespace(), &agent, at_least, lease).await? {
                Ok(taken) => taken,
                Err(live) => return Ok(Err(CheckpointError::Live(live))),
            };
            // Read after the fence row is locked, in a statement of its own (READ COMMITTED:
            // it sees every save that committed before): a save of an older epoch either
            // committed before the lock, and is read here, or comes after and is refused.
            let row = read_row(&tx, db.namespace(), &agent).await?;
            tx.commit().await?;
            Ok(Ok(TakenEpoch {
                epoch: taken.epoch,
                row,
            }))
        });
        async move {
            if let Some(refused) = refused {
                return Err(refused);
            }
            taken.await?
        }
    }

    /// `CheckpointStore::renew`: the fence checked and renewed, nothing else written.
    fn renew_task(
        &self,
        agent_id: &str,
    ) -> impl Future<Output = Result<(), CheckpointError>> + Send + 'static {
        let refused = check_agent_id(agent_id).err();
        // Only the fence's own agent has a lease through this handle.
        let fence = self
            .fence
            .clone()
            .filter(|fence| fence.agent_id() == agent_id);
        let context = format!("renewing the lease of agent `{agent_id}`");
        let renewed = self.run(context, move |db| async move {
            let Some(fence) = fence else {
                return Ok(Ok(()));
            };
            let mut client = db.client().await?;
            let tx = begin(&mut client).await?;
            if let Err(refusal) = fence::check(&tx, db.namespace(), Some(&fence)).await? {
                return Ok(Err(CheckpointError::Superseded(refusal)));
            }
            tx.commit().await?;
            Ok(Ok(()))
        });
        async move {
            if let Some(refused) = refused {
                return Err(refused);
            }
            renewed.await?
        }
    }
}

/// `agent_id`'s row as stored, read inside the caller's transaction if any.
async fn read_row(
    client: &impl GenericClient,
    namespace: &str,
    agent_id: &str,
) -> Result<Option<CheckpointRow>, Cause> {
    let row = client
        .query_opt(
            "SELECT json, sha256 FROM compaction.checkpoints
             WHERE namespace = $1 AND agent_id = $2",
            hidden![namespace, agent_id],
        )
        .await?;
    Ok(match row {
        Some(row) => Some(CheckpointRow::stored(
            row.try_get::<_, String>(0)?.into_bytes(),
            Some(row.try_get::<_, String>(1)?),
        )),
        None => None,
    })
}

/// The checksum of `agent_id`'s stored row, the identity a save names as its parent; with
/// `lock`, the row stays locked until the caller's transaction ends.
async fn stored_sha256(
    client: &impl GenericClient,
    namespace: &str,
    agent_id: &str,
    lock: bool,
) -> Result<Option<String>, Cause> {
    let sql = if lock {
        "SELECT sha256 FROM compaction.checkpoints
         WHERE namespace = $1 AND agent_id = $2 FOR UPDATE"
    } else {
        "SELECT sha256 FROM compaction.checkpoints WHERE namespace = $1 AND agent_id = $2"
    };
    let row = client.query_opt(sql, hidden![namespace, agent_id]).await?;
    Ok(match row {
        Some(row) => Some(row.try_get(0)?),
        None => None,
    })
}

/// The parts (blobs) stored under `hexes` in `namespace`, those it holds; a row whose address is
/// not a hash names no part (loading finds that part missing).
pub(super) async fn read_parts(
    client: &impl GenericClient,
    namespace: &str,
    hexes: &[String],
) -> Result<Vec<CheckpointPart>, Cause> {
    let rows = client
        .query(
            "SELECT hash, bytes FROM compaction.blobs WHERE namespace = $1 AND hash = ANY($2)",
            hidden![namespace, hexes],
        )
        .await?;
    let mut parts = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(hash) = ContentHash::from_hex(&row.try_get::<_, String>(0)?) {
            parts.push(CheckpointPart::stored(hash, row.try_get(1)?));
        }
    }
    Ok(parts)
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
        Box::pin(self.save_row_task(agent_id, row, None))
    }

    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        Box::pin(self.load_row_task(agent_id))
    }

    fn stores_parts(&self) -> bool {
        true
    }

    fn load_parts<'a>(
        &'a self,
        hashes: &'a [ContentHash],
    ) -> BoxFuture<'a, Result<Vec<CheckpointPart>, CheckpointError>> {
        Box::pin(self.load_parts_task(hashes.to_vec()))
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
            deleted.await?
        })
    }

    fn take_epoch<'a>(
        &'a self,
        agent_id: &'a str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> BoxFuture<'a, Result<Option<TakenEpoch>, CheckpointError>> {
        let taken = self.take_epoch_task(agent_id, at_least, lease);
        Box::pin(async move { taken.await.map(Some) })
    }

    fn save_row_over<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
        parent: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(self.save_row_task(agent_id, row, Some(parent)))
    }

    fn renew<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(self.renew_task(agent_id))
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        Some(PgStore {
            db: Arc::clone(&self.db),
            fence: Some(Arc::new(fence.clone())),
        })
    }
}
