//! The checker's own test: each invariant is broken on purpose by a [`Sabotage`] (a wrapper or
//! a driver that drops a message, runs an effect twice, leaks a value, loses a write, does not
//! forward the fence), and the run must report that invariant failed, on some seed of a small
//! range. A check that asserted nothing would pass the plain seeds and fail here. (The
//! sabotages of the model over HTTP: `tests/http.rs`, feature `http`.)

use compaction_sim::check::INVARIANTS;
use compaction_sim::ctx::Config;
use compaction_sim::run::run;
use compaction_sim::sabotage::Sabotage;

/// Seeds tried per sabotage before calling its invariant blind.
const SEEDS: u64 = 80;
const STEPS: usize = 40;

/// The first seed on which `sabotage` makes its invariant fail.
fn caught(sabotage: Sabotage) -> Option<u64> {
    (0..SEEDS).find(|&seed| {
        let config = Config {
            sabotage: Some(sabotage),
            ..Config::new(seed, STEPS)
        };
        let report = run(&config).expect("the memory backend opens");
        report
            .failures
            .iter()
            .any(|f| f.invariant == sabotage.caught_by())
    })
}

#[test]
fn every_invariant_catches_its_sabotage() {
    let blind: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = Sabotage::ALL
            .iter()
            .filter(|s| !s.needs_http())
            .map(|&sabotage| scope.spawn(move || (sabotage, caught(sabotage))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a sabotaged run panicked"))
            .filter(|(_, seed)| seed.is_none())
            .map(|(sabotage, _)| {
                format!(
                    "{sabotage:?}: `{}` never failed on seeds 0..{SEEDS}",
                    sabotage.caught_by()
                )
            })
            .collect()
    });
    assert!(
        blind.is_empty(),
        "checks that see nothing:\n{}",
        blind.join("\n")
    );
}

#[test]
fn every_invariant_has_a_sabotage() {
    for invariant in INVARIANTS {
        assert!(
            Sabotage::ALL.iter().any(|s| s.caught_by() == invariant),
            "no sabotage shows that `{invariant}` can fail"
        );
    }
}
