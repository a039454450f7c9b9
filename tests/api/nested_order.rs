//! Rule 5 for `Vec` of `#[nested]` state: newer is kept before older. The later elements of
//! the list come back into the window first and leave it last, whatever the budget.

use compaction::{Compactable, Compactor, FieldOutcome, MemoryStore, Tokenizer};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
struct Step {
    #[protected]
    id: u32,
    #[redundant]
    output: String,
    #[derivable(pointer = "file://steps/{id}")]
    listing: String,
}

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
struct Agent {
    #[protected(pin)]
    goal: String,
    #[redundant]
    scratch: String,
    #[nested]
    steps: Vec<Step>,
    #[redundant]
    after: String,
}

fn agent(steps: u32) -> Agent {
    Agent {
        goal: "ship the release".into(),
        scratch: "scratch notes ".repeat(30),
        steps: (0..steps)
            .map(|id| Step {
                id,
                output: format!("output of step {id} ").repeat(40),
                listing: format!("file{id}.rs ").repeat(30),
            })
            .collect(),
        after: "later notes ".repeat(30),
    }
}

fn compactor(budget: usize) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .store(MemoryStore::new())
        .build()
        .unwrap()
}

/// Which elements kept `field` verbatim, by index.
fn kept(report: &compaction::CompactionReport, steps: usize, field: &str) -> Vec<bool> {
    (0..steps)
        .map(|i| report.outcome(&format!("steps[{i}].{field}")) == Some(&FieldOutcome::Kept))
        .collect()
}

#[test]
fn the_newest_elements_are_kept_at_every_budget() {
    let agent = agent(10);
    let mut partial = 0;
    for budget in (400..=6_000).step_by(150) {
        let compacted = match compactor(budget).compact_blocking(&agent) {
            Ok(c) => c,
            Err(_) => continue,
        };
        let report = compacted.report();
        for field in ["output", "listing"] {
            let kept = kept(report, 10, field);
            // Kept elements form a suffix: once one is kept, every later one is too.
            let first_kept = kept.iter().position(|k| *k).unwrap_or(10);
            assert!(
                kept[first_kept..].iter().all(|k| *k),
                "budget {budget}, {field}: {kept:?}"
            );
            if first_kept > 0 && first_kept < 10 {
                partial += 1;
            }
        }
    }
    assert!(partial > 0, "some budget must keep only part of the list");
}

#[test]
fn the_last_element_comes_back_before_the_first() {
    let agent = agent(4);
    // Room for some outputs but not all: the last one is kept, the first one is not.
    let all = compactor(100_000).compact_blocking(&agent).unwrap();
    assert!(all.report().nothing_evicted());
    let budget = (1..=40)
        .map(|k| k * 100)
        .find(|&b| {
            compactor(b).compact_blocking(&agent).is_ok_and(|c| {
                let kept = kept(c.report(), 4, "output");
                kept.iter().any(|k| *k) && !kept.iter().all(|k| *k)
            })
        })
        .expect("a budget that keeps part of the outputs");
    let compacted = compactor(budget).compact_blocking(&agent).unwrap();
    let kept = kept(compacted.report(), 4, "output");
    assert!(kept[3], "{kept:?}");
    assert!(!kept[0], "{kept:?}");
}
