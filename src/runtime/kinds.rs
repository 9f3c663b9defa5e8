//! What the runtime asks of a kind it watches, stores and writes
//! ([`Kind`]): its name, its API, how much of an object a write encodes,
//! and the trim applied to every object before it is stored, whether it
//! came from a watch or from the answer to a write. The kinds themselves,
//! and what is kept of each, are implemented where the controllers are
//! known; here are only the pieces those implementations share.

use std::fmt::Debug;

use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde::ser::{SerializeMap, Serializer};
use serde_json::value::RawValue;

/// A kind the process watches and stores.
pub(crate) trait Kind:
    Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The kind's name in logs and errors: its kind in lower case
    /// (`node`).
    const NAME: &'static str;

    /// Drops what no controller of the process reads, so a large cluster's
    /// objects cost little memory.
    fn trim(&mut self);

    /// The API of the kind in `namespace` (ignored for a cluster-scoped
    /// kind).
    fn api(client: &Client, namespace: &str) -> Api<Self>;

    /// The object encoded as JSON, as far as a write of `part` can change
    /// it: for a kind with a status subresource, its metadata and that
    /// part alone (the server ignores the other part of such a write, so
    /// encoding it would be wasted work on every write); the whole object
    /// otherwise.
    fn encode_part(&self, part: Part) -> serde_json::Result<Box<RawValue>> {
        let _ = part;
        serde_json::value::to_raw_value(self)
    }
}

/// The part of an object a write changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// Spec and metadata (the main resource).
    Spec,
    /// The status subresource.
    Status,
}

impl Part {
    /// The subresource label of the write metric ("" for the main resource).
    pub(crate) fn subresource(self) -> &'static str {
        match self {
            Part::Spec => "",
            Part::Status => "status",
        }
    }
}

/// `{"metadata": …, "spec" or "status": …}` of an object with a status
/// subresource: what [`Kind::encode_part`] gives for `part` for such a
/// kind.
pub(crate) fn metadata_and(
    metadata: &impl Serialize,
    spec: &impl Serialize,
    status: &impl Serialize,
    part: Part,
) -> serde_json::Result<Box<RawValue>> {
    let mut encoded = Vec::with_capacity(512);
    let mut serializer = serde_json::Serializer::new(&mut encoded);
    let mut map = serializer.serialize_map(Some(2))?;
    map.serialize_entry("metadata", metadata)?;
    match part {
        Part::Spec => map.serialize_entry("spec", spec)?,
        Part::Status => map.serialize_entry("status", status)?,
    }
    map.end()?;
    let text = String::from_utf8(encoded).map_err(serde::ser::Error::custom)?;
    RawValue::from_string(text)
}

/// Drops server-side apply's bookkeeping, which on a real API server is
/// larger than the rest of most objects and which no controller reads: the
/// start of every kind's trim.
pub(crate) fn drop_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}
