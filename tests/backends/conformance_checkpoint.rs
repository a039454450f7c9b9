//! Every checkpoint backend lists, refuses, and catches tampering and swapped rows alike, and a
//! backend with namespaces keeps them apart (`tests/conformance/checkpoint.rs`). A new
//! backend: one line, with its raw hooks.

use crate::common;
use crate::conformance;
#[cfg(feature = "postgres")]
use crate::pg;

use common::TempDir;
use compaction::sqlite::rusqlite::{Connection, OptionalExtension};
use compaction::{MemoryStore, SqliteStore};
use conformance::checkpoint::{check, Fixture};

fn memory_fixture() -> Fixture<MemoryStore> {
    let store = MemoryStore::new();
    let (read, write, blob) = (store.clone(), store.clone(), store.clone());
    Fixture {
        store,
        read_row: Box::new(move |agent| read.raw_checkpoint(agent)),
        write_row: Box::new(move |agent, json, sha| {
            write.overwrite_checkpoint(agent, json.to_vec(), Some(sha.to_owned()))
        }),
        write_blob: Box::new(move |hash, bytes| blob.overwrite_unchecked(*hash, bytes.to_vec())),
        namespace: String::new(),
        sibling: None,
        keep: Box::new(()),
    }
}

fn sqlite_fixture() -> Fixture<SqliteStore> {
    let dir = TempDir::new("conformance-checkpoint");
    let path = dir.db("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let raw = move || Connection::open(&path).unwrap();
    let (read, write, blob) = (raw.clone(), raw.clone(), raw);
    Fixture {
        store,
        read_row: Box::new(move |agent| {
            let sql = "SELECT CAST(json AS BLOB), sha256 FROM checkpoints WHERE agent_id = ?1";
            read()
                .query_row(sql, [agent], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .unwrap()
        }),
        write_row: Box::new(move |agent, json, sha| {
            // Written as text, as the store writes it.
            let json = String::from_utf8(json.to_vec()).unwrap();
            let sql = "UPDATE checkpoints SET json = ?1, sha256 = ?2 WHERE agent_id = ?3";
            assert_eq!(write().execute(sql, (json, sha, agent)).unwrap(), 1);
        }),
        write_blob: Box::new(move |hash, bytes| {
            let sql = "UPDATE blobs SET bytes = ?1 WHERE hash = ?2";
            assert_eq!(blob().execute(sql, (bytes, hash.to_hex())).unwrap(), 1);
        }),
        namespace: String::new(),
        sibling: None,
        keep: Box::new(dir),
    }
}

#[test]
fn memory_checkpoints_conform() {
    check(memory_fixture);
}

#[test]
fn sqlite_checkpoints_conform() {
    check(sqlite_fixture);
}

/// A store in a fresh namespace of the shared database, a sibling in another, and raw SQL
/// hooks (values as hex literals: no quoting of hostile text).
#[cfg(feature = "postgres")]
fn postgres_fixture() -> Fixture<compaction::PgStore> {
    use pg::{fresh_namespace, hex, shared_db, store};
    let namespace = fresh_namespace("checkpoint");
    let sibling = store(shared_db().url(), &fresh_namespace("checkpoint-sibling"));
    let text = |s: &[u8]| format!("convert_from(decode('{}', 'hex'), 'UTF8')", hex(s));
    let row = {
        let namespace = namespace.clone();
        move |agent: &str| {
            format!(
                "namespace = '{namespace}' AND agent_id = {}",
                text(agent.as_bytes())
            )
        }
    };
    let (read_where, write_where) = (row.clone(), row);
    let blob_namespace = namespace.clone();
    Fixture {
        store: store(shared_db().url(), &namespace),
        read_row: Box::new(move |agent| {
            let rows = shared_db().sql(&format!(
                "SELECT encode(convert_to(json, 'UTF8'), 'hex'), sha256
                 FROM compaction.checkpoints WHERE {}",
                read_where(agent)
            ));
            let row = rows.into_iter().next()?;
            let json = row[0].as_deref().expect("json is NOT NULL");
            let bytes = (0..json.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&json[i..i + 2], 16).unwrap())
                .collect();
            Some((bytes, row[1].clone()))
        }),
        write_row: Box::new(move |agent, json, sha| {
            let updated = shared_db().sql(&format!(
                "UPDATE compaction.checkpoints SET json = {}, sha256 = {} WHERE {} RETURNING 1",
                text(json),
                text(sha.as_bytes()),
                write_where(agent)
            ));
            assert_eq!(updated.len(), 1, "no checkpoint row for {agent:?}");
        }),
        write_blob: Box::new(move |hash, bytes| {
            let updated = shared_db().sql(&format!(
                "UPDATE compaction.blobs SET bytes = decode('{}', 'hex')
                 WHERE namespace = '{blob_namespace}' AND hash = '{}' RETURNING 1",
                hex(bytes),
                hash.to_hex()
            ));
            assert_eq!(updated.len(), 1, "no blob {hash}");
        }),
        namespace,
        sibling: Some(sibling),
        keep: Box::new(()),
    }
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_checkpoints_conform() {
    check(postgres_fixture);
}

/// Incremental rows (format 4): parts shared, tampered parts, format-3 rows read.
#[test]
fn memory_parts_conform() {
    conformance::parts::check(memory_fixture);
}

#[test]
fn sqlite_parts_conform() {
    conformance::parts::check(sqlite_fixture);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_parts_conform() {
    conformance::parts::check(postgres_fixture);
}

#[test]
fn a_store_answering_with_other_parts_is_refused() {
    conformance::parts::a_store_answering_with_other_parts_is_refused(MemoryStore::new());
}
