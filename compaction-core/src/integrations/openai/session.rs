//! A session's turn in async-openai's chat types: the model's response pushed as it comes
//! (the completion or its message), and the request as chat completion messages.

use crate::conversation::message::Message;
use crate::integrations::openai::messages::{
    from_openai_response_message, message_to_openai, Opaque,
};
use crate::session::error::SessionError;
use crate::session::request::SessionRequest;
use crate::session::turn::ModelResponse;
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionResponseMessage, CreateChatCompletionResponse,
};

impl ModelResponse for &ChatCompletionResponseMessage {
    fn into_message(self) -> Result<Message, SessionError> {
        from_openai_response_message(self).map_err(|e| SessionError::Response(Box::new(e)))
    }
}

impl ModelResponse for ChatCompletionResponseMessage {
    fn into_message(self) -> Result<Message, SessionError> {
        (&self).into_message()
    }
}

/// The first choice's message (a session asks for one, `n = 1`); a completion without a choice
/// is [`SessionError::Response`].
impl ModelResponse for &CreateChatCompletionResponse {
    fn into_message(self) -> Result<Message, SessionError> {
        match self.choices.first() {
            Some(choice) => (&choice.message).into_message(),
            None => Err(SessionError::Response(
                "a chat completion without a choice".into(),
            )),
        }
    }
}

impl ModelResponse for CreateChatCompletionResponse {
    fn into_message(self) -> Result<Message, SessionError> {
        (&self).into_message()
    }
}

impl SessionRequest {
    /// The request as async-openai chat completion messages (as
    /// [`Compacted::openai_messages`](crate::Compacted::openai_messages): provider-opaque
    /// parts, which chat completions cannot carry, are left out). Send it with
    /// [`prompt_cache_key`](Self::prompt_cache_key) as the request's `prompt_cache_key`.
    pub fn openai_messages(&self) -> Vec<ChatCompletionRequestMessage> {
        // Every message converts: the session's messages are a compaction's, which
        // `validate_messages` checked for every shape the wire cannot carry.
        self.messages()
            .iter()
            .enumerate()
            .filter_map(|(index, message)| message_to_openai(message, index, Opaque::LeaveOut).ok())
            .collect()
    }
}
