//! What the runtime asks of a kind it watches, stores and writes.
//!
//! What follows from a kind's type is derived here for every type of
//! `k8s-openapi` ([`Kind`]): its name in logs and errors, and its API
//! (namespaced or cluster-wide, by the kind's scope). What the type cannot
//! tell is handed in as a value by the code that asks for the kind
//! ([`Shape`]): the trim applied to every object before it is stored,
//! whether it came from a watch or from the answer to a write, and how much
//! of an object a write encodes. The shapes themselves are defined where
//! the controllers are known, one per kind; here are only the pieces they
//! share.

use std::fmt::{self, Debug};

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde::ser::{SerializeMap, Serializer};
use serde_json::value::RawValue;

/// A kind the process watches and stores: any `k8s-openapi` type of a
/// namespaced or cluster-wide kind (the blanket implementation below).
pub trait Kind:
    Resource<DynamicType = (), Scope: Scope>
    + k8s_openapi::Resource
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind's name in logs, errors and write locks: its kind in lower
    /// case (`node`).
    const NAME: &'static str;

    /// The API of the kind in `namespace` (ignored for a cluster-scoped
    /// kind).
    fn api(client: &Client, namespace: &str) -> Api<Self>;
}

impl<K> Kind for K
where
    K: Resource<DynamicType = (), Scope: Scope>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    const NAME: &'static str = LowerCase::<K>::NAME;

    fn api(client: &Client, namespace: &str) -> Api<Self> {
        <<K as Resource>::Scope as Scope>::api(client, namespace)
    }
}

/// The scope of a kind, which decides how its API is addressed.
pub trait Scope {
    /// The API of `K` in `namespace`, or of the whole cluster.
    fn api<K: Resource<DynamicType = (), Scope = Self>>(client: &Client, namespace: &str)
    -> Api<K>;
}

impl Scope for NamespaceResourceScope {
    fn api<K: Resource<DynamicType = (), Scope = Self>>(
        client: &Client,
        namespace: &str,
    ) -> Api<K> {
        Api::namespaced(client.clone(), namespace)
    }
}

impl Scope for ClusterResourceScope {
    fn api<K: Resource<DynamicType = (), Scope = Self>>(client: &Client, _: &str) -> Api<K> {
        Api::all(client.clone())
    }
}

/// The longest kind name [`LowerCase`] takes; a longer one fails to
/// compile.
const LONGEST_NAME: usize = 64;

/// A kind's name in lower case, computed when the program is compiled.
struct LowerCase<K>(std::marker::PhantomData<K>);

impl<K: k8s_openapi::Resource> LowerCase<K> {
    /// `K::KIND` in ASCII lower case, padded with zeros.
    const BYTES: [u8; LONGEST_NAME] = lower_case(K::KIND);

    /// `K::KIND` in lower case.
    const NAME: &'static str = match std::str::from_utf8(Self::BYTES.split_at(K::KIND.len()).0) {
        Ok(name) => name,
        // Lowering ASCII letters keeps UTF-8 valid: never taken.
        Err(_) => K::KIND,
    };
}

/// `name` in ASCII lower case, padded with zeros.
const fn lower_case(name: &str) -> [u8; LONGEST_NAME] {
    let bytes = name.as_bytes();
    let mut lower = [0; LONGEST_NAME];
    let mut at = 0;
    while at < bytes.len() && at < LONGEST_NAME {
        lower[at] = bytes[at].to_ascii_lowercase();
        at += 1;
    }
    lower
}

/// What the runtime cannot derive from a kind's type, handed in by the
/// code that asks for the kind: what its store keeps of an object (the
/// union of what every controller of the process reads of the kind), and
/// what a write of the kind encodes. One value per kind, kept in a
/// `static` and handed by reference, so every controller that asks for a
/// kind hands the same one (the informers refuse another).
pub struct Shape<K> {
    trim: fn(&mut K),
    encode: Option<EncodeFn<K>>,
}

/// How a kind with a status subresource encodes a write of one part.
pub type EncodeFn<K> = fn(&K, Part) -> serde_json::Result<Box<RawValue>>;

impl<K> Debug for Shape<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shape")
            .field("status_subresource", &self.encode.is_some())
            .finish_non_exhaustive()
    }
}

impl<K: Serialize> Shape<K> {
    /// A kind whose objects are trimmed by `trim` before they are stored,
    /// and encoded whole for a write.
    pub const fn new(trim: fn(&mut K)) -> Self {
        Self { trim, encode: None }
    }

    /// The same kind with a status subresource: a write of one part
    /// encodes the object's metadata and that part alone with `encode`
    /// (see [`metadata_and`]), as the server ignores the other part of such
    /// a write and encoding it would be wasted work on every write.
    pub const fn with_status(self, encode: EncodeFn<K>) -> Self {
        Self {
            encode: Some(encode),
            ..self
        }
    }

    /// Drops what no controller of the process reads, so a large cluster's
    /// objects cost little memory.
    pub fn trim(&self, object: &mut K) {
        (self.trim)(object);
    }

    /// The object encoded as JSON, as far as a write of `part` can change
    /// it: for a kind with a status subresource, its metadata and that
    /// part alone; the whole object otherwise.
    pub fn encode(&self, object: &K, part: Part) -> serde_json::Result<Box<RawValue>> {
        match self.encode {
            Some(encode) => encode(object, part),
            None => serde_json::value::to_raw_value(object),
        }
    }
}

/// The part of an object a write changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Spec and metadata (the main resource).
    Spec,
    /// The status subresource.
    Status,
}

impl Part {
    /// The subresource label of the write metric ("" for the main resource).
    pub fn subresource(self) -> &'static str {
        match self {
            Part::Spec => "",
            Part::Status => "status",
        }
    }
}

/// `{"metadata": …, "spec" or "status": …}` of an object with a status
/// subresource: what [`Shape::with_status`] is handed for such a kind.
pub fn metadata_and(
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
/// start of every kind's trim, and the whole trim of most.
pub fn drop_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

#[cfg(test)]
mod tests;
