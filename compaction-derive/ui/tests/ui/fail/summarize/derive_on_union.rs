use compaction::Summarizable;

#[derive(Summarizable)]
union Bits {
    a: u32,
    b: f32,
}

fn main() {}
