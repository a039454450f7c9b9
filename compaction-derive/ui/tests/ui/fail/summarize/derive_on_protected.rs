use compaction::Summarizable;
use serde::Serialize;

#[derive(Summarizable, Serialize)]
struct Note {
    text: String,
    #[protected]
    constraint: String,
}

fn main() {}
