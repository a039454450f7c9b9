//! Unit tests of what the seals cover of a planner memory record.

use super::*;

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
