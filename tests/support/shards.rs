//! Spreading a slow test's independent work over the machine's cores: a property test's cases
//! in shards (each its own proptest runner with a seed of its own), or a list of independent
//! checks in chunks. The work done is the same as in one thread; only the wall time shrinks.
//!
//! Why: `cargo test` runs the test binaries one after another, and inside a binary the single
//! longest test sets its wall time. A property test of 2000 cases in one runner kept one core
//! busy and left the other idle for most of its binary's run (issue 28).

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseResult, TestRunner};

/// How many threads to spread work over: the cores this process may use (1 when unknown).
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The configs of `shards` runners that together run `config.cases` cases: the cases split as
/// evenly as they go, and shard `i` seeded with `seed + i` when `config` fixes a seed (CI's
/// `PROPTEST_RNG_SEED`), so a run stays reproducible and no two shards draw the same cases.
pub fn shard_configs(config: &Config, shards: usize) -> Vec<Config> {
    let shards = shards.clamp(1, config.cases.max(1) as usize);
    let total = config.cases as usize;
    (0..shards)
        .map(|i| {
            let cases = total / shards + usize::from(i < total % shards);
            let rng_seed = match config.rng_seed {
                RngSeed::Fixed(seed) => RngSeed::Fixed(seed.wrapping_add(i as u64)),
                RngSeed::Random => RngSeed::Random,
            };
            Config {
                cases: cases as u32,
                rng_seed,
                ..config.clone()
            }
        })
        .collect()
}

/// Runs `config.cases` cases of `test` over values of `strategy()`, split over [`threads`]
/// runners (see [`shard_configs`]). Each shard shrinks its own failure; the first failing
/// shard's message is returned, naming the shard and its seed.
pub fn run_sharded<S, F>(
    config: &Config,
    strategy: impl Fn() -> S + Sync,
    test: F,
) -> Result<(), String>
where
    S: Strategy,
    F: Fn(S::Value) -> TestCaseResult + Sync,
{
    let configs = shard_configs(config, threads());
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = configs
            .iter()
            .enumerate()
            .map(|(i, shard)| {
                let (strategy, test) = (&strategy, &test);
                scope.spawn(move || {
                    TestRunner::new(shard.clone())
                        .run(&strategy(), test)
                        .map_err(|e| {
                            format!(
                                "shard {i} (seed {:?}, {} cases): {e}",
                                shard.rng_seed, shard.cases
                            )
                        })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.into_iter().collect()
}

/// `f` applied to every item, the items split into one contiguous chunk per thread; the
/// results in the items' order. A panic in any chunk is re-raised here with its own message.
pub fn map_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let chunk = items.len().div_ceil(threads()).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                let f = &f;
                scope.spawn(move || part.iter().map(f).collect::<Vec<R>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}
