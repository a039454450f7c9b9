//! Every backend fences alike (`tests/conformance/fence.rs`): memory (clones of one store and
//! ledger), SQLite (a new connection to one file per worker, the store and the ledger in it, as
//! the embedded default keeps them), and PostgreSQL with the `postgres` feature. Also: a SQLite
//! file written before fencing (schema 6) opens, and its agent is fenced from then on.

use crate::common;
use crate::conformance;

use common::TempDir;
use compaction::fence::OpenMode;
use compaction::session::SessionError;
use compaction::sqlite::rusqlite::Connection;
use compaction::sqlite::{SqliteLedger, SqliteStore};
use compaction::{MemoryLedger, MemoryStore, Message};
use conformance::fence::{check, open, Fixture};

fn memory_fixture() -> Fixture<MemoryStore, MemoryLedger> {
    let (store, ledger) = (MemoryStore::new(), MemoryLedger::new());
    Fixture {
        open: Box::new(move || (store.clone(), ledger.clone())),
        keep: Box::new(()),
    }
}

fn sqlite_fixture() -> Fixture<SqliteStore, SqliteLedger> {
    let dir = TempDir::new("conformance-fence");
    let path = dir.db("agent.db");
    Fixture {
        open: Box::new(move || {
            (
                SqliteStore::open(&path).unwrap(),
                SqliteLedger::open(&path).unwrap(),
            )
        }),
        keep: Box::new(dir),
    }
}

#[test]
fn memory_fences_conform() {
    check(memory_fixture);
}

#[test]
fn sqlite_fences_conform() {
    check(sqlite_fixture);
}

/// A file an earlier version wrote (schema 6: no `agent_fences`) with a checkpoint in it: the
/// schema migrates, the agent's session opens at epoch 1 with its conversation, and a second
/// session fences it.
#[test]
fn a_sqlite_file_from_before_fencing_opens_and_is_fenced() {
    let fx = sqlite_fixture();
    let mut first = open((fx.open)(), OpenMode::TakeOver).unwrap();
    first.push(Message::user("saved before the upgrade"));
    first.next_request_blocking().unwrap();
    drop(first);
    let path = {
        let (store, _) = (fx.open)();
        store.path().to_path_buf()
    };
    // Back to schema 6, as the previous version left its files.
    let raw = Connection::open(&path).unwrap();
    raw.execute_batch("DROP TABLE agent_fences; DELETE FROM schema_version WHERE version = 7;")
        .unwrap();
    drop(raw);

    let mut old = open((fx.open)(), OpenMode::TakeOver).unwrap();
    assert_eq!(old.epoch(), Some(1));
    let texts: Vec<&str> = old
        .transcript()
        .messages()
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(texts, ["saved before the upgrade"]);
    let version: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, compaction::sqlite::SCHEMA_VERSION);

    let mut new = open((fx.open)(), OpenMode::TakeOver).unwrap();
    old.push(Message::user("from the old worker"));
    assert!(matches!(
        old.next_request_blocking(),
        Err(SessionError::Superseded { epoch: 1, newer: 2 })
    ));
    new.push(Message::user("from the new worker"));
    new.next_request_blocking().unwrap();
}

/// PostgreSQL: each worker connects a store and a ledger of its own (their own pools, as a
/// second process has) to one fresh namespace of the shared database; the store and the
/// ledger share the agent's fence row there.
#[cfg(feature = "postgres")]
fn postgres_fixture() -> Fixture<compaction::PgStore, compaction::PgLedger> {
    use crate::pg::{fresh_namespace, shared_db, store};
    let namespace = fresh_namespace("conformance-fence");
    Fixture {
        open: Box::new(move || {
            let url = shared_db().url();
            let ledger = compaction::block_on(compaction::PgLedger::connect(url, &namespace));
            (store(url, &namespace), ledger.unwrap())
        }),
        keep: Box::new(()),
    }
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_fences_conform() {
    check(postgres_fixture);
}
