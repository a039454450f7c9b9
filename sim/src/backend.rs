//! The durable backends a run is simulated on, each the library's real one: `memory`
//! (`MemoryStore` + `MemoryLedger`), `sqlite` (`SqliteStore` + `SqliteLedger` in one temporary
//! file, the embedded default) and `postgres` (`PgStore` + `PgLedger` on a server, one
//! namespace per run; feature `postgres`). [`Durable`] and [`AnyLedger`] hold whichever the run
//! chose behind the library's own traits, so the fault wrappers, the session and the checks are
//! written once for all three.

use compaction::fence::{Fence, FenceRecord};
use compaction::{
    AnnotatedTransition, BoxFuture, CheckpointError, CheckpointInfo, CheckpointPart, CheckpointRow,
    CheckpointStore, ContentHash, Effect, EffectError, EffectLedger, EffectLog, EffectStatus,
    MemoryLedger, MemoryStore, Settlement, SqliteLedger, SqliteLedgerError, SqliteStore, Store,
    StoreError, SyncSummary, TakenEpoch, Transition,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Which backend a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// `MemoryStore` and `MemoryLedger`.
    Memory,
    /// `SqliteStore` and `SqliteLedger` in one temporary file.
    Sqlite,
    /// `PgStore` and `PgLedger` on the server [`set_postgres_url`] names (feature `postgres`).
    Postgres,
}

impl BackendKind {
    /// Parses `memory`, `sqlite` or `postgres`.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "memory" => Ok(BackendKind::Memory),
            "sqlite" => Ok(BackendKind::Sqlite),
            "postgres" => Ok(BackendKind::Postgres),
            other => Err(format!(
                "unknown backend `{other}`: write memory, sqlite or postgres"
            )),
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Memory => "memory",
            BackendKind::Sqlite => "sqlite",
            BackendKind::Postgres => "postgres",
        }
    }
}

static POSTGRES_URL: OnceLock<String> = OnceLock::new();

/// The PostgreSQL server every `postgres` run of this process uses (set once; each run takes a
/// namespace of its own on it). The command line and `tests/postgres.rs` start a throwaway one
/// with the facade's test harness (`tests/pg/harness.rs`) when none is given.
pub fn set_postgres_url(url: String) {
    let _ = POSTGRES_URL.set(url);
}

/// A run's store, on the backend it chose.
#[derive(Clone)]
pub enum Durable {
    /// In memory.
    Memory(MemoryStore),
    /// SQLite.
    Sqlite(SqliteStore),
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(compaction::PgStore),
}

/// A run's ledger, on the same backend as its store.
#[derive(Clone)]
pub enum AnyLedger {
    /// In memory.
    Memory(MemoryLedger),
    /// SQLite (the store's file).
    Sqlite(SqliteLedger),
    /// PostgreSQL (the store's namespace).
    #[cfg(feature = "postgres")]
    Postgres(compaction::PgLedger),
}

/// The temporary files of a `sqlite` run, removed when the run ends.
pub struct TempFiles(Option<PathBuf>);

impl Drop for TempFiles {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut name = path.clone().into_os_string();
                name.push(suffix);
                let _ = std::fs::remove_file(name);
            }
        }
    }
}

static RUNS: AtomicU64 = AtomicU64::new(0);

/// A fresh store and ledger of `kind` for the run of `seed`, and what to remove after it.
pub fn open(kind: BackendKind, seed: u64) -> Result<(Durable, AnyLedger, TempFiles), String> {
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    match kind {
        BackendKind::Memory => Ok((
            Durable::Memory(MemoryStore::new()),
            AnyLedger::Memory(MemoryLedger::new()),
            TempFiles(None),
        )),
        BackendKind::Sqlite => {
            let path = std::env::temp_dir().join(format!(
                "compaction-sim-{}-{seed}-{run}.db",
                std::process::id()
            ));
            let files = TempFiles(Some(path.clone()));
            let store = SqliteStore::open(&path).map_err(|e| e.to_string())?;
            let ledger = SqliteLedger::open(&path).map_err(|e| e.to_string())?;
            Ok((Durable::Sqlite(store), AnyLedger::Sqlite(ledger), files))
        }
        BackendKind::Postgres => open_postgres(seed, run),
    }
}

#[cfg(feature = "postgres")]
fn open_postgres(seed: u64, run: u64) -> Result<(Durable, AnyLedger, TempFiles), String> {
    use compaction::postgres::PgOptions;
    let url = POSTGRES_URL
        .get()
        .ok_or("no PostgreSQL server: set_postgres_url was not called")?;
    let namespace = format!("sim-{}-{seed}-{run}", std::process::id());
    let options = PgOptions::new()
        .max_connections(2)
        .connect_timeout(Duration::from_secs(10));
    let store = compaction::block_on(compaction::PgStore::connect_with(url, &namespace, &options))
        .map_err(|e| e.to_string())?;
    let ledger = compaction::block_on(compaction::PgLedger::connect_with(
        url, &namespace, &options,
    ))
    .map_err(|e| e.to_string())?;
    Ok((
        Durable::Postgres(store),
        AnyLedger::Postgres(ledger),
        TempFiles(None),
    ))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_seed: u64, _run: u64) -> Result<(Durable, AnyLedger, TempFiles), String> {
    let _ = (&POSTGRES_URL, Duration::ZERO);
    Err("the postgres backend needs the simulator built with `--features postgres`".into())
}

impl Durable {
    /// The memory store, when the run is on memory (the warm twin copies it).
    pub fn as_memory(&self) -> Option<&MemoryStore> {
        match self {
            Durable::Memory(store) => Some(store),
            _ => None,
        }
    }
}

/// `$body` on whichever store `$on` holds, bound to `$s`.
macro_rules! each_store {
    ($on:expr, $s:ident => $body:expr) => {
        match $on {
            Durable::Memory($s) => $body,
            Durable::Sqlite($s) => $body,
            #[cfg(feature = "postgres")]
            Durable::Postgres($s) => $body,
        }
    };
}

impl Store for Durable {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        each_store!(self, s => Store::put(s, hash, bytes).await)
    }

    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        each_store!(self, s => Store::get(s, hash).await)
    }

    async fn put_entry(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        each_store!(self, s => Store::put_entry(s, name, bytes).await)
    }

    async fn get_entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        each_store!(self, s => Store::get_entry(s, name).await)
    }
}

impl CheckpointStore for Durable {
    fn namespace(&self) -> &str {
        each_store!(self, s => CheckpointStore::namespace(s))
    }

    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        each_store!(self, s => CheckpointStore::save_row(s, agent_id, row))
    }

    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        each_store!(self, s => CheckpointStore::load_row(s, agent_id))
    }

    fn stores_parts(&self) -> bool {
        each_store!(self, s => CheckpointStore::stores_parts(s))
    }

    fn load_parts<'a>(
        &'a self,
        hashes: &'a [ContentHash],
    ) -> BoxFuture<'a, Result<Vec<CheckpointPart>, CheckpointError>> {
        each_store!(self, s => CheckpointStore::load_parts(s, hashes))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>> {
        each_store!(self, s => CheckpointStore::list(s))
    }

    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        each_store!(self, s => CheckpointStore::delete(s, agent_id))
    }

    fn take_epoch<'a>(
        &'a self,
        agent_id: &'a str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> BoxFuture<'a, Result<Option<TakenEpoch>, CheckpointError>> {
        each_store!(self, s => CheckpointStore::take_epoch(s, agent_id, at_least, lease))
    }

    fn save_row_over<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
        parent: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        each_store!(self, s => CheckpointStore::save_row_over(s, agent_id, row, parent))
    }

    fn renew<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), CheckpointError>> {
        each_store!(self, s => CheckpointStore::renew(s, agent_id))
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        match self {
            Durable::Memory(s) => CheckpointStore::fenced(s, fence).map(Durable::Memory),
            Durable::Sqlite(s) => CheckpointStore::fenced(s, fence).map(Durable::Sqlite),
            #[cfg(feature = "postgres")]
            Durable::Postgres(s) => CheckpointStore::fenced(s, fence).map(Durable::Postgres),
        }
    }
}

/// A ledger error, of whichever ledger the run holds.
#[derive(Debug)]
pub enum AnyLedgerError {
    /// The memory ledger's.
    Memory(EffectError),
    /// SQLite's.
    Sqlite(SqliteLedgerError),
    /// PostgreSQL's.
    #[cfg(feature = "postgres")]
    Postgres(compaction::PgLedgerError),
}

impl std::fmt::Display for AnyLedgerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnyLedgerError::Memory(e) => e.fmt(f),
            AnyLedgerError::Sqlite(e) => e.fmt(f),
            #[cfg(feature = "postgres")]
            AnyLedgerError::Postgres(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AnyLedgerError {}

/// `$call` on whichever ledger `$on` holds (bound to `$l`), its error wrapped.
macro_rules! each_ledger {
    ($on:expr, $l:ident => $call:expr) => {
        Box::pin(async move {
            match $on {
                AnyLedger::Memory($l) => $call.await.map_err(AnyLedgerError::Memory),
                AnyLedger::Sqlite($l) => $call.await.map_err(AnyLedgerError::Sqlite),
                #[cfg(feature = "postgres")]
                AnyLedger::Postgres($l) => $call.await.map_err(AnyLedgerError::Postgres),
            }
        })
    };
}

type Res<'a, T> = BoxFuture<'a, Result<T, AnyLedgerError>>;

impl EffectLedger for AnyLedger {
    type Error = AnyLedgerError;

    fn refusal(error: &Self::Error) -> Option<&EffectError> {
        match error {
            AnyLedgerError::Memory(e) => MemoryLedger::refusal(e),
            AnyLedgerError::Sqlite(e) => SqliteLedger::refusal(e),
            #[cfg(feature = "postgres")]
            AnyLedgerError::Postgres(e) => compaction::PgLedger::refusal(e),
        }
    }

    fn record<'a>(&'a self, scope: &'a str, effect: &'a Effect) -> Res<'a, ()> {
        each_ledger!(self, l => EffectLedger::record(l, scope, effect))
    }

    fn begin_effect<'a>(&'a self, scope: &'a str, effect: &'a Effect) -> Res<'a, ()> {
        each_ledger!(self, l => EffectLedger::begin_effect(l, scope, effect))
    }

    fn begin<'a>(&'a self, scope: &'a str, key: &'a str) -> Res<'a, ()> {
        each_ledger!(self, l => EffectLedger::begin(l, scope, key))
    }

    fn commit<'a>(&'a self, scope: &'a str, key: &'a str) -> Res<'a, ()> {
        each_ledger!(self, l => EffectLedger::commit(l, scope, key))
    }

    fn fail<'a>(&'a self, scope: &'a str, key: &'a str) -> Res<'a, ()> {
        each_ledger!(self, l => EffectLedger::fail(l, scope, key))
    }

    fn reconcile<'a>(&'a self, scope: &'a str, key: &'a str, status: EffectStatus) -> Res<'a, ()> {
        each_ledger!(self, l => EffectLedger::reconcile(l, scope, key, status))
    }

    fn set_payload<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        payload: &'a serde_json::Value,
    ) -> Res<'a, ()> {
        each_ledger!(self, l => EffectLedger::set_payload(l, scope, key, payload))
    }

    fn get<'a>(&'a self, scope: &'a str, key: &'a str) -> Res<'a, Option<Effect>> {
        each_ledger!(self, l => EffectLedger::get(l, scope, key))
    }

    fn status<'a>(&'a self, scope: &'a str, key: &'a str) -> Res<'a, Option<EffectStatus>> {
        each_ledger!(self, l => EffectLedger::status(l, scope, key))
    }

    fn load_log<'a>(&'a self, scope: &'a str) -> Res<'a, EffectLog> {
        each_ledger!(self, l => EffectLedger::load_log(l, scope))
    }

    fn load_all(&self) -> Res<'_, BTreeMap<String, EffectLog>> {
        each_ledger!(self, l => EffectLedger::load_all(l))
    }

    fn sync_log<'a>(&'a self, scope: &'a str, log: &'a EffectLog) -> Res<'a, SyncSummary> {
        each_ledger!(self, l => EffectLedger::sync_log(l, scope, log))
    }

    fn history<'a>(&'a self, scope: &'a str, key: &'a str) -> Res<'a, Vec<Transition>> {
        each_ledger!(self, l => EffectLedger::history(l, scope, key))
    }

    fn settle<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        settlement: &'a Settlement,
    ) -> Res<'a, ()> {
        each_ledger!(self, l => EffectLedger::settle(l, scope, key, settlement))
    }

    fn annotated_history<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
    ) -> Res<'a, Vec<AnnotatedTransition>> {
        each_ledger!(self, l => EffectLedger::annotated_history(l, scope, key))
    }

    fn advance_checkpoint<'a>(&'a self, agent_id: &'a str, sequence: u64) -> Res<'a, u64> {
        each_ledger!(self, l => EffectLedger::advance_checkpoint(l, agent_id, sequence))
    }

    fn newest_checkpoint<'a>(&'a self, agent_id: &'a str) -> Res<'a, Option<u64>> {
        each_ledger!(self, l => EffectLedger::newest_checkpoint(l, agent_id))
    }

    fn fence_record<'a>(&'a self, agent_id: &'a str) -> Res<'a, Option<FenceRecord>> {
        each_ledger!(self, l => EffectLedger::fence_record(l, agent_id))
    }

    fn raise_epoch<'a>(&'a self, fence: &'a Fence) -> Res<'a, bool> {
        each_ledger!(self, l => EffectLedger::raise_epoch(l, fence))
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        match self {
            AnyLedger::Memory(l) => EffectLedger::fenced(l, fence).map(AnyLedger::Memory),
            AnyLedger::Sqlite(l) => EffectLedger::fenced(l, fence).map(AnyLedger::Sqlite),
            #[cfg(feature = "postgres")]
            AnyLedger::Postgres(l) => EffectLedger::fenced(l, fence).map(AnyLedger::Postgres),
        }
    }
}
