//! Unit tests of the handle table: numbering, reuse, one spelling per handle, edited tables
//! refused.

use super::*;
use crate::store::ContentHash;

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
