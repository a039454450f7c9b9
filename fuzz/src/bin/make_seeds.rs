//! Writes the seed corpus of the `checkpoint` target: `cargo run --bin make_seeds`.

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/checkpoint");
    std::fs::create_dir_all(&dir).expect("corpus dir");
    for (i, seed) in compaction_fuzz::fixture().seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}.json")), seed).expect("write seed");
    }
    println!(
        "{} seeds in {}",
        compaction_fuzz::fixture().seeds.len(),
        dir.display()
    );
}
