//! The tools that ask about one symbol and list locations or text:
//! `definition`, `type_definition`, `implementation`, `references`, `hover`.

use super::budget::DEFAULT_BUDGET;
use super::partial::partial_view;
use super::*;

impl LspTools {
    /// The target resolved and its file's text, or the answer that stands
    /// instead (an ambiguous name's candidates).
    pub(super) async fn target_at(
        &self,
        target: &Target,
    ) -> ToolResult<Result<(At, Arc<Text>), CallToolResult>> {
        match self.resolve(target).await? {
            Resolved::Answer(answer) => Ok(Err(answer)),
            Resolved::At(at) => {
                let text = read_text(
                    &at.tool,
                    &self.texts,
                    &at.path,
                    &at.path.display().to_string(),
                )
                .await?;
                Ok(Ok((*at, text)))
            }
        }
    }

    /// A request at the target answered by locations (definition, type
    /// definition, implementation); `capability`: the server capability
    /// that must be present to ask.
    pub(super) async fn locations(
        &self,
        args: PositionArgs,
        method: &str,
        what: &str,
        capability: Option<&str>,
    ) -> ToolResult<CallToolResult> {
        let (at, text) = match self.target_at(&args.target).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        if let Some(capability) = capability {
            let capabilities = capabilities_of(&at.entry);
            if capabilities[capability].is_null() || capabilities[capability] == false {
                return Err(format!("{} does not answer {method}", at.server()));
            }
        }
        let result = at
            .tool
            .request(
                at.server_id(),
                method,
                json!({ "textDocument": at.text_document(), "position": at.position(&text) }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let answer = render_locations(
            &at.tool,
            &self.texts,
            at.encoding,
            &result,
            what,
            args.offset.unwrap_or(0),
        )
        .await;
        let hint = partial_view(&at.tool, &at.entry, &at.path).await;
        Ok(answer
            .noted(at.note.as_deref())
            .sourced(at.source.as_deref())
            .hinted(hint)
            .into_result())
    }

    pub(super) async fn references_inner(
        &self,
        args: ReferencesArgs,
    ) -> ToolResult<CallToolResult> {
        let (at, text) = match self.target_at(&args.target).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        let result = at
            .tool
            .request(
                at.server_id(),
                "textDocument/references",
                json!({
                    "textDocument": at.text_document(),
                    "position": at.position(&text),
                    "context": { "includeDeclaration": args.include_declaration.unwrap_or(true) },
                }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let answer = render_locations(
            &at.tool,
            &self.texts,
            at.encoding,
            &result,
            "references",
            args.offset.unwrap_or(0),
        )
        .await;
        let hint = partial_view(&at.tool, &at.entry, &at.path).await;
        Ok(answer
            .noted(at.note.as_deref())
            .sourced(at.source.as_deref())
            .hinted(hint)
            .into_result())
    }

    pub(super) async fn hover_inner(&self, args: HoverArgs) -> ToolResult<CallToolResult> {
        let (at, text) = match self.target_at(&args.target).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        let result = at
            .tool
            .request(
                at.server_id(),
                "textDocument/hover",
                json!({ "textDocument": at.text_document(), "position": at.position(&text) }),
            )
            .await
            .map_err(describe)?;
        let result: Value = parse(result.get())?;
        let mut hover = hover_text(&result["contents"]);
        if hover.trim().is_empty() {
            hover = format!("{} has no hover information here", at.server());
        }
        // A long docstring is cut at the budget, saying so.
        let full = hover.len();
        if full > DEFAULT_BUDGET {
            let mut cut = DEFAULT_BUDGET;
            while !hover.is_char_boundary(cut) {
                cut -= 1;
            }
            hover.truncate(cut);
            hover.push_str(&format!("\n… (cut at {cut} of {full} bytes)"));
        }
        let answer = Answer::new(hover.clone(), json!({ "contents": hover }));
        Ok(answer
            .noted(at.note.as_deref())
            .sourced(at.source.as_deref())
            .into_result())
    }
}
