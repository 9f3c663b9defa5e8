//! The devices file of `dra-publish`: pools by name, each a list of
//! devices in the resource.k8s.io/v1 Device shape (unknown fields refused,
//! a device's too, so a typo is an error rather than a device without the
//! field), read
//! into the driver's resources with each pool cut into slices within the
//! API's limits ([`Pool::from_devices`]). Whatever the text, reading it
//! gives the resources or an error that says what is wrong, never a panic;
//! the pools are checked ([`crate::validate_pool`]) before anything is sent.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::Device;
use serde::Deserialize;

use crate::{DriverResources, NodeSelection, Pool};

/// The file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DevicesFile {
    pools: BTreeMap<String, PoolFile>,
}

/// One pool of the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolFile {
    #[serde(default)]
    devices: Vec<Device>,
}

/// The file as written, untyped: what its devices name that the Device
/// type drops.
#[derive(Debug, Deserialize)]
struct WrittenFile {
    pools: BTreeMap<String, WrittenPool>,
}

/// One pool of the file as written.
#[derive(Debug, Deserialize)]
struct WrittenPool {
    #[serde(default)]
    devices: Vec<serde_json::Value>,
}

/// A field of `written` the Device type does not keep (`None` when it
/// keeps all), as a path: `attributes.model.strng`.
fn dropped_field(written: &serde_json::Value, kept: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match (written, kept) {
        (Value::Object(written), Value::Object(kept)) => {
            written.iter().find_map(|(name, value)| {
                if value.is_null() {
                    return None;
                }
                match kept.get(name) {
                    None => Some(name.clone()),
                    Some(kept) => dropped_field(value, kept).map(|rest| format!("{name}.{rest}")),
                }
            })
        }
        (Value::Array(written), Value::Array(kept)) => written
            .iter()
            .zip(kept)
            .enumerate()
            .find_map(|(at, (w, k))| dropped_field(w, k).map(|rest| format!("{at}.{rest}"))),
        _ => None,
    }
}

/// Whether `device` (the `at`th of pool `pool`) keeps every field of
/// `written`, what the file says of it.
fn check(
    pool: &str,
    at: usize,
    device: &Device,
    written: &serde_json::Value,
) -> Result<(), DevicesFileError> {
    let refused = |why: String| DevicesFileError(format!("pool {pool:?}, device {at}: {why}"));
    let kept = serde_json::to_value(device).map_err(|error| refused(error.to_string()))?;
    match dropped_field(written, &kept) {
        Some(field) => Err(refused(format!("unknown field {field:?}"))),
        None => Ok(()),
    }
}

/// Why a devices file was refused: the YAML parser's words, with where.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DevicesFileError(String);

/// The driver's resources the devices file `text` describes, each pool's
/// devices reachable as `selection` says.
pub fn parse_devices_file(
    text: &str,
    selection: &NodeSelection,
) -> Result<DriverResources, DevicesFileError> {
    let file: DevicesFile =
        serde_saphyr::from_str(text).map_err(|error| DevicesFileError(error.to_string()))?;
    let written: WrittenFile =
        serde_saphyr::from_str(text).map_err(|error| DevicesFileError(error.to_string()))?;
    let mut pools = BTreeMap::new();
    for (name, pool) in file.pools {
        let as_written = written.pools.get(&name).map(|p| p.devices.as_slice());
        for (at, device) in pool.devices.iter().enumerate() {
            if let Some(written) = as_written.and_then(|devices| devices.get(at)) {
                check(&name, at, device, written)?;
            }
        }
        let pool = Pool {
            node_selection: selection.clone(),
            ..Pool::from_devices(pool.devices)
        };
        pools.insert(name, pool);
    }
    Ok(DriverResources { pools })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::validate_pool;

    /// Text near the file's shape: its keys, YAML's punctuation, and
    /// anything else.
    fn near_yaml() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            Just("pools:".to_string()),
            Just("devices:".to_string()),
            Just("- name: ".to_string()),
            Just("attributes:".to_string()),
            Just("capacity:".to_string()),
            Just("{model: {string: a100}}".to_string()),
            Just("{memory: {value: 40Gi}}".to_string()),
            Just("{memory: {value: x}}".to_string()),
            Just("\n".to_string()),
            Just("  ".to_string()),
            Just(": ".to_string()),
            Just("[".to_string()),
            Just("&a *a".to_string()),
            "[a-z0-9-]{0,8}",
            ".{0,6}",
        ];
        prop::collection::vec(token, 0..40).prop_map(|tokens| tokens.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        #[test]
        fn any_text_is_read_or_refused_with_a_message(text in prop_oneof![near_yaml(), ".{0,200}"]) {
            match parse_devices_file(&text, &NodeSelection::AllNodes) {
                Err(error) => prop_assert!(!error.to_string().is_empty()),
                Ok(resources) => {
                    for (name, pool) in &resources.pools {
                        if let Err(error) = validate_pool(name, pool, false) {
                            prop_assert!(!error.to_string().is_empty());
                        }
                    }
                }
            }
        }

        #[test]
        fn listed_devices_are_all_published(
            pools in prop::collection::btree_map("[a-z]{1,8}", prop::collection::vec("[a-z][a-z0-9]{0,8}", 0..40), 1..4),
        ) {
            let mut text = String::from("pools:\n");
            for (pool, devices) in &pools {
                text.push_str(&format!("  {pool}:\n    devices:\n"));
                for device in devices {
                    text.push_str(&format!("    - name: {device}\n"));
                }
            }
            let resources = parse_devices_file(&text, &NodeSelection::AllNodes)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for (pool, devices) in &pools {
                let read: Vec<&str> = resources.pools[pool]
                    .slices
                    .iter()
                    .flat_map(|slice| slice.devices.iter().map(|d| d.name.as_str()))
                    .collect();
                prop_assert_eq!(read, devices.iter().map(String::as_str).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn an_unknown_field_is_named() {
        let error = parse_devices_file(
            "pools:\n  a:\n    devices:\n    - name: x\n      modle: y\n",
            &NodeSelection::AllNodes,
        )
        .expect_err("a typo");
        assert_eq!(
            error.to_string(),
            "pool \"a\", device 0: unknown field \"modle\""
        );
        let error = parse_devices_file(
            "pools:\n  a:\n    devices:\n    - name: x\n      attributes: {model: {strng: a100}}\n",
            &NodeSelection::AllNodes,
        )
        .expect_err("a typo deeper");
        assert!(
            error.to_string().contains("attributes.model.strng"),
            "{error}"
        );
        let taken = parse_devices_file(
            "pools:\n  a:\n    devices:\n    - name: gpu-0\n      attributes: {model: {string: a100}}\n      capacity: {memory: {value: 40Gi}}\n",
            &NodeSelection::AllNodes,
        )
        .expect("the documented shape");
        assert_eq!(taken.pools["a"].slices[0].devices[0].name, "gpu-0");
    }
}
