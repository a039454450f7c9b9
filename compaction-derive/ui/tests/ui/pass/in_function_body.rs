//! Derives inside function bodies, twice with one name: nothing generated leaks or collides.
use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[test]
fn derives_inside_function_bodies() {
    #[derive(Compactable, Serialize, Deserialize, Default)]
    struct Local {
        #[protected]
        goal: String,
        #[redundant]
        scratch: Vec<String>,
    }

    fn twice() -> usize {
        #[derive(Compactable, Serialize, Deserialize)]
        struct Local {
            #[protected(pin)]
            pinned: u8,
        }
        Local::schema().fields().len()
    }

    assert_eq!(Local::schema().fields().len(), 2);
    assert_eq!(twice(), 1);
}
