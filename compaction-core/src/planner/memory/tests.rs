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

/// `count` slots, each input message kept as it is.
fn kept_slots(count: usize) -> Vec<SlotMeta> {
    (0..count)
        .map(|index| SlotMeta {
            slot: Slot::Kept { index },
            tokens: 10,
        })
        .collect()
}

/// The opening's slot count (`planner::opening`) is sealed and serialized when there is one,
/// and left out when there is none, so a record from before it keeps its bytes and seal.
#[test]
fn the_opening_is_sealed_and_absent_from_records_without_one() {
    let mut record = record(1);
    record.slots = kept_slots(6);
    let json = |record: &MemoryRecord| {
        (
            serde_json::to_string(record).expect("serializes"),
            serde_json::to_string(&SealedRecord::of(record)).expect("serializes"),
        )
    };
    let (full, sealed) = json(&record);
    assert!(
        !full.contains("opening") && !sealed.contains("opening"),
        "{full}"
    );
    let old: MemoryRecord = serde_json::from_str(&full).expect("a record without it parses");
    assert_eq!(old.opening, 0);
    record.opening = 4;
    let (full, sealed) = json(&record);
    assert!(full.contains("\"opening\":4") && sealed.contains("\"opening\":4"));
    let read: MemoryRecord = serde_json::from_str(&full).expect("parses");
    assert_eq!(read, record);
    assert_eq!(record.stable_slots(), 5);
}

/// An edited record whose opening passes its messages is refused, not trusted.
#[test]
fn an_opening_past_the_messages_is_refused() {
    let mut record = record(1);
    record.slots = kept_slots(3);
    record.len = 256;
    record.opening = 3;
    let refused = record
        .check(3)
        .expect_err("1 block slot + 3 opening slots > 3");
    assert!(refused.contains("opening"), "{refused}");
}
