//! How the store holds each volume and claim: packed as its JSON
//! text, unpacked into a fresh object whenever the controller reads it.
//!
//! A `k8s-openapi` `PersistentVolume` takes 3,472 bytes before any string
//! or map, because every volume source is an inline `Option`, and each
//! non-empty map (labels, annotations, capacity) is a B-tree node of about
//! 540 bytes: a bound volume costs about 5.5 KB, a bound claim about 3 KB.
//! Its JSON text is 700 to 900 bytes, and compressed against a dictionary
//! of what most volumes and claims share ([`dictionary`]) 100 to 270. With
//! thousands of objects that is the controller's memory, while a sync reads
//! a handful of objects, and unpacking one takes a few microseconds. The
//! text is exactly what the controller had (every field, known to the type,
//! round-trips), so a write edits the same object as before.
//!
//! A sync reads its objects several times (its writes each edit the newest
//! copy, and read the answer of the one before), so the last few objects
//! read or written are also kept unpacked ([`Recent`]).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::pv::census::TallyId;
use crate::runtime::keys::ObjectKey;

mod dictionary;
mod recent;

pub(crate) use recent::{RECENT, Recent};

/// An object of type `K` held as its JSON text, compressed.
pub(crate) struct Packed<K> {
    compressed: Box<[u8]>,
    kind: PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for Packed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Packed({} bytes)", self.compressed.len())
    }
}

impl<K: Serialize + DeserializeOwned> Packed<K> {
    /// Packs `object`; fails only when its type cannot be written as JSON,
    /// which none of the Kubernetes types does.
    pub(crate) fn pack(object: &K) -> Result<Self, serde_json::Error> {
        let json = serde_json::to_vec(object)?;
        let compressed =
            lz4_flex::block::compress_prepend_size_with_dict(&json, dictionary::dictionary());
        Ok(Self {
            compressed: compressed.into_boxed_slice(),
            kind: PhantomData,
        })
    }

    /// A fresh copy of the packed object; fails only when the text does not
    /// read back, which would be a defect of the compression or of the
    /// type's JSON mapping.
    pub(crate) fn unpack(&self) -> Result<Arc<K>, UnpackError> {
        let json = lz4_flex::block::decompress_size_prepended_with_dict(
            &self.compressed,
            dictionary::dictionary(),
        )?;
        Ok(Arc::new(serde_json::from_slice(&json)?))
    }
}

/// Why a packed object did not read back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnpackError {
    /// The compressed text is damaged.
    #[error("cannot decompress: {0}")]
    Decompress(#[from] lz4_flex::block::DecompressError),
    /// The text is not the type's JSON.
    #[error("cannot read: {0}")]
    Json(#[from] serde_json::Error),
}

/// One object as the store keeps it: packed, with the two things the
/// store decides on without unpacking it.
#[derive(Debug)]
pub(crate) struct Stored<K> {
    packed: Packed<K>,
    /// Its resourceVersion, compared with every newer offer.
    version: Option<Version>,
    /// Whether a watch has shown it: the answer of the controller's own
    /// write alone (a volume it has just created, a write that crossed the
    /// object's deletion) does not make an object listed.
    listed: bool,
    /// Set when a sync of this very version found its binding complete;
    /// a newer version is stored without it.
    completed: Option<Box<Completed>>,
    /// What the state gauges count it under ([`crate::pv::census`]), once
    /// the store has counted it.
    tally: Option<TallyId>,
}

/// What a sync of an object that found nothing left to write read besides
/// the object: the other half of a binding it found complete, at which
/// version, or nothing (a free volume). A sync of a bound claim or volume
/// reads nothing but the two objects, and a sync of a free volume nothing
/// but the volume, so while they keep these versions another sync would
/// find nothing to do either, and the periodic resync passes the object by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completed {
    /// The volume a claim is bound to, or the claim a volume is bound to,
    /// with its resourceVersion when the sync read it; `None` for a free
    /// volume.
    pub(crate) partner: Option<(Partner, Version)>,
}

/// The other half of a binding found complete, its name shared with the volume
/// index, which holds it anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Partner {
    /// The volume of that name.
    Volume(Arc<str>),
    /// The claim of that key.
    Claim(Arc<ObjectKey>),
}

/// A resourceVersion as the store keeps it: a number, which is what API
/// servers send, in place; any other text as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Version {
    /// A decimal number written without sign or leading zeros.
    Number(u64),
    /// Any other text.
    Text(Box<str>),
}

impl Version {
    /// The version written as `text`.
    pub(crate) fn new(text: &str) -> Self {
        match text.parse::<u64>() {
            Ok(number) if !text.starts_with(['+', '0']) || text == "0" => Self::Number(number),
            _ => Self::Text(text.into()),
        }
    }

    /// Whether this is the version written as `text`.
    pub(crate) fn is(&self, text: &str) -> bool {
        match self {
            Self::Number(number) => Self::new(text) == Self::Number(*number),
            Self::Text(own) => **own == *text,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(number) => write!(f, "{number}"),
            Self::Text(text) => f.write_str(text),
        }
    }
}

impl<K: Serialize + DeserializeOwned + kube::Resource> Stored<K> {
    /// Packs `object` for the store.
    pub(crate) fn new(object: &K, listed: bool) -> Result<Self, serde_json::Error> {
        Ok(Self {
            packed: Packed::pack(object)?,
            version: object.meta().resource_version.as_deref().map(Version::new),
            listed,
            completed: None,
            tally: None,
        })
    }

    /// A fresh copy of the object. `None`, with an error logged, if it does
    /// not read back (see [`Packed::unpack`]): the object is then unknown to
    /// the controller until its next version comes.
    pub(crate) fn object(&self) -> Option<Arc<K>> {
        match self.packed.unpack() {
            Ok(object) => Some(object),
            Err(error) => {
                tracing::error!(
                    %error,
                    version = self.version.as_ref().map(tracing::field::display),
                    "a stored object does not read back"
                );
                None
            }
        }
    }
}

impl<K> Stored<K> {
    /// The stored resourceVersion.
    pub(crate) fn version(&self) -> Option<&Version> {
        self.version.as_ref()
    }

    /// Whether a watch has shown the object.
    pub(crate) fn listed(&self) -> bool {
        self.listed
    }

    /// Marks the object as shown by a watch.
    pub(crate) fn set_listed(&mut self) {
        self.listed = true;
    }

    /// What the state gauges count it under, once counted.
    pub(crate) fn tally(&self) -> Option<TallyId> {
        self.tally
    }

    /// Records what the state gauges count it under.
    pub(crate) fn set_tally(&mut self, tally: TallyId) {
        self.tally = Some(tally);
    }

    /// What a sync of the stored version found it complete with, if it did.
    pub(crate) fn completed(&self) -> Option<&Completed> {
        self.completed.as_deref()
    }

    /// Records that a sync of `version` found the object complete with
    /// `completed`; ignored when another version is stored now, which that
    /// sync did not read.
    pub(crate) fn complete(&mut self, version: Option<&str>, completed: Completed) {
        if let Some(version) = version
            && self.version().is_some_and(|own| own.is(version))
        {
            self.completed = Some(Box::new(completed));
        }
    }
}

#[cfg(test)]
mod tests;
