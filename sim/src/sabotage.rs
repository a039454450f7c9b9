//! Breaking a part on purpose, to show the checker sees it: each [`Sabotage`] is a wrapper or a
//! driver that misbehaves the way a real bug would (drops a message, runs an effect twice,
//! leaks a value, loses a write, forgets to forward the fence), and names the invariant that
//! must catch it. `sim/tests/mutations.rs` runs each one and asserts its invariant fails, so no
//! check of [`check`](crate::check) can pass by asserting nothing.

/// One part broken on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    /// The deploy tool performs its effect twice per run.
    RunEffectTwice,
    /// The ledger wrapper acknowledges a commit or settlement it never applied.
    LedgerLosesCommit,
    /// The model echoes the agent's newest protected note in its reply text.
    EchoNoteInReply,
    /// The session is built with three times the budget the requests must fit.
    OverBudget,
    /// The driver hands the model the request without its last tool result.
    DropToolResult,
    /// The driver edits the protected state right after a request, before anything saves it.
    EditStateAfterRequest,
    /// The store acknowledges blob writes it never made.
    LoseBlobWrites,
    /// The driver hands the model a request whose first message it rewrote.
    RewriteHandedPrefix,
    /// The driver pushes a user message, then fails the step.
    PushThenFail,
    /// Faults keep coming after the fault window.
    FaultsOutlastWindow,
    /// The store and ledger wrappers do not forward the fence (a 0.4 wrapper): a superseded
    /// session's writes land.
    UnfencedWrappers,
    /// The store acknowledges checkpoint saves it never made.
    LoseCheckpointSaves,
    /// The driver's own error for a failed model call quotes the API key (feature `http`).
    LeakKeyInError,
    /// The `read_file` tool panics.
    PanicInTool,
}

impl Sabotage {
    /// Every sabotage.
    pub const ALL: [Sabotage; 14] = [
        Sabotage::RunEffectTwice,
        Sabotage::LedgerLosesCommit,
        Sabotage::EchoNoteInReply,
        Sabotage::OverBudget,
        Sabotage::DropToolResult,
        Sabotage::EditStateAfterRequest,
        Sabotage::LoseBlobWrites,
        Sabotage::RewriteHandedPrefix,
        Sabotage::PushThenFail,
        Sabotage::FaultsOutlastWindow,
        Sabotage::UnfencedWrappers,
        Sabotage::LoseCheckpointSaves,
        Sabotage::LeakKeyInError,
        Sabotage::PanicInTool,
    ];

    /// The invariant that must catch it.
    pub fn caught_by(self) -> &'static str {
        match self {
            Sabotage::RunEffectTwice => "effect_once",
            Sabotage::LedgerLosesCommit => "unknown_not_done",
            Sabotage::EchoNoteInReply => "summarizer_sees_nothing_protected",
            Sabotage::OverBudget => "request_fits_budget",
            Sabotage::DropToolResult => "request_valid_on_wire",
            Sabotage::EditStateAfterRequest => "rehydrate_identical",
            Sabotage::LoseBlobWrites => "resume_matches_warm",
            Sabotage::RewriteHandedPrefix => "prefix_claims_true",
            Sabotage::PushThenFail => "error_changes_nothing",
            Sabotage::FaultsOutlastWindow => "progress",
            Sabotage::UnfencedWrappers => "fenced_session_changes_nothing",
            Sabotage::LoseCheckpointSaves => "no_message_lost",
            Sabotage::LeakKeyInError => "no_key_leaked",
            Sabotage::PanicInTool => "no_panic",
        }
    }

    /// Whether it needs the model behind the HTTP clients (`Config::http`, feature `http`).
    pub fn needs_http(self) -> bool {
        self == Sabotage::LeakKeyInError
    }
}
