//! Reading a `WorkspaceEdit`: its changes classified (text edits, create,
//! rename, delete), its change annotations, its members checked and its
//! `file:` URIs made paths; nothing planned yet.

use super::*;

/// One entry of `documentChanges` or of `changes`, classified but not yet read.
pub(super) enum Change<'v> {
    Text {
        uri: &'v str,
        version: Option<i32>,
        edits: &'v [Value],
    },
    Create(&'v Map<String, Value>),
    Rename(&'v Map<String, Value>),
    Delete(&'v Map<String, Value>),
}

pub(super) fn top_level(why: &str) -> PlanError {
    PlanError {
        failed_change: None,
        kind: PlanErrorKind::Malformed(why.to_string()),
    }
}

pub(super) fn changes_of(obj: &Map<String, Value>) -> Result<Vec<Change<'_>>, PlanError> {
    match obj.get("documentChanges") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                classify(item).map_err(|kind| PlanError {
                    failed_change: Some(index),
                    kind,
                })
            })
            .collect(),
        Some(Value::Null) | None => match obj.get("changes") {
            Some(Value::Object(map)) => map
                .iter()
                .enumerate()
                .map(|(index, (uri, edits))| match edits {
                    Value::Array(edits) => Ok(Change::Text {
                        uri,
                        version: None,
                        edits,
                    }),
                    _ => Err(PlanError {
                        failed_change: Some(index),
                        kind: malformed("the edits of a `changes` entry must be an array"),
                    }),
                })
                .collect(),
            Some(Value::Null) | None => Ok(Vec::new()),
            Some(_) => Err(top_level("`changes` must be an object")),
        },
        Some(_) => Err(top_level("`documentChanges` must be an array")),
    }
}

pub(super) fn classify(item: &Value) -> Result<Change<'_>, PlanErrorKind> {
    let obj = item
        .as_object()
        .ok_or_else(|| malformed("a document change must be an object"))?;
    match obj.get("kind") {
        Some(Value::String(kind)) => match kind.as_str() {
            "create" => Ok(Change::Create(obj)),
            "rename" => Ok(Change::Rename(obj)),
            "delete" => Ok(Change::Delete(obj)),
            other => Err(malformed(&format!("unknown resource operation {other:?}"))),
        },
        Some(_) => Err(malformed("`kind` must be a string")),
        None => {
            let doc = obj
                .get("textDocument")
                .and_then(Value::as_object)
                .ok_or_else(|| malformed("a TextDocumentEdit needs a `textDocument` object"))?;
            let uri = req_str(doc, "uri")?;
            let version = match doc.get("version") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_i64()
                        .and_then(|v| i32::try_from(v).ok())
                        .ok_or_else(|| malformed("`textDocument.version` must be an integer"))?,
                ),
            };
            let edits = obj
                .get("edits")
                .and_then(Value::as_array)
                .ok_or_else(|| malformed("a TextDocumentEdit needs an `edits` array"))?;
            Ok(Change::Text {
                uri,
                version,
                edits,
            })
        }
    }
}

/// `changeAnnotations`, by id, with the parts the planner uses.
pub(super) struct AnnotationInfo {
    pub(super) label: String,
    pub(super) description: Option<String>,
    pub(super) needs_confirmation: bool,
}

pub(super) fn read_annotations(
    obj: &Map<String, Value>,
) -> Result<BTreeMap<String, AnnotationInfo>, PlanErrorKind> {
    let mut out = BTreeMap::new();
    let map = match obj.get("changeAnnotations") {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(malformed("`changeAnnotations` must be an object")),
    };
    for (id, a) in map {
        let a = a
            .as_object()
            .ok_or_else(|| malformed(&format!("change annotation {id:?} must be an object")))?;
        let label = req_str(a, "label")?.to_string();
        let description = opt_str(a, "description")?.map(str::to_string);
        let needs_confirmation = opt_bool(a, "needsConfirmation")?;
        out.insert(
            id.clone(),
            AnnotationInfo {
                label,
                description,
                needs_confirmation,
            },
        );
    }
    Ok(out)
}

pub(super) fn malformed(why: &str) -> PlanErrorKind {
    PlanErrorKind::Malformed(why.to_string())
}

pub(super) fn req_str<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
) -> Result<&'v str, PlanErrorKind> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| malformed(&format!("`{key}` must be a string")))
}

pub(super) fn opt_str<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
) -> Result<Option<&'v str>, PlanErrorKind> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(malformed(&format!("`{key}` must be a string"))),
    }
}

pub(super) fn opt_bool(obj: &Map<String, Value>, key: &str) -> Result<bool, PlanErrorKind> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(malformed(&format!("`{key}` must be a boolean"))),
    }
}

/// A resource operation's `options`, absent members being `false`.
pub(super) fn option(op: &Map<String, Value>, key: &str) -> Result<bool, PlanErrorKind> {
    match op.get("options") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Object(options)) => opt_bool(options, key),
        Some(_) => Err(malformed("`options` must be an object")),
    }
}

/// A `file:` URI as a local absolute path.
pub(super) fn path_of(uri: &str) -> Result<PathBuf, PlanErrorKind> {
    let invalid = |why: &str| PlanErrorKind::InvalidUri {
        uri: uri.to_string(),
        why: why.to_string(),
    };
    let url = Url::parse(uri).map_err(|e| invalid(&e.to_string()))?;
    if url.scheme() != "file" {
        return Err(invalid("not a file URI"));
    }
    // `to_file_path` refuses hosts other than `localhost`.
    let path = url
        .to_file_path()
        .map_err(|()| invalid("not a local file path"))?;
    // A decoded `%00` would make the path mean something else to the kernel.
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(invalid("contains a NUL"));
    }
    Ok(path)
}
