//! Checkpoints: the latest `Compacted<S>` of each agent, so a killed agent resumes from it.
//! [`SqliteStore`] is a [`CheckpointStore`] (no namespaces: one file, one tenant); the typed
//! methods here are its synchronous form, for sync callers.

use super::now_ms;
use super::store::{raw_bytes, SqliteStore};
use crate::checkpoint::{check_agent_id, check_parent, MAX_PART_ROUNDS};
use crate::checkpoint::{
    CheckpointError, CheckpointInfo, CheckpointPart, CheckpointRow, CheckpointStore, Compacted,
    TakenEpoch,
};
use crate::error::CompactionError;
use crate::fence::Fence;
use crate::future::BoxFuture;
use crate::store::{ContentHash, StoreError};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use std::sync::Arc;
use std::time::Duration;

impl SqliteStore {
    /// Saves `compacted` as the latest checkpoint of `agent_id` (replacing the previous one)
    /// in one transaction.
    ///
    /// Refuses, saving nothing, when the checkpoint's seal is broken (`Integrity`), when it is
    /// bound to another agent or namespace, or keyed and bound to no agent
    /// (`ForeignCheckpoint`, see `CompactorBuilder::agent_id`), or when it
    /// points at a blob this store does not hold (`Store(NotFound)`): such a checkpoint could
    /// not be rehydrated after a restart, so compact with this store
    /// (`Compactor::builder().store(store.clone())`) before checkpointing into it.
    pub fn save_checkpoint<S>(
        &self,
        agent_id: &str,
        compacted: &Compacted<S>,
    ) -> Result<(), CompactionError> {
        let row = CheckpointRow::encode(compacted, agent_id, "", true)?;
        Ok(self.save_row_now(agent_id, &row, None)?)
    }

    /// Loads the latest checkpoint of `agent_id`; `Ok(None)` when there is none.
    ///
    /// Bytes that no longer parse as a checkpoint give `Integrity { field: "<checkpoint>" }`;
    /// a checkpoint bound to another agent or namespace (a row copied over this one) gives
    /// `ForeignCheckpoint`.
    /// Bytes that still parse but differ from what was saved (their SHA-256, stored next to
    /// them, does not match) come back with a broken seal: `verify_seal()` is `false` and
    /// `rehydrate` returns `Integrity { field: "<checkpoint>" }`. Either way a changed byte is
    /// never silently accepted.
    pub fn load_checkpoint<S>(
        &self,
        agent_id: &str,
    ) -> Result<Option<Compacted<S>>, CompactionError> {
        match self.load_row_now(agent_id)? {
            Some(mut row) => {
                // The manifest's parts, then its runs' messages; a round that finds nothing
                // ends it (decoding reports a part missing), as in `read_parts`.
                for _ in 0..MAX_PART_ROUNDS {
                    let needed = row.parts_needed()?;
                    let found = if needed.is_empty() {
                        Vec::new()
                    } else {
                        self.load_parts_now(&needed)?
                    };
                    if found.is_empty() {
                        break;
                    }
                    row = row.with_parts(found);
                }
                Ok(Some(row.decode(agent_id, "")?))
            }
            None => Ok(None),
        }
    }

    /// Saves `row`, over `parent` when given (`Some(None)`: over no checkpoint), under this
    /// handle's fence, in one transaction.
    fn save_row_now(
        &self,
        agent_id: &str,
        row: &CheckpointRow,
        parent: Option<Option<&str>>,
    ) -> Result<(), CheckpointError> {
        check_agent_id(agent_id)?;
        let context = || format!("saving the checkpoint of agent `{agent_id}`");
        let sql = |e| CheckpointError::from(self.store_error(context(), e));
        self.write(&context, |tx| {
            if let Some(parent) = parent {
                check_parent(agent_id, parent, stored_sha256(tx, agent_id).map_err(sql)?)?;
            }
            // Over its parent (checked above), the parts the parent holds are there.
            let over_parent = matches!(parent, Some(Some(_)));
            store_parts(tx, row.new_parts(over_parent)).map_err(sql)?;
            let mut held = tx
                .prepare_cached("SELECT 1 FROM blobs WHERE hash = ?1")
                .map_err(sql)?;
            for hash in row.blobs() {
                if !held.exists([hash.to_hex()]).map_err(sql)? {
                    return Err(StoreError::NotFound { hash: *hash }.into());
                }
            }
            tx.prepare_cached(
                "INSERT INTO checkpoints (agent_id, state_type, json, sha256, saved_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (agent_id) DO UPDATE SET state_type = excluded.state_type,
                     json = excluded.json, sha256 = excluded.sha256,
                     saved_at_ms = excluded.saved_at_ms",
            )
            .and_then(|mut save| {
                save.execute(rusqlite::params![
                    agent_id,
                    row.state_type(),
                    row.json_text(),
                    row.sha256(),
                    now_ms()
                ])
            })
            .map_err(sql)?;
            Ok(())
        })
    }

    /// The parts stored under `hashes` (those this store holds), read in one transaction.
    fn load_parts_now(
        &self,
        hashes: &[ContentHash],
    ) -> Result<Vec<CheckpointPart>, CheckpointError> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let map = |e| CheckpointError::from(self.store_error("loading checkpoint parts", e));
        let mut conn = self.db.lock();
        let tx = conn.transaction().map_err(map)?;
        let mut parts = Vec::with_capacity(hashes.len());
        {
            let mut read = tx
                .prepare_cached("SELECT bytes FROM blobs WHERE hash = ?1")
                .map_err(map)?;
            for hash in hashes {
                let bytes = read
                    .query_row([hash.to_hex()], |row| Ok(raw_bytes(row.get_ref(0)?)))
                    .optional()
                    .map_err(map)?
                    .flatten();
                if let Some(bytes) = bytes {
                    parts.push(CheckpointPart::stored(*hash, bytes));
                }
            }
        }
        tx.commit().map_err(map)?;
        Ok(parts)
    }

    fn load_row_now(&self, agent_id: &str) -> Result<Option<CheckpointRow>, CheckpointError> {
        check_agent_id(agent_id)?;
        let conn = self.db.lock();
        self.row_in(&conn, agent_id)
    }

    /// `agent_id`'s row as stored, read on `conn` (inside the caller's transaction, if any).
    fn row_in(
        &self,
        conn: &Connection,
        agent_id: &str,
    ) -> Result<Option<CheckpointRow>, CheckpointError> {
        let row = conn
            .prepare_cached("SELECT json, sha256 FROM checkpoints WHERE agent_id = ?1")
            .and_then(|mut read| {
                read.query_row([agent_id], |row| {
                    Ok((raw_bytes(row.get_ref(0)?), raw_bytes(row.get_ref(1)?)))
                })
                .optional()
            })
            .map_err(|e| {
                self.store_error(format!("loading the checkpoint of agent `{agent_id}`"), e)
            })?;
        let Some((json, sha256)) = row else {
            return Ok(None);
        };
        let json = json.ok_or(CheckpointError::Integrity)?;
        let sha256 = sha256.and_then(|hex| String::from_utf8(hex).ok());
        Ok(Some(CheckpointRow::stored(json, sha256)))
    }

    /// The saved checkpoints, by agent id.
    pub fn list_checkpoints(&self) -> Result<Vec<CheckpointInfo>, StoreError> {
        let conn = self.db.lock();
        let map = |e| self.store_error("listing checkpoints", e);
        let mut stmt = conn
            .prepare(
                "SELECT agent_id, state_type, saved_at_ms, length(CAST(json AS BLOB))
                 FROM checkpoints ORDER BY agent_id",
            )
            .map_err(map)?;
        let rows = stmt
            .query_map([], |row| {
                Ok(CheckpointInfo::from_row(
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                ))
            })
            .map_err(map)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(map)
    }

    /// Deletes the checkpoint of `agent_id`; returns whether there was one. The blobs it
    /// pointed at stay (other checkpoints may share them). No checkpoint is ever saved under
    /// an id with a NUL character, so there is none to delete.
    pub fn delete_checkpoint(&self, agent_id: &str) -> Result<bool, StoreError> {
        if check_agent_id(agent_id).is_err() {
            return Ok(false);
        }
        let context = || format!("deleting the checkpoint of agent `{agent_id}`");
        self.write(&context, |tx| {
            tx.execute("DELETE FROM checkpoints WHERE agent_id = ?1", [agent_id])
                .map(|deleted| deleted > 0)
                .map_err(|e| self.store_error(context(), e))
        })
    }

    /// `CheckpointStore::take_epoch`: the epoch taken and the row read in one transaction.
    fn take_epoch_now(
        &self,
        agent_id: &str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> Result<TakenEpoch, CheckpointError> {
        check_agent_id(agent_id)?;
        let context = || format!("opening a session of agent `{agent_id}`");
        let backend = |e| CheckpointError::from(self.store_error(context(), e));
        let mut conn = self.db.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend)?;
        let taken = super::fence::take(&tx, agent_id, at_least, lease)
            .map_err(backend)?
            .map_err(CheckpointError::Live)?;
        let row = self.row_in(&tx, agent_id)?;
        tx.commit().map_err(backend)?;
        Ok(TakenEpoch {
            epoch: taken.epoch,
            row,
        })
    }

    /// `CheckpointStore::renew`.
    fn renew_now(&self, agent_id: &str) -> Result<(), CheckpointError> {
        check_agent_id(agent_id)?;
        if self.fence.as_deref().map(Fence::agent_id) != Some(agent_id) {
            return Ok(());
        }
        let context = || format!("renewing the lease of agent `{agent_id}`");
        // The fence's check is the whole write (it renews when due).
        self.write(&context, |_| Ok::<_, CheckpointError>(()))
    }
}

/// Stores the parts of an incremental row that `tx`'s database does not hold yet (a part held
/// is the same bytes: its address is their SHA-256). Written with the blobs' time, so garbage
/// collection treats a part exactly as a blob.
fn store_parts<'a>(
    tx: &Connection,
    parts: impl Iterator<Item = &'a CheckpointPart>,
) -> rusqlite::Result<()> {
    let mut parts = parts.peekable();
    if parts.peek().is_none() {
        return Ok(());
    }
    let mut held = tx.prepare_cached("SELECT 1 FROM blobs WHERE hash = ?1")?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO blobs (hash, bytes, size, created_at_ms) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let now = now_ms();
    for part in parts {
        let hex = part.hash().to_hex();
        if held.exists([&hex])? {
            continue;
        }
        insert.execute(rusqlite::params![
            hex,
            part.bytes(),
            part.bytes().len() as i64,
            now
        ])?;
    }
    Ok(())
}

/// The checksum of `agent_id`'s stored row, the identity a save names as its parent.
fn stored_sha256(conn: &Connection, agent_id: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT sha256 FROM checkpoints WHERE agent_id = ?1")?
        .query_row([agent_id], |row| Ok(raw_bytes(row.get_ref(0)?)))
        .optional()
        .map(|found| found.flatten().and_then(|hex| String::from_utf8(hex).ok()))
}

impl CheckpointStore for SqliteStore {
    fn namespace(&self) -> &str {
        ""
    }

    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move { self.save_row_now(agent_id, row, None) })
    }

    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        Box::pin(async move { self.load_row_now(agent_id) })
    }

    fn stores_parts(&self) -> bool {
        true
    }

    fn load_parts<'a>(
        &'a self,
        hashes: &'a [ContentHash],
    ) -> BoxFuture<'a, Result<Vec<CheckpointPart>, CheckpointError>> {
        Box::pin(async move { self.load_parts_now(hashes) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>> {
        Box::pin(async move { Ok(self.list_checkpoints()?) })
    }

    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        Box::pin(async move {
            check_agent_id(agent_id)?;
            Ok(self.delete_checkpoint(agent_id)?)
        })
    }

    fn take_epoch<'a>(
        &'a self,
        agent_id: &'a str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> BoxFuture<'a, Result<Option<TakenEpoch>, CheckpointError>> {
        Box::pin(async move { self.take_epoch_now(agent_id, at_least, lease).map(Some) })
    }

    fn save_row_over<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
        parent: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move { self.save_row_now(agent_id, row, Some(parent)) })
    }

    fn renew<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move { self.renew_now(agent_id) })
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        Some(SqliteStore {
            db: Arc::clone(&self.db),
            fence: Some(Arc::new(fence.clone())),
        })
    }
}
