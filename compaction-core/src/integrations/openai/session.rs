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
    ChatCompletionRequestMessage, ChatCompletionResponseMessage, ChatCompletionTool,
    ChatCompletionTools, CreateChatCompletionRequest, CreateChatCompletionResponse, FunctionObject,
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

/// A Responses API reply: its `output` as [`from_responses_output`] reads it (reasoning items
/// kept to be replayed unchanged), usually one assistant message; what it cannot carry is
/// [`SessionError::Response`].
///
/// [`from_responses_output`]: crate::integrations::openai::responses::from_responses_output
#[cfg(feature = "openai-responses")]
impl ModelResponse for &async_openai::types::responses::Response {
    fn into_message(self) -> Result<Message, SessionError> {
        let mut messages = self.into_messages()?;
        match messages.len() {
            1 => Ok(messages.remove(0)),
            n => Err(SessionError::Response(
                format!("a Responses output of {n} assistant turns: push the reply itself").into(),
            )),
        }
    }

    fn into_messages(self) -> Result<Vec<Message>, SessionError> {
        crate::integrations::openai::responses::from_responses_output(&self.output)
            .map_err(|e| SessionError::Response(Box::new(e)))
    }
}

#[cfg(feature = "openai-responses")]
impl ModelResponse for async_openai::types::responses::Response {
    fn into_message(self) -> Result<Message, SessionError> {
        (&self).into_message()
    }

    fn into_messages(self) -> Result<Vec<Message>, SessionError> {
        (&self).into_messages()
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

    /// The whole chat completions request for `model`: [`openai_messages`](Self::openai_messages),
    /// the session's [`tools`](Self::tools) as function tools, and
    /// [`prompt_cache_key`](Self::prompt_cache_key); every other field unset (set yours on the
    /// value before sending it).
    pub fn openai_chat_request(&self, model: impl Into<String>) -> CreateChatCompletionRequest {
        let tools: Vec<ChatCompletionTools> = self
            .tools()
            .iter()
            .map(|tool| {
                ChatCompletionTools::Function(ChatCompletionTool {
                    function: FunctionObject {
                        name: tool.name.clone(),
                        description: Some(tool.description.clone()),
                        parameters: Some(tool.parameters.clone()),
                        strict: None,
                    },
                })
            })
            .collect();
        CreateChatCompletionRequest {
            model: model.into(),
            messages: self.openai_messages(),
            tools: (!tools.is_empty()).then_some(tools),
            prompt_cache_key: Some(self.prompt_cache_key().to_owned()),
            ..CreateChatCompletionRequest::default()
        }
    }

    /// The whole Responses API request for `model`, stateless as compaction needs it:
    /// [`responses_input`](Self::responses_input), the session's [`tools`](Self::tools) as
    /// function tools, `store: false`, `include: ["reasoning.encrypted_content"]` (so each
    /// reasoning item comes back whole, to be replayed unchanged), and
    /// [`prompt_cache_key`](Self::prompt_cache_key); every other field unset.
    #[cfg(feature = "openai-responses")]
    #[cfg_attr(docsrs, doc(cfg(feature = "openai-responses")))]
    pub fn responses_request(
        &self,
        model: impl Into<String>,
    ) -> async_openai::types::responses::CreateResponse {
        use async_openai::types::responses::{
            CreateResponse, FunctionTool, IncludeEnum, InputParam, Tool,
        };
        let tools: Vec<Tool> = self
            .tools()
            .iter()
            .map(|tool| {
                Tool::Function(FunctionTool {
                    name: tool.name.clone(),
                    description: Some(tool.description.clone()),
                    parameters: Some(tool.parameters.clone()),
                    ..FunctionTool::default()
                })
            })
            .collect();
        CreateResponse {
            model: Some(model.into()),
            input: InputParam::Items(self.responses_input()),
            tools: (!tools.is_empty()).then_some(tools),
            store: Some(false),
            include: Some(vec![IncludeEnum::ReasoningEncryptedContent]),
            prompt_cache_key: Some(self.prompt_cache_key().to_owned()),
            ..CreateResponse::default()
        }
    }
}
