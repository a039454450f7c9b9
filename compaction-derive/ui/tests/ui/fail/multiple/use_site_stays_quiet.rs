// A broken derive emits only its own errors: the code that uses the type as `Compactable`
// does not add "`State` is not `Compactable`" on top.
use compaction::{Compactable, Compactor};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    scratch: String,
}

fn main() {
    let compactor = Compactor::builder().budget(1000).build().unwrap();
    let state = State { scratch: String::new() };
    let _ = compactor.compact_blocking(&state);
    let _ = State::schema();
}
