//! Seeding from YAML: multi-document streams of objects (`---` separated,
//! empty documents ignored, `kind: List` expanded), each stored with its
//! given status, as a test's starting cluster.

use super::error::MemApiError;
use super::ops::{self, Origin};
use super::resources;
use super::status::ApiError;
use super::store::Store;
use serde_json::Value;

/// Parses every document into objects, expanding lists.
pub(crate) fn parse(text: &str) -> Result<Vec<Value>, MemApiError> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|source| MemApiError::Yaml { source })?;
    let mut objects = Vec::new();
    for value in documents {
        expand(value, &mut objects);
    }
    Ok(objects)
}

fn expand(value: Value, out: &mut Vec<Value>) {
    match value {
        Value::Null => {}
        Value::Object(ref map)
            if map.get("kind").and_then(Value::as_str).is_some_and(|k| {
                k == "List" || k.ends_with("List") && map.contains_key("items")
            }) =>
        {
            if let Some(Value::Array(items)) = map.get("items") {
                for item in items {
                    expand(item.clone(), out);
                }
            }
        }
        other => out.push(other),
    }
}

/// Stores every object as seeded (status kept). Returns how many were stored.
pub(crate) fn load(store: &mut Store, objects: Vec<Value>) -> Result<usize, MemApiError> {
    let mut count = 0;
    for obj in objects {
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind_name = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        let kind = resources::by_type(api_version, kind_name).ok_or_else(|| {
            ApiError::bad_request(format!(
                "memapi does not serve kind {kind_name:?} of apiVersion {api_version:?}"
            ))
        })?;
        ops::create(store, kind, None, obj, Origin::Seed)?;
        count += 1;
    }
    Ok(count)
}
