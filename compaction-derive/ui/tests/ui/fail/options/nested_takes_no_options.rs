use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct Inner {
    #[protected]
    x: u32,
}

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[nested(x)]
    inner: Inner,
}

fn main() {}
