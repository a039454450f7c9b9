//! `PgStore`: content-addressed blobs of one namespace in a shared PostgreSQL database.

use super::db::{spawn, Db};
use super::error::{Cause, PgError};
use super::hidden::hidden;
use super::PgOptions;
use crate::fence::{Fence, Superseded};
use crate::store::{entry_name_shown, ContentHash, Store, StoreError};
use deadpool_postgres::{GenericClient, Transaction};
use std::future::Future;
use std::sync::Arc;

/// A durable [`Store`] for a fleet: spilled values as content-addressed blobs in PostgreSQL,
/// plus the latest checkpoint of each agent
/// ([`save_checkpoint`](Self::save_checkpoint), [`load_checkpoint`](Self::load_checkpoint)),
/// all confined to the namespace the handle was opened for.
///
/// - `put` is idempotent (the same content is stored once per namespace), one statement; it
///   refuses bytes that do not hash to the given address, and repairs a stored blob that no
///   longer matches its address.
/// - `get` re-hashes what it reads: `StoreError::Integrity` when the bytes were altered,
///   `StoreError::NotFound` when this namespace holds nothing under the hash (whether or not
///   another namespace does).
/// - Named entries ([`put_entry`](Store::put_entry), the summary cache) are per namespace too:
///   a fleet's processes on one namespace share their cached summaries, tenants never do.
/// - Clones share one connection pool.
/// - A handle [`fenced`](crate::checkpoint::CheckpointStore::fenced) for a session checks its
///   epoch in the transaction of each of its writes (blob and entry puts, checkpoint saves and
///   deletes), under a lock on the agent's fence row (see [`crate::fence`]).
///
/// Every method that talks to the server is `async`: it waits on the network without blocking
/// the caller's executor (a tokio worker of an async agent goes on serving other tasks). The
/// futures are `Send` and run on any executor: the backend drives its connections on a small
/// runtime of its own. There are no blocking twins; synchronous code (a command-line tool, a
/// script, the `migration_agent` example) runs them to completion with
/// [`compaction::block_on`](crate::block_on), which works on any thread.
///
/// ```no_run
/// use compaction::{ContentHash, PgStore, Store, StoreError};
///
/// # async fn run() -> Result<(), StoreError> {
/// let store = PgStore::connect("postgres://agent@db.internal/agents", "acme").await?;
/// let bytes = b"[\"never touch /etc/prod\"]";
/// let hash = ContentHash::of(bytes);
/// store.put(&hash, bytes).await?;
/// assert_eq!(store.get(&hash).await?, bytes);
///
/// // Another tenant on the same database sees nothing of it.
/// let other = PgStore::connect("postgres://agent@db.internal/agents", "globex").await?;
/// assert!(!other.contains(&hash).await?);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PgStore {
    pub(super) db: Arc<Db>,
    /// The session this handle writes for, when fenced: every write checks it in its own
    /// transaction (see [`crate::fence`]).
    pub(super) fence: Option<Arc<Fence>>,
}

impl PgStore {
    /// Connects to the database `url` names (`postgres://user@host:port/dbname` or
    /// `host=... dbname=...`) for `namespace`, creating the schema when missing, with the
    /// default [`PgOptions`]. A bad connection string or namespace, an unreachable server or
    /// a schema written by a newer version gives `StoreError::Backend` whose message names the
    /// server and namespace and whose source is a [`PgError`].
    pub async fn connect(url: &str, namespace: &str) -> Result<PgStore, StoreError> {
        Self::connect_with(url, namespace, &PgOptions::default()).await
    }

    /// [`connect`](Self::connect) with options (pool size, timeouts).
    pub async fn connect_with(
        url: &str,
        namespace: &str,
        options: &PgOptions,
    ) -> Result<PgStore, StoreError> {
        let db = Db::connect(url, namespace, options)
            .await
            .map_err(PgError::into_store_error)?;
        Ok(PgStore { db, fence: None })
    }

    /// The namespace this handle reads and writes.
    pub fn namespace(&self) -> &str {
        self.db.namespace()
    }

    /// The server and database, as `host:port/dbname`.
    pub fn target(&self) -> &str {
        self.db.target()
    }

    /// Whether this namespace holds a blob under `hash` (without reading or verifying it).
    pub async fn contains(&self, hash: &ContentHash) -> Result<bool, StoreError> {
        let hex = hash.to_hex();
        self.run(format!("looking up blob {hash}"), |db| async move {
            let client = db.client().await?;
            let stmt = client
                .prepare_cached("SELECT 1 FROM compaction.blobs WHERE namespace = $1 AND hash = $2")
                .await?;
            Ok(client
                .query_opt(&stmt, hidden![db.namespace(), hex])
                .await?
                .is_some())
        })
        .await
    }

    /// Number of blobs this namespace holds.
    pub async fn blob_count(&self) -> Result<usize, StoreError> {
        self.run("counting blobs".into(), |db| async move {
            let client = db.client().await?;
            let row = client
                .query_one(
                    "SELECT count(*) FROM compaction.blobs WHERE namespace = $1",
                    hidden![db.namespace()],
                )
                .await?;
            Ok(row.try_get::<_, i64>(0)?.max(0) as usize)
        })
        .await
    }

    /// Runs `op` on the backend's runtime with this handle's pool; a failure becomes a
    /// `StoreError::Backend` naming what the store was doing.
    pub(super) fn run<T, Op, Fut>(
        &self,
        context: String,
        op: Op,
    ) -> impl Future<Output = Result<T, StoreError>> + Send
    where
        T: Send + 'static,
        Op: FnOnce(Arc<Db>) -> Fut,
        Fut: Future<Output = Result<T, Cause>> + Send + 'static,
    {
        let db = Arc::clone(&self.db);
        let task = op(Arc::clone(&db));
        // Spawned when first polled: a future dropped unpolled writes nothing.
        async move {
            spawn(async move {
                task.await
                    .map_err(|cause| db.error(context, cause).into_store_error())
            })
            .await
        }
    }
}

impl Store for PgStore {
    fn put(
        &self,
        hash: &ContentHash,
        bytes: &[u8],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let verified = hash.matches(bytes);
        let hash = *hash;
        let bytes = bytes.to_vec();
        let fence = self.fence.clone();
        let write = self.run(format!("storing blob {hash}"), move |db| async move {
            let mut client = db.client().await?;
            let Some(fence) = fence else {
                // Unfenced: one statement, no transaction around it.
                put_blob(&client, db.namespace(), &hash, &bytes).await?;
                return Ok(Ok(()));
            };
            let tx = begin(&mut client).await?;
            if let Err(refusal) = super::fence::check(&tx, db.namespace(), Some(&fence)).await? {
                return Ok(Err(refusal)); // dropping `tx` rolls back
            }
            put_blob(&tx, db.namespace(), &hash, &bytes).await?;
            tx.commit().await?;
            Ok(Ok(()))
        });
        async move {
            if !verified {
                return Err(StoreError::Integrity { hash });
            }
            flatten(write.await)
        }
    }

    fn get(&self, hash: &ContentHash) -> impl Future<Output = Result<Vec<u8>, StoreError>> + Send {
        let hash = *hash;
        let read = self.run(format!("reading blob {hash}"), move |db| async move {
            let client = db.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT bytes FROM compaction.blobs WHERE namespace = $1 AND hash = $2",
                )
                .await?;
            let row = client
                .query_opt(&stmt, hidden![db.namespace(), hash.to_hex()])
                .await?;
            Ok(match row {
                Some(row) => Some(row.try_get::<_, Vec<u8>>(0)?),
                None => None,
            })
        });
        async move {
            let bytes = read.await?.ok_or(StoreError::NotFound { hash })?;
            if !hash.matches(&bytes) {
                return Err(StoreError::Integrity { hash });
            }
            Ok(bytes)
        }
    }

    /// `get` hashes what it read: `Integrity` for a row altered in the database.
    fn verifies_reads(&self) -> bool {
        true
    }

    fn put_entry(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let (name, bytes) = (name.to_owned(), bytes.to_vec());
        let context = format!("storing entry `{}`", entry_name_shown(&name));
        let fence = self.fence.clone();
        let write = self.run(context, move |db| async move {
            let mut client = db.client().await?;
            let Some(fence) = fence else {
                put_named(&client, db.namespace(), &name, &bytes).await?;
                return Ok(Ok(()));
            };
            let tx = begin(&mut client).await?;
            if let Err(refusal) = super::fence::check(&tx, db.namespace(), Some(&fence)).await? {
                return Ok(Err(refusal));
            }
            put_named(&tx, db.namespace(), &name, &bytes).await?;
            tx.commit().await?;
            Ok(Ok(()))
        });
        async move { flatten(write.await) }
    }

    fn get_entry(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send {
        let name = name.to_owned();
        let context = format!("reading entry `{}`", entry_name_shown(&name));
        self.run(context, move |db| async move {
            let client = db.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT bytes FROM compaction.entries WHERE namespace = $1 AND name = $2",
                )
                .await?;
            let row = client
                .query_opt(&stmt, hidden![db.namespace(), name])
                .await?;
            Ok(match row {
                Some(row) => Some(row.try_get::<_, Vec<u8>>(0)?),
                None => None,
            })
        })
    }
}

/// A READ COMMITTED transaction, whatever the server's default: each statement then sees what
/// committed before it, so a write that waited for the fence row's lock reads the epoch the
/// holder left (under REPEATABLE READ it would fail to serialize instead).
pub(super) async fn begin(
    client: &mut deadpool_postgres::Object,
) -> Result<Transaction<'_>, tokio_postgres::Error> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .start()
        .await
}

/// Stores a blob (one statement), inside the caller's transaction if any.
async fn put_blob(
    client: &impl GenericClient,
    namespace: &str,
    hash: &ContentHash,
    bytes: &[u8],
) -> Result<(), Cause> {
    // Same content: nothing to write. A stored blob that no longer matches its hash (altered
    // in the database) is replaced by the good bytes. Storing content again refreshes its time
    // (at most once a minute, so repeated puts stay reads), which keeps it from garbage
    // collection until the caller's checkpoint refers to it.
    let stmt = client
        .prepare_cached(
            "INSERT INTO compaction.blobs (namespace, hash, bytes, size, created_at_ms)
             VALUES ($1, $2, $3, $4, compaction.now_ms())
             ON CONFLICT (namespace, hash) DO UPDATE
                 SET bytes = excluded.bytes, size = excluded.size,
                     created_at_ms = excluded.created_at_ms
                 WHERE compaction.blobs.bytes IS DISTINCT FROM excluded.bytes
                    OR compaction.blobs.created_at_ms < excluded.created_at_ms - 60000",
        )
        .await?;
    client
        .execute(
            &stmt,
            hidden![namespace, hash.to_hex(), bytes, (bytes.len() as i64),],
        )
        .await?;
    Ok(())
}

/// Stores a named entry (one statement), inside the caller's transaction if any.
async fn put_named(
    client: &impl GenericClient,
    namespace: &str,
    name: &str,
    bytes: &[u8],
) -> Result<(), Cause> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO compaction.entries (namespace, name, bytes, updated_at_ms)
             VALUES ($1, $2, $3, compaction.now_ms())
             ON CONFLICT (namespace, name) DO UPDATE
                 SET bytes = excluded.bytes, updated_at_ms = excluded.updated_at_ms",
        )
        .await?;
    client
        .execute(&stmt, hidden![namespace, name, bytes])
        .await?;
    Ok(())
}

/// A fenced write's refusal, or the database's failure, as the store error it is.
fn flatten<T>(result: Result<Result<T, Superseded>, StoreError>) -> Result<T, StoreError> {
    result?.map_err(StoreError::Superseded)
}

// How a `PgError` crosses the `Store` trait: here, not in error.rs, so the error type stays
// below the store vocabulary in the module graph.
impl PgError {
    /// The `PgError` inside a store error, if the store is a [`PgStore`](super::PgStore).
    pub fn from_store_error(error: &StoreError) -> Option<&PgError> {
        match error {
            StoreError::Backend {
                source: Some(source),
                ..
            } => source.downcast_ref::<PgError>(),
            _ => None,
        }
    }

    /// Wraps this error as a store error whose message names the server and namespace.
    pub(crate) fn into_store_error(self) -> StoreError {
        StoreError::Backend {
            message: self.to_string(),
            source: Some(Box::new(self)),
        }
    }
}
