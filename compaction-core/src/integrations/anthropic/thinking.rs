//! Extended thinking as an option of the request an author sends
//! ([`AnthropicRequest::with_thinking`]), with the provider's budget rule checked before
//! anything is sent.

use crate::integrations::anthropic::convert::AnthropicError;
use crate::integrations::anthropic::wire::AnthropicRequest;

/// The smallest thinking budget Anthropic takes (extended thinking guide:
/// <https://docs.claude.com/en/docs/build-with-claude/extended-thinking>, "budget_tokens").
pub const MIN_THINKING_BUDGET: u32 = 1_024;

impl AnthropicRequest {
    /// Extended thinking on, with at most `budget_tokens` of the reply for the model's
    /// reasoning: `thinking` becomes `{"type": "enabled", "budget_tokens": N}`. The provider's
    /// rules (extended thinking guide, "budget_tokens"): at least 1,024 tokens, and less than
    /// `max_tokens`; anything else is refused here with
    /// [`AnthropicError::ThinkingBudget`](crate::anthropic::AnthropicError::ThinkingBudget),
    /// before a request is sent. The thinking blocks of earlier replies go back as they came
    /// (the session keeps them byte for byte, signatures included).
    ///
    /// ```
    /// # use compaction::anthropic::AnthropicRequest;
    /// # fn build(request: AnthropicRequest) -> Result<(), compaction::anthropic::AnthropicError> {
    /// let request = request.with_thinking(2_048)?; // with max_tokens above 2,048
    /// # let _ = request; Ok(()) }
    /// ```
    pub fn with_thinking(mut self, budget_tokens: u32) -> Result<Self, AnthropicError> {
        if budget_tokens < MIN_THINKING_BUDGET || budget_tokens >= self.max_tokens {
            return Err(AnthropicError::ThinkingBudget {
                budget_tokens,
                max_tokens: self.max_tokens,
            });
        }
        self.thinking =
            Some(serde_json::json!({"type": "enabled", "budget_tokens": budget_tokens}));
        Ok(self)
    }
}
