//! Unit tests of `mcp/tools.rs`.

use super::*;

/// Agents that defer MCP tools behind a search (claude-agent-acp's
/// ToolSearch) find them by name and description: each phrase a model
/// would search for finds exactly the tool that does it.
#[test]
fn a_tool_search_finds_each_tool_by_what_it_does() {
    let tools = LspTools::tool_router().list_all();
    let found = |phrase: &str| -> Vec<String> {
        tools
            .iter()
            .filter(|t| {
                let text = format!(
                    "{} {}",
                    t.name.replace('_', " "),
                    t.description.as_deref().unwrap_or_default()
                )
                .to_lowercase();
                text.contains(phrase)
            })
            .map(|t| t.name.to_string())
            .collect()
    };
    for (phrase, tool) in [
        ("find references", "references"),
        ("rename symbol", "rename"),
        ("go to definition", "definition"),
        ("type of", "hover"),
        ("document symbols", "document_symbols"),
        ("workspace symbols", "workspace_symbols"),
        ("compile errors", "diagnostics"),
        ("quick fixes", "code_actions"),
        ("implementations", "implementation"),
        ("go to type definition", "type_definition"),
        ("call hierarchy", "call_hierarchy"),
        ("functions it calls", "call_hierarchy"),
    ] {
        assert_eq!(found(phrase), [tool], "searching {phrase:?}");
    }
}

#[test]
fn counts_read_as_english() {
    assert_eq!(counted(1, "references"), "1 reference");
    assert_eq!(counted(2, "references"), "2 references");
    assert_eq!(counted(1, "definitions"), "1 definition");
}

#[test]
fn the_structured_content_carries_the_same_text() {
    let result = ok(
        "2 references:\na.rs:1:1: x\n".to_string(),
        json!({"locations": []}),
    );
    assert_eq!(
        result.structured_content,
        Some(json!({"locations": [], "summary": "2 references:\na.rs:1:1: x\n"}))
    );
}

#[test]
fn hover_contents_of_every_shape() {
    assert_eq!(hover_text(&json!("plain")), "plain");
    assert_eq!(
        hover_text(&json!({"kind": "markdown", "value": "**x**"})),
        "**x**"
    );
    assert_eq!(
        hover_text(&json!([{"language": "rust", "value": "fn f()"}, "doc"])),
        "```rust\nfn f()\n```\n\ndoc"
    );
}

#[test]
fn positions_are_one_based_characters() {
    let text = &Text::new("fn a() {}\nlet é = b;\n".to_string());
    let path = Path::new("/x.rs");
    assert_eq!(
        lsp_position(text, path, 2, 9, PositionEncoding::Utf16).unwrap(),
        8
    );
    assert_eq!(
        lsp_position(text, path, 2, 9, PositionEncoding::Utf8).unwrap(),
        9
    );
    assert!(lsp_position(text, path, 0, 1, PositionEncoding::Utf16).is_err());
    assert!(lsp_position(text, path, 9, 1, PositionEncoding::Utf16).is_err());
}

/// Every tool's schema stays small: a model reads it on every turn.
#[test]
fn the_tool_schemas_are_small_and_every_position_tool_takes_a_symbol() {
    let tools = LspTools::tool_router().list_all();
    for tool in &tools {
        let schema = serde_json::to_string(&tool.input_schema).unwrap();
        assert!(
            schema.len() < 2500,
            "{}: {} bytes: {schema}",
            tool.name,
            schema.len()
        );
    }
    for name in [
        "definition",
        "references",
        "hover",
        "rename",
        "implementation",
        "call_hierarchy",
        "type_definition",
    ] {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        let properties = tool.input_schema.get("properties").unwrap();
        for field in ["symbol", "file", "line", "column"] {
            assert!(
                properties.get(field).is_some(),
                "{name} lacks {field}: {properties}"
            );
        }
        let required: Vec<&str> = tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        assert!(
            required.iter().all(|r| *r == "new_name"),
            "{name} requires {required:?}: a symbol alone must do"
        );
    }
}

#[test]
fn symbol_kinds_by_number() {
    assert_eq!(symbol_kind(12), "function");
    assert_eq!(symbol_kind(23), "struct");
    assert_eq!(symbol_kind(26), "type-parameter");
    assert_eq!(symbol_kind(99), "symbol");
}
