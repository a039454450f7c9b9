//! The chat completions request and answer of one summary, in async-openai's types: what
//! [`OpenAiSummarizer`](super::OpenAiSummarizer) sends on the shared HTTPS transport.

use crate::integrations::http::summary::{Settings, SummaryWire};
use async_openai::types::chat::{
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequest, CreateChatCompletionResponse, FinishReason,
};

/// OpenAI's chat completions, with the organization and project headers when set.
pub(super) struct ChatWire {
    pub(super) organization: Option<String>,
    pub(super) project: Option<String>,
}

impl SummaryWire for ChatWire {
    type Reply = CreateChatCompletionResponse;
    const REPLY: &'static str = "a chat completion";

    fn request(
        &self,
        settings: &Settings,
        prompt: String,
        target: usize,
    ) -> (String, Vec<(&'static str, String)>, Vec<u8>) {
        let request = CreateChatCompletionRequest {
            model: settings.model.clone(),
            messages: vec![
                ChatCompletionRequestSystemMessage::from(settings.instructions.as_str()).into(),
                ChatCompletionRequestUserMessage::from(prompt).into(),
            ],
            max_completion_tokens: Some(u32::try_from(target).unwrap_or(u32::MAX)),
            ..CreateChatCompletionRequest::default()
        };
        let mut headers = Vec::new();
        if let Some(key) = &settings.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        if let Some(organization) = &self.organization {
            headers.push(("openai-organization", organization.clone()));
        }
        if let Some(project) = &self.project {
            headers.push(("openai-project", project.clone()));
        }
        // A request of plain strings and numbers always serializes.
        let body = serde_json::to_vec(&request).unwrap_or_default();
        (
            format!("{}/chat/completions", settings.base_url),
            headers,
            body,
        )
    }

    fn summary(&self, response: CreateChatCompletionResponse) -> Result<(String, bool), String> {
        let Some(choice) = response.choices.into_iter().next() else {
            return Err("the answer has no choice".to_owned());
        };
        if let Some(refusal) = choice.message.refusal.filter(|r| !r.trim().is_empty()) {
            return Err(format!("the model refused: {refusal}"));
        }
        let cut = choice.finish_reason == Some(FinishReason::Length);
        match choice.message.content {
            Some(content) => Ok((content, cut)),
            None => Err("the answer has no text content".to_owned()),
        }
    }
}
