//! Every durable store collects garbage by the same rules, and never loses a blob a checkpoint
//! saved meanwhile needs (`tests/conformance/gc.rs`). A new backend: one line, with its hook
//! that ages the stored rows.

use crate::common;
use crate::conformance;
#[cfg(feature = "postgres")]
use crate::pg;

use common::TempDir;
use compaction::sqlite::rusqlite::Connection;
use compaction::SqliteStore;
use conformance::gc::{check, Fixture};

fn sqlite_fixture() -> Fixture<SqliteStore> {
    let dir = TempDir::new("conformance-gc");
    let path = dir.db("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let age = move |seconds: i64| {
        let conn = Connection::open(&path).unwrap();
        let ms = seconds * 1000;
        conn.execute("UPDATE blobs SET created_at_ms = created_at_ms - ?1", [ms])
            .unwrap();
        conn.execute(
            "UPDATE entries SET updated_at_ms = updated_at_ms - ?1",
            [ms],
        )
        .unwrap();
    };
    Fixture {
        store,
        age: Box::new(age),
        keep: Box::new(dir),
    }
}

#[test]
fn sqlite_collects_garbage_by_the_rules() {
    check(sqlite_fixture);
}

#[cfg(feature = "postgres")]
fn postgres_fixture() -> Fixture<compaction::PgStore> {
    use pg::{fresh_namespace, shared_db, store};
    let namespace = fresh_namespace("gc");
    let store = store(shared_db().url(), &namespace);
    let age = move |seconds: i64| {
        let ms = seconds * 1000;
        shared_db().sql(&format!(
            "UPDATE compaction.blobs SET created_at_ms = created_at_ms - {ms}
                 WHERE namespace = '{namespace}';
             UPDATE compaction.entries SET updated_at_ms = updated_at_ms - {ms}
                 WHERE namespace = '{namespace}';"
        ));
    };
    Fixture {
        store,
        age: Box::new(age),
        keep: Box::new(()),
    }
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_collects_garbage_by_the_rules() {
    check(postgres_fixture);
}
