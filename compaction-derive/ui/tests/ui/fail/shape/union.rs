use compaction::Compactable;

#[derive(Compactable)]
union Bits {
    a: u32,
    b: f32,
}

fn main() {}
