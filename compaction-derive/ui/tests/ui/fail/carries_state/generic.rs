//! A type parameter carries state or not only once it is filled in: the derive bounds generic
//! fields, so each instantiation below with state in a protected or evictable field is refused
//! where it is written.
use compaction::{Compactable, EffectLog};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Step {
    #[protected]
    number: u32,
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Wrapper<R, D, P> {
    #[protected]
    id: u32,
    #[redundant]
    scratch: R,
    #[derivable(pointer = "x://{id}")]
    bodies: Vec<D>,
    #[protected]
    kept: P,
}

fn main() {
    let compactor = compaction::Compactor::builder().budget(1000).build().unwrap();
    let _ = compactor.compact(&Wrapper::<String, u8, u8>::default());
    let _ = compactor.compact(&Wrapper::<Step, u8, u8>::default());
    let _ = compactor.compact(&Wrapper::<String, EffectLog, u8>::default());
    let _ = compactor.compact(&Wrapper::<String, u8, Step>::default());
}
