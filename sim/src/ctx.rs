//! What a run and its checks share: its configuration ([`Config`]), its fixed parts ([`Ctx`]:
//! the fault plan, the durable store and ledger behind it, the world, the summarizer, the
//! values the run generated that must never reach a summarizer, the session's settings), what
//! a step did ([`Act`]) and what a run found ([`Report`]).

use crate::agent::{
    effect_of, fresh_agent, sim_tools, Ground, RecordingSummarizer, SimAgent, World,
};
use crate::backend::{self, AnyLedger, BackendKind, TempFiles};
use crate::faults::{FaultClasses, Faults, FaultyLedger, FaultyStore};
use crate::rng::Rng;
use crate::sabotage::Sabotage;
use compaction::session::{EffectOutcome, Session, SessionBuilder, SessionError, SessionRequest};
use compaction::{AnthropicMessages, Compactor, Message, SealKey, Tokenizer, ToolDefinition};

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
    /// The durable backend.
    pub backend: BackendKind,
    /// A part broken on purpose (the checker's own tests), if any.
    pub sabotage: Option<Sabotage>,
    /// The model behind the library's HTTP clients and a loopback server (feature `http`),
    /// else called directly.
    pub http: bool,
}

impl Config {
    /// `steps` steps of `seed`, faults of every class in the first two thirds.
    pub fn new(seed: u64, steps: usize) -> Self {
        Config {
            seed,
            steps,
            fault_window: steps * 2 / 3,
            classes: FaultClasses::ALL,
            backend: BackendKind::Memory,
            sabotage: None,
            http: false,
        }
    }

    /// The same run on `backend`.
    pub fn on(self, backend: BackendKind) -> Self {
        Config { backend, ..self }
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
    pub ledger: FaultyLedger<AnyLedger>,
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
    /// Every value the run generated that no summarizer may see.
    pub ground: Ground,
    /// The part broken on purpose, if any.
    pub sabotage: Option<Sabotage>,
    /// The model server and clients, when the run calls the model over HTTP.
    #[cfg(feature = "http")]
    pub model: Option<crate::wire::ModelServer>,
    /// The backend's temporary files (last: removed after the handles above are dropped).
    _files: TempFiles,
}

impl Ctx {
    /// The parts of a run of `config`, on a fresh store and ledger of its backend.
    pub fn new(config: &Config) -> Result<Self, String> {
        let faults = Faults::sabotaged(config.seed, config.classes, config.sabotage);
        let mut rng = Rng::new(config.seed, 0x5e55);
        let (store, ledger, files) = backend::open(config.backend, config.seed)?;
        #[cfg(feature = "http")]
        let model = match config.http {
            true => Some(crate::wire::ModelServer::start(config.seed)?),
            false => None,
        };
        #[cfg(not(feature = "http"))]
        if config.http {
            return Err("--http needs the simulator built with `--features http`".into());
        }
        let ground = Ground::default();
        for rule in fresh_agent().rules {
            ground.protect(rule);
        }
        Ok(Ctx {
            seed: config.seed,
            store: FaultyStore::new(store, faults.clone()),
            ledger: FaultyLedger::new(ledger, faults.clone()),
            world: World::default(),
            summarizer: RecordingSummarizer::new(faults.clone()),
            budget: *rng.pick(&[3_000, 4_000, 6_000, 12_000]),
            anthropic: rng.chance(500),
            evict: rng.chance(500),
            faults,
            ground,
            sabotage: config.sabotage,
            #[cfg(feature = "http")]
            model,
            _files: files,
        })
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
        let budget = match self.sabotage {
            Some(Sabotage::OverBudget) => self.budget * 3,
            _ => self.budget,
        };
        let mut compactor = Compactor::builder()
            .budget(budget)
            .token_counter(Tokenizer::Heuristic)
            .summarizer(summarizer)
            .seal_key(key);
        if self.evict {
            compactor = compactor.evict_on_summarizer_error(true);
        }
        let builder = Session::builder(AGENT)
            .compactor(compactor)
            .tools(sim_tools())
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
    /// Made a request (as handed to the model).
    Request(Box<Handed>),
    /// Pushed the model's reply (described).
    Response(String),
    /// The model call failed (over HTTP): nothing pushed, the request is made again later.
    ModelFailed {
        /// The error's `Display`.
        display: String,
        /// The error's `Debug`.
        debug: String,
    },
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

/// A request as the driver hands it to the model: the session's request, or what a sabotaged
/// driver made of it.
#[derive(Debug, Clone)]
pub struct Handed {
    /// The session's request itself (what the HTTP clients send).
    pub request: SessionRequest,
    /// The messages sent.
    pub messages: Vec<Message>,
    /// The tool definitions sent.
    pub tools: Vec<ToolDefinition>,
    /// The session's count of the request, tools included.
    pub tokens: usize,
    /// The checkpoint sequence it was made at.
    pub sequence: u64,
    /// Whether the session said it is a compaction point.
    pub point: bool,
    /// How many leading messages the session says it shares with the previous request.
    pub reused: usize,
}

impl Handed {
    /// What the session made.
    pub fn of(request: &SessionRequest) -> Self {
        Handed {
            request: request.clone(),
            messages: request.messages().to_vec(),
            tools: request.tools().to_vec(),
            tokens: request.tokens(),
            sequence: request.sequence(),
            point: request.is_compaction_point(),
            reused: request.reused_prefix_len(),
        }
    }
}
