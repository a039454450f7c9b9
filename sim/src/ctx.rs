//! What a run and its checks share: its configuration ([`Config`]), its fixed parts ([`Ctx`]:
//! the fault plan, the durable store and ledger behind it, the world, the summarizer, the
//! session's settings), what a step did ([`Act`]) and what a run found ([`Report`]).

use crate::agent::{effect_of, fresh_agent, RecordingSummarizer, SimAgent, World};
use crate::faults::{FaultClasses, Faults, FaultyLedger, FaultyStore};
use crate::rng::Rng;
use compaction::session::{EffectOutcome, Session, SessionBuilder, SessionError, SessionRequest};
use compaction::{AnthropicMessages, Compactor, MemoryLedger, MemoryStore, SealKey, Tokenizer};

/// An invariant that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Which (one of [`INVARIANTS`](crate::check::INVARIANTS)).
    pub invariant: &'static str,
    /// The step it failed after.
    pub step: usize,
    /// What was seen.
    pub detail: String,
}

/// What one run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The seed every choice comes from.
    pub seed: u64,
    /// How many steps to run.
    pub steps: usize,
    /// Faults are injected in steps `0..fault_window` only; after it, every step must succeed.
    pub fault_window: usize,
    /// Which fault classes are injected.
    pub classes: FaultClasses,
}

impl Config {
    /// `steps` steps of `seed`, faults of every class in the first two thirds.
    pub fn new(seed: u64, steps: usize) -> Self {
        Config {
            seed,
            steps,
            fault_window: steps * 2 / 3,
            classes: FaultClasses::ALL,
        }
    }
}

/// What a run found: the first failure of each invariant, and the trace.
#[derive(Debug, Default)]
pub struct Report {
    /// The first failure of each invariant that failed, in the order found.
    pub failures: Vec<Failure>,
    /// One line per step.
    pub trace: Vec<String>,
}

/// The agent id of every run.
pub const AGENT: &str = "sim-agent";

/// The fixed parts of a run, shared by the steps.
pub struct Ctx {
    /// The seed.
    pub seed: u64,
    /// The fault plan.
    pub faults: Faults,
    /// The durable store (behind the fault plan).
    pub store: FaultyStore,
    /// The durable ledger (behind the fault plan).
    pub ledger: FaultyLedger<MemoryLedger>,
    /// The world that counts executions.
    pub world: World,
    /// The summarizer.
    pub summarizer: RecordingSummarizer,
    /// The budget of every request.
    pub budget: usize,
    /// Requests are planned for Anthropic's wire (else OpenAI's chat).
    pub anthropic: bool,
    /// `evict_on_summarizer_error(true)`.
    pub evict: bool,
}

impl Ctx {
    /// The parts of a run of `config`.
    pub fn new(config: &Config) -> Self {
        let faults = Faults::new(config.seed, config.classes);
        let mut rng = Rng::new(config.seed, 0x5e55);
        Ctx {
            seed: config.seed,
            store: FaultyStore::new(MemoryStore::new(), faults.clone()),
            ledger: FaultyLedger::new(MemoryLedger::new(), faults.clone()),
            world: World::default(),
            summarizer: RecordingSummarizer::new(faults.clone()),
            budget: *rng.pick(&[3_000, 4_000, 6_000, 12_000]),
            anthropic: rng.chance(500),
            evict: rng.chance(500),
            faults,
        }
    }

    /// Opens the agent's session from the store (fresh the first time).
    pub async fn open(&self) -> Result<Session<SimAgent>, SessionError> {
        self.builder(self.summarizer.clone())
            .store(self.store.clone())
            .ledger(self.ledger.clone())
            .open(fresh_agent)
            .await
    }

    /// The session's settings (budget, counter, seal key, wire, effects) with `summarizer`;
    /// the store and ledger are the caller's.
    pub fn builder(&self, summarizer: RecordingSummarizer) -> SessionBuilder<SimAgent> {
        let key = SealKey::new("sim", [7u8; 32]).expect("a 32-byte key");
        let mut compactor = Compactor::builder()
            .budget(self.budget)
            .token_counter(Tokenizer::Heuristic)
            .summarizer(summarizer)
            .seal_key(key);
        if self.evict {
            compactor = compactor.evict_on_summarizer_error(true);
        }
        let builder = Session::builder(AGENT)
            .compactor(compactor)
            .effect_calls(effect_of);
        if self.anthropic {
            builder.chat_format(AnthropicMessages)
        } else {
            builder
        }
    }
}

/// What a step did.
#[derive(Debug)]
pub enum Act {
    /// Opened the session (resumed from this sequence, if any).
    Opened(Option<u64>),
    /// Pushed the user message of this turn.
    User(u64),
    /// Made a request.
    Request(Box<SessionRequest>),
    /// Pushed the model's reply (described).
    Response(String),
    /// Answered a call (described).
    Answered(String),
    /// Ran (or refused) an effect.
    Effect {
        /// Its key.
        key: String,
        /// What `run_effect` returned.
        outcome: EffectOutcome,
    },
}
