//! Unit tests of the handle table (numbering, reuse, one spelling per handle, edited tables
//! refused) and of what the seals cover of a record.

use super::*;

fn pointer(n: u8) -> Pointer {
    Pointer::for_hash(ContentHash::of(&[n]))
}

#[test]
fn handles_count_up_are_reused_for_the_same_address_and_never_given_twice() {
    let mut table = HandleTable::new();
    let a = table.assign(&pointer(1));
    let b = table.assign(&pointer(2));
    assert_eq!((a.to_string(), b.to_string()), ("p1".into(), "p2".into()));
    assert_eq!(table.assign(&pointer(1)), a);
    table.retain(|h| h == b);
    assert_eq!(table.pointer(a), None);
    // The forgotten address gets a new number, never p1 again.
    assert_eq!(table.assign(&pointer(1)).to_string(), "p3");
    let json = serde_json::to_string(&table).unwrap();
    let back: HandleTable = serde_json::from_str(&json).unwrap();
    assert_eq!(back, table);
}

#[test]
fn handles_parse_in_one_spelling_only() {
    assert_eq!("p17".parse::<Handle>().unwrap().number(), 17);
    assert_eq!(" ⟦p17⟧ ".parse::<Handle>().unwrap().number(), 17);
    for bad in [
        "p0",
        "p017",
        "p",
        "17",
        "p1x",
        "P1",
        "p-1",
        "p99999999999999999999",
    ] {
        assert!(bad.parse::<Handle>().is_err(), "{bad}");
    }
}

#[test]
fn an_edited_table_is_refused() {
    let p = pointer(1).to_string();
    let ahead = format!(r#"{{"next":2,"handles":{{"p2":"{p}"}}}}"#);
    assert!(serde_json::from_str::<HandleTable>(&ahead).is_err());
    let twice = format!(r#"{{"next":3,"handles":{{"p1":"{p}","p2":"{p}"}}}}"#);
    assert!(serde_json::from_str::<HandleTable>(&twice).is_err());
}

fn record(chunks: usize) -> MemoryRecord {
    let refs: Vec<ChunkRef> = (0..chunks)
        .map(|i| ChunkRef {
            first: i * 256,
            count: 256,
            hash: ContentHash::of(format!("chunk {i}").as_bytes()),
        })
        .collect();
    let manifest = Manifest::of(refs);
    let mut record = TranscriptMemory::empty("o200k_base").record;
    record.blocks.push(Block {
        first: 0,
        end: chunks * 256,
        handle: Handle::new(1).expect("not zero"),
        manifest: manifest.stored().0,
        chunks: manifest,
        summary: Some("the summary".into()),
        slots: 1,
        spilled_users: 10,
        folded: chunks * 256 - 10,
    });
    record
}

#[test]
fn the_sealed_record_does_not_grow_with_the_chunks_and_keeps_every_other_field() {
    let json = |record: &MemoryRecord| {
        serde_json::to_string(&SealedRecord::of(record)).expect("serializes")
    };
    let (small, large) = (record(2), record(400));
    // 398 more chunk refs: the record's own JSON grows by each, the sealed view by the
    // digits of two larger numbers.
    let full = |record: &MemoryRecord| serde_json::to_string(record).expect("serializes");
    assert!(full(&large).len() > full(&small).len() + 398 * 64);
    assert!(json(&large).len() < json(&small).len() + 16);
    let sealed = json(&large);
    assert!(!sealed.contains("\"chunks\""), "{sealed}");
    assert!(sealed.contains(&large.blocks[0].manifest.to_hex()));
    assert!(sealed.contains("the summary") && sealed.contains("\"spilled_users\":10"));
    // Every field of the record is there, under the name the record's own JSON uses.
    let full: serde_json::Value = serde_json::to_value(&large).expect("serializes");
    let view: serde_json::Value = serde_json::from_str(&sealed).expect("JSON");
    for key in full.as_object().expect("an object").keys() {
        assert!(view.get(key).is_some(), "the seal misses {key}");
    }
    let block = full["blocks"][0].as_object().expect("an object");
    for key in block.keys().filter(|key| *key != "chunks") {
        assert!(
            view["blocks"][0].get(key).is_some(),
            "the seal misses {key}"
        );
    }
}

#[test]
fn a_changed_manifest_changes_the_sealed_record() {
    let mut record = record(3);
    let before = serde_json::to_string(&SealedRecord::of(&record)).expect("serializes");
    record.blocks[0].manifest = ContentHash::of(b"another manifest");
    let after = serde_json::to_string(&SealedRecord::of(&record)).expect("serializes");
    assert_ne!(before, after);
}
